"""A row-wise step that could fail on one value is refused when it is added, from the schema.

``with_columns(y=pl.col("s").cast(pl.Int64))`` is row-wise, and fails on the data (Polars'
strict cast) exactly when some row's ``s`` is not an integer's text. Accepted, it made the
query fail before any charge exactly when such a record exists: at ε = 0 an analyst learned
whether anyone's ``s`` held, say, a letter (and with a ``pl.when`` on another column, whether
anyone's salary passed a threshold). Now every node of a step must be total, decided from the
expression and the schema alone (``dpkit.frame._total``): a step that could fail is refused
whatever the data, and its lenient form (``strict=False``: a failed conversion is null, which
is dropped) is answered on every table.
"""

from __future__ import annotations

import polars as pl
import pytest

import dpkit.frame as dpf
from dpkit.errors import DataError

# Values chosen to break every fallible function below: text that is no number or date, an
# integer too large for 64 bits, negatives, zero, NaN, ±inf, an empty list, nulls.
HOSTILE = pl.DataFrame(
    {
        "user": [1, 2, 3, 4, 5],
        "s": ["1", "abc", None, "99999999999999999999", "2020-13-45"],
        "i": [1, -5, 0, 300, None],
        "f": [1.5, float("nan"), float("inf"), -1e300, None],
        "l": [[1], [], None, [1, 2, 3], [4]],
    }
)
BENIGN = HOSTILE.head(1)  # a neighbour: one record, on which every step below succeeds

c, s, i, f, lst = pl.col("c"), pl.col("s"), pl.col("i"), pl.col("f"), pl.col("l")
STEPS = {
    "strict cast of text": s.cast(pl.Int64),
    "narrowing cast": i.cast(pl.Int8),
    "cast to unsigned": i.cast(pl.UInt8),
    "float to int": f.cast(pl.Int64),
    "rounded float to int": f.round(0).cast(pl.Int32),
    "cast to enum": s.cast(pl.Enum(["1", "abc"])),
    "cast to boolean": s.cast(pl.Boolean),
    "cast to decimal": f.cast(pl.Decimal(5, 2)),
    "to_integer": s.str.to_integer(),
    "strptime": s.str.strptime(pl.Date, "%Y-%m-%d"),
    "to_date": s.str.to_date("%Y-%m-%d"),
    "to_datetime": s.str.to_datetime("%Y-%m-%d"),
    "list.get": lst.list.get(2),
    "list.to_array": lst.list.to_array(1),
    "replace_strict": s.replace_strict({"1": 1}),
    "json_decode": s.str.json_decode(pl.Int64),
    "integer pow": i.pow(i),
    "zfill": s.str.zfill(i),
    "datetime from parts": pl.datetime(2020, i, 1),
    "under a when": pl.when(i > 100).then(s.cast(pl.Int8)).otherwise(0),
    # lenient and total forms: accepted, and answered on every table
    "lenient cast": s.cast(pl.Int64, strict=False),
    "lenient to_integer": s.str.to_integer(strict=False),
    "lenient strptime": s.str.strptime(pl.Date, "%Y-%m-%d", strict=False),
    "list.get null_on_oob": lst.list.get(2, null_on_oob=True),
    "replace_strict with default": s.replace_strict({"1": 1}, default=0),
    "widening cast": i.cast(pl.Int64),
    "int to float": i.cast(pl.Float64),
    "anything to text": f.cast(pl.String),
    "float pow": f.pow(i),
    "integer pow, literal exponent": i.pow(2),
    "arithmetic": (i * 10**18) // i + i % i,
    "string functions": s.str.slice(i).str.to_uppercase().str.len_chars(),
}
LENIENT = {k for k in STEPS if list(STEPS).index(k) >= list(STEPS).index("lenient cast")}


def _outcome(df: pl.DataFrame, step: pl.Expr) -> str:
    try:
        q = dpf.Query(df, privacy_unit="user").with_columns(y=step)
    except DataError:
        return "refused when added"
    q.agg(dpf.count(), max_rows=1).release(epsilon=1.0, rng=0)  # must not raise on any table
    return "answered"


@pytest.mark.parametrize("name", list(STEPS))
def test_whether_a_step_is_answered_never_depends_on_a_value(name: str) -> None:
    outcomes = {_outcome(df, STEPS[name]) for df in (HOSTILE, BENIGN, HOSTILE.clear())}
    expected = "answered" if name in LENIENT else "refused when added"
    assert outcomes == {expected}


def test_the_refusal_names_the_lenient_form() -> None:
    with pytest.raises(DataError, match=r"strict=False") as err:
        dpf.Query(HOSTILE, privacy_unit="user").with_columns(y=s.cast(pl.Int64))
    assert "abc" not in str(err.value)
    with pytest.raises(DataError, match=r"null_on_oob=True"):
        dpf.Query(HOSTILE, privacy_unit="user").filter(lst.list.get(0) > 1)


def test_a_lenient_step_drops_what_it_cannot_convert() -> None:
    q = dpf.Query(HOSTILE, privacy_unit="user", missing="drop")
    q = q.with_columns(y=s.cast(pl.Int64, strict=False))
    # only "1" converts (and fits the bounds): 1 row, bounds (0, 9), a high ε
    out = (
        q.agg(dpf.count(), dpf.sum("y", bounds=(0, 9)), max_rows=1)
        .release(epsilon=1e6, rng=0)
        .frame
    )
    assert abs(out["sum_y"][0] - 1.0) < 0.01
