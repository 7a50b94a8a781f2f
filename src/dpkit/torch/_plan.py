"""The privacy plan of a DP-SGD run: noise, grid, and the event of the sampler actually used."""

from __future__ import annotations

import math
from dataclasses import dataclass

from dpkit._checks import check_delta
from dpkit.accounting import (
    Event,
    GaussianEvent,
    Neighbouring,
    PoissonSubsampledEvent,
    SampledWithoutReplacementEvent,
    SelfComposedEvent,
    calibrate,
    epsilon_of,
)
from dpkit.errors import PrivacyParameterError
from dpkit.noise import check_gaussian_scale, gaussian_grid, rounded_sensitivity

__all__ = ["TrainingPlan", "plan_training"]

ADD_REMOVE, REPLACE = Neighbouring.ADD_REMOVE, Neighbouring.REPLACE

SAMPLINGS = ("poisson", "shuffle", "fixed")


@dataclass(frozen=True, kw_only=True)
class TrainingPlan:
    """A calibrated private training run: what each step adds and what the run costs (no data).

    Privacy guarantee: the ``steps`` released noisy gradient sums (hence the model, and every
    iterate) satisfy ``event``, whose (ε, δ) is :meth:`epsilon`. For ``sampling="poisson"`` the
    event is ``steps`` Poisson-subsampled Gaussians with rate ``sample_rate`` under add/remove of
    one example (Abadi et al. 2016); for ``"shuffle"`` it is ``epochs`` Gaussians with twice the
    sensitivity, under replacement of one example (no amplification by shuffling is claimed); for
    ``"fixed"`` it is ``steps`` Gaussians with twice the sensitivity on ``batch_size`` examples
    drawn without replacement from ``n_samples``, under replacement of one example
    (:class:`~dpkit.accounting.SampledWithoutReplacementEvent`, PLD accounting only).
    """

    noise_multiplier: float
    """z: σ / Δ (with adaptive clipping, of the gradient sum and the count together)."""
    sigma: float
    """Standard deviation of the noise added to each step's clipped gradient sum."""
    grid: int
    """The noisy sums lie on multiples of ``2**grid``."""
    sensitivity: float
    """Δ: ℓ2 sensitivity of one step's grid-rounded sum (just above ``max_grad_norm``)."""
    max_grad_norm: float
    sample_rate: float
    """q = batch_size / n_samples."""
    expected_batch_size: float
    """q · n_samples, the public divisor of every step's noisy sum."""
    steps: int
    steps_per_epoch: int
    sampling: str
    delta: float
    event: Event
    """The whole run."""
    accounting: str = "auto"
    """How ε is computed from the event (``"auto"``: the better of PLD and RDP)."""
    count_sigma: float = 0.0
    """Adaptive clipping: σ_b, the noise of each step's count of unclipped examples (0: off)."""
    count_grid: int = 0
    """Grid exponent of the count's noise."""

    def step_event(self) -> Event:
        """The event of one step (Poisson, fixed) or one epoch (shuffle)."""
        e = self.event
        return e.event if isinstance(e, SelfComposedEvent) else e

    def epsilon_after(self, steps: int, *, delta: float | None = None) -> float:
        """ε after ``steps`` steps of this plan, at ``delta`` (default: the plan's δ)."""
        d = self.delta if delta is None else check_delta(delta, allow_zero=False)
        if steps <= 0:
            return 0.0
        per_step = self.sampling != "shuffle"
        units = steps if per_step else -(-steps // self.steps_per_epoch)
        one = self.step_event()
        event = SelfComposedEvent(one, count=units) if units > 1 else one
        return float(epsilon_of(event, delta=d, method=self.accounting))

    def epsilon(self) -> float:
        """ε of the whole run at the plan's δ."""
        return float(epsilon_of(self.event, delta=self.delta, method=self.accounting))


def _step_event(sigma: float, sens: float, sampling: str, b: int, n: int) -> Event:
    # Each event declares the relation its sensitivity is for, so that an accountant refuses to
    # compose a run with releases accounted under the other relation.
    if sampling == "poisson":
        # add/remove one example: the sum moves by at most Δ (the Poisson event declares it)
        gauss = GaussianEvent(sigma=sigma, sensitivity=sens, neighbouring=ADD_REMOVE)
        return PoissonSubsampledEvent(gauss, sampling_rate=b / n, neighbouring=ADD_REMOVE)
    if sampling == "fixed":
        # replace one example: a batch holding it changes its sum by at most 2Δ
        gauss = GaussianEvent(sigma=sigma, sensitivity=2 * sens, neighbouring=REPLACE)
        return SampledWithoutReplacementEvent(gauss, sample_size=b, population_size=n)
    # replace one example: one batch of the epoch changes, its sum by at most 2Δ. The batch
    # size is fixed and the dataset's size public, so this holds under replacement only.
    return GaussianEvent(sigma=sigma, sensitivity=2 * sens, neighbouring=REPLACE)


def plan_training(
    *,
    n_samples: int,
    batch_size: int,
    epochs: float,
    max_grad_norm: float,
    dimension: int,
    delta: float,
    sampling: str = "poisson",
    noise_multiplier: float | None = None,
    target_epsilon: float | None = None,
    accounting: str = "auto",
    count_noise: float | None = None,
    count_dimension: int = 1,
) -> TrainingPlan:
    """Calibrate a DP-SGD run from public quantities only.

        ``steps = ceil(epochs · n_samples / batch_size)``. Give exactly one of ``noise_multiplier``
        (σ = it · Δ) or ``target_epsilon`` (the smallest multiplier whose run is (ε, δ)-DP, by
        dpkit's accountant: ``accounting="auto"`` takes the better of PLD (Doroshenko et al. 2022)
        and RDP (Mironov, Talwar & Zhang 2019); ``"pld"`` or ``"rdp"`` one of them, ``"rdp"``
        being the fastest to calibrate). ``sampling="fixed"`` (``batch_size`` examples drawn without
        replacement each step, neighbours by replacement of one example) is accounted by PLD only:
        dpkit has no Rényi bound for it, and ``accounting="rdp"`` is refused.

        ``count_noise`` (σ_b) plans adaptive clipping (Andrew, Thakkar, McMahan & Ramaswamy 2021,
        "Differentially Private Learning with Adaptive Clipping"): each step also releases the
        number of examples whose gradient was not clipped, centred (Σ(b_i − ½), sensitivity ½) plus
        N(0, σ_b²). The two releases together are one Gaussian mechanism whose noise multiplier is
        the declared one, z, when the gradient sum gets the multiplier
        ``z_Δ = (z⁻² − (2σ_b)⁻²)^(−1/2)`` (their Theorem 1), so ``sigma = z_Δ·Δ`` and the event and
        ε are those of the plain run with multiplier z. Needs ``2σ_b > z``.

    ``count_dimension`` = L > 1 plans per-layer adaptive clipping: L such counts, one per layer,
    each with noise σ_b, released together. One example moves each by ½, so the counts' ℓ2
    sensitivity is ½√L and the gradient multiplier becomes ``(z⁻² − L·(2σ_b)⁻²)^(−1/2)``: sum and
    counts are again one Gaussian mechanism of multiplier z. Needs ``2σ_b > z·√L``.

        Examples
        --------
        >>> p = plan_training(n_samples=60_000, batch_size=256, epochs=1, max_grad_norm=1.0,
        ...                   dimension=1000, delta=1e-5, noise_multiplier=1.0)
        >>> p.steps, round(p.sample_rate, 5), round(p.epsilon(), 2)
        (235, 0.00427, 0.39)
    """
    if accounting not in ("auto", "pld", "rdp"):
        raise PrivacyParameterError('accounting must be "auto", "pld" or "rdp".')
    if sampling not in SAMPLINGS:
        raise PrivacyParameterError('sampling must be "poisson", "shuffle" or "fixed".')
    if sampling == "fixed" and accounting == "rdp":
        raise PrivacyParameterError(
            'sampling="fixed" (without replacement) is accounted by PLD only: use '
            'accounting="pld" or "auto" (dpkit has no Rényi bound for it, and Poisson accounting '
            "would not describe this sampler)."
        )
    for v, name in ((n_samples, "n_samples"), (batch_size, "batch_size"), (dimension, "dimension")):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise PrivacyParameterError(f"{name} must be a positive int.")
    if batch_size > n_samples:
        raise PrivacyParameterError("batch_size must be at most n_samples.")
    for x, label in ((epochs, "epochs"), (max_grad_norm, "max_grad_norm")):
        if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x) or x <= 0:
            raise PrivacyParameterError(f"{label} must be a finite positive number.")
    d = check_delta(delta, allow_zero=False)
    if (noise_multiplier is None) == (target_epsilon is None):
        raise PrivacyParameterError("give exactly one of noise_multiplier and target_epsilon.")
    q = batch_size / n_samples
    per_epoch = (
        n_samples // batch_size if sampling == "shuffle" else math.ceil(n_samples / batch_size)
    )
    steps = math.ceil(epochs * n_samples / batch_size)
    if sampling == "shuffle":
        if epochs != int(epochs):
            raise PrivacyParameterError('sampling="shuffle" needs a whole number of epochs.')
        steps = int(epochs) * per_epoch
    units = int(epochs) if sampling == "shuffle" else steps

    if target_epsilon is not None:
        z = calibrate(
            lambda s: _step_event(s, 1.0, sampling, batch_size, n_samples),
            epsilon=target_epsilon,
            delta=d,
            count=units,
            # below 0.5 the fixed-size pair's losses outgrow the PLD grid (and no other method
            # accounts for it); such a small multiplier is far from any useful ε anyway
            lower=0.5 if sampling == "fixed" else 0.05,
            upper=1e3,
            tolerance=1e-4,
            method=accounting,
        )
    else:
        if not isinstance(noise_multiplier, int | float) or not noise_multiplier > 0:
            raise PrivacyParameterError("noise_multiplier must be a finite positive number.")
        z = float(noise_multiplier)
    z_grad, count_sigma, count_grid, count_sens = z, 0.0, 0, 0.0
    if count_noise is not None:
        if isinstance(count_noise, bool) or not isinstance(count_noise, int | float):
            raise PrivacyParameterError("count_noise must be a finite positive number.")
        count_sigma = float(count_noise)
        if not math.isfinite(count_sigma) or count_sigma <= 0:
            raise PrivacyParameterError("count_noise must be a finite positive number.")
        count_grid = gaussian_grid(count_sigma)
        check_gaussian_scale(count_sigma, count_grid)
        if isinstance(count_dimension, bool) or not isinstance(count_dimension, int):
            raise PrivacyParameterError("count_dimension must be a positive int.")
        if count_dimension < 1:
            raise PrivacyParameterError("count_dimension must be a positive int.")
        # each count moves by ½ for one example: ℓ2 sensitivity ½√L (rounded up)
        half = (
            0.5
            if count_dimension == 1
            else math.nextafter(0.5 * math.sqrt(count_dimension), math.inf)
        )
        count_sens = rounded_sensitivity(half, count_grid, coordinates=count_dimension, norm=2)
        left = z**-2 - (count_sens / count_sigma) ** 2
        if not left > 0:
            raise PrivacyParameterError(
                "count_noise is too small for this noise multiplier: adaptive clipping needs "
                "2·count_noise > noise_multiplier·√L for L counts (the counts' noise alone would "
                "spend the whole budget); raise count_noise."
            )
        z_grad = left**-0.5
    grid = gaussian_grid(2 * z_grad * max_grad_norm)
    sens = rounded_sensitivity(max_grad_norm, grid, coordinates=dimension, norm=2)
    sigma = math.nextafter(z_grad * sens, math.inf)
    check_gaussian_scale(sigma, grid)
    if count_noise is None:
        one = _step_event(sigma, sens, sampling, batch_size, n_samples)
    else:
        # the sum and the count as one Gaussian: (Δ/σ)² + (Δ_b/σ_b)² = 1/z², rounded safe
        ratio = math.nextafter(math.hypot(sens / sigma, count_sens / count_sigma), math.inf)
        one = _step_event(math.nextafter(sens / ratio, 0.0), sens, sampling, batch_size, n_samples)
    return TrainingPlan(
        noise_multiplier=z,
        sigma=sigma,
        grid=grid,
        sensitivity=sens,
        max_grad_norm=float(max_grad_norm),
        sample_rate=q,
        expected_batch_size=q * n_samples,
        steps=steps,
        steps_per_epoch=per_epoch,
        sampling=sampling,
        delta=d,
        event=SelfComposedEvent(one, count=units) if units > 1 else one,
        accounting=accounting,
        count_sigma=count_sigma,
        count_grid=count_grid,
    )
