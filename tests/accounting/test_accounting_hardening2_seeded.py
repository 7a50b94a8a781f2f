"""Every charged release with seeded noise warns, in every layer, through one check.

The README promises an :class:`~dpkit.errors.InsecureRandomnessWarning` whenever a release whose
noise comes from a seed is charged to an accountant. Each public release entry point of each
layer is run three ways on a tiny public data set: with an int seed (must warn), with
``rng=None`` (secure: must not warn) and with ``dpkit.random.seeded(...)`` (the explicit opt-in:
must not warn). pyproject ignores this warning for the rest of the suite, so the checks here set
their own filters (``pytest.warns`` records it whatever the filters; the silent cases turn it
into an error).

A structural check keeps it so: outside the accounting package no module of dpkit calls an
accountant's ``charge`` itself; every layer charges through ``dpkit.accounting``'s one helper,
whose ``rng`` is a required argument.
"""

from __future__ import annotations

import ast
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

import dpkit.frame as dpf
import dpkit.stats as st
from dpkit.accounting import Accountant, ApproxDP
from dpkit.errors import InsecureRandomnessWarning
from dpkit.holdout import Thresholdout
from dpkit.local import (
    GRR,
    OLH,
    OUE,
    SUE,
    DuchiMean,
    HadamardResponse,
    HybridMean,
    PiecewiseMean,
    SubsetSelection,
    VectorMean,
)
from dpkit.mechanisms import Laplace
from dpkit.ml import PCA, GaussianNB, KMeans, LinearRegression, LogisticRegression, StandardScaler
from dpkit.random import seeded
from dpkit.release import (
    Categorical,
    Domain,
    Numeric,
    Synthesizer,
    bernstein_density,
    discover_domain,
    histogram_density,
    kde_density,
    ks_synthetic,
    series_density,
)

_G = np.random.default_rng(0)  # public test data, not noise
X1 = _G.uniform(0.0, 1.0, 400)
X2 = _G.uniform(0.0, 1.0, (200, 2))
Y2 = (X2[:, 0] > 0.5).astype(int)
CATS = _G.integers(0, 3, 400)
FRAME = pl.DataFrame({"user": np.arange(400) % 100, "amount": X1})

Release = Callable[[Any, Any], object]


def _frame(acct: Any, rng: Any) -> object:
    q = dpf.Query(FRAME, privacy_unit="user").agg(
        dpf.count(), dpf.sum("amount", bounds=(0, 1)), max_rows=4
    )
    return q.release(epsilon=1.0, delta=1e-6, accountant=acct, rng=rng)


def _synth(acct: Any, rng: Any) -> object:
    dom = Domain({"a": Categorical([0, 1, 2]), "c": Numeric(0, 1, bins=4)})
    data = {"a": CATS, "c": X1}
    return Synthesizer(dom, epsilon=1.0, delta=1e-6).fit(data, accountant=acct, rng=rng)


def _ml(make: Callable[..., Any], supervised: bool) -> Release:
    def fit(acct: Any, rng: Any) -> object:
        est = make(accountant=acct, rng=rng)
        return est.fit(X2, Y2) if supervised else est.fit(X2)

    return fit


