"""Whether a release succeeds never depends on one record's value (the refusal rule).

Every release entry point of :mod:`dpkit.release` is run on a dataset and on neighbours that
differ from it in one record built to hit a validation path: a value above or below the public
bounds, a category the domain does not list, a value that cannot be a category. The outcome
(success, or the type of the exception) must be the same on both: a refusal on one of them
would be a free membership oracle (ε = 0 spent, one record's presence or value revealed).

Only a value with no place in any domain (NaN) may be refused, before anything is charged or
drawn; the docs say that such a refusal reveals that one exists.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpkit.accounting import Accountant, ApproxDP, Neighbouring
from dpkit.errors import DataError
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
from dpkit.release._marginals import marginal

ADD = Neighbouring.ADD_REMOVE
REPLACE = Neighbouring.REPLACE
BASE = np.array([0.1, 0.2, 0.35, 0.5, 0.65, 0.8, 0.9])

DENSITIES: dict[str, tuple[Callable[..., Any], dict[str, Any]]] = {
    "histogram": (histogram_density, {"bins": 4}),
    "series": (series_density, {"degree": 3}),
    "kde": (kde_density, {"bandwidth": 0.1, "delta": 1e-6, "grid": 16}),
    "bernstein": (bernstein_density, {"bandwidth": 0.2}),
    "ks": (ks_synthetic, {"size": 5, "grid": 6}),
}

DOM = Domain({"c": Categorical(["a", "b"]), "x": Numeric(0, 1, bins=4)})


def _state(gen: np.random.Generator) -> str:
    """The generator's state as text (its arrays compared element by element)."""
    return json.dumps(gen.bit_generator.state, default=lambda a: np.asarray(a).tolist())


def _outcome(call: Callable[[], object]) -> tuple[str, type[BaseException] | None]:
    try:
        call()
    except Exception as exc:  # the type is what is compared
        return ("refused", type(exc))
    return ("released", None)


def _numeric_neighbours(relation: Neighbouring) -> list[np.ndarray]:
    """Neighbours of BASE whose extra (or replacing) record lies outside [0, 1]."""
    out = []
    for bad in (1.5, -3.0, 1e300, -1e-300 - 1.0):
        if relation is ADD:
            out.append(np.r_[BASE, bad])
        else:
            out.append(np.r_[BASE[:-1], bad])
    return out


@pytest.mark.parametrize("name", sorted(DENSITIES))
@pytest.mark.parametrize("relation", [ADD, REPLACE])
def test_density_outcome_does_not_depend_on_an_out_of_bounds_record(
    name: str, relation: Neighbouring
) -> None:
    fn, kw = DENSITIES[name]

    def run(x: np.ndarray) -> Callable[[], object]:
        acct = Accountant(ApproxDP(epsilon=10.0, delta=1e-3))
        return lambda: fn(
            x,
            bounds=(0, 1),
            epsilon=1.0,
            neighbouring=relation,
            accountant=acct,
            rng=seeded(0),
            **kw,
        )

    base = _outcome(run(BASE))
    assert base == ("released", None)
    for x in _numeric_neighbours(relation):
        assert _outcome(run(x)) == base


@pytest.mark.parametrize("name", sorted(DENSITIES))
def test_out_of_bounds_records_are_clamped_to_the_box(name: str) -> None:
    # The same release (same seed) on data and on its clamped copy: identical output, so the
    # sensitivity computed for records inside the box covers them.
    fn, kw = DENSITIES[name]
    wild = np.r_[BASE, 7.0, -2.0]
    clamped = np.r_[BASE, 1.0, 0.0]
    a = fn(wild, bounds=(0, 1), epsilon=1.0, n=9, rng=3, **kw)
    b = fn(clamped, bounds=(0, 1), epsilon=1.0, n=9, rng=3, **kw)
    key = "values" if name == "ks" else "raw"
    assert np.array_equal(getattr(a, key), getattr(b, key))


@pytest.mark.parametrize("name", sorted(DENSITIES))
def test_no_option_refuses_on_a_value(name: str) -> None:
    # outside="raise" was a membership oracle; it is now refused as a parameter, whatever the
    # data (inside the box or not), before anything is charged.
    fn, kw = DENSITIES[name]
    for x in (BASE, np.r_[BASE, 2.0]):
        acct = Accountant(ApproxDP(epsilon=10.0, delta=1e-3))
        with pytest.raises(DataError, match="outside"):
            fn(x, bounds=(0, 1), epsilon=1.0, outside="raise", accountant=acct, rng=seeded(0), **kw)
        assert not acct.ledger


