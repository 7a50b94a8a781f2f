"""The ``dpkit`` command.

``dpkit audit`` runs empirical privacy audits (:mod:`dpkit.audit`) of dpkit's own mechanisms and
statistics, prints a table of claimed ε against the lower bound found, and exits with status 1 if
any mechanism is found to leak more than it claims (or, with ``--controls``, if a deliberately
broken control goes undetected). An audit whose bound is about 0 reports "no power" rather than
"ok" (it tested nothing) and does not change the exit status.

>>> main(["audit", "--controls", "--mechanism", "naive", "--epsilon", "1", "--trials", "2000",
...       "--quiet"])
mechanism                      claimed ε  δ        ε_LB    p̂        q̂        verdict
control: naive float Laplace   1          0        4...    0.7...   0        caught
0

``dpkit plan`` finds the smallest budget that meets an accuracy target (:mod:`dpkit.plan`):

>>> main(["plan", "mean", "--bounds", "0", "100", "--n", "1000", "--half-width", "0.5"])
mean: epsilon=0.2996 gives a 95% noise interval of +/- 0.5
0
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence

from dpkit._progress import ProgressBar
from dpkit.audit._cases import AuditCase
from dpkit.audit._catalogue import builtin_cases
from dpkit.audit._controls import negative_controls
from dpkit.audit._result import AuditResult
from dpkit.errors import DPKitError
from dpkit.plan import MECHANISMS
from dpkit.stats._accuracy import STATISTICS, accuracy

__all__ = ["ProgressBar", "main"]  # ProgressBar lives in dpkit._progress


NO_POWER = 0.05
"""A bound below this fraction of the claim means the audit could not tell the two inputs apart
at all (most often ε_LB = 0): the mechanism was not tested, which must not read as "ok"."""


def _verdict(case: AuditCase, result: AuditResult, control: bool) -> tuple[str, bool]:
    exceeded = result.exceeds(case.claimed_epsilon)
    if control:
        return ("caught", True) if exceeded else ("MISSED", False)
    if exceeded:
        return "VIOLATION", False
    if result.epsilon < NO_POWER * case.claimed_epsilon:
        return "no power", True  # nothing found, but nothing was tested either: not a failure
    return "ok", True


def _row(cells: Sequence[str]) -> str:
    widths = (30, 10, 8, 7, 9, 9, 9)
    return "".join(f"{c:<{w}} " for c, w in zip(cells[:-1], widths, strict=False)) + cells[-1]


def _select(cases: list[AuditCase], names: Sequence[str] | None) -> list[AuditCase]:
    if not names:
        return cases
    wanted = [n.lower() for n in names]
    return [c for c in cases if any(w in c.name.lower() for w in wanted)]


def _audit(args: argparse.Namespace) -> int:
    epsilons = args.epsilon or [0.5, 1.0, 2.0]
    cases: list[tuple[AuditCase, bool]] = []
    for eps in epsilons:
        cases += [(c, False) for c in _select(builtin_cases(eps), args.mechanism)]
    if args.controls:
        for eps in epsilons:
            cases += [(c, True) for c in _select(negative_controls(eps), args.mechanism)]
    if args.list:
        for case, control in cases:
            kind = "control" if control else "mechanism"
            print(f"{case.name:<32} ε={case.claimed_epsilon:<6g} {kind}: {case.description}")
        return 0
    if not cases:
        print("no mechanism matches; see `dpkit audit --list`.", file=sys.stderr)
        return 2
    bar = None
    if not args.quiet:
        bar = ProgressBar(sum(c.runs(args.trials) for c, _ in cases))
    print(_row(["mechanism", "claimed ε", "δ", "ε_LB", "p̂", "q̂", "verdict"]))
    rows: list[str] = []
    all_good = True
    for i, (case, control) in enumerate(cases):
        label = case.name

        def tick(done: int, total: int, _label: str = label, _state: list[int] = [0]) -> None:  # noqa: B006
            if bar is not None:
                bar.advance(done - _state[0], _label)
            _state[0] = done

        result = case.run(trials=args.trials, confidence=args.confidence, rng=args.seed + i,
                          progress=tick)  # fmt: skip
        verdict, good = _verdict(case, result, control)
        all_good &= good
        rows.append(
            _row(
                [
                    case.name,
                    f"{case.claimed_epsilon:g}",
                    f"{case.delta:.2g}" + ("" if case.audit_delta is None else "*"),
                    f"{result.epsilon:.3f}",
                    f"{result.p:.3g}",
                    f"{result.q:.3g}",
                    verdict,
                ]
            )
        )
        if bar is None:
            print(rows[-1])
    if bar is not None:
        bar.close()
        print("\n".join(rows))
    if any(c.audit_delta is not None for c, _ in cases):
        print("* claimed δ not far below 1/n is void (δn records in clear); audited at δ = 1/n².")
    if any(r.endswith(" no power") for r in rows):
        print(
            f"no power: ε_LB below {NO_POWER:g} × the claim; the audit could not tell the inputs "
            "apart, which proves nothing either way. Try more --trials."
        )
    return 0 if all_good else 1


def _add_plan_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    plan = sub.add_parser(
        "plan",
        help="the smallest ε (or ρ) that meets an accuracy target, before spending anything",
        description=(
            "Find the smallest epsilon (or, with --rho, the zCDP rho) with which a statistic or "
            "a mechanism's noise interval at 1 - alpha is at most the target half-width. "
            "Public parameters only: nothing is read or charged."
        ),
    )
    plan.add_argument("what", choices=[*STATISTICS, *MECHANISMS], help="statistic or mechanism")
    target = plan.add_mutually_exclusive_group(required=True)
    target.add_argument("--half-width", type=float, help="target half-width of the interval")
    target.add_argument("--relative", type=float, help="target relative error (with --scale)")
    plan.add_argument("--scale", type=float, help="a public value of the statistic")
    plan.add_argument("--alpha", type=float, default=0.05, help="1 - coverage (default 0.05)")
    plan.add_argument("--delta", type=float, default=0.0, help="δ (Gaussian noise when > 0)")
    plan.add_argument("--bounds", type=float, nargs=2, metavar=("LOW", "HIGH"))
    plan.add_argument("--n", type=int, help="the public number of records, if known")
    plan.add_argument("--expected-n", type=int, help="a public guess of n (mean, unknown n)")
    plan.add_argument("--sensitivity", type=float, default=1.0, help="mechanisms: Δ")
    plan.add_argument("--rho", action="store_true", help="plan zCDP rho (Gaussian noise)")


def _plan(args: argparse.Namespace) -> int:
    from dpkit import plan as planner

    common = {"half_width": args.half_width, "relative": args.relative, "scale": args.scale,
              "alpha": args.alpha}  # fmt: skip
    bounds = None if args.bounds is None else tuple(args.bounds)
    if args.what in STATISTICS and args.rho:
        rho = planner.rho_for(args.what, bounds=bounds, n=args.n, expected_n=args.expected_n,
                              **common)  # fmt: skip
        got = accuracy(args.what, rho=rho, bounds=bounds, n=args.n, expected_n=args.expected_n,
                       alpha=args.alpha)  # fmt: skip
        budget = f"rho={_up(rho)}"
    elif args.what in STATISTICS:
        eps = planner.epsilon_for(args.what, delta=args.delta, n=args.n,
                                  expected_n=args.expected_n,
                                  bounds=None if args.bounds is None else tuple(args.bounds),
                                  **common)  # fmt: skip
        got = accuracy(args.what, epsilon=eps, delta=args.delta, n=args.n,
                       expected_n=args.expected_n,
                       bounds=None if args.bounds is None else tuple(args.bounds),
                       alpha=args.alpha)  # fmt: skip
        budget = f"epsilon={_up(eps)}" + (f", delta={args.delta:g}" if args.delta else "")
    elif args.rho:
        rho = planner.rho_for(args.what, sensitivity=args.sensitivity, **common)
        got = planner._mechanism(args.what, args.sensitivity, rho=rho).accuracy(args.alpha)
        budget = f"rho={_up(rho)}"
    else:
        eps = planner.epsilon_for_mechanism(args.what, sensitivity=args.sensitivity,
                                            delta=args.delta, **common)  # fmt: skip
        extra = {"delta": args.delta} if args.what.endswith("gaussian") else {}
        got = planner._mechanism(args.what, args.sensitivity, epsilon=eps, **extra).accuracy(
            args.alpha
        )
        budget = f"epsilon={_up(eps)}" + (f", delta={args.delta:g}" if extra else "")
    level = f"{100 * (1 - args.alpha):g}%"
    print(f"{args.what}: {budget} gives a {level} noise interval of +/- {got:.4g}")
    return 0


def _up(value: float) -> str:
    """A planned budget shown to 4 significant digits, rounded up (so that it still meets the
    target when typed back in)."""
    text = f"{value:.4g}"
    if float(text) < value:
        text = f"{float(text) + 10 ** (math.floor(math.log10(value)) - 3):.4g}"
    return text


def _parser() -> argparse.ArgumentParser:
    from dpkit._version import __version__

    parser = argparse.ArgumentParser(prog="dpkit", description="dpkit: differential privacy.")
    parser.add_argument("--version", action="version", version=f"dpkit {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    audit = sub.add_parser(
        "audit",
        help="empirically audit dpkit's mechanisms (lower bounds on ε)",
        description=(
            "Run each mechanism many times on a hard pair of neighbouring datasets and report a "
            "lower bound on the ε it provides (Clopper–Pearson, selection/evaluation split). "
            "Exit status 1 if a bound exceeds a mechanism's claim or a control is missed."
        ),
    )
    audit.add_argument(
        "--mechanism",
        nargs="+",
        metavar="NAME",
        help="audit only mechanisms whose name contains NAME (case-insensitive)",
    )
    audit.add_argument("--epsilon", nargs="+", type=float, metavar="E", help="claimed ε values")
    audit.add_argument("--trials", type=int, default=50_000, help="runs per dataset")
    audit.add_argument("--seed", type=int, default=0, help="seed of the audit's randomness")
    audit.add_argument(
        "--confidence",
        type=float,
        default=0.999,
        help="confidence of each bound (default 0.999: dozens of audits run, and at 0.95 a "
        "correct mechanism whose claim is tight is flagged about once in twenty)",
    )
    audit.add_argument("--controls", action="store_true", help="also run the negative controls")
    audit.add_argument("--list", action="store_true", help="list the audits and exit")
    audit.add_argument("--quiet", action="store_true", help="no progress bar")
    _add_plan_parser(sub)
    # The layers' commands register themselves; their heavy dependencies load only when run.
    from dpkit.release._cli import add_release_parser
    from dpkit.server._cli import register as register_serve
    from dpkit.sql._cli import register as register_sql

    register_serve(sub)
    register_sql(sub)
    add_release_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``dpkit`` console script; returns the exit status."""
    words = sys.argv[1:] if argv is None else list(argv)
    if words == ["--version"]:  # answered before the layers' commands are imported
        from dpkit._version import __version__

        print(f"dpkit {__version__}")
        return 0
    args = _parser().parse_args(argv)
    try:
        if args.command == "audit":
            return _audit(args)
        if args.command == "plan":
            return _plan(args)
        if hasattr(args, "func"):
            return int(args.func(args))
        if args.command == "release":
            from dpkit.release._cli import run_release

            return run_release(args)
    except DPKitError as exc:
        print(f"dpkit: error: {exc}", file=sys.stderr)
        return 2
    return 2  # pragma: no cover - argparse rejects unknown commands


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
