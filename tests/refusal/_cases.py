"""Every public release entry point, as a case: how to call it, its base data, its neighbours.

A case's ``make(v)`` builds a dataset: the base (``v is BASE``) or the base with one record
whose value is ``v`` (one record added, or for a mechanism the one query answer replaced). The
kinds of values tried are listed per case: only the ones that fit its declared domain or
schema (a string only where the schema says "numeric", an unseen category only where there
is a declared category set).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

import dpkit.frame as dpf
import dpkit.holdout as dph
import dpkit.local as dpl
import dpkit.mechanisms as dpm
import dpkit.ml as dpml
import dpkit.release as dpr
import dpkit.stats as st
from dpkit.accounting import PureDP
from dpkit.random import seeded

BASE: Any = object()
NAN = float("nan")

# A value of each kind, for a numeric column declared in [0, 10] (or [-1, 1] for local means).
FAR = {"far": 1e9, "huge": 1e308, "neg_huge": -1e308, "inf": float("inf"), "neg_inf": -float("inf")}
NEAR = {"neg_zero": -0.0, "subnormal": 5e-324}
MISSING = {"nan": NAN, "none": None}
# Kinds with no place in any domain: NaN, None, a null category where none is declared, a string
# in a column declared numeric. A library call may refuse them (before any charge).
NO_PLACE = {"nan", "none", "string", "none_category"}
NUMERIC = {**FAR, **NEAR, **MISSING}
INTS = {"far": 10**9, "huge": 10**30, "negative": -(10**9)}

Run = Callable[[Any, Any], object]


@dataclass(frozen=True)
class Case:
    name: str  # "module.entry" (and ":variant")
    run: Run  # run(data, accountant)
    make: Callable[[Any], Any]
    kinds: dict[str, Any]
    xfail: dict[str, str] = field(default_factory=dict)  # kind -> reason (known, being fixed)


def _rng() -> Any:
    return seeded(11)


# -- dpkit.stats --------------------------------------------------------------------------------
XS = [float(i % 10) + 0.5 for i in range(60)]
B = (0.0, 10.0)


def _vec(v: Any) -> list[Any]:
    return XS if v is BASE else [*XS, v]


def _pairs(v: Any) -> tuple[list[Any], list[Any]]:
    return (XS, XS) if v is BASE else ([*XS, v], [*XS, 1.0])


def _stats(name: str, call: Callable[..., Any], make: Callable[[Any], Any] = _vec) -> Case:
    # an untyped list: a string is a missing number, an int beyond the doubles a far value
    kinds = {**NUMERIC, "string": "n/a", "huge_int": 10**400}

    def run(data: Any, acct: Any, **kw: Any) -> object:
        args = data if isinstance(data, tuple) else (data,)
        return call(*args, accountant=acct, rng=_rng(), **kw)

    return Case(f"dpkit.stats.{name}", run, make, kinds)


STATS = [
    _stats("count", lambda x, **k: st.count(x, epsilon=1.0, **k)),
    _stats("sum", lambda x, **k: st.sum(x, bounds=B, epsilon=1.0, **k)),
    _stats("mean", lambda x, **k: st.mean(x, bounds=B, epsilon=1.0, **k)),
    _stats("var", lambda x, **k: st.var(x, bounds=B, epsilon=1.0, **k)),
    _stats("std", lambda x, **k: st.std(x, bounds=B, epsilon=1.0, **k)),
    _stats("median", lambda x, **k: st.median(x, bounds=B, epsilon=1.0, **k)),
    _stats("quantile", lambda x, **k: st.quantile(x, [0.1, 0.9], bounds=B, epsilon=1.0, **k)),
    _stats("bounds", lambda x, **k: st.bounds(x, epsilon=4.0, **k)),
    _stats("histogram", lambda x, **k: st.histogram(x, bins=[0, 5, 10], epsilon=1.0, **k)),
    _stats("cov", lambda x, y, **k: st.cov(x, y, bounds=(B, B), epsilon=1.0, **k), _pairs),
    _stats("corr", lambda x, y, **k: st.corr(x, y, bounds=(B, B), epsilon=1.0, **k), _pairs),
]


# missing="drop": no refusal at all, missing values included
def _drop(case: Case) -> Case:
    def run(data: Any, acct: Any) -> object:
        return case.run(data, acct, missing="drop")  # type: ignore[call-arg]

    return Case(f"{case.name}:drop", run, case.make, case.kinds)


STATS_DROP = [_drop(c) for c in STATS]

# -- dpkit.mechanisms: the "dataset" is the query answer the caller computed ---------------------


def _answer(base: Any) -> Callable[[Any], Any]:
    return lambda v: base if v is BASE else v


def _mech(name: str, release: Run, base: Any, kinds: dict[str, Any]) -> Case:
    return Case(f"dpkit.mechanisms.{name}", release, _answer(base), kinds)


def _scores(v: Any) -> list[Any]:
    return [3.0, 0.0, 2.0] if v is BASE else [3.0, v, 2.0]


def _select(cls: type) -> Case:
    m = cls(epsilon=1.0, sensitivity=1.0)
    return Case(
        f"dpkit.mechanisms.{cls.__name__}",
        lambda s, a: m.select(["a", "b", "c"], s, accountant=a, rng=_rng()),
        _scores,
        {**LARGE, **NEAR},
    )


# Neighbouring answers differ by at most the declared sensitivity Δ = 1, so a NaN or ±inf
# answer has no finite neighbour: those refusals concern the caller's own value only. What is
# tried: signed zeros and subnormals (0.0 -> -0.0 or 5e-324), large finite answers, and for the
# integer mechanisms the last accepted answer and its neighbour one above it.
EDGE = 2**62 - 1  # the end of the integer mechanisms' range: answers beyond it are clamped
LARGE = {"far": 1e9, "huge": 1e308, "neg_huge": -1e308}


def _int_mech(name: str, make_mech: Callable[[], Any]) -> list[Case]:
    def run(x: Any, a: Any) -> object:
        return make_mech().release(x, accountant=a, rng=_rng())

    return [
        Case(f"dpkit.mechanisms.{name}", run, _answer(3), {"far": 10**9, "negative": -(10**9)}),
        Case(
            f"dpkit.mechanisms.{name}:edge",
            run,
            _answer(EDGE),
            {"edge": EDGE + 1},
        ),
    ]


MECHANISMS = [
    _mech(
        "Laplace",
        lambda x, a: dpm.Laplace(epsilon=1.0).release(x, accountant=a, rng=_rng()),
        0.0,
        {**LARGE, **NEAR},
    ),
    _mech(
        "Gaussian",
        lambda x, a: dpm.Gaussian(epsilon=1.0, delta=1e-6).release(x, accountant=a, rng=_rng()),
        0.0,
        {**LARGE, **NEAR},
    ),
    *_int_mech("DiscreteGaussian", lambda: dpm.DiscreteGaussian(epsilon=1.0, delta=1e-6)),
    *_int_mech("DiscreteLaplace", lambda: dpm.DiscreteLaplace(epsilon=1.0)),
    *_int_mech("Geometric", lambda: dpm.Geometric(epsilon=1.0)),
    _select(dpm.Exponential),
    _select(dpm.PermuteAndFlip),
    _select(dpm.ReportNoisyMax),
    Case(
        "dpkit.mechanisms.SparseVector",
        lambda x, a: dpm.SparseVector(epsilon=1.0, threshold=5.0).run(x, accountant=a, rng=_rng()),
        _scores,
        {**LARGE, **NEAR},
    ),
    Case(
        "dpkit.mechanisms.RandomizedResponse",
        lambda x, a: dpm.RandomizedResponse(epsilon=1.0).randomize(x, accountant=a, rng=_rng()),
        lambda v: [0, 1, 1, 0] if v is BASE else [0, 1, 1, 0, v],
        {"unseen": 2, "negative": -1},
    ),
]

# -- dpkit.frame: one query per aggregation ------------------------------------------------------
FRAME = pl.DataFrame(
    {"user": list(range(40)), "key": ["a", "b"] * 20, "x": [float(i % 10) for i in range(40)]}
)


def _frame(v: Any, key: str = "a", column: str = "x") -> pl.DataFrame:
    if v is BASE:
        return FRAME
    row = {"user": [99], "key": [key], "x": [1.0]}
    row[column] = [v]
    return pl.concat([FRAME, pl.DataFrame(row, schema=FRAME.schema)])


def _query(agg: Callable[[], Any], name: str, missing: str = "raise") -> Case:
    def run(df: Any, acct: Any) -> object:
        q = dpf.Query(df, privacy_unit="user", missing=missing)  # type: ignore[arg-type]
        q = q.group_by("key", public_keys=["a", "b"], max_groups=1, max_rows=1)
        return q.agg(agg()).release(epsilon=1.0, accountant=acct, rng=_rng())

    kinds: dict[str, Any] = {**{k: v for k, v in NUMERIC.items() if k != "none"}, "none": None}
    case_kinds = {**kinds, "unseen_key": ("key", "zz")}
    suffix = "" if missing == "raise" else f":{missing}"
    return Case(f"dpkit.frame.{name}{suffix}", run, _frame_make, case_kinds)


def _frame_make(v: Any) -> pl.DataFrame:
    if isinstance(v, tuple):  # a key value outside the public keys
        return _frame(1.0, key=v[1])
    return _frame(v)


FRAMES = [
    _query(dpf.count, "count"),
    _query(dpf.count_units, "count_units"),
    _query(lambda: dpf.sum("x", bounds=B), "sum"),
    _query(lambda: dpf.mean("x", bounds=B), "mean"),
    _query(lambda: dpf.var("x", bounds=B), "var"),
    _query(lambda: dpf.std("x", bounds=B), "std"),
    _query(lambda: dpf.histogram("x", bins=[0, 5, 10]), "histogram"),
    _query(lambda: dpf.quantiles("x", [0.5], bounds=B), "quantiles"),
]
# dpkit.frame.count / count_units read no value column: a NaN there is no missing value, and a
# Query of any aggregation is the entry point "Query" too.
FRAME_DROP = _query(lambda: dpf.mean("x", bounds=B), "Query", missing="drop")
FRAME_QUERY = Case("dpkit.frame.Query", FRAMES[3].run, _frame_make, FRAMES[3].kinds)


def _parts(df: Any, acct: Any) -> object:
    """A mean over each part of a parallel composition (the unseen key is in no part).

    missing="drop": the parts' budget is paid when the parts are made, before a part's release
    would refuse a missing value (that refusal, before the part's own charge, is covered by the
    frame cases above)."""
    q = dpf.Query(df, privacy_unit="user", missing="drop").partition_by("key", keys=["a", "b"])
    for part in acct.parallel(q, budget=PureDP(epsilon=1.0)).values():
        part.agg(dpf.mean("x", bounds=B), max_rows=1).release(epsilon=1.0, rng=_rng())
    return None


def _suggest(df: Any, acct: Any) -> object:
    q = dpf.Query(df, privacy_unit="user")
    return q.suggest_bounds("key", epsilon=1.0, upper=10, accountant=acct, rng=_rng())


FRAME_PARTS = Case("dpkit.frame.Partitions", _parts, _frame_make, FRAMES[3].kinds)
FRAME_SUGGEST = Case("dpkit.frame.SuggestedBounds", _suggest, _frame_make, FRAMES[3].kinds)

# -- dpkit.release -------------------------------------------------------------------------------


def _density(name: str, call: Callable[..., Any]) -> Case:
    return Case(
        f"dpkit.release.{name}",
        lambda x, a: call(np.asarray(x, dtype=float), accountant=a, rng=_rng()),
        _vec,
        {**FAR, **NEAR, "nan": NAN},
    )


RELEASE_DENSITIES = [
    _density(
        "histogram_density",
        lambda x, **k: dpr.histogram_density(x, bounds=B, epsilon=1.0, bins=4, **k),
    ),
    _density(
        "bernstein_density",
        lambda x, **k: dpr.bernstein_density(x, bounds=B, bandwidth=2.0, epsilon=1.0, **k),
    ),
    _density(
        "kde_density",
        lambda x, **k: dpr.kde_density(x, bounds=B, bandwidth=2.0, epsilon=1.0, delta=1e-6, **k),
    ),
    _density(
        "series_density", lambda x, **k: dpr.series_density(x, bounds=B, epsilon=1.0, degree=3, **k)
    ),
    _density("ks_synthetic", lambda x, **k: dpr.ks_synthetic(x, bounds=B, epsilon=1.0, **k)),
]

DOMAIN = dpr.Domain({"x": dpr.Numeric(0.0, 10.0, bins=4), "c": dpr.Categorical(("a", "b"))})
TABLE = {"x": [float(i % 10) for i in range(40)], "c": ["a", "b"] * 20}


def _table(v: Any) -> Any:
    import pandas as pd

    if v is BASE:
        return pd.DataFrame(TABLE)
    col, value = v
    row = {"x": [1.0], "c": ["a"]}
    row[col] = [value]
    return pd.concat([pd.DataFrame(TABLE), pd.DataFrame(row)], ignore_index=True)


SYNTH = Case(
    "dpkit.release.Synthesizer",
    lambda df, a: dpr.Synthesizer(DOMAIN, rho=1.0, method="independent").fit(
        df, accountant=a, rng=_rng()
    ),
    _table,
    {
        **{k: ("x", v) for k, v in {**FAR, **NEAR, **MISSING, "string": "n/a"}.items()},
        "unseen": ("c", "zz"),
        "none_category": ("c", None),
    },
)
DISCOVER = Case(
    "dpkit.release.discover_domain",
    lambda df, a: dpr.discover_domain(
        df, numeric={"x": B}, categorical=["c"], epsilon=1.0, delta=1e-6, accountant=a, rng=_rng()
    ),
    _table,
    {
        **{k: ("x", v) for k, v in {**FAR, **NEAR, **MISSING}.items()},
        "unseen": ("c", "zz"),
        "int_category": ("c", 1),
    },
)

# -- dpkit.local: a population's reports, randomized centrally (simulations) -------------------
K = 4
CATS = [i % K for i in range(40)]
UNIT = [((i % 9) - 4) / 4 for i in range(40)]


def _local_cat(cls: type) -> Case:
    m = cls(epsilon=1.0, k=K)
    return Case(
        f"dpkit.local.{cls.__name__}",
        lambda x, a: m.randomize(np.asarray(x), accountant=a, rng=_rng()),
        lambda v: CATS if v is BASE else [*CATS, v],
        {"unseen": K, "negative": -1, "far": 10**9},
    )


def _local_num(cls: type) -> Case:
    m = cls(epsilon=1.0)
    return Case(
        f"dpkit.local.{cls.__name__}",
        lambda x, a: m.randomize(np.asarray(x, dtype=float), accountant=a, rng=_rng()),
        lambda v: UNIT if v is BASE else [*UNIT, v],
        {**FAR, **NEAR, "nan": NAN},
    )


LOCAL = [
    *(
        _local_cat(c)
        for c in (dpl.GRR, dpl.OLH, dpl.OUE, dpl.SUE, dpl.HadamardResponse, dpl.SubsetSelection)
    ),
    *(_local_num(c) for c in (dpl.DuchiMean, dpl.HybridMean, dpl.PiecewiseMean)),
    Case(
        "dpkit.local.VectorMean",
        lambda x, a: dpl.VectorMean(epsilon=1.0, d=2).randomize(
            np.asarray(x, dtype=float), accountant=a, rng=_rng()
        ),
        lambda v: [[u, u] for u in UNIT] if v is BASE else [*([u, u] for u in UNIT), [v, 0.0]],
        {**FAR, **NEAR, "nan": NAN},
    ),
]

# -- dpkit.ml: fit ---------------------------------------------------------------------------
X2 = [[float(i % 10), float((3 * i) % 10)] for i in range(60)]
Y01 = [i % 2 for i in range(60)]
YR = [float(i % 10) for i in range(60)]


def _xy(y: list[Any]) -> Callable[[Any], Any]:
    def make(v: Any) -> Any:
        if v is BASE:
            return X2, y
        col, value = v
        if col == "y":
            return [*X2, [1.0, 1.0]], [*y, value]
        return [*X2, [value, 1.0]], [*y, y[0]]

    return make


def _ml(name: str, est: Callable[[Any], Any], y: list[Any], labels: bool = False) -> Case:
    kinds: dict[str, Any] = {k: ("x", v) for k, v in {**FAR, **NEAR, "nan": NAN}.items()}
    if labels:
        kinds["unseen_label"] = ("y", 7)
    return Case(
        f"dpkit.ml.{name}",
        lambda d, a: est(a).fit(np.asarray(d[0], dtype=float), np.asarray(d[1])),
        _xy(y),
        kinds,
    )


BX = (0.0, 10.0)
ML = [
    _ml("KMeans", lambda a: dpml.KMeans(2, epsilon=1.0, bounds=BX, accountant=a, rng=_rng()), Y01),
    _ml(
        "StandardScaler",
        lambda a: dpml.StandardScaler(epsilon=1.0, bounds=BX, accountant=a, rng=_rng()),
        Y01,
    ),
    _ml(
        "PCA",
        lambda a: dpml.PCA(1, epsilon=1.0, delta=1e-6, data_norm=15.0, accountant=a, rng=_rng()),
        Y01,
    ),
    _ml(
        "GaussianNB",
        lambda a: dpml.GaussianNB(epsilon=1.0, bounds=BX, classes=[0, 1], accountant=a, rng=_rng()),
        Y01,
        labels=True,
    ),
    _ml(
        "LogisticRegression",
        lambda a: dpml.LogisticRegression(
            epsilon=1.0, data_norm=15.0, classes=[0, 1], accountant=a, rng=_rng()
        ),
        Y01,
        labels=True,
    ),
    _ml(
        "LinearRegression",
        lambda a: dpml.LinearRegression(
            epsilon=1.0, delta=1e-6, data_norm=15.0, bounds_y=B, accountant=a, rng=_rng()
        ),
        YR,
    ),
]

# -- dpkit.holdout -------------------------------------------------------------------------------
TRAIN = np.asarray(XS[:40], dtype=float)
HOLDOUT = [float(i % 10) for i in range(40)]


def _thresholdout(h: Any, a: Any) -> object:
    t = dph.Thresholdout(
        TRAIN,
        np.asarray(h, dtype=float),
        threshold=0.1,
        sigma=0.05,
        budget=2,
        bounds=B,
        accountant=a,
        rng=_rng(),
    )
    return t.query(lambda r: r)


HOLDOUT_CASE = Case(
    "dpkit.holdout.Thresholdout",
    _thresholdout,
    lambda v: HOLDOUT if v is BASE else [*HOLDOUT[:-1], v],  # replace-one: n_h is public
    {**FAR, **NEAR, "nan": NAN},
)

CASES: list[Case] = [
    *STATS,
    *STATS_DROP,
    *MECHANISMS,
    *FRAMES,
    FRAME_QUERY,
    FRAME_DROP,
    FRAME_PARTS,
    FRAME_SUGGEST,
    *RELEASE_DENSITIES,
    SYNTH,
    DISCOVER,
    *LOCAL,
    *ML,
    HOLDOUT_CASE,
]