@pytest.mark.parametrize("name", sorted(DENSITIES))
def test_nan_is_refused_before_any_charge_or_draw(name: str) -> None:
    fn, kw = DENSITIES[name]
    acct = Accountant(ApproxDP(epsilon=10.0, delta=1e-3))
    gen = seeded(0)
    state = _state(gen)
    with pytest.raises(DataError, match="NaN"):
        fn(np.r_[BASE, np.nan], bounds=(0, 1), epsilon=1.0, accountant=acct, rng=gen, **kw)
    assert not acct.ledger and _state(gen) == state


def _table(cats: list[object], xs: list[float]) -> dict[str, np.ndarray]:
    return {"c": np.array(cats, dtype=object), "x": np.array(xs)}


BASE_TABLE = _table(["a", "b", "a", "b", "a"], [0.1, 0.3, 0.5, 0.7, 0.9])
ODD_RECORDS: list[tuple[object, float]] = [
    ("never-declared", 0.5),  # a category the domain does not list
    (("a", "tuple"), 0.5),  # a hashable value that is no category
    (["a", "list"], 0.5),  # an unhashable value
    ("a", 42.0),  # a number above the bounds
    ("b", -42.0),  # and below
]


def _neighbour(record: tuple[object, float], relation: Neighbouring) -> dict[str, np.ndarray]:
    cats = BASE_TABLE["c"].tolist()
    xs = BASE_TABLE["x"].tolist()
    if relation is REPLACE:
        cats, xs = cats[:-1], xs[:-1]
    cats.append(record[0])
    xs.append(record[1])
    col = np.empty(len(cats), dtype=object)
    col[:] = cats  # element by element: a list value stays one value
    return {"c": col, "x": np.array(xs)}


@pytest.mark.parametrize("method", ["independent", "mst", "aim"])
@pytest.mark.parametrize("relation", [ADD, REPLACE])
def test_synthesizer_outcome_does_not_depend_on_an_unseen_category(
    method: str, relation: Neighbouring
) -> None:
    syn = Synthesizer(DOM, rho=0.5, method=method, neighbouring=relation)
    base = _outcome(lambda: syn.fit(BASE_TABLE, rng=0))
    assert base == ("released", None)
    for record in ODD_RECORDS:
        assert _outcome(lambda r=record: syn.fit(_neighbour(r, relation), rng=0)) == base  # type: ignore[misc]


def test_unseen_category_without_catch_all_drops_the_record() -> None:
    # Dropping one record is the removal of a record: covered by add/remove neighbours, and
    # under replace the marginals move by less than the replace sensitivity (checked below).
    codes = DOM.encode(_neighbour(("never-declared", 0.5), ADD))
    assert np.array_equal(codes, DOM.encode(BASE_TABLE))
    with_other = Domain({"c": Categorical(["a", "b", "rest"], other="rest"), "x": Numeric(0, 1)})
    assert with_other.encode(_neighbour((["a", "list"], 0.5), ADD))[-1, 0] == 2


def test_dropping_keeps_the_replace_sensitivity() -> None:
    # Exact reasoning behind the claimed ρ under replace-one: the fit reads the data only
    # through marginals of the encoded records, whose ℓ2 sensitivity it calibrates as √2 (one
    # record moves between two cells) and scores as 2 in ℓ1. Replacing a record by one that is
    # dropped moves each marginal by one count in one cell: ℓ2 = ℓ1 = 1, within both.
    syn = Synthesizer(DOM, rho=0.5, method="aim", neighbouring=REPLACE)
    assert syn.plan.score_sensitivity == 2
    shape = DOM.shape
    for record in ODD_RECORDS[:3]:
        a = DOM.encode(BASE_TABLE)
        b = DOM.encode(_neighbour(record, REPLACE))
        for cols in ((0,), (1,), (0, 1), (1, 0)):
            diff = marginal(a, shape, cols) - marginal(b, shape, cols)
            assert np.abs(diff).sum() <= 2 and np.sqrt((diff**2).sum()) <= np.sqrt(2)


