"""Adversarial tier: audit every mechanism and statistic dpkit offers against its claimed ε.

A bound above the claim is a privacy bug in dpkit (or in its privacy map), never a reason to
loosen this test. Each audit is valid with probability 0.95 only if nothing is wrong, so to keep
the suite meaningful *and* free of false alarms the bounds are taken at confidence 0.999 (each of
the ~60 audits below then raises a false alarm with probability < 0.001, and the fixed seeds make
the outcome reproducible). The negative controls in test_audit_lower_bound.py show that the same
machinery does catch real bugs at these sample sizes.

Runs per dataset: 50_000 for the batched additive-noise mechanisms and randomized response,
20_000 for the selection mechanisms, 3_000 for the sparse vector, 10_000 for the median and
quantile, 3_000 for count, sum, histogram, bounds, var, std, cov and corr, 2_000 for the mean, and
1_000 for the Gaussian mean with unknown n (0.07-40 ms a call, one public call per run; see
docs/audit.md). Statistics are audited at ε = 0.5 and 2; var, std, cov, corr (on replace-one
pairs), the Gaussian count and the Gaussian mean with n public at ε = 2 only; the Gaussian mean
with unknown n at ε = 1 only. The statistics in ``POWER`` must also show power at ε = 2, so the
audit can fail in both directions.
"""

from __future__ import annotations

import pytest

from dpkit.audit._cases import AuditCase
from dpkit.audit._catalogue import mechanism_cases
from dpkit.audit._catalogue_stats import statistic_cases

CONFIDENCE = 0.999
EPSILONS = (0.5, 1.0, 2.0)
STATS_EPSILONS = (0.5, 2.0)
STATS_RUNS = 3000


def _mechanism_params() -> list[tuple[AuditCase, int]]:
    out = []
    for i, eps in enumerate(EPSILONS):
        for j, case in enumerate(mechanism_cases(eps)):
            if case.name == "SparseVector" and eps == 1.0:
                continue  # the slowest audit: two ε values are enough
            out.append((case, 1000 * i + j))
    return out


SLOW_STATS = {"stats.mean (δ>0)": 1000}
"""The Gaussian mean with unknown n (5-40 ms per call): audited at ε = 1 only, with fewer runs."""

AT_TWO = {"stats.var": 3000, "stats.std": 3000, "stats.cov": 3000, "stats.corr": 3000,
          "stats.count (δ>0)": 3000, "stats.mean (δ>0, replace)": 3000}  # fmt: skip
"""Statistics audited at ε = 2 only, where they must show power: var, std, cov and corr (several
noisy sums; 0.5-1.5 ms per call on their replace-one pairs) and the Gaussian count and mean."""

RUNS = {"stats.median": 10_000, "stats.quantile": 10_000, "stats.mean": 4000}
"""Runs per dataset where the cost per call (0.07 ms for quantiles, 0.75 ms for the mean) is far
from the 0.25-0.35 ms of count, sum, histogram and bounds. With 2000 runs the mean's audit at
ε = 2 reached 0.33-0.52 of its claim on most seeds but 0.06-0.28 on 3 of 20 (its selection half
then picked a poor region); with 4000, those seeds reach 0.46-0.50."""

POWER = {"stats.count": 0.6, "stats.sum": 0.6, "stats.histogram": 0.4, "stats.mean": 0.3,
         "stats.median": 0.35, "stats.quantile": 0.35, "stats.var": 0.25, "stats.std": 0.25,
         "stats.cov": 0.17, "stats.corr": 0.12, "stats.count (δ>0)": 0.14,
         "stats.mean (δ>0, replace)": 0.12}  # fmt: skip
"""Least ε_LB / claim required at ε = 2 (a test that could not fail would prove nothing). Each
floor is about 2/3 of the fraction the audit reaches with these runs and seeds (0.7-0.97 for count
and sum, 0.55-0.7 for histogram, 0.5 for mean, 0.6-0.7 for the quantiles, 0.41 for var, 0.38 for
std, 0.25 for cov, 0.2 for corr, 0.22 for the Gaussian count, 0.19 for the Gaussian mean with n
public), and far above the 0 the earlier pairs gave for the 0.25-quantile, for var, std, cov and
corr, and for the Gaussian count and mean at ε = 1."""


def _stats_params() -> list[tuple[AuditCase, int, int]]:
    out = []
    for i, eps in enumerate((*STATS_EPSILONS, 1.0)):
        for j, case in enumerate(statistic_cases(eps)):
            if case.name in SLOW_STATS:
                keep = eps == 1.0
            elif case.name in AT_TWO:
                keep = eps == 2.0
            else:
                keep = eps in STATS_EPSILONS
            if keep:
                runs = {**SLOW_STATS, **AT_TWO, **RUNS}.get(case.name, STATS_RUNS)
                out.append((case, 5000 + 1000 * i + j, runs))
    return out


def _id(p: object) -> str:
    return f"{p.name}@{p.claimed_epsilon:.3g}" if isinstance(p, AuditCase) else str(p)


@pytest.mark.parametrize(("case", "seed"), _mechanism_params(), ids=_id)
def test_mechanism_meets_its_claim(case: AuditCase, seed: int) -> None:
    r = case.run(trials=50_000, confidence=CONFIDENCE, rng=seed)
    assert r.epsilon <= case.claimed_epsilon, f"{case.name}: {r}"


@pytest.mark.parametrize(("case", "seed", "runs"), _stats_params(), ids=_id)
def test_statistic_meets_its_claim(case: AuditCase, seed: int, runs: int) -> None:
    r = case.run(trials=round(runs / case.trials_factor), confidence=CONFIDENCE, rng=seed)
    assert r.negatives + r.selection_trials == runs
    assert r.epsilon <= case.claimed_epsilon, f"{case.name}: {r}"
    # Audits run at ε = 0.5, 1 and 2; claims composed from several parts read 2 − 2e-12 at ε = 2.
    if case.name in POWER and case.claimed_epsilon > 1.5:
        assert r.epsilon >= POWER[case.name] * case.claimed_epsilon, f"{case.name}: {r}"


def test_sparse_vector_audit_has_power() -> None:
    # 3000 runs at ε = 2 reach 0.79 with seed 1 (it was 0.004 from 1000 runs on a pair shifting
    # every query up); a floor of a quarter of the claim leaves room and still catches a blind
    # audit.
    (case,) = [c for c in mechanism_cases(2.0) if c.name == "SparseVector"]
    r = case.run(trials=50_000, confidence=CONFIDENCE, rng=1)
    assert case.claimed_epsilon / 4 <= r.epsilon <= case.claimed_epsilon, str(r)


def test_audits_have_power_on_pure_mechanisms() -> None:
    # A bound that is always 0 could not fail: on Laplace and randomized response the same audit
    # must come close to the claimed ε (within 15%), showing the pair and regions are tight.
    for case in mechanism_cases(1.0):
        if case.name in ("Laplace", "Geometric (discrete Laplace)", "RandomizedResponse"):
            r = case.run(trials=50_000, confidence=CONFIDENCE, rng=1)
            assert r.epsilon > 0.85 * case.claimed_epsilon, f"{case.name}: {r}"
