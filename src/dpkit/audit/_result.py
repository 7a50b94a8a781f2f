"""The lower bound on ε from a hypothesis test's error counts, and the result object."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from dpkit._checks import check_delta
from dpkit.audit._clopper_pearson import check_confidence, cp_lower, cp_upper
from dpkit.errors import PrivacyParameterError

__all__ = ["AuditResult", "epsilon_from_counts", "epsilon_from_rates"]


def epsilon_from_rates(
    p_high: npt.ArrayLike, q_high: npt.ArrayLike, delta: float
) -> npt.NDArray[np.float64]:
    """ε_LB from upper confidence ends of the false positive and false negative rates.

    (ε, δ)-DP forces ``p + e^ε q ≥ 1 − δ`` and ``e^ε p + q ≥ 1 − δ`` for every test (Kamath 2020,
    hypothesis-testing view; Kairouz, Oh & Viswanath 2015), hence
    ``ε ≥ max(log((1 − δ − q)/p), log((1 − δ − p)/q))``; replacing p and q by upper confidence
    ends keeps the bound valid. Returns 0 where the test shows nothing. Vectorised.
    """
    p = np.asarray(p_high, dtype=np.float64)
    q = np.asarray(q_high, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.log(np.maximum(1.0 - delta - q, 0.0)) - np.log(p)
        b = np.log(np.maximum(1.0 - delta - p, 0.0)) - np.log(q)
    out = np.maximum(np.maximum(a, b), 0.0)
    return np.asarray(np.where(np.isnan(out), 0.0, out), dtype=np.float64)


def _count(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral | np.integer):
        raise PrivacyParameterError(f"{name} must be an int count, got {value!r}.")
    return int(value)


@dataclass(frozen=True)
class AuditResult:
    """An empirical lower bound on the ε a mechanism provides, with the test that proves it.

    With probability at least ``confidence`` (over the audit's own randomness), the mechanism is
    *not* (ε, δ)-DP for any ε below ``epsilon``. The bound says nothing in the other direction:
    a small ``epsilon`` does not prove the mechanism private.

    Attributes
    ----------
    epsilon : float
        The lower bound ε_LB (0 when the test shows nothing).
    delta : float
        The δ the bound was computed for.
    confidence : float
        Joint confidence of the two Clopper–Pearson upper ends used.
    region : object or None
        The rejection region ("guess D′ when the output is in it"), if the bound came from an
        audit.
    false_positives, negatives : int
        Outputs of ``D`` that fell in the region, out of how many runs on ``D``.
    false_negatives, positives : int
        Outputs of ``D′`` that fell outside it, out of how many runs on ``D′``.
    p_interval, q_interval : tuple of float
        Clopper–Pearson intervals for the false positive and false negative rates.
    selection_trials : int
        Runs per dataset spent choosing the region (0 when the region was given).
    """

    epsilon: float
    delta: float
    confidence: float
    false_positives: int
    negatives: int
    false_negatives: int
    positives: int
    p_interval: tuple[float, float]
    q_interval: tuple[float, float]
    region: Any = None
    selection_trials: int = 0

    @property
    def p(self) -> float:
        """Observed false positive rate p̂."""
        return self.false_positives / self.negatives

    @property
    def q(self) -> float:
        """Observed false negative rate q̂."""
        return self.false_negatives / self.positives

    def delta_lower_bound(self, epsilon: float) -> float:
        """Lower bound on δ for a claim of ε: ``δ ≥ 1 − p − e^ε q`` at the conservative ends.

        A test that flags ``D′`` in 10% of its runs and never flags ``D`` (say a record printed in
        the clear with probability 0.1) shows δ ≥ 0.093 whatever ε is claimed:

        >>> r = epsilon_from_counts(false_positives=0, negatives=10_000,
        ...                         false_negatives=9_000, positives=10_000)
        >>> round(r.delta_lower_bound(1.0), 3)
        0.093
        """
        if not math.isfinite(epsilon) or epsilon < 0:
            raise PrivacyParameterError(f"epsilon must be finite and >= 0, got {epsilon!r}.")
        p_hi, q_hi = self.p_interval[1], self.q_interval[1]
        d1 = 1.0 - p_hi - math.exp(epsilon) * q_hi
        d2 = 1.0 - q_hi - math.exp(epsilon) * p_hi
        return max(d1, d2, 0.0)

    def exceeds(self, claimed_epsilon: float) -> bool:
        """Whether the bound refutes a claim of ``claimed_epsilon`` at this δ."""
        return self.epsilon > claimed_epsilon

    def __str__(self) -> str:
        where = f" with region [{self.region}]" if self.region is not None else ""
        conf = f"{100 * self.confidence:g}% confidence"
        return (
            f"ε ≥ {self.epsilon:.4g} at δ={self.delta:g} ({conf}){where};"
            f" p̂={self.p:.4g} {_fmt(self.p_interval)}, q̂={self.q:.4g} {_fmt(self.q_interval)}"
        )


def _fmt(iv: tuple[float, float]) -> str:
    return f"[{iv[0]:.3g}, {iv[1]:.3g}]"


def epsilon_from_counts(
    *,
    false_positives: int,
    negatives: int,
    false_negatives: int,
    positives: int,
    delta: float = 0.0,
    confidence: float = 0.95,
    region: Any = None,
    selection_trials: int = 0,
) -> AuditResult:
    """Lower bound on ε from the error counts of one fixed test.

    Parameters
    ----------
    false_positives, negatives : int
        How many of ``negatives`` runs on ``D`` the test wrongly flagged as ``D′``.
    false_negatives, positives : int
        How many of ``positives`` runs on ``D′`` the test wrongly took for ``D``.
    delta : float
        The δ of the claim being tested.
    confidence : float
        The bound holds with at least this probability: each rate is replaced by the upper end of
        its two-sided Clopper–Pearson interval at this level, so each end fails with probability
        at most ``(1 − confidence)/2`` and both hold together with probability ≥ ``confidence``.

    Returns
    -------
    AuditResult
        ``epsilon = max(log((1 − δ − q_hi)/p_hi), log((1 − δ − p_hi)/q_hi), 0)``.

    Notes
    -----
    The test must be fixed before the counts are taken (choose it on other data), otherwise the
    confidence is not what it says. The inequality ``p + e^ε q ≥ 1 − δ`` is Kamath's (2020)
    hypothesis-testing view of DP (Wasserman & Zhou 2010; Kairouz, Oh & Viswanath 2015); its use
    with Clopper–Pearson ends follows Jagielski, Ullman & Oprea (2020, "Auditing differentially
    private machine learning") and Nasr et al. (2021, "Adversary instantiation").

    Examples
    --------
    Known answer: 500 true positives and 500 true negatives without a single error, at two-sided
    α = 0.01 (``confidence=0.99``). The Clopper–Pearson upper end for 0 of 500 is
    ``1 − 0.005^(1/500) = 0.010541`` and ``log(0.989459/0.010541) = 4.5419``:

    >>> r = epsilon_from_counts(false_positives=0, negatives=500, false_negatives=0,
    ...                         positives=500, confidence=0.99)
    >>> round(r.epsilon, 4)
    4.5419
    """
    fp = _count(false_positives, "false_positives")
    n0 = _count(negatives, "negatives")
    fn = _count(false_negatives, "false_negatives")
    n1 = _count(positives, "positives")
    for k, n, what in (
        (fp, n0, "false_positives/negatives"),
        (fn, n1, "false_negatives/positives"),
    ):
        if n < 1 or not 0 <= k <= n:
            raise PrivacyParameterError(
                f"{what}: need 0 <= errors <= runs and runs >= 1, got {k}/{n}."
            )
    d = check_delta(delta)
    c = check_confidence(confidence)
    alpha = (1.0 - c) / 2.0
    p_iv = (float(cp_lower(fp, n0, alpha)), float(cp_upper(fp, n0, alpha)))
    q_iv = (float(cp_lower(fn, n1, alpha)), float(cp_upper(fn, n1, alpha)))
    eps = float(epsilon_from_rates(p_iv[1], q_iv[1], d))
    return AuditResult(
        epsilon=eps,
        delta=d,
        confidence=c,
        false_positives=fp,
        negatives=n0,
        false_negatives=fn,
        positives=n1,
        p_interval=p_iv,
        q_interval=q_iv,
        region=region,
        selection_trials=selection_trials,
    )
