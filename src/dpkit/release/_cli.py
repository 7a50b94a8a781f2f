"""``dpkit release``: a private synthetic copy of a CSV table, with an optional utility report.

::

    dpkit release data.csv --domain domain.json --epsilon 1 --delta 1e-6 \\
        --out synthetic.csv --rows 10000 --report report.html --target occupation

The domain is a JSON file as written by :meth:`dpkit.release.Domain.spec` (it must be public:
never derive it from the same CSV without paying for it, see
:func:`dpkit.release.discover_domain`). A progress bar on stderr follows the fit.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from pathlib import Path
from typing import Any

from dpkit._progress import ProgressBar
from dpkit.errors import DataError
from dpkit.release._domain import Domain
from dpkit.release._report import utility_report
from dpkit.release._synth import Synthesizer
from dpkit.release._synth_plan import ESTIMATORS, METHODS

__all__ = ["add_release_parser", "run_release"]


def add_release_parser(sub: Any) -> None:
    """Register the ``release`` sub-command on an ``argparse`` sub-parser collection."""
    p = sub.add_parser(
        "release",
        help="write a private synthetic copy of a CSV table",
        description=(
            "Fit a private model of a CSV table on a public domain (JSON) and write synthetic "
            "rows. The fit is charged as one zCDP release of (epsilon, delta); the utility "
            "report compares with the real data and is not private."
        ),
    )
    p.add_argument("data", help="CSV file with a header row")
    p.add_argument("--domain", required=True, help="public domain, JSON (see Domain.spec)")
    p.add_argument("--epsilon", type=float, required=True, help="ε of the whole fit")
    p.add_argument("--delta", type=float, default=1e-6, help="δ of the whole fit (1e-6)")
    p.add_argument("--method", choices=METHODS, default="aim", help="synthesiser (aim)")
    p.add_argument(
        "--estimator",
        choices=ESTIMATORS,
        default="pgm",
        help="pgm: one model fitted to every measurement (default); closed: faster, less exact",
    )
    p.add_argument("--rows", type=int, help="synthetic rows (default: the private estimate of n)")
    p.add_argument("--out", required=True, help="CSV file to write the synthetic table to")
    p.add_argument("--report", help="also write an HTML utility report here (not private)")
    p.add_argument("--target", help="column to predict in the report's train-on-synthetic test")
    p.add_argument("--seed", type=int, help="seed (reproducible, NOT secure; default: secure)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def _read_csv(path: str, domain: Domain) -> Any:
    try:
        pd = importlib.import_module("pandas")
    except ImportError:  # pragma: no cover - pandas ships with the release extra
        raise ImportError("dpkit release needs pandas: pip install 'dpkit[release]'") from None
    try:
        # Categorical columns are read as text unless every declared category is a number,
        # so that "01" stays "01" and 1 matches 1.
        dtypes: dict[str, Any] = {}
        for k, c in domain.columns.items():
            cats = getattr(c, "categories", None)
            if cats is not None and not all(isinstance(v, int | float) for v in cats):
                dtypes[k] = str
        return pd.read_csv(path, dtype=dtypes, keep_default_na=True)
    except (OSError, ValueError) as exc:
        raise DataError(f"could not read {path!r} as CSV ({type(exc).__name__}).") from None


def run_release(args: argparse.Namespace) -> int:
    """Run ``dpkit release`` from parsed arguments; returns the exit status."""
    try:
        spec = json.loads(Path(args.domain).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise DataError(f"could not read the domain {args.domain!r}: {exc}") from None
    domain = Domain.from_spec(spec)
    synth = Synthesizer(
        domain,
        epsilon=args.epsilon,
        delta=args.delta,
        method=args.method,
        estimator=args.estimator,
    )
    # Everything that can fail is checked before the fit, so that a refusal never follows
    # a fit (and its privacy cost) and never leaves a partial set of output files behind.
    if args.rows is not None and args.rows < 0:
        raise DataError(f"--rows must be a non-negative integer, got {args.rows}.")
    if args.target is not None and args.target not in domain.names:
        raise DataError(f"--target {args.target!r} is not a column of the domain.")
    outputs = [args.out] + ([args.report] if args.report else [])
    for path in outputs:
        parent = Path(path).resolve().parent
        if not parent.is_dir() or not os.access(parent, os.W_OK) or Path(path).is_dir():
            raise DataError(f"cannot write {path!r}: its folder is missing or not writable.")
    data = _read_csv(args.data, domain)
    bar = None
    if not args.quiet:
        bar = ProgressBar(1 + synth.plan.rounds)

    def tick(done: int, total: int) -> None:
        if bar is not None:
            bar.advance(done - bar.done, f"{args.method}: step {done} of {total}")

    if args.seed is not None:
        print("dpkit: note: --seed makes the output reproducible and its randomness NOT secure; "
              "leave it out for a real release.", file=sys.stderr)  # fmt: skip
    model = synth.fit(data, rng=args.seed, progress=tick)
    if bar is not None:
        bar.close()
    table = model.sample(
        args.rows, rng=None if args.seed is None else args.seed + 1, output="pandas"
    )
    rep = (
        utility_report(data, table, domain, target=args.target, synthesizer=synth)
        if args.report
        else None
    )
    # Written to temporaries beside their targets and renamed only when all are complete.
    temps = {
        path: Path(path).with_name(f".{Path(path).name}.{os.getpid()}.tmp") for path in outputs
    }
    try:
        table.to_csv(temps[args.out], index=False)
        if rep is not None:
            rep.to_html(temps[args.report])
        for path, tmp in temps.items():
            os.replace(tmp, path)
    except OSError as exc:
        raise DataError(f"could not write the output ({type(exc).__name__}).") from None
    finally:
        for tmp in temps.values():
            tmp.unlink(missing_ok=True)
    print(f"wrote {len(table)} synthetic rows to {args.out} ({args.method}, ρ = {synth.rho:.4g})")
    if rep is not None:
        print(rep.summary())
        print(f"report: {args.report} (compares with the real data; not private)")
    return 0
