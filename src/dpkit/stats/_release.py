"""What every private statistic returns: the value, the event that paid for it, its error bars."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from scipy import special

from dpkit._checks import check_probability
from dpkit.accounting import epsilon_of
from dpkit.errors import DPKitError, PrivacyParameterError
from dpkit.stats._noisy import PartNoise

__all__ = ["ErrorModel", "LinearNoise", "NoInterval", "PartsBox", "Release"]

_DRAWS = 4000  # simulated noise draws per interval: quantile error at 97.5% is about ±0.3%
_SEED = 20221  # simulations of the noise use no data, so a fixed public seed is fine


class ErrorModel(Protocol):
    """Turns a released value into an interval (post-processing: it reads no data)."""

    def interval(
        self, value: Any, alpha: float, include_sampling: bool, method: str
    ) -> tuple[Any, Any]: ...


def _sampling_draws(sd: float | None, size: int, gen: np.random.Generator) -> Any:
    if sd is None:
        raise DPKitError(
            "this statistic has no sampling-error model; call ci(alpha) for the noise interval."
        )
    return gen.normal(0.0, sd, size)


@dataclass(frozen=True)
class LinearNoise:
    """Error ``Σ_j c_j Z_j`` (``Z_j`` the noise of part j): exact for a single part."""

    terms: tuple[tuple[PartNoise, float], ...]
    sampling_sd: float | None = None

    def interval(
        self, value: Any, alpha: float, include_sampling: bool, method: str
    ) -> tuple[Any, Any]:
        if len(self.terms) == 1 and not include_sampling:
            part, coef = self.terms[0]
            half = abs(coef) * part.half_width(alpha)
            return value - half, value + half
        gen = np.random.default_rng(_SEED)
        err = sum((c * p.simulate(_DRAWS, gen) for p, c in self.terms), np.zeros(_DRAWS))
        if include_sampling:
            err = err + _sampling_draws(self.sampling_sd, _DRAWS, gen)
        lo, hi = np.quantile(err, [alpha / 2, 1 - alpha / 2])
        return float(value - hi), float(value - lo)


@dataclass(frozen=True)
class PartsBox:
    """Error bars of a statistic computed from several noisy parts, valid by construction.

    Each released part ``T̂_j`` is within ``h_j`` of the exact part with probability at least
    ``1 − alpha/m`` (``h_j`` from the exact noise distribution, :meth:`PartNoise.half_width`), so
    with probability at least ``1 − alpha`` (Bonferroni) every exact part lies in the box
    ``Π [T̂_j − h_j, T̂_j + h_j]``, and the exact statistic ``f(T)`` between the smallest and the
    largest value of ``f`` on the box. The extremes are searched numerically: a grid of the box
    (its corners, nine points per side, and 0 where a side crosses it, the stationary point of the
    centred sums' quadratic terms), then a finer search along every axis from the best points.
    An extreme strictly inside an edge can still be missed by a hair; the box's own slack covers
    that in practice (coverage ≥ 99.9% at a nominal 95% in simulations, never below nominal).
    Conservative: wider than a bootstrap's interval, but it never relies on the estimator being
    nearly linear, which fails for small n or small ε.
    Post-processing only: it reads the released parts, never the data.

    ``corners=True`` declares the statistic monotone along every line parallel to an axis (the
    mean ``s / max(n, 1)``: monotone in ``s`` for each ``n`` and in ``n`` for each ``s``). Its
    extremes over the box are then at corners (the minimum over the first coordinate is at one
    of its two ends, for every value of the others; repeat on each end), so only the ``2^m``
    corners are evaluated: the search's grid contains them and can find nothing beyond them,
    so the interval is the same, found without the search.
    """

    noisy: tuple[float, ...]
    parts: tuple[PartNoise, ...]
    exact: Callable[..., Any]  # the statistic as a function of exact parts (vectorised)
    sampling_sd: Any = None
    limits: tuple[float, float] = (-np.inf, np.inf)  # the statistic's range (e.g. r ∈ [-1, 1])
    corners: bool = False  # monotone along every axis: the extremes are at the box's corners

    def interval(
        self, value: Any, alpha: float, include_sampling: bool, method: str
    ) -> tuple[Any, Any]:
        if method == "bootstrap":
            return self._bootstrap(value, alpha, include_sampling)
        noise_alpha = alpha / 2 if include_sampling else alpha
        share = noise_alpha / sum(1 for p in self.parts if p.kind != "none")
        axes: list[Any] = []
        for t, p in zip(self.noisy, self.parts, strict=True):
            h = p.half_width(share) if p.kind != "none" else p.half_width(1.0)
            if self.corners:
                axes.append((t - h, t + h))
                continue
            side = np.linspace(t - h, t + h, 9)
            if t - h < 0.0 < t + h:
                side = np.append(side, 0.0)
            axes.append(side)
        if self.corners:
            lo, hi = self._corners(axes)
        else:
            with np.errstate(all="ignore"):
                values = np.asarray(self.exact(*np.meshgrid(*axes, indexing="ij", sparse=True)))
            values = np.where(np.isfinite(values), values, np.nan)
            if np.all(np.isnan(values)):
                raise DPKitError("the noise is too large for an interval around this estimate.")
            lo, hi = self._refine(
                axes,
                np.unravel_index(np.nanargmin(values), values.shape),
                np.unravel_index(np.nanargmax(values), values.shape),
            )
        if include_sampling:
            if self.sampling_sd is None:
                _sampling_draws(None, 0, np.random.default_rng(_SEED))
            z = float(special.ndtri(1.0 - alpha / 4.0))
            lo, hi = lo - z * float(self.sampling_sd), hi + z * float(self.sampling_sd)
        a, b = self.limits
        # min/max of floats: np.clip's result (a NaN stays NaN) without its per-call cost.
        return float(min(max(lo, a), b)), float(min(max(hi, a), b))

    def _corners(self, ends: list[Any]) -> tuple[float, float]:
        """The smallest and largest finite value of the statistic at the box's corners."""
        corners = list(itertools.product(*ends))
        if getattr(self.exact, "floats", False) and all(
            type(v) is float for v in corners[0] + corners[-1]
        ):
            # A statistic that declares it computes Python floats (the mean's, which never
            # raises on them): each corner in turn, cheaper than arrays for a few corners.
            values = [float(self.exact(*pt)) for pt in corners]
        else:
            points = np.array(corners, dtype=np.float64).T
            with np.errstate(all="ignore"):
                values = np.asarray(self.exact(*points), dtype=np.float64).ravel().tolist()
        finite = [v for v in values if math.isfinite(v)]
        if not finite:
            raise DPKitError("the noise is too large for an interval around this estimate.")
        return min(finite), max(finite)

    def _refine(
        self, axes: list[Any], low: tuple[Any, ...], high: tuple[Any, ...]
    ) -> tuple[float, float]:
        """Improve the grid's minimum and maximum by fine 1-D searches along each axis (two
        sweeps). The two searches are independent; they run side by side, each step evaluating
        both lines in one vectorised call (the statistic is elementwise)."""
        starts = (low, high)
        signs = (-1.0, 1.0)
        points = [[float(axis[i]) for axis, i in zip(axes, st, strict=True)] for st in starts]
        lines = [np.linspace(float(axis.min()), float(axis.max()), 257) for axis in axes]
        # A line whose other coordinates have not moved since it was last searched (on both
        # sides) cannot improve on the best found so far: its search is skipped, not repeated.
        searched: list[Any] = [None] * len(axes)
        with np.errstate(all="ignore"):
            best = [sg * float(self.exact(*pt)) for sg, pt in zip(signs, points, strict=True)]
            for _ in range(2):
                for j, line in enumerate(lines):
                    others = [tuple(pt[:j] + pt[j + 1 :]) for pt in points]
                    if searched[j] == others:
                        continue
                    searched[j] = others
                    n = line.size
                    trial = [
                        np.concatenate((np.full(n, points[0][i]), np.full(n, points[1][i])))
                        for i in range(len(axes))
                    ]
                    trial[j] = np.concatenate((line, line))
                    both = np.asarray(self.exact(*trial), dtype=np.float64)
                    for side in (0, 1):
                        vals = signs[side] * both[side * n : (side + 1) * n]
                        vals = np.where(np.isfinite(vals), vals, -np.inf)
                        k = int(np.argmax(vals))
                        if vals[k] > best[side]:
                            best[side], points[side][j] = float(vals[k]), float(line[k])
        return -best[0], best[1]

    def _bootstrap(self, value: Any, alpha: float, include_sampling: bool) -> tuple[Any, Any]:
        """Basic parametric bootstrap: ``f(T̂ + Z) − f(T̂)`` taken as the error distribution.

        Narrower than the box, but only approximate: it assumes the estimator's error looks the
        same at the released parts as at the exact ones, which fails when the noise is large
        against the statistic (small n·ε), e.g. a correlation near ±1.
        """
        gen = np.random.default_rng(_SEED)
        sims = [p.simulate(_DRAWS, gen) for p in self.parts]
        with np.errstate(all="ignore"):
            base = self.exact(*self.noisy)
            err = np.asarray(self.exact(*[t + z for t, z in zip(self.noisy, sims, strict=True)]))
            err = err - base
        if include_sampling:
            err = err + _sampling_draws(self.sampling_sd, _DRAWS, gen)
        ok = err[np.isfinite(err)]
        if ok.size == 0:
            raise DPKitError("the noise is too large for an interval around this estimate.")
        lo, hi = np.quantile(ok, [alpha / 2, 1 - alpha / 2])
        a, b = self.limits
        return float(np.clip(value - hi, a, b)), float(np.clip(value - lo, a, b))


@dataclass(frozen=True)
class NoInterval:
    """For mechanisms whose error depends on the data (the exponential mechanism)."""

    reason: str

    def interval(
        self, value: Any, alpha: float, include_sampling: bool, method: str
    ) -> tuple[Any, Any]:
        raise DPKitError(self.reason)


def _plain(v: Any) -> Any:
    arr = np.asarray(v, dtype=np.float64)
    return float(arr) if arr.ndim == 0 else arr


@dataclass(frozen=True)
class Release:
    """A private statistic: its value, the privacy event that paid for it, and its error bars.

    Attributes
    ----------
    value : float or numpy.ndarray
        The released estimate.
    event : object
        The privacy event charged for it (a ``ComposedEvent`` when it has several noisy parts).
    statistic : str
        What was released, e.g. ``"mean"``.
    delta : float
        The δ the release was calibrated for (0 for pure ε-DP); with ``event`` it gives the
        (ε, δ) shown by ``repr``.
    rho : float or None
        The zCDP budget ρ the release was calibrated for, when it was given one (``rho=``).

    The ``repr`` shows the value, the privacy cost in user units (ε, and δ when positive) and
    how ``ci`` computes its error bars; the event itself, in the integer units of the noise, is
    in ``.event``.
    """

    value: Any
    event: object
    statistic: str = "statistic"
    errors: ErrorModel = field(default=NoInterval("no error model"), repr=False, compare=False)
    delta: float = field(default=0.0, repr=False, compare=False)
    rho: float | None = field(default=None, repr=False, compare=False)

    def ci(
        self, alpha: float = 0.05, *, include_sampling: bool = False, method: str = "box"
    ) -> tuple[Any, Any]:
        """A ``1 − alpha`` interval for the statistic of the (clamped) data.

        By default it covers the **privacy noise** only: with probability at least ``1 − alpha``
        over the noise, the interval contains the exact statistic of the clamped data — exactly
        for one-part statistics (count, sum, mean with known n, histogram), conservatively for
        statistics made of several noisy parts (``method="box"``: the statistic's range over a
        Bonferroni box of the parts' exact noise intervals, :class:`PartsBox`).
        ``method="bootstrap"`` gives a narrower parametric-bootstrap interval for those, which
        is only approximate and can under-cover badly when n·ε is small.

        With ``include_sampling=True`` the interval also covers the sampling error of the data
        as a sample from a population (McSherry 2016 plots both), where a model of that error is
        available (count and corr have none). Clamping bias is not covered: choose bounds that
        contain the data.

        Returns
        -------
        (low, high)
            Floats, or arrays shaped like ``value``.
        """
        a = check_probability(alpha, "alpha")
        if a >= 1.0:
            raise PrivacyParameterError("alpha must be in (0, 1), e.g. 0.05 for a 95% interval.")
        if method not in ("box", "bootstrap"):
            raise PrivacyParameterError(f"method must be 'box' or 'bootstrap', got {method!r}.")
        return self.errors.interval(self.value, a, include_sampling, method)

    def __float__(self) -> float:
        return float(self.value)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray[Any, Any]:
        return np.asarray(self.value, dtype=dtype)

    def __repr__(self) -> str:
        v = self.value
        shown = f"{v:.6g}" if isinstance(v, float) else np.array2string(np.asarray(v), precision=6)
        return f"Release({self.statistic}={shown}, {self._cost()}, ci={_method(self.errors)!r})"

    def _repr_html_(self) -> str:
        """A notebook's view: the value, its 95% interval where it has one, and the cost."""
        from dpkit._html import table

        v = self.value
        value = f"{v:.6g}" if isinstance(v, float) else np.array2string(np.asarray(v), precision=6)
        rows = [("statistic", self.statistic), ("value", value), ("cost", self._cost())]
        try:
            lo, hi = self.ci(0.05)
        except DPKitError:
            rows.append(("95% interval", "not available for this statistic"))
        else:
            ends = f"[{_text(lo)}, {_text(hi)}]"
            rows.append(("95% interval", f"{ends} ({_method(self.errors)})"))
        return table("Release", rows)

    def _cost(self) -> str:
        if self.event is None:
            return "epsilon=0 (public)"
        if self.rho is not None:  # paid in zCDP: shown in ρ, the unit it was asked and paid in
            return f"rho={_round_up(self.rho)}"
        try:
            eps = float(epsilon_of(self.event, delta=self.delta))  # type: ignore[arg-type]
        except DPKitError:  # pragma: no cover - every event a statistic charges has an ε
            return "epsilon=?"
        shown = f"epsilon={_round_up(eps)}"
        return shown + (f", delta={self.delta:.3g}" if self.delta > 0 else "")


def _text(a: Any) -> str:
    """A released number or array, to six significant digits."""
    if isinstance(a, float):
        return f"{a:.6g}"
    return np.array2string(np.asarray(a), precision=6)


def _round_up(eps: float) -> str:
    """ε to 4 significant digits, rounded up (the charged ε sits a hair below the target)."""
    text = f"{eps:.4g}"
    if float(text) < eps:
        text = f"{float(text) + 10 ** (math.floor(math.log10(eps)) - 3):.4g}"
    return text


def _method(errors: object) -> str:
    if isinstance(errors, LinearNoise):
        return "exact noise quantiles" if len(errors.terms) == 1 else "simulated noise"
    if isinstance(errors, PartsBox):
        return "box over the noisy parts (conservative)"
    return "none"
