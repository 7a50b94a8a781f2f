"""``epsilon_lower_bound``: audit any mechanism on a pair of neighbouring datasets."""

from __future__ import annotations

import inspect
import math
import numbers
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from dpkit._checks import check_delta
from dpkit._progress import Progress
from dpkit.audit._clopper_pearson import check_confidence
from dpkit.audit._regions import (
    Above,
    Below,
    Coordinate,
    InBins,
    InSet,
    Interval,
    LinearScore,
    OffLattice,
    OnLattice,
    Predicate,
    Region,
    Residue,
    RowsIn,
)
from dpkit.audit._result import AuditResult, epsilon_from_counts
from dpkit.audit._select import choose_region
from dpkit.errors import DataError, PrivacyParameterError
from dpkit.random import RNGLike, as_generator

__all__ = ["Progress", "epsilon_lower_bound", "is_batched", "run_mechanism"]

# ``progress(done, total)``, called as runs complete: the one progress API (dpkit._progress).

_KNOWN_REGIONS = (
    Above,
    Below,
    Coordinate,
    InSet,
    RowsIn,
    OnLattice,
    OffLattice,
    LinearScore,
    Predicate,
    Interval,
    InBins,
    Residue,
)


def is_batched(mechanism: Callable[..., Any]) -> bool:
    """Whether ``mechanism`` has the batched form ``mechanism(dataset, n, rng)``.

    A callable with three or more positional parameters is taken as batched; one with two as the
    single-run form ``mechanism(dataset, rng)``.

    >>> is_batched(lambda d, n, rng: rng.laplace(size=n))
    True
    >>> is_batched(lambda d, rng: rng.laplace())
    False
    """
    try:
        sig = inspect.signature(mechanism)
    except (TypeError, ValueError):
        return False
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    params = list(sig.parameters.values())
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params):
        return False
    return sum(p.kind in kinds for p in params) >= 3