def test_synthesizer_refuses_missing_values_before_any_charge() -> None:
    acct = Accountant(ApproxDP(epsilon=10.0, delta=1e-3))
    gen = seeded(0)
    state = _state(gen)
    with pytest.raises(DataError):
        Synthesizer(DOM, epsilon=1.0, delta=1e-6).fit(
            _table(["a", None], [0.1, 0.2]), accountant=acct, rng=gen
        )
    assert not acct.ledger and _state(gen) == state


@pytest.mark.parametrize("record", [("zz", 0.5), (["un", "hashable"], 0.5), ("a", 99.0)])
def test_discover_domain_outcome_does_not_depend_on_one_record(
    record: tuple[object, float],
) -> None:
    def run(data: dict[str, np.ndarray]) -> Callable[[], object]:
        return lambda: discover_domain(
            data, numeric={"x": (0, 1)}, categorical=["c"], epsilon=1.0, delta=1e-6, bins=2, rng=0
        )

    base = _outcome(run(BASE_TABLE))
    assert base == ("released", None)
    assert _outcome(run(_neighbour(record, ADD))) == base


def test_audit_of_a_replaced_record_that_is_clamped() -> None:
    # A record replaced by one far outside the box is clamped into the last cell: a record
    # moving between two cells, which the replace-one sensitivity (2) covers. The audit's
    # lower bound stays below the claim (and has power: it sees the move).
    from dpkit.audit import epsilon_lower_bound

    def mech(d: np.ndarray, rng: np.random.Generator) -> float:
        out = histogram_density(
            d, bounds=(0, 1), epsilon=1.0, bins=4, neighbouring=REPLACE, rng=rng
        ).raw
        return float(out[0] - out[3])

    d0, d1 = np.full(6, 0.1), np.r_[np.full(5, 0.1), 1e6]
    # 4000 trials: at 1200 the power margin was thin (0.21-0.37 on seeds 5-7) and the selection
    # half picked a region with no power on seed 4 once the sampler's stream changed; at 4000
    # seeds 4-7 give 0.44-0.56
    r = epsilon_lower_bound(mech, d0, d1, trials=4000, rng=4)
    print(r)
    assert 0.2 < r.epsilon <= 1.0, r


ANY_FLOAT = st.floats(allow_nan=False, allow_infinity=False)  # NaN/inf: no place, refused
IN_BOX = st.floats(min_value=0.0, max_value=1.0)


@settings(max_examples=15, deadline=None, derandomize=True, database=None)
@given(
    base=st.lists(IN_BOX, min_size=0, max_size=6),
    odd=ANY_FLOAT,
    name=st.sampled_from(sorted(DENSITIES)),
    relation=st.sampled_from([ADD, REPLACE]),
)
def test_property_one_record_never_changes_the_outcome(
    base: list[float], odd: float, name: str, relation: Neighbouring
) -> None:
    # Any finite value, in or out of the box, added to (or replacing a record of) any small
    # dataset: the same outcome as without it.
    fn, kw = DENSITIES[name]
    if relation is REPLACE and not base:
        base = [0.5]
    other = [*base, odd] if relation is ADD else [*base[:-1], odd]

    def run(x: list[float]) -> tuple[str, type[BaseException] | None]:
        acct = Accountant(ApproxDP(epsilon=10.0, delta=1e-3))
        arr = np.array(x, dtype=np.float64)
        return _outcome(
            lambda: fn(
                arr,
                bounds=(0, 1),
                epsilon=1.0,
                neighbouring=relation,
                accountant=acct,
                rng=seeded(0),
                **kw,
            )
        )

    assert run(other) == run(base)


CATEGORY_VALUES = st.one_of(
    st.sampled_from(["a", "b"]),
    st.text(max_size=3),
    st.integers(),
    st.booleans(),
    st.tuples(st.integers()),
    st.lists(st.integers(), max_size=2),
)


@settings(max_examples=15, deadline=None, derandomize=True, database=None)
@given(
    cat=CATEGORY_VALUES,
    x=ANY_FLOAT,
    method=st.sampled_from(["independent", "mst", "aim"]),
    relation=st.sampled_from([ADD, REPLACE]),
)
def test_property_one_record_never_changes_the_synthesizer_outcome(
    cat: object, x: float, method: str, relation: Neighbouring
) -> None:
    syn = Synthesizer(DOM, rho=0.5, method=method, neighbouring=relation)
    base = _outcome(lambda: syn.fit(BASE_TABLE, rng=0))
    assert _outcome(lambda: syn.fit(_neighbour((cat, x), relation), rng=0)) == base
