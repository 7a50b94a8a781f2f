"""Refusals depend on public things only, at every public release entry point.

For each entry point, a base dataset and neighbours that differ in one record, whose value hits
one validation path: far outside the declared bounds, an unseen category, an extreme float
(1e308, ±inf, -0.0, a subnormal), a string where the schema says "number", a NaN or None.
The neighbour must give the base's outcome (success, or the same exception type), and a refusal
must charge nothing. A missing value (NaN, None) may be refused under the default
``missing="raise"`` policy — the docs say such a refusal reveals that one exists — but only
before any charge.

The cases are listed in ``_cases.py``; :func:`test_every_public_entry_point_is_covered` checks
them against each module's ``__all__``, so a new entry point cannot be forgotten.
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any

import pytest

from dpkit import Accountant, ApproxDP
from tests.refusal._cases import CASES, NO_PLACE, Case

MODULES = ["dpkit.stats", "dpkit.mechanisms", "dpkit.frame", "dpkit.release", "dpkit.local",
           "dpkit.ml", "dpkit.holdout"]  # fmt: skip

# Public names that are not release entry points, each with the reason.
EXCLUDED: dict[str, str] = {
    "dpkit.stats.Release": "a result type",
    "dpkit.mechanisms.ProportionEstimate": "a result type",
    "dpkit.mechanisms.interval_grid": "a function of public bounds",
    "dpkit.stats.accuracy": "a function of public parameters (no data)",
    "dpkit.frame.Aggregation": "a query building block (covered through Query)",
    "dpkit.frame.Explanation": "a result type (explain() charges nothing)",
    "dpkit.frame.FrameRelease": "a result type",
    "dpkit.frame.GroupBy": "a query building block (covered through Query)",
    "dpkit.frame.GroupedQuery": "a query building block (its release is covered through Query)",
    "dpkit.frame.truncated_geometric_probabilities": "a function of public parameters",
    "dpkit.release.Categorical": "a declared domain (public)",
    "dpkit.release.Column": "a type alias",
    "dpkit.release.ColumnUtility": "a result type",
    "dpkit.release.DensityRelease": "a result type",
    "dpkit.release.Domain": "a declared domain (public)",
    "dpkit.release.Numeric": "a declared domain (public)",
    "dpkit.release.SyntheticModel": "a result type (sampling is post-processing)",
    "dpkit.release.SyntheticSample": "a result type",
    "dpkit.release.TrainTestScore": "a result type",
    "dpkit.release.UtilityReport": "a result type",
    "dpkit.release.bernstein_degree": "a function of public parameters",
    "dpkit.release.bernstein_density_accuracy": "a function of public parameters (no data)",
    "dpkit.release.histogram_density_accuracy": "a function of public parameters (no data)",
    "dpkit.release.histogram_bins": "a function of public parameters",
    "dpkit.release.kde_density_accuracy": "a function of public parameters (no data)",
    "dpkit.release.partition_threshold": "a function of public parameters",
    "dpkit.release.series_degree": "a function of public parameters",
    "dpkit.release.series_density_accuracy": "a function of public parameters (no data)",
    "dpkit.release.utility_report": "an evaluation on real data, documented as not private",
    "dpkit.local.PROTOCOLS": "a constant",
    "dpkit.local.Aggregator": "post-processing of reports already randomized",
    "dpkit.local.CountMeanSketch": "a client-side randomizer (no accountant; one user's own value)",
    "dpkit.local.DBitEstimate": "a result type",
    "dpkit.local.DBitFlip": "a client-side randomizer (no accountant; one user's own value)",
    "dpkit.local.FrequencyEstimate": "a result type",
    "dpkit.local.FrequencyOracle": "an abstract base (its subclasses are covered)",
    "dpkit.local.HeavyHitters": "a result type",
    "dpkit.local.MeanEstimate": "a result type",
    "dpkit.local.MemoizedOneBitClient": "a client-side randomizer (one user's own value)",
    "dpkit.local.NumericRandomizer": "an abstract base (its subclasses are covered)",
    "dpkit.local.OneBitMean": "a client-side randomizer (no accountant; one user's own value)",
    "dpkit.local.PrefixExtension": "a client-side randomizer (no accountant; one user's value)",
    "dpkit.local.Rappor": "a client-side randomizer (no accountant; one user's own value)",
    "dpkit.local.RapporClient": "a client-side randomizer (one user's own value)",
    "dpkit.local.RapporEstimate": "a result type",
    "dpkit.local.Reports": "a result type",
    "dpkit.local.SketchEstimate": "a result type",
    "dpkit.local.UnaryEncoding": "the base of OUE and SUE (covered)",
    "dpkit.local.VectorMeanEstimate": "a result type",
    "dpkit.local.VectorReports": "a result type",
    "dpkit.local.candidates": "a function of public parameters",
    "dpkit.local.choose_protocol": "a function of public parameters",
    "dpkit.local.norm_sub": "post-processing of released counts",
    "dpkit.local.shuffle_delta": "a function of public parameters",
    "dpkit.local.shuffle_epsilon": "a function of public parameters",
    "dpkit.local.shuffle_guarantee": "a function of public parameters",
    "dpkit.local.sketch_hash": "a public hash",
    "dpkit.local.universal_hash": "a public hash",
    "dpkit.ml.DPSGDPlan": "a plan of public parameters",
    "dpkit.ml.dpsgd_plan": "a function of public parameters",
    "dpkit.ml.objective_perturbation_noise": "a function of public parameters",
    "dpkit.holdout.HoldoutCurves": "a result type",
    "dpkit.holdout.reusable_holdout_experiment": "a simulation on generated data (no input)",
}


def test_every_public_entry_point_is_covered() -> None:
    public = {f"{m}.{n}" for m in MODULES for n in importlib.import_module(m).__all__}
    covered = {c.name.split(":")[0] for c in CASES}
    assert not covered & set(EXCLUDED), "a name is both covered and excluded"
    assert covered | set(EXCLUDED) == public, (
        f"not covered: {sorted(public - covered - set(EXCLUDED))}; "
        f"unknown: {sorted((covered | set(EXCLUDED)) - public)}"
    )


def _outcome(case: Case, data: Any) -> tuple[str, Accountant]:
    acct = Accountant(ApproxDP(epsilon=1000.0, delta=0.5))
    with warnings.catch_warnings():
        # warnings about the data (never about a refusal) are not outcomes
        warnings.simplefilter("ignore")
        try:
            case.run(data, acct)
        except Exception as exc:  # the outcome is the exception's type
            return type(exc).__name__, acct
    return "ok", acct


def _params() -> list[Any]:
    out = []
    for case in CASES:
        for kind, value in case.kinds.items():
            marks = []
            if kind in case.xfail:
                marks.append(pytest.mark.xfail(strict=True, reason=case.xfail[kind]))
            out.append(pytest.param(case, kind, value, id=f"{case.name}-{kind}", marks=marks))
    return out


_BASE_OUTCOMES: dict[str, str] = {}


@pytest.mark.parametrize(("case", "kind", "value"), _params())
def test_neighbours_get_the_same_outcome(case: Case, kind: str, value: Any) -> None:
    from tests.refusal._cases import BASE

    if case.name not in _BASE_OUTCOMES:
        base, _ = _outcome(case, case.make(BASE))
        _BASE_OUTCOMES[case.name] = base
    base = _BASE_OUTCOMES[case.name]
    assert base == "ok", f"the base dataset of {case.name} is refused ({base})"
    got, acct = _outcome(case, case.make(value))
    if got != "ok":
        spent = acct.spent
        assert spent.epsilon == 0 and spent.delta == 0, f"refused after a charge ({got})"
    if kind in NO_PLACE and got == "DataError" and not case.name.endswith(":drop"):
        return  # missing="raise": a refusal before any charge, documented as revealing
    assert got == base, f"{case.name}: the base succeeds, a neighbour with {kind} gives {got}"