def run_mechanism(
    mechanism: Callable[..., Any],
    dataset: Any,
    n: int,
    rng: np.random.Generator,
    *,
    batched: bool,
    progress: Callable[[int], None] | None = None,
) -> npt.NDArray[Any]:
    """Run ``mechanism`` ``n`` times on ``dataset``; outputs stacked along a new first axis."""
    if batched:
        chunk = min(n, max(4096, n // 10))
        parts: list[npt.NDArray[Any]] = []
        done = 0
        while done < n:
            m = min(chunk, n - done)
            out = np.asarray(mechanism(dataset, m, rng))
            if out.ndim == 0 or out.shape[0] != m:
                raise DataError(
                    f"a batched mechanism(dataset, n, rng) must return n={m} outputs along its "
                    f"first axis, got shape {out.shape}; or give batched=False."
                )
            parts.append(out)
            done += m
            if progress is not None:
                progress(m)
        return np.concatenate(parts) if len(parts) > 1 else parts[0]
    step = max(1, n // 50)
    outs: list[Any] = []
    reported = 0
    for i in range(n):
        outs.append(mechanism(dataset, rng))
        if progress is not None and ((i + 1) % step == 0 or i + 1 == n):
            progress(i + 1 - reported)
            reported = i + 1
    try:
        return np.asarray(outs)
    except ValueError as exc:
        raise DataError(
            "the mechanism's outputs have different shapes; return a fixed-shape array (pad or "
            "encode variable-length outputs)."
        ) from exc


def _as_region(region: Any) -> Region:
    if isinstance(region, _KNOWN_REGIONS):
        return region
    if callable(region):
        return Predicate(region, name=getattr(region, "__name__", "custom region"))
    raise PrivacyParameterError(
        f"region must be a callable mapping a batch of outputs to booleans, got {region!r}."
    )


def _check_trials(trials: object) -> int:
    if isinstance(trials, bool) or not isinstance(trials, numbers.Integral):
        raise PrivacyParameterError(f"trials must be an int, got {trials!r}; e.g. trials=100_000.")
    if int(trials) < 4:
        raise PrivacyParameterError(
            f"trials must be at least 4 (runs per dataset), got {trials}; audits need thousands."
        )
    return int(trials)


def epsilon_lower_bound(
    mechanism: Callable[..., Any],
    d0: Any,
    d1: Any,
    *,
    trials: int,
    delta: float = 0.0,
    confidence: float = 0.95,
    rng: RNGLike = None,
    region: Callable[[npt.NDArray[Any]], npt.ArrayLike] | None = None,
    batched: bool | None = None,
    selection: float = 0.5,
    progress: Progress | None = None,
) -> AuditResult:
    """Empirical lower bound on the ε a mechanism provides on one pair of neighbours.

    Runs ``mechanism`` ``trials`` times on each of ``d0`` and ``d1``. Unless a ``region`` is
    given, the first ``selection`` fraction of the runs chooses a rejection region (thresholds on
    both tails, sets of discrete outputs ranked by likelihood ratio, low-order-bit lattices, or a
    logistic-regression score for vector outputs) and the remaining runs, which played no part in
    the choice, give the false positive and false negative counts. Their Clopper–Pearson upper ends
    turn Kamath's (2020) test inequality ``p + e^ε q ≥ 1 − δ`` into a bound.

    Parameters
    ----------
    mechanism : callable
        ``mechanism(dataset, rng) -> output`` or, vectorised, ``mechanism(dataset, n, rng) ->
        array`` with ``n`` outputs along the first axis (detected from the signature; force with
        ``batched=``). Outputs must be numbers, fixed-shape numeric arrays, or labels.
    d0, d1 : object
        Neighbouring datasets (see :mod:`dpkit.audit` pair helpers), passed through unchanged.
    trials : int
        Runs per dataset.
    delta : float
        δ of the claim under test; the bound is the ε refuted at this δ.
    confidence : float
        Probability (over the audit's randomness) that the reported bound is valid.
    rng : None, int or numpy.random.Generator
        Randomness handed to the mechanism. Use an int seed for a reproducible audit.
    region : callable, optional
        A fixed rejection region (``outputs -> bool per run``), chosen without these outputs.
        All runs are then used for evaluation.
    batched : bool, optional
        Override the signature-based detection of the vectorised form.
    selection : float
        Fraction of the runs used to choose the region (default one half).
    progress : callable, optional
        ``progress(done, total)`` with the number of runs completed, for progress bars.

    Returns
    -------
    AuditResult
        ``epsilon`` (ε_LB), ``region``, ``p``, ``q`` and their intervals.

    Notes
    -----
    With probability at least ``confidence`` the mechanism is not (ε, δ)-DP for any ε below the
    bound (Jagielski, Ullman & Oprea 2020; Nasr et al. 2021; the test view is Kamath 2020,
    Wasserman & Zhou 2010, Kairouz, Oh & Viswanath 2015). A bound below the claim proves
    nothing about privacy: a better pair or region might find more.

    Examples
    --------
    Laplace noise of scale 1 on a count, rounded to a data-independent grid: the claim ε = 1
    is not refuted.

    >>> def lap(d, n, rng):
    ...     return d + np.round(rng.laplace(0.0, 1.0, size=n) * 2**20) / 2**20
    >>> r = epsilon_lower_bound(lap, 0.0, 1.0, trials=50_000, rng=1)
    >>> 0.5 < r.epsilon <= 1.0
    True

    The same noise added in floating point (Mironov 2012) is caught by its low-order bits:

    >>> naive = lambda d, n, rng: d + rng.laplace(0.0, 1.0, size=n)
    >>> r = epsilon_lower_bound(naive, 0.0, 1.0, trials=50_000, rng=1)
    >>> r.epsilon > 5, str(r.region)
    (True, 'output is a multiple of 2^-53')
    """
    n = _check_trials(trials)
    d = check_delta(delta)
    c = check_confidence(confidence)
    if not isinstance(selection, numbers.Real) or not 0.0 < float(selection) < 1.0:
        raise PrivacyParameterError(f"selection must be a fraction in (0, 1), got {selection!r}.")
    if not callable(mechanism):
        raise PrivacyParameterError(f"mechanism must be callable, got {type(mechanism).__name__}.")
    fixed = _as_region(region) if region is not None else None
    gen = as_generator(rng)
    use_batch = is_batched(mechanism) if batched is None else bool(batched)
    done = [0]

    def tick(k: int) -> None:
        done[0] += k
        if progress is not None:
            progress(done[0], 2 * n)

    y0 = run_mechanism(mechanism, d0, n, gen, batched=use_batch, progress=tick)
    y1 = run_mechanism(mechanism, d1, n, gen, batched=use_batch, progress=tick)
    if y0.shape[1:] != y1.shape[1:]:
        raise DataError(
            f"outputs on d0 and d1 have different shapes ({y0.shape[1:]} vs {y1.shape[1:]})."
        )
    alpha = (1.0 - c) / 2.0
    if fixed is None:
        k = min(n - 1, max(1, math.floor(n * float(selection))))
        # Candidates are scored at a 100x stricter level than the final bound, so that a tail
        # threshold with a handful of lucky hits does not beat a robust one (winner's curse).
        chosen, _ = choose_region(y0[:k], y1[:k], delta=d, alpha=alpha / 100)
        e0, e1 = y0[k:], y1[k:]
    else:
        k, chosen, e0, e1 = 0, fixed, y0, y1
    in0 = np.asarray(chosen(e0), dtype=np.bool_)
    in1 = np.asarray(chosen(e1), dtype=np.bool_)
    return epsilon_from_counts(
        false_positives=int(np.count_nonzero(in0)),
        negatives=int(e0.shape[0]),
        false_negatives=int(e1.shape[0] - np.count_nonzero(in1)),
        positives=int(e1.shape[0]),
        delta=d,
        confidence=c,
        region=chosen,
        selection_trials=k,
    )
