"""The privacy plan of a synthesiser: every noise scale and selection ε fixed before the data.

MST (McKenna, Miklau & Sheldon 2021, Alg. 1) spends a third of ρ on one-way marginals, a third
on choosing a tree and a third on measuring its edges. AIM (McKenna et al., PVLDB 2022, Alg. 1)
spends a share on one-way marginals and the rest over rounds, each split between an exponential
mechanism (selection) and a Gaussian measurement (α = 0.9 to measurement). Here the number of
rounds is fixed in advance (one per column after the first), so the whole plan — and its event —
is known before any data are read, and is charged at once.

With the joint estimator (``estimator="pgm"``) AIM runs as its authors define it: the one-way
marginals at σ₀ = Δ·√(T/(2αρ)) with T = 16·d, then rounds whose σ and ε anneal with the data
until ρ is spent exactly. The number of rounds then depends on the data, but the total does not:
the plan's event is the one-way measurements composed with a zCDP event for the rest of ρ, known
before the data are read and charged at once, and the loop never spends more than it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from dpkit.accounting import (
    ComposedEvent,
    DiscreteGaussianEvent,
    Event,
    ExponentialEvent,
    SelfComposedEvent,
    ZCDPEvent,
)
from dpkit.noise import sampled_sigma

__all__ = ["AIM_ALPHA", "AIM_ONE_WAY_TOP_UP", "ESTIMATORS", "METHODS", "Plan", "make_plan"]

METHODS = ("aim", "independent", "mst")
ESTIMATORS = ("pgm", "closed")

AIM_ALPHA = 0.9
"""AIM's share of each round's ρ spent on measurement (McKenna et al. 2022, Alg. 1)."""

AIM_ONE_WAY_TOP_UP = 0.3
"""Most of ρ AIM may spend measuring one-way marginals again (see ``_synth_aim``)."""

AIM_ROUNDS_PER_COLUMN = 16
"""AIM's T = 16·d: the nominal number of rounds that sets σ₀ and ε₀ (ibid., §5)."""

ONE_WAY_SHARE = {"aim": 0.15, "mst": 1.0 / 3.0, "independent": 1.0}
"""Share of ρ on one-way marginals. AIM's own start measures them at the round scale; a fixed
15% gives the model's priors and the estimate of n about the same accuracy on small budgets."""

SELECT_SHARE = {"aim": 0.1, "mst": 0.5}
"""Share of each round's ρ spent on selection: AIM's 1 − α with α = 0.9; MST's even split."""


@dataclass(frozen=True)
class Plan:
    """Noise scales and selection ε of one fit; ``rounds`` selections and measurements."""

    method: str
    rho: float
    columns: int
    sigma_one_way: float
    rounds: int
    select_epsilon: float
    sigma_round: float
    sensitivity: float
    max_cells: int
    adaptive: bool = False
    max_model_cells: int = 0

    @property
    def score_sensitivity(self) -> float:
        """Sensitivity of an ℓ1 error score of counts: 1 under add/remove, 2 under replace."""
        return 2.0 if self.sensitivity > 1 else 1.0

    @property
    def event(self) -> Event:
        """The composed event of the whole fit."""
        if self.adaptive:
            one = self.columns * self.sensitivity**2 / (2 * self.sigma_one_way**2)
            return ComposedEvent(
                events=(
                    SelfComposedEvent(
                        DiscreteGaussianEvent(
                            sigma=self.sigma_one_way, sensitivity=self.sensitivity, dimension=2
                        ),
                        count=self.columns,
                    ),
                    ZCDPEvent(rho=self.rho - one),
                )
            )
        parts: list[Event] = [
            SelfComposedEvent(
                DiscreteGaussianEvent(
                    sigma=self.sigma_one_way, sensitivity=self.sensitivity, dimension=2
                ),
                count=self.columns,
            )
        ]
        if self.rounds:
            parts.append(
                SelfComposedEvent(ExponentialEvent(epsilon=self.select_epsilon), count=self.rounds)
            )
            parts.append(
                SelfComposedEvent(
                    DiscreteGaussianEvent(
                        sigma=self.sigma_round, sensitivity=self.sensitivity, dimension=2
                    ),
                    count=self.rounds,
                )
            )
        # (no relation here: Synthesizer.event declares the synthesizer's, which ``sens`` is for)
        return ComposedEvent(events=tuple(parts))

    def spent_rho(self) -> float:
        """ρ of the plan: Δ²/(2σ²) per measurement, ε²/8 per selection (Cesar & Rogers 2021)."""
        if self.adaptive:
            return self.rho
        r = self.columns * self.sensitivity**2 / (2 * self.sigma_one_way**2)
        if self.rounds:
            r += self.rounds * self.select_epsilon**2 / 8
            r += self.rounds * self.sensitivity**2 / (2 * self.sigma_round**2)
        return r


def _sampleable(sens: float, rho: float) -> float:
    """The σ of a Gaussian step with sensitivity ``sens`` and ``rho`` of the budget, refused
    (``PrivacyParameterError``) when the exact sampler cannot draw it: here, at construction,
    rather than at the first measurement, after the fit was charged."""
    root = math.sqrt(2 * rho)
    # a share of a subnormal ρ underflows to 0: an infinite σ, refused by the sampler's check
    sigma = sens / root if root > 0 else math.inf
    sampled_sigma(sigma)
    return sigma


def make_plan(
    method: str,
    rho: float,
    columns: int,
    replace: bool,
    max_cells: int,
    estimator: str = "closed",
    max_model_cells: int = 0,
) -> Plan:
    """Split ``rho`` over the steps of ``method`` for a table of ``columns`` columns."""
    sens = math.sqrt(2.0) if replace else 1.0
    # A hair below ρ so that rounding in the accountant's sums can never tip the charge over.
    rho = rho * (1 - 1e-9)
    if method == "aim" and estimator == "pgm":
        t = AIM_ROUNDS_PER_COLUMN * columns
        sigma0 = _sampleable(sens, AIM_ALPHA * rho / t)
        _sampleable(sens, AIM_ALPHA * AIM_ALPHA * rho / t)  # the last round's largest σ
        _sampleable(sens, AIM_ONE_WAY_TOP_UP * rho)  # the smallest σ of a repeated one-way
        eps0 = math.sqrt(8 * (1 - AIM_ALPHA) * rho / t)
        return Plan(
            method, rho, columns, sigma0, t, eps0, sigma0, sens, max_cells, True, max_model_cells
        )
    rounds = 0 if method == "independent" else columns - 1
    share = ONE_WAY_SHARE[method] if rounds else 1.0
    rho1 = rho * share / columns
    sigma1 = _sampleable(sens, rho1)
    if not rounds:
        return Plan(method, rho, columns, sigma1, 0, 1.0, 1.0, sens, max_cells)
    per_round = rho * (1 - share) / rounds
    sel = SELECT_SHARE[method]
    eps_sel = math.sqrt(8 * per_round * sel)
    sigma_r = _sampleable(sens, per_round * (1 - sel))
    return Plan(method, rho, columns, sigma1, rounds, eps_sel, sigma_r, sens, max_cells)
