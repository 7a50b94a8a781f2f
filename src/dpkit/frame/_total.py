"""Steps that cannot fail on a value: the refusal of a step never depends on the data.

A row-wise step that *fails* on some value (a strict ``cast`` of text that is not a number,
``str.to_integer``, ``list.get`` past the end, ``replace_strict`` of an unmapped value, an
integer power with a negative exponent) makes the whole query fail, before any charge, exactly
when some record holds such a value: a free membership test (at ε = 0, "does anyone's ``s``
hold a letter?"; with ``pl.when`` on another column, "does anyone earn more than x?").

:func:`check_total` therefore accepts a step only if every node of every expression is *total*
(defined on every value of its input type), decided from the expression and the table's schema
alone, never from the data:

- columns, literals, aliases, ``when/then/otherwise``, and the binary operators (Polars' integer
  arithmetic wraps and its integer division by zero gives null: neither fails);
- the functions in :data:`_TOTAL`, which Polars defines on every value (a NaN, a null or an
  out-of-range result stands for the value it cannot compute);
- functions whose leniency is an option, only with the lenient option: ``cast(..., strict=False)``
  (or a strict cast that cannot fail, such as a widening integer cast or any cast to text),
  ``str.to_integer(strict=False)``, ``str.strptime(..., strict=False)``, ``str.contains(...,
  strict=False)``, ``list.get(..., null_on_oob=True)``, ``replace_strict(..., default=...)``;
- an integer ``pow`` only with a non-negative literal exponent; ``clip`` only with bounds of
  its input's type (or both numeric, or both temporal);
- ``str.replace``/``extract``/``count_matches`` only with a literal pattern, ``str.slice`` only
  with a literal length, ``dt.truncate`` only with a literal duration (Polars parses a column's
  pattern, length or duration on each row, and fails on a record that holds a bad one).

and, since Polars casts a function's inputs on each row (a cast that can fail on some values,
even where the schema check passed), the inputs' types, from the schema:

- the two sides of an operator, the branches of a ``when``, the inputs of ``fill_null``,
  ``coalesce``, the horizontal functions and ``is_between`` are of one kind (numbers and
  booleans; dates and datetimes; or one type), no category or list in arithmetic; an instant
  plus or minus a duration;
- a cast, strict or not, only between kinds listed in :data:`_CASTS` (a list or a duration to
  text, a number to a category, a category to a number, text to a date all fail on some rows);
- text functions take text arguments, ``str.head``/``tail``/``slice`` integer lengths, the
  numeric functions numbers, ``concat_str`` no duration or list.

Anything else is refused with a message that names the function and the lenient form to use;
a value that a lenient step cannot convert becomes null, which the aggregation drops (see
"Errors, nulls and empty tables" in ``docs/frame.md``). The walk reads Polars' own serialized
form of the expression, so a function Polars adds later is refused until it is listed here.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable
from typing import Any

from dpkit.errors import DataError
from dpkit.frame._engine import polars

# Functions with one form, defined on every value of their input types.
_TOTAL_PLAIN = frozenset(
    {
        "Abs", "Negate", "Sign", "Log", "Log1p", "Exp", "Floor", "Ceil", "FillNull",
        "Coalesce", "MaxHorizontal", "MinHorizontal", "AsStruct",
    }
)  # fmt: skip
# Families of functions, by the family's name: which members are total (``None``: all).
_TOTAL_FAMILY: dict[str, frozenset[str] | None] = {
    "Trigonometry": None,
    "Round": None,
    "RoundSF": None,
    "Clip": None,
    "SumHorizontal": None,
    "MeanHorizontal": None,
    "Hash": None,
    "Boolean": frozenset(
        {
            "IsNull", "IsNotNull", "IsNan", "IsNotNan", "IsFinite", "IsInfinite", "Not",
            "IsBetween", "IsIn", "AnyHorizontal", "AllHorizontal",
        }
    ),
    "Pow": frozenset({"Sqrt", "Cbrt"}),  # "Generic": see _pow
    "StringExpr": frozenset(
        {
            "StartsWith", "EndsWith", "Lowercase", "Uppercase", "Titlecase", "StripChars",
            "StripCharsStart", "StripCharsEnd", "StripPrefix", "StripSuffix", "LenChars",
            "LenBytes", "Slice", "Head", "Tail", "Replace", "Extract", "ConcatHorizontal",
            "CountMatches", "Reverse",
        }
    ),
    "TemporalExpr": frozenset(
        {
            "Year", "IsoYear", "Month", "Quarter", "Week", "WeekDay", "Day", "OrdinalDay",
            "Hour", "Minute", "Second", "Millisecond", "Microsecond", "Nanosecond", "Date",
            "Time", "IsLeapYear", "Truncate",
        }
    ),
    "ListExpr": frozenset({"Length"}),
    "StructExpr": frozenset({"FieldByName"}),
}  # fmt: skip
# Functions whose lenient option is a flag ``strict`` in their options, and how to ask for it.
_LENIENT_FLAG = {
    "ToInteger": "str.to_integer(..., strict=False)",
    "Strptime": "str.strptime / str.to_date / str.to_datetime(..., strict=False)",
    "Contains": "str.contains(..., strict=False)",
}
_STRING_PADS = frozenset({"PadStart", "PadEnd"})
# Total for literal arguments only: Polars parses each row's pattern, length or duration when
# it comes from a column, and fails on a record that holds no regex, a negative length or no
# duration (and a column pattern with ``literal=True`` failed on an empty input only).
_LITERAL_ARGS: dict[tuple[str, str], tuple[int, ...]] = {  # which inputs must be literals
    ("StringExpr", "Replace"): (1,),  # the pattern (a column replacement is total)
    ("StringExpr", "Extract"): (1,),
    ("StringExpr", "CountMatches"): (1,),
    ("StringExpr", "Slice"): (2,),  # the length (a negative offset from a column is total)
    ("TemporalExpr", "Truncate"): (1,),
    ("StringExpr", "ToInteger"): (1,),  # the base: 1 or 99 from a column fails on the row
}
_SIGNED = ("Int8", "Int16", "Int32", "Int64", "Int128")
_UNSIGNED = ("UInt8", "UInt16", "UInt32", "UInt64")
_FLOATS = ("Float32", "Float64")


_NUMERIC = frozenset({"int", "float", "bool"})
_INSTANTS = frozenset({"date", "datetime"})
_NO_ARITHMETIC = frozenset({"cat", "other"})  # Polars fails on a row (a null list, a category)
_NO_TEXT = frozenset({"duration", "other"})  # to text, they fail on a row
_COMPARISONS = frozenset({"Eq", "EqValidity", "NotEq", "NotEqValidity", "Lt", "LtEq", "Gt", "GtEq"})
# Casts between kinds that never fail on a row when lenient (measured on Polars' casts: any
# other pair, e.g. a category to a number or text to a date, fails on some rows).
_CASTS: dict[str, frozenset[str]] = {
    "int": frozenset({"int", "float", "bool", "str", "date", "datetime", "duration", "time"}),
    "float": frozenset({"int", "float", "bool", "str", "date", "datetime", "duration", "time"}),
    "bool": frozenset({"int", "float", "bool", "str"}),
    "str": frozenset({"int", "float", "str", "cat"}),
    "cat": frozenset({"str", "cat"}),
    "date": frozenset({"int", "float", "str", "date", "datetime"}),
    "datetime": frozenset({"int", "float", "str", "date", "datetime", "time"}),
    "time": frozenset({"int", "float", "str", "time", "duration"}),
    "duration": frozenset({"int", "float", "duration"}),
    "null": frozenset(
        {"int", "float", "bool", "str", "cat", "date", "datetime", "time", "duration"}
    ),
}
# Functions whose inputs Polars brings to one type on each row.
_ALIKE = frozenset({
    "FillNull", "Coalesce", "MaxHorizontal", "MinHorizontal", "SumHorizontal",
    "MeanHorizontal", "IsBetween", "AnyHorizontal", "AllHorizontal",
})  # fmt: skip
_NON_TEXT_ARGS = frozenset({"ToInteger", "PadStart", "PadEnd"})  # literal integers (see there)
_NUMERIC_FUNCTIONS = frozenset({
    "Sign", "Log", "Log1p", "Exp", "Floor", "Ceil", "Trigonometry", "Round", "RoundSF", "Pow",
})  # fmt: skip


def _kind(dtype: Any) -> str:
    """A type's kind: types of one kind cast to each other on every row."""
    pl = polars()
    if dtype == pl.Null:
        return "null"
    if dtype == pl.Boolean:
        return "bool"
    if dtype.is_integer():
        return "int"
    if dtype.is_float():
        return "float"
    if dtype == pl.String:
        return "str"
    for name, kind in (
        (pl.Categorical, "cat"), (pl.Enum, "cat"), (pl.Date, "date"), (pl.Datetime, "datetime"),
        (pl.Duration, "duration"), (pl.Time, "time"),
    ):  # fmt: skip
        if dtype.base_type() == name:
            return kind
    return "other"