ENTRY_POINTS: dict[str, Release] = {
    # the layers that warned already (kept here so that the one check covers them too)
    "mechanisms.Laplace": lambda a, r: Laplace(epsilon=0.5).release(1.0, accountant=a, rng=r),
    "stats.mean": lambda a, r: st.mean(X1, bounds=(0, 1), epsilon=0.5, accountant=a, rng=r),
    # dpkit.frame
    "frame.Query.release": _frame,
    # dpkit.release
    "release.histogram_density": lambda a, r: histogram_density(
        X1, bounds=(0, 1), epsilon=1.0, n=400, accountant=a, rng=r
    ),
    "release.series_density": lambda a, r: series_density(
        X1, bounds=(0, 1), epsilon=1.0, n=400, accountant=a, rng=r
    ),
    "release.bernstein_density": lambda a, r: bernstein_density(
        X1, bounds=(0, 1), bandwidth=0.25, epsilon=1.0, n=400, accountant=a, rng=r
    ),
    "release.kde_density": lambda a, r: kde_density(
        X1, bounds=(0, 1), bandwidth=0.25, epsilon=1.0, delta=1e-6, n=400, accountant=a, rng=r
    ),
    "release.ks_synthetic": lambda a, r: ks_synthetic(
        X1, bounds=(0, 1), epsilon=1.0, n=400, accountant=a, rng=r
    ),
    "release.discover_domain": lambda a, r: discover_domain(
        {"c": CATS.astype(str)}, categorical=["c"], epsilon=1.0, delta=1e-6, accountant=a, rng=r
    ),
    "release.Synthesizer.fit": _synth,
    # dpkit.local
    "local.GRR.randomize": lambda a, r: GRR(epsilon=1.0, k=3).randomize(CATS, accountant=a, rng=r),
    "local.OLH.randomize": lambda a, r: OLH(epsilon=1.0, k=3).randomize(CATS, accountant=a, rng=r),
    "local.HadamardResponse.randomize": lambda a, r: HadamardResponse(epsilon=1.0, k=3).randomize(
        CATS, accountant=a, rng=r
    ),
    "local.OUE.randomize": lambda a, r: OUE(epsilon=1.0, k=3).randomize(CATS, accountant=a, rng=r),
    "local.SUE.randomize": lambda a, r: SUE(epsilon=1.0, k=3).randomize(CATS, accountant=a, rng=r),
    "local.SubsetSelection.randomize": lambda a, r: SubsetSelection(epsilon=1.0, k=3).randomize(
        CATS, accountant=a, rng=r
    ),
    "local.DuchiMean.randomize": lambda a, r: DuchiMean(epsilon=1.0).randomize(
        X1, accountant=a, rng=r
    ),
    "local.PiecewiseMean.randomize": lambda a, r: PiecewiseMean(epsilon=1.0).randomize(
        X1, accountant=a, rng=r
    ),
    "local.HybridMean.randomize": lambda a, r: HybridMean(epsilon=1.0).randomize(
        X1, accountant=a, rng=r
    ),
    "local.VectorMean.randomize": lambda a, r: VectorMean(epsilon=1.0, d=2).randomize(
        X2 - 0.5, accountant=a, rng=r
    ),
    # dpkit.ml
    "ml.KMeans.fit": _ml(lambda **k: KMeans(2, epsilon=1.0, bounds=(0, 1), **k), False),
    "ml.StandardScaler.fit": _ml(
        lambda **k: StandardScaler(epsilon=1.0, bounds=(0, 1), **k), False
    ),
    "ml.PCA.fit": _ml(
        lambda **k: PCA(n_components=1, epsilon=1.0, delta=1e-6, data_norm=1.5, **k), False
    ),
    "ml.GaussianNB.fit": _ml(
        lambda **k: GaussianNB(epsilon=1.0, bounds=(0, 1), classes=[0, 1], **k), True
    ),
    "ml.LinearRegression.fit": _ml(
        lambda **k: LinearRegression(epsilon=1.0, delta=1e-6, data_norm=1.5, bounds_y=(0, 1), **k),
        True,
    ),
    "ml.LogisticRegression.fit": _ml(
        lambda **k: LogisticRegression(epsilon=1.0, data_norm=1.5, classes=[0, 1], **k), True
    ),
    # dpkit.holdout
    "holdout.Thresholdout": lambda a, r: Thresholdout(
        X1[:200], X1[200:], threshold=0.2, sigma=0.05, budget=2, accountant=a, rng=r
    ),
}


def _budget() -> Accountant:
    return Accountant(ApproxDP(epsilon=10.0, delta=1e-5))


@pytest.mark.parametrize("name", sorted(ENTRY_POINTS))
def test_a_seeded_charged_release_warns(name: str) -> None:
    acct = _budget()
    with pytest.warns(InsecureRandomnessWarning, match="charged to an accountant"):
        ENTRY_POINTS[name](acct, 7)
    assert acct.ledger  # it was charged (and warned before, see the next test)


@pytest.mark.parametrize("name", sorted(ENTRY_POINTS))
def test_secure_or_explicitly_seeded_releases_do_not_warn(name: str) -> None:
    for rng in (None, seeded(7)):
        acct = _budget()
        with warnings.catch_warnings():
            warnings.simplefilter("error", InsecureRandomnessWarning)
            ENTRY_POINTS[name](acct, rng)
        assert acct.ledger


@pytest.mark.parametrize("name", ["local.GRR.randomize", "stats.mean", "frame.Query.release"])
def test_an_uncharged_seeded_release_does_not_warn(name: str) -> None:
    # the warning is about noise charged as if it were secret; nothing is charged here
    with warnings.catch_warnings():
        warnings.simplefilter("error", InsecureRandomnessWarning)
        ENTRY_POINTS[name](None, 7)


