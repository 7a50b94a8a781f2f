"""A grouped COUNT on privately selected keys: its own noisy count is the key selection.

The plan (``selection="count"``, ``dpkit.frame._selection``) spends the whole ε on the counts
and releases a key iff its noisy count reaches τ. Checked here: the threshold's exact δ bound
and its minimality, the audit of a released count near τ (a neighbour moves it by the
sensitivity), the plan SQL chooses (and where it does not apply), and refusals before any
charge.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np
import polars as pl
import pytest

import dpkit.sql as dps
from dpkit.accounting import Accountant, ApproxDP, ApproxDPEvent
from dpkit.audit import epsilon_lower_bound
from dpkit.errors import PrivacyParameterError
from dpkit.frame._finish import finish
from dpkit.frame._pipeline import ALL
from dpkit.frame._selection import count_threshold
from dpkit.mechanisms._tails import discrete_laplace_upper_tail
from dpkit.random import as_generator, seeded

EPS, DELTA = 1.0, 1e-5
TRIALS = 10_000


def _catalog(**kw: Any) -> dps.Catalog:
    cols = [dps.Column("pid", "int"), dps.Column("g", "string", **kw),
            dps.Column("x", "float", bounds=(0, 10))]  # fmt: skip
    return dps.Catalog([dps.Table("t", cols, privacy_unit="pid", max_groups=2, max_rows=3)])


COUNT = "SELECT g, COUNT(*) AS n FROM t GROUP BY g"


@pytest.mark.parametrize(
    ("scale", "per_key", "keys", "delta"),
    [(Fraction(3), 3, 3, 1e-5), (Fraction(6), 3, 3, 1e-5), (Fraction(1, 2), 1, 1, 1e-3),
     (Fraction(40), 5, 4, 1e-7)],
)  # fmt: skip
def test_count_threshold_bounds_a_lone_units_keys_and_is_the_smallest(
    scale: Fraction, per_key: int, keys: int, delta: float
) -> None:
    tau = count_threshold(scale, per_key=per_key, keys=keys, delta=delta)
    # every key the added unit alone holds has <= per_key rows: all of them together pass
    # with probability <= keys * P(Z >= tau - per_key) <= delta
    tail = discrete_laplace_upper_tail(float(scale), tau - per_key)
    assert keys * tail <= delta
    # one less would break it: the threshold is not looser than the claim needs
    assert keys * discrete_laplace_upper_tail(float(scale), tau - 1 - per_key) > delta


def test_sql_grouped_count_on_private_keys_spends_all_epsilon_on_the_count() -> None:
    data = pl.DataFrame({"pid": range(200), "g": ["a", "b"] * 100, "x": [1.0] * 200})
    q = dps.SQLQuery(COUNT, _catalog())
    ex = q.explain({"t": data}, epsilon=EPS, delta=DELTA)
    plan = ex.frame.plan
    assert plan.selection is not None and plan.selection.method == "count"
    (mn,) = plan.measures
    # L1 sensitivity max_groups * max_rows = 6; the whole ε: b = 6 (a split would give 12)
    assert mn.kind == "laplace" and float(mn.scale) == pytest.approx(6.0, rel=1e-8)
    assert isinstance(ex.event, ApproxDPEvent)
    assert ex.event.epsilon <= EPS and ex.event.delta == DELTA
    tau = plan.selection.threshold
    assert tau == count_threshold(mn.scale, per_key=3, keys=2, delta=DELTA)
    assert "threshold on the released count itself" in str(ex.frame)
    acc = Accountant(ApproxDP(epsilon=1.0, delta=DELTA))
    out = q.release({"t": data}, epsilon=EPS, delta=DELTA, rng=seeded(0), accountant=acc)
    assert sorted(out.frame["g"].to_list()) == ["a", "b"]  # 100 rows each, far above tau
    assert (out.frame["n"] >= tau).all()  # a released count is the one that passed
    assert acc.spent.epsilon == pytest.approx(EPS, rel=1e-6)


def test_count_selection_only_where_it_applies() -> None:
    data = pl.DataFrame({"pid": range(200), "g": ["a", "b"] * 100, "x": [1.0] * 200})
    # public keys: no selection at all
    pub = dps.SQLQuery(COUNT, _catalog(keys=["a", "b"])).explain({"t": data}, epsilon=EPS,
                                                                  delta=DELTA)  # fmt: skip
    assert pub.frame.plan.selection is None
    # no count among the aggregates: a selection of its own (half of ε)
    s = dps.SQLQuery("SELECT g, SUM(x) AS s FROM t GROUP BY g", _catalog())
    sel = s.explain({"t": data}, epsilon=EPS, delta=DELTA).frame.plan.selection
    assert sel is not None and sel.method != "count"
    # a count with a sum: the count's noise selects, the sum is released on the kept keys
    data = pl.DataFrame({"pid": range(600), "g": ["a", "b"] * 300, "x": [1.0] * 600})
    both = dps.SQLQuery("SELECT g, COUNT(*) AS n, SUM(x) AS s FROM t GROUP BY g", _catalog())
    r = both.release({"t": data}, epsilon=EPS, delta=DELTA, rng=seeded(1))
    assert r.explanation.frame.plan.selection.method == "count"  # type: ignore[union-attr]
    assert r.frame.height == 2 and r.frame["s"].is_finite().all()


def test_frame_refuses_count_selection_where_it_does_not_hold() -> None:
    data = pl.DataFrame({"pid": range(20), "g": ["a", "b"] * 10, "x": [1.0] * 20})
    gq = dps.SQLQuery("SELECT g, SUM(x) AS s FROM t GROUP BY g", _catalog()).frame_query(
        {"t": data}
    )
    acc = Accountant(ApproxDP(epsilon=10.0, delta=1e-3))
    with pytest.raises(PrivacyParameterError, match="count"):
        gq.release(epsilon=EPS, delta=DELTA, noise="laplace", selection="count", accountant=acc)
    gc = dps.SQLQuery(COUNT, _catalog()).frame_query({"t": data})
    with pytest.raises(PrivacyParameterError, match="laplace"):
        gc.release(epsilon=EPS, delta=DELTA, noise="gaussian", selection="count", accountant=acc)
    assert acc.spent.epsilon == 0.0  # refused before any charge


def test_audit_count_selected_release_near_the_threshold() -> None:
    """Key 'a' sits near τ, so whether it is released and its count both move when one unit
    (3 rows of 'a', beyond its bounds in the raw data) is added: the audit of the released
    value (−1 where the key is not released) stays within the claim (ε, δ)."""
    cat = _catalog()
    probe = pl.DataFrame({"pid": [0], "g": ["a"], "x": [1.0]})
    plan = dps.SQLQuery(COUNT, cat).explain({"t": probe}, epsilon=EPS, delta=DELTA).frame.plan
    assert plan.selection is not None
    tau = plan.selection.threshold
    base = pl.DataFrame({"pid": range(tau), "g": ["a"] * tau, "x": [1.0] * tau})
    extra = pl.DataFrame({"pid": [999] * 50, "g": ["a"] * 50, "x": [1.0] * 50})
    q = dps.SQLQuery(COUNT, cat)
    g0 = q.frame_query({"t": base})
    g1 = q.frame_query({"t": pl.concat([base, extra])})
    keys = list(g0._layout().keys)
    d0 = g0._exact(plan, (11, 12, 13, 14))[0]
    d1 = g1._exact(plan, (11, 12, 13, 14))[0]

    def mech(d: Any, n: int, rng: Any) -> np.ndarray[Any, Any]:
        t = d.join(pl.DataFrame({"trial": np.arange(n)}), how="cross")
        f = finish(
            t, None, keys=["trial", *keys], aggs=g0._aggs, plan=plan, gen=as_generator(rng),
            alpha=0.05, drop_keys=(ALL,),
        )  # fmt: skip
        out = np.full(n, -1.0)
        a = f.filter(pl.col("g") == "a")
        out[a["trial"].to_numpy()] = a["sqlagg1"].to_numpy()
        return out

    eps_lb = float(epsilon_lower_bound(mech, d0, d1, trials=TRIALS, delta=DELTA, rng=5).epsilon)
    # the unit moves the count by 3 rows at b = 6: a correct release gives a bound below ε,
    # and the audit has power (well above 0)
    assert 0.2 < eps_lb <= EPS


def test_sql_selection_given_is_used() -> None:
    data = pl.DataFrame({"pid": range(200), "g": ["a", "b"] * 100, "x": [1.0] * 200})
    q = dps.SQLQuery(COUNT, _catalog())
    ex = q.explain({"t": data}, epsilon=EPS, delta=DELTA, selection="gaussian")
    sel = ex.frame.plan.selection
    assert sel is not None and sel.method == "gaussian" and sel.epsilon == pytest.approx(0.5)
    (mn,) = ex.frame.plan.measures
    assert float(mn.scale) == pytest.approx(12.0, rel=1e-8)  # half of ε left: b = 6 / 0.5
