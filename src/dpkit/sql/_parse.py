"""SQL text to a sqlglot tree, strictly; BigQuery's differential privacy clause read by hand.

sqlglot (pure Python) parses each dialect's ordinary SQL, but not BigQuery's
``SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(...)`` clause, and it reads the named arguments
``contribution_bounds_per_group => (lo, hi)`` only in some functions (with its lenient error
level it drops them silently). So the clause and the named arguments are taken out with
sqlglot's tokenizer first: the options are read from their tokens, each aggregate carrying bounds
is wrapped in a marker call ``DPKIT_BOUNDS_<k>(...)`` that the compiler unwraps, and the rest
is parsed with errors raised.
"""

from __future__ import annotations

import importlib
import itertools
from dataclasses import dataclass, field
from typing import Any

from dpkit.errors import QueryRefusedError

__all__ = ["Parsed", "parse_sql", "sqlglot"]

MARKER = "DPKIT_BOUNDS_"
_NAMED = ("contribution_bounds_per_group", "contribution_bounds_per_row")
_MAX_SQL = 100_000


def sqlglot() -> Any:
    """The ``sqlglot`` module, or an ImportError that says how to install it."""
    try:
        return importlib.import_module("sqlglot")
    except ImportError as exc:  # pragma: no cover - the test environment has sqlglot
        raise ImportError("dpkit.sql needs sqlglot: pip install 'dpkit[sql]'") from exc


@dataclass(frozen=True)
class Parsed:
    """A parsed statement and, for BigQuery's dialect, its options and named bounds."""

    tree: Any
    bigquery: bool
    options: dict[str, Any] = field(default_factory=dict)
    bounds: dict[int, tuple[str, tuple[float, float]]] = field(default_factory=dict)


def _number(tokens: list[Any], i: int) -> tuple[float, int]:
    """A possibly signed number at token ``i``; returns it and the next index."""
    t = sqlglot().tokens.TokenType
    sign = 1.0
    if tokens[i].token_type in (t.DASH, t.PLUS):
        sign = -1.0 if tokens[i].token_type == t.DASH else 1.0
        i += 1
    if tokens[i].token_type != t.NUMBER:
        raise QueryRefusedError("contribution bounds must be two numbers: (lower, upper).")
    return sign * float(tokens[i].text), i + 1


def _options(tokens: list[Any], i: int) -> tuple[dict[str, Any], int]:
    """``OPTIONS(name = value, ...)`` starting at token ``i`` (the word OPTIONS)."""
    t = sqlglot().tokens.TokenType
    if tokens[i].text.upper() != "OPTIONS" or tokens[i + 1].token_type != t.L_PAREN:
        raise QueryRefusedError("WITH DIFFERENTIAL_PRIVACY needs OPTIONS(epsilon=..., ...).")
    i += 2
    out: dict[str, Any] = {}
    while tokens[i].token_type != t.R_PAREN:
        name = tokens[i].text.lower()
        if tokens[i + 1].token_type != t.EQ:
            raise QueryRefusedError("OPTIONS are name = value pairs.")
        if name in out:  # which one would count? the reader and the charge must agree
            raise QueryRefusedError("an option is given twice in OPTIONS(...).")
        i += 2
        tok = tokens[i]
        if tok.token_type in (t.NUMBER, t.DASH, t.PLUS):
            out[name], i = _number(tokens, i)
        elif tok.token_type == t.NULL:
            out[name], i = None, i + 1
        else:
            out[name], i = tok.text, i + 1
        if tokens[i].token_type == t.COMMA:
            i += 1
    return out, i + 1