@pytest.mark.parametrize("name", sorted(ENTRY_POINTS))
def test_the_warning_comes_before_the_charge(name: str) -> None:
    # With the warning as an error, the release stops at the check: nothing is charged.
    acct = _budget()
    with warnings.catch_warnings():
        warnings.simplefilter("error", InsecureRandomnessWarning)
        with pytest.raises(InsecureRandomnessWarning):
            ENTRY_POINTS[name](acct, 7)
    assert acct.ledger == ()


@pytest.mark.parametrize("name", sorted(ENTRY_POINTS))
def test_the_check_draws_nothing_and_comes_before_any_noise(name: str) -> None:
    # A NumPy generator (not dpkit's secure one) warns too; stopped at the check, it has not
    # been drawn from: the check looks only at rng, and no noise precedes it.
    gen = np.random.default_rng(7)
    before = gen.bit_generator.state
    acct = _budget()
    with warnings.catch_warnings():
        warnings.simplefilter("error", InsecureRandomnessWarning)
        with pytest.raises(InsecureRandomnessWarning):
            ENTRY_POINTS[name](acct, gen)
    if name != "frame.Query.release":
        assert gen.bit_generator.state == before
    # (a frame query draws the seeds of its row bounding, not noise, and bounds the units before
    # it charges, so that a query the data make fail charges nothing; its noise follows the check)
    assert acct.ledger == ()


SRC = Path(__file__).resolve().parents[2] / "src" / "dpkit"


def test_no_layer_charges_an_accountant_but_through_the_one_check() -> None:
    # Any `<something>.charge(...)` call outside dpkit.accounting would be a charge that can
    # skip the check (the server's Meter *is* an accountant: its charge calls super().charge).
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel.startswith(("accounting/", "server/")):
            continue  # the server's ledger.charge(id) reads a row; its releases go through stats
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "charge"
                and not (isinstance(node.func.value, ast.Call) and _is_super(node.func.value))
            ):
                offenders.append(f"{rel}:{node.lineno}")
    assert offenders == []


def _is_super(call: ast.Call) -> bool:
    return isinstance(call.func, ast.Name) and call.func.id == "super"


ROOT = SRC.parents[1]


def _seeded_charges(tree: ast.AST) -> list[int]:
    """Lines of calls that pass an accountant and a raw seed (an int, or a SEED constant)."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        kw = {k.arg: k.value for k in node.keywords if k.arg}
        acct, rng = kw.get("accountant"), kw.get("rng")
        if acct is None or rng is None:
            continue
        if isinstance(acct, ast.Constant) and acct.value is None:
            continue
        raw_int = isinstance(rng, ast.Constant) and isinstance(rng.value, int)
        if raw_int or (isinstance(rng, ast.Name) and rng.id.isupper()):
            found.append(node.lineno)
    return found


def _examples(text: str) -> list[str]:
    import doctest

    return [ex.source for ex in doctest.DocTestParser().get_examples(text)]


def test_examples_that_charge_with_a_seed_say_seeded() -> None:
    # The suite ignores InsecureRandomnessWarning (pyproject), so a doctest that charges with
    # rng=7 would pass silently while teaching the pattern the warning is there to stop. Docs,
    # README, docstrings and the demos must say rng=dpkit.random.seeded(...) (or rng=None);
    # an example that records the warning on purpose (catch_warnings(record=True)) may show it.
    offenders = []
    pages = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]
    for page in pages:
        for src in _examples(page.read_text(encoding="utf-8")):
            if "record=True" in src:
                continue
            if _seeded_charges(ast.parse(src)):
                offenders.append(f"{page.name}: {src.strip().splitlines()[0]}")
    for path in sorted(SRC.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        offenders += [f"{path.name}:{line}" for line in _seeded_charges(tree)]
        for node in ast.walk(tree):
            doc = ast.get_docstring(node) if isinstance(node, _DOCUMENTED) else None
            for src in _examples(doc or ""):
                if "record=True" not in src and _seeded_charges(ast.parse(src)):
                    offenders.append(f"{path.name} (docstring): {src.strip().splitlines()[0]}")
    assert offenders == []
    assert offenders == []


_DOCUMENTED = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
