"""Calibration: the least noise that meets a target (ε, δ), and DP-SGD accounting."""

from __future__ import annotations

import math
from collections.abc import Callable

from dpkit._checks import check_delta, check_epsilon, check_positive, check_probability
from dpkit.accounting._compose import compose
from dpkit.accounting._events import Event, GaussianEvent, PoissonSubsampledEvent, SelfComposedEvent
from dpkit.errors import PrivacyParameterError

__all__ = ["calibrate", "dpsgd_epsilon", "dpsgd_noise_multiplier"]


def _count(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise PrivacyParameterError(f"{name} must be a positive integer, got {value!r}.")
    return value


def calibrate(
    make_event: Callable[[float], Event],
    *,
    epsilon: float,
    delta: float = 0.0,
    count: int = 1,
    lower: float = 1e-3,
    upper: float = 1e4,
    method: str = "auto",
    tolerance: float = 1e-4,
) -> float:
    """Smallest noise parameter x in [lower, upper] such that ``count`` runs of ``make_event(x)``
    are (ε, δ)-DP.

    ``make_event`` maps a noise level (a scale, σ, a noise multiplier) to an event whose privacy
    improves as the level grows. The search is a bisection on log x that keeps the upper end, so
    the value returned always meets the target (to a relative ``tolerance`` from the smallest).

    Privacy guarantee: ``compose(SelfComposedEvent(make_event(x), count=count), method=method)``
    is (ε, δ)-DP for the returned x.

    Examples
    --------
    >>> from dpkit.accounting import GaussianEvent
    >>> s = calibrate(lambda s: GaussianEvent(sigma=s), epsilon=1.0, delta=1e-5, count=100)
    >>> round(s, 1)      # one Gaussian at σ/10 = 3.73 (exact)
    37.3
    """
    eps = check_epsilon(epsilon)
    d = check_delta(delta)
    k = _count(count, "count")
    lo = check_positive(lower, "lower")
    hi = check_positive(upper, "upper")
    if lo >= hi:
        raise PrivacyParameterError(f"lower must be below upper, got lower={lo}, upper={hi}.")

    def ok(x: float) -> bool:
        event = make_event(x)
        target = SelfComposedEvent(event, count=k) if k > 1 else event
        return compose(target, method=method).epsilon(d) <= eps

    if not ok(hi):
        raise PrivacyParameterError(
            f"even the noise level upper={hi} does not reach epsilon={eps}, delta={d}; "
            "raise upper, epsilon or delta."
        )
    if ok(lo):
        return lo
    a, b = math.log(lo), math.log(hi)
    while b - a > tolerance:
        mid = (a + b) / 2
        if ok(math.exp(mid)):
            b = mid
        else:
            a = mid
    x = math.exp(b)
    while not ok(x):  # exp(log(x)) may round below the checked point
        x = math.nextafter(x, math.inf)
    return x


def _dpsgd_event(noise_multiplier: float, sample_rate: float, steps: int) -> Event:
    step = PoissonSubsampledEvent(GaussianEvent(sigma=noise_multiplier), sampling_rate=sample_rate)
    return SelfComposedEvent(step, count=steps) if steps > 1 else step


def dpsgd_epsilon(
    noise_multiplier: float,
    sample_rate: float,
    steps: int,
    delta: float,
    *,
    method: str = "auto",
) -> float:
    """ε of DP-SGD (Abadi et al. 2016): ``steps`` Poisson-subsampled Gaussian steps, add/remove.

    Each step samples every example with probability ``sample_rate``, clips per-example gradients
    to norm C and adds N(0, (noise_multiplier·C)²) to their sum. ``method="auto"`` takes the best of
    PLD (Doroshenko et al. 2022) and RDP (Mironov, Talwar & Zhang 2019).

    Examples
    --------
    >>> round(dpsgd_epsilon(4.0, 0.01, 10_000, 1e-5), 2)   # moments accountant: 1.26
    0.95
    """
    return compose(
        _dpsgd_event(
            check_positive(noise_multiplier, "noise_multiplier"),
            check_probability(sample_rate, "sample_rate"),
            _count(steps, "steps"),
        ),
        method=method,
    ).epsilon(check_delta(delta, allow_zero=False))


def dpsgd_noise_multiplier(
    *, epsilon: float, delta: float, sample_rate: float, steps: int, method: str = "auto"
) -> float:
    """Smallest DP-SGD noise multiplier reaching (ε, δ) after ``steps`` steps (see
    :func:`dpsgd_epsilon`).

    Examples
    --------
    >>> nm = dpsgd_noise_multiplier(epsilon=1.0, delta=1e-5, sample_rate=0.01, steps=10_000)
    >>> round(nm, 2)
    3.81
    """
    q = check_probability(sample_rate, "sample_rate")
    k = _count(steps, "steps")
    return calibrate(
        lambda s: PoissonSubsampledEvent(GaussianEvent(sigma=s), sampling_rate=q),
        epsilon=epsilon,
        delta=check_delta(delta, allow_zero=False),
        count=k,
        lower=0.05,
        upper=1e3,
        method=method,
        tolerance=1e-4,
    )
