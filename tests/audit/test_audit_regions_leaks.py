"""The auditor catches leaks one-sided thresholds cannot see: a hole in a continuous output's
distribution, and an integer output whose parity depends on the input."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest

from dpkit.audit import InBins, Interval, Residue, epsilon_lower_bound
from dpkit.cli import main
from dpkit.noise import discrete_laplace

TRIALS = 5000  # per dataset; the previous auditor found 0.47 (punctured) and 0.0 (parity) here


def punctured_laplace(d: float, n: int, rng: np.random.Generator) -> npt.NDArray[np.float64]:
    """Laplace of scale 2 (a claim of ε = 0.5) on a 2^-20 grid; on input 0 it never outputs a
    value in (0.8, 1.2) (such draws are redrawn), so its true ε is infinite."""
    y = d + np.round(rng.laplace(0.0, 2.0, size=n) * 2**20) / 2**20
    if d == 0.0:
        hole = (y > 0.8) & (y < 1.2)
        while hole.any():
            y[hole] = np.round(rng.laplace(0.0, 2.0, size=int(hole.sum())) * 2**20) / 2**20
            hole = (y > 0.8) & (y < 1.2)
    return y


def parity_leak(d: int, n: int, rng: np.random.Generator) -> npt.NDArray[np.int64]:
    """d + 2·DL(200): as wide as a 0.0025-DP count, but its parity is the input's."""
    return d + 2 * np.asarray(discrete_laplace(200, size=n, rng=rng), dtype=np.int64)


def test_punctured_laplace_is_flagged_against_its_claim() -> None:
    r = epsilon_lower_bound(punctured_laplace, 0.0, 1.0, trials=TRIALS, rng=1, confidence=0.999)
    # The hole has probability ~0.1 on input 1 and 0 on input 0: with 2500 evaluation runs the
    # bound is about log(0.1 / (6.9/2500)) ≈ 3.6; the test asks for well above the claim.
    assert r.epsilon > 2 * 0.5, str(r)
    assert isinstance(r.region, Interval | InBins), str(r.region)


def test_fixed_interval_region_is_accepted() -> None:
    r = epsilon_lower_bound(
        punctured_laplace, 0.0, 1.0, trials=TRIALS, rng=2, region=Interval(0.81, 1.19)
    )
    assert r.false_positives == 0 and r.epsilon > 2.0, str(r)


def test_integer_parity_leak_is_flagged() -> None:
    r = epsilon_lower_bound(parity_leak, 0, 1, trials=TRIALS, rng=1, confidence=0.999)
    # Every output of input 0 is even and of input 1 odd: p = q = 0 and the bound is the largest
    # 2500 evaluation runs can give, log(2500/6.9) ≈ 5.9 at 99.9%.
    assert r.epsilon > 5.0, str(r)
    assert r.region == Residue(2, (1,)), str(r.region)


def test_lr_bins_region_evaluates_fixed_bins() -> None:
    region = InBins(edges=(-np.inf, 0.0, 1.0, np.inf), bins=(1,))
    assert region(np.array([-1.0, 0.5, 1.0, 7.0])).tolist() == [False, True, False, False]


def test_cli_reports_no_power_and_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    # 300 runs cannot tell var's neighbours apart: ε_LB = 0, which must not read "ok".
    status = main(["audit", "--mechanism", "stats.var", "--epsilon", "0.5", "--trials", "300",
                   "--quiet"])  # fmt: skip
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("stats.var")]
    assert rows and all(line.endswith("no power") for line in rows), out
    assert " ok" not in out
    assert "no power: ε_LB below" in out
    assert status == 0


def test_cli_still_says_ok_when_the_audit_has_power(capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["audit", "--mechanism", "Laplace", "--epsilon", "1", "--trials", "3000",
                   "--quiet"])  # fmt: skip
    out = capsys.readouterr().out
    assert [line.split()[-1] for line in out.splitlines()[1:]] == ["ok", "ok"], out
    assert status == 0