def _bigquery_text(sql: str, tokens: list[Any]) -> tuple[str, dict[str, Any], dict[int, Any]]:
    """The SQL without the DP clause and with named bounds replaced by marker calls."""
    t = sqlglot().tokens.TokenType
    edits: list[tuple[int, int, str]] = []  # (start, end exclusive, replacement)
    options: dict[str, Any] = {}
    bounds: dict[int, tuple[str, tuple[float, float]]] = {}
    stack: list[int] = []  # token indexes of open parentheses
    close: dict[int, int] = {}
    for j, tok in enumerate(tokens):
        if tok.token_type == t.L_PAREN:
            stack.append(j)
        elif tok.token_type == t.R_PAREN and stack:
            close[stack.pop()] = j
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        upper = tok.text.upper()
        if (
            tok.token_type == t.WITH
            and i > 0
            and tokens[i - 1].token_type == t.SELECT
            and i + 1 < len(tokens)
            and tokens[i + 1].text.upper() == "DIFFERENTIAL_PRIVACY"
        ):
            options, nxt = _options(tokens, i + 2)
            edits.append((tok.start, tokens[nxt - 1].end + 1, " "))
            i = nxt
            continue
        if upper.lower() in _NAMED and i + 1 < len(tokens) and tokens[i + 1].token_type == t.FARROW:
            opens = [o for o, c in close.items() if o < i < c]
            if not opens or tokens[i - 1].token_type != t.COMMA or opens[-1] < 1:
                raise QueryRefusedError(
                    f"{upper.lower()} must be the last argument of an aggregate."
                )
            fopen = max(opens)
            if tokens[i + 2].token_type != t.L_PAREN:
                raise QueryRefusedError("contribution bounds must be written (lower, upper).")
            lo, k = _number(tokens, i + 3)
            if tokens[k].token_type != t.COMMA:
                raise QueryRefusedError("contribution bounds must be written (lower, upper).")
            hi, k = _number(tokens, k + 1)
            if tokens[k].token_type != t.R_PAREN or tokens[k + 1].token_type != t.R_PAREN:
                raise QueryRefusedError(
                    f"{upper.lower()} must be the last argument of an aggregate."
                )
            n = len(bounds)
            bounds[n] = (upper.lower(), (lo, hi))
            name = tokens[fopen - 1]
            edits.append((name.start, name.start, f"{MARKER}{n}("))
            edits.append((tokens[i - 1].start, tokens[k].end + 1, ""))
            edits.append((tokens[k + 1].end + 1, tokens[k + 1].end + 1, ")"))
            i = k + 2
            continue
        i += 1
    out = sql
    for start, end, text in sorted(edits, key=lambda e: (e[0], e[1]), reverse=True):
        out = out[:start] + text + out[end:]
    return out, options, bounds


def parse_sql(sql: str, *, dialect: str | None = None) -> Parsed:
    """Parse one SELECT statement; BigQuery's DP clause is recognised in any dialect.

    Syntax errors are refused with a message that does not quote the text.
    """
    sg = sqlglot()
    if not isinstance(sql, str) or not sql.strip():
        raise QueryRefusedError("the query must be a non-empty SQL string.")
    if len(sql) > _MAX_SQL:
        raise QueryRefusedError(f"the query is longer than {_MAX_SQL} characters.")
    read = dialect or "postgres"
    try:
        tokens = list(sg.tokenize(sql, read="bigquery" if read == "bigquery" else read))
    except Exception:
        raise QueryRefusedError("the query cannot be tokenized: check its quotes.") from None
    bq = any(
        a.token_type == sg.tokens.TokenType.WITH and b.text.upper() == "DIFFERENTIAL_PRIVACY"
        for a, b in itertools.pairwise(tokens)
    )
    options: dict[str, Any] = {}
    bounds: dict[int, Any] = {}
    if bq or any(tok.text.lower() in _NAMED for tok in tokens):
        try:
            sql, options, bounds = _bigquery_text(sql, tokens)
        except IndexError:
            raise QueryRefusedError("the DIFFERENTIAL_PRIVACY clause is incomplete.") from None
        read = "bigquery"
    try:
        trees = sg.parse(sql, read=read, error_level=sg.ErrorLevel.RAISE)
    except Exception as exc:
        raise QueryRefusedError(
            f"the query is not valid SQL in the {read} dialect ({type(exc).__name__})."
        ) from None
    trees = [tr for tr in trees if tr is not None]
    if len(trees) != 1:
        raise QueryRefusedError("send exactly one SQL statement (no ';'-separated list).")
    return Parsed(trees[0], bq, options, bounds)
