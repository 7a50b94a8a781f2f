"""``dpkit sql``: run one private SQL query on CSV or Parquet tables with a metadata file.

    dpkit sql --meta pums.toml --table pums=pums.csv --epsilon 1 --delta 1e-6 \\
        "SELECT educ, AVG(age) FROM pums GROUP BY educ"

``--explain`` prints the plan and its cost and releases nothing. Noise is secure unless
``--seed`` is given (reproducible, not private). This module imports nothing heavy until the
command runs.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

__all__ = ["register"]


def register(sub: Any) -> None:
    """Add the ``sql`` subcommand to the ``dpkit`` parser's subparsers."""
    p = sub.add_parser(
        "sql",
        help="run a differentially private SQL query on CSV/Parquet tables",
        description=(
            "Compile one SELECT (dpkit's dialect, or BigQuery's SELECT WITH "
            "DIFFERENTIAL_PRIVACY) on tables described by a metadata file (TOML, or SmartNoise "
            "SQL's YAML), release it, and print the result with its intervals (docs/sql.md)."
        ),
    )
    p.add_argument("query", help="the SQL text (or @file to read it from a file)")
    p.add_argument("--meta", required=True, help="metadata file: .toml, or SmartNoise .yaml")
    p.add_argument(
        "--table",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help="a table's data, CSV or Parquet (repeat for joined tables)",
    )
    p.add_argument("--epsilon", type=float, help="the query's total ε (BigQuery: from OPTIONS)")
    p.add_argument("--delta", type=float, help="the query's total δ (needed to select keys)")
    p.add_argument("--alpha", type=float, default=0.05, help="interval level (default 0.05)")
    p.add_argument("--explain", action="store_true", help="print the plan and cost only")
    p.add_argument("--seed", type=int, help="reproducible noise: NOT private, for testing")
    p.add_argument("--output", help="write the result to this CSV file instead of printing")
    p.set_defaults(func=run_sql)


def _read(path: str, table: Any) -> Any:
    """A lazy scan, each declared column read as its declared type (a value that does not
    convert becomes NULL: files are cleaned when read, never refused on a value)."""
    import polars as pl

    from dpkit.errors import DataError

    kinds = {"int": pl.Int64, "float": pl.Float64, "string": pl.String, "boolean": pl.Boolean}
    types = {} if table is None else {
        c.name: kinds[c.type] for c in table.columns if c.type in kinds
    }  # fmt: skip
    try:
        if path.lower().endswith((".parquet", ".pq")):
            lf = pl.scan_parquet(path)
        else:
            lf = pl.scan_csv(path, infer_schema=False)  # all text: no inference from values
        names = lf.collect_schema().names()
    except Exception as exc:  # the reader's message can quote the file's content
        raise DataError(f"cannot read a table file ({type(exc).__name__}).") from None
    return lf.with_columns(
        [pl.col(k).cast(v, strict=False) for k, v in types.items() if k in names]
    )


def run_sql(args: argparse.Namespace) -> int:
    """Run ``dpkit sql``; returns the exit status."""
    import polars as pl

    import dpkit.sql as dps
    from dpkit.errors import DataError
    from dpkit.random import seeded

    text = args.query
    if text.startswith("@"):
        with open(text[1:], encoding="utf-8") as f:
            text = f.read()
    catalog = dps.load_catalog(args.meta)
    tables: dict[str, Any] = {}
    for spec in args.table:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            raise DataError("--table takes NAME=PATH (a CSV or Parquet file).")
        tables[name] = _read(path, catalog.table(name))
    q = dps.SQLQuery(text, catalog)
    if args.explain:
        print(q.explain(tables, epsilon=args.epsilon, delta=args.delta))
        return 0
    rng = None if args.seed is None else seeded(args.seed)
    r = q.release(tables, epsilon=args.epsilon, delta=args.delta, rng=rng, alpha=args.alpha)
    if args.output:
        r.frame.write_csv(args.output)
    else:
        with pl.Config(tbl_rows=50, tbl_cols=30, float_precision=3):
            print(r.frame)
    print(
        f"spent: epsilon={r.explanation.epsilon:g}, delta={r.explanation.delta:g}", file=sys.stderr
    )
    return 0