def _never_fails(source: Any, target: Any) -> bool:
    """Whether a strict cast from ``source`` to ``target`` succeeds on every value."""
    pl = polars()
    if source == target or target in (pl.String, pl.Categorical) or source == pl.Null:
        return True
    s, t = str(source.base_type()), str(target.base_type())
    if t in _FLOATS:
        return s in _SIGNED + _UNSIGNED + _FLOATS + ("Boolean",)
    if s == "Boolean":
        return t in _SIGNED + _UNSIGNED
    bits = {n: int("".join(ch for ch in n if ch.isdigit())) for n in _SIGNED + _UNSIGNED}
    if s in _SIGNED and t in _SIGNED:
        return bits[s] <= bits[t]
    if s in _UNSIGNED and t in _UNSIGNED:
        return bits[s] <= bits[t]
    if s in _UNSIGNED and t in _SIGNED:
        return bits[s] < bits[t]
    return False


class _Walk:
    """One expression's walk over its serialized form, against the step's input schema."""

    def __init__(self, frame: Any, what: str) -> None:
        self.frame, self.what = frame, what

    def refuse(self, name: str, fix: str) -> DataError:
        return DataError(
            f"{self.what} uses {name}, which fails on some values: a release would then be "
            "refused exactly when some record holds such a value, which reveals that it does. "
            f"Use {fix}; a value it cannot convert becomes null, and nulls are dropped."
        )

    def dtype(self, node: Any) -> Any:
        """The type of a sub-expression, from the schema (no data are read)."""
        pl = polars()
        dyn = node.get("Literal", {}) if isinstance(node, dict) else {}
        if isinstance(dyn, dict) and "Float" in dyn.get("Dyn", {}):
            return pl.Float64  # (a NaN or inf literal is serialized as null: not read back)
        try:
            expr = pl.Expr.deserialize(io.StringIO(json.dumps(node)), format="json")
            return self.frame.select(expr.alias("_")).collect_schema()["_"]
        except Exception:  # from the expression and the schema alone: the same on any data
            raise DataError(f"{self.what} has an expression dpkit cannot analyse.") from None

    def check(self, node: Any) -> None:
        stack = [node]
        while stack:
            n = stack.pop()
            if not isinstance(n, dict) or len(n) != 1:
                raise DataError(f"{self.what} has an expression dpkit cannot analyse.")
            (kind, body), *_ = n.items()
            if kind in ("Column", "Literal"):
                continue
            if kind == "Alias":
                stack.append(body[0])
            elif kind == "BinaryExpr":
                self._binary(body)
                stack += [body["left"], body["right"]]
            elif kind == "Ternary":
                self._alike([body["truthy"], body["falsy"]], "when/then/otherwise")
                stack += [body["predicate"], body["truthy"], body["falsy"]]
            elif kind == "Cast":
                self._cast(body)
                stack.append(body["expr"])
            elif kind == "Function":
                self._function(body["function"], body["input"])
                stack += body["input"]
            else:
                raise self.refuse(kind, "row-wise expressions of the listed kinds")

    def _cast(self, body: Any) -> None:
        source = self.dtype(body["expr"])
        out = self.dtype({"Cast": {**body, "options": "NonStrict"}})
        # even a lenient cast fails on a row between some types (a list or a duration to
        # text, a number to a category, text to a date): only the listed pairs are cast
        if source != out and _kind(out) not in _CASTS.get(_kind(source), ()):
            raise self.refuse("a cast between these types", "a cast between listed types")
        if body["options"] == "Strict" and not _never_fails(source, out):
            raise self.refuse("a strict cast", "cast(..., strict=False)")

    def _function(self, fn: Any, inputs: list[Any]) -> None:
        self._arguments(fn, inputs)
        if isinstance(fn, str):
            if fn not in _TOTAL_PLAIN:
                raise self.refuse(fn, "a total form of it, or another expression")
            return
        ((family, member),) = fn.items()
        name = member if isinstance(member, str) else ""
        options = None
        if isinstance(member, dict) and member:
            name = next(iter(member))
            options = member[name]
        if family == "StringExpr" and name in _LENIENT_FLAG:
            flags = options[-1] if isinstance(options, list) else options
            if not isinstance(flags, dict) or flags.get("strict") is not False:
                raise self.refuse(f"str {name} (strict)", _LENIENT_FLAG[name])
        elif family == "StringExpr" and name in _STRING_PADS:
            if list(inputs[1]) != ["Literal"]:  # a negative length from a column fails
                raise self.refuse(f"str {name} with a length from a column", "a literal length")
        elif family == "ListExpr" and name == "Get":
            if member.get("Get") is not True:
                raise self.refuse("list.get", "list.get(..., null_on_oob=True)")
        elif family == "ReplaceStrict":
            if len(inputs) < 4:  # value, old, new, default
                raise self.refuse("replace_strict", "replace_strict(..., default=...)")
        elif family == "Clip":
            self._clip(inputs)
        elif family == "Pow" and member == "Generic":
            self._pow(inputs)
        elif family not in _TOTAL_FAMILY:
            raise self.refuse(family, "a total form of it, or another expression")
        else:
            allowed = _TOTAL_FAMILY[family]
            if allowed is not None and name not in allowed:
                raise self.refuse(f"{family} {name}", "a total form of it, or another expression")

    def _kinds(self, nodes: list[Any]) -> list[str]:
        return [_kind(self.dtype(n)) for n in nodes]

    def _alike(self, nodes: list[Any], what: str, arithmetic: bool = False) -> None:
        """Inputs that Polars brings to one type at run time: of one kind (or null), since
        a cast between kinds can fail on a row (a list or a duration to text)."""
        kinds = {k for k in self._kinds(nodes) if k != "null"}
        one = kinds <= _NUMERIC or kinds <= _INSTANTS or len(kinds) <= 1
        if one and not (arithmetic and kinds & _NO_ARITHMETIC):
            return
        raise self.refuse(f"{what} over inputs of different types", "inputs of one type")

    def _binary(self, body: Any) -> None:
        op = body["op"]
        sides = [body["left"], body["right"]]
        if op in ("Plus", "Minus"):  # an instant and a duration: a shifted instant
            kinds = set(self._kinds(sides))
            if kinds <= _INSTANTS | {"duration", "time", "null"} and "duration" in kinds:
                return
        if op in _COMPARISONS and set(self._kinds(sides)) <= {"cat", "str", "null"}:
            return  # a category compared with text: Polars compares on every row
        self._alike(sides, f"the operator {op}", arithmetic=op not in _COMPARISONS)

    def _arguments(self, fn: Any, inputs: list[Any]) -> None:
        """The types of a function's inputs, where Polars casts them on each row."""
        if isinstance(fn, str):
            family, name = fn, fn
        else:
            ((family, member),) = fn.items()
            name = member if isinstance(member, str) else ""
            if isinstance(member, dict) and member:
                name = next(iter(member))
        literal = _LITERAL_ARGS.get((family, name), ())
        if any(list(inputs[k]) != ["Literal"] for k in literal if k < len(inputs)):
            raise self.refuse(
                f"{family} {name} with an argument from a column", "literal arguments"
            )
        if name in _ALIKE or family in _ALIKE:
            self._alike(
                inputs,
                name if family == "Boolean" else family,
                arithmetic=family in ("SumHorizontal", "MeanHorizontal"),
            )
        elif family == "StringExpr" and name in ("Head", "Tail", "Slice"):
            if not set(self._kinds(inputs[1:])) <= {"int", "null"}:
                raise self.refuse(f"str {name} with a length that is no integer", "an integer")
        elif family == "StringExpr" and name == "ConcatHorizontal":
            if set(self._kinds(inputs)) & _NO_TEXT:
                raise self.refuse("concat_str of a list or duration", "cast it first")
        elif family == "StringExpr" and len(inputs) > 1 and name not in _NON_TEXT_ARGS:
            if not set(self._kinds(inputs)) <= {"str", "null"}:
                raise self.refuse(f"str {name} with an argument that is no text", "text")
        elif (family in _NUMERIC_FUNCTIONS or name in _NUMERIC_FUNCTIONS) and not set(
            self._kinds(inputs)
        ) <= _NUMERIC | {"null"}:
            raise self.refuse(f"{name or family} of a non-number", "a number")

    def _clip(self, inputs: list[Any]) -> None:
        """A bound of another type (text for a number or a date) passes the schema check and
        fails on the first row: the step would fail exactly when some row reaches it."""
        source = self.dtype(inputs[0])
        for bound in inputs[1:]:
            other = self.dtype(bound)
            if other == polars().Null or other == source:
                continue
            if (source.is_numeric() and other.is_numeric()) or (
                source.is_temporal() and other.is_temporal()
            ):
                continue
            raise self.refuse("clip with a bound of another type", "bounds of the input's type")

    def _pow(self, inputs: list[Any]) -> None:
        if str(self.dtype(inputs[0]).base_type()) in _FLOATS:
            return  # a float power is NaN or inf where it is undefined, never an error
        exponent = inputs[1]
        literal = exponent.get("Literal", {}) if isinstance(exponent, dict) else {}
        value = literal.get("Dyn", {}) if isinstance(literal, dict) else {}
        if isinstance(value, dict) and (
            "Float" in value or (isinstance(value.get("Int"), int) and value["Int"] >= 0)
        ):
            return
        raise self.refuse("an integer pow", "pow of a float (cast the base to Float64 first)")


def check_total(exprs: Iterable[Any], frame: Any, what: str) -> None:
    """Refuse a step with an expression that can fail on some value (from the expression and
    the schema of ``frame``, the step's input, alone: never from the data).

    Examples
    --------
    >>> import polars as pl
    >>> frame = pl.LazyFrame({"s": ["1"], "i": [1]})
    >>> check_total([pl.col("s").cast(pl.Int64, strict=False), pl.col("i").cast(pl.Float64)],
    ...             frame, "with_columns")
    >>> check_total([pl.col("s").cast(pl.Int64)], frame, "with_columns")
    Traceback (most recent call last):
    ...
    dpkit.errors.DataError: with_columns uses a strict cast, which fails on some values: ...
    """
    pl = polars()
    for e in exprs:
        if not isinstance(e, pl.Expr):
            continue  # a scalar literal: checked row-wise already, cannot fail
        try:
            tree = json.loads(e.meta.serialize(format="json"))
        except Exception:
            raise DataError(f"{what} has an expression dpkit cannot analyse.") from None
        _Walk(frame, what).check(tree)
