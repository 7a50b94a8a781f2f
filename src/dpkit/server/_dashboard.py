"""The web dashboard: one server-rendered page, no JavaScript, every value HTML-escaped.

The admin sees datasets (total and spent budget, and spent over time), principals, budgets, the
latest charges and the refused queries; an analyst sees the same for their own budgets and
queries. Error bars are drawn in SVG from the released value and interval only (post-processing,
no data), on one axis per query (dataset, statistic, column) so that answers compare; a group-by
answer is a table with an error bar per group.
"""

from __future__ import annotations

import html
import math
import time
from typing import TYPE_CHECKING, Any

from dpkit.server._auth import Principal
from dpkit.server._dashboard_charts import budget_over_time, rows_table, shared_axes

if TYPE_CHECKING:
    from dpkit.server._service import Curator

__all__ = ["dashboard_page"]

_CSS = """
body{font-family:sans-serif;margin:24px;color:#222;background:#fafafa}
h1{font-size:22px}h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ccc}
table{border-collapse:collapse;background:#fff}td,th{border:1px solid #ddd;padding:4px 8px;
font-size:13px;text-align:left}th{background:#eef}.bar{width:160px;height:12px;background:#ddd;
display:inline-block}.bar span{display:block;height:12px;background:#2a7ae2}
.released{color:#176b2c}.reserved,.failed,.refused{color:#a33}.muted{color:#777;font-size:12px}
table.rows td,table.rows th{font-size:12px;padding:2px 6px}
"""


def _e(v: object) -> str:
    return html.escape(str(v), quote=True)


def _num(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, list):
        shown = ", ".join(_num(t) for t in v[:6])
        return f"[{shown}{', …' if len(v) > 6 else ''}]"
    if isinstance(v, dict):  # a group-by or synthetic row, a local estimate: shortened too
        shown = ", ".join(f"{k}: {_num(t)}" for k, t in list(v.items())[:6])
        return f"{{{shown}{', …' if len(v) > 6 else ''}}}"
    return "–" if v is None else str(v)


def _bar(spent: float, total: float) -> str:
    frac = 0.0 if total <= 0 else min(1.0, spent / total)
    return f'<span class="bar"><span style="width:{100 * frac:.1f}%"></span></span>'


def _table(head: list[str], rows: list[list[str]]) -> str:
    th = "".join(f"<th>{_e(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><tr>{th}</tr>{body or '<tr><td colspan=99>none</td></tr>'}</table>"


def error_bar(
    value: Any, ci: Any, width: int = 220, axis: tuple[float, float] | None = None
) -> str:
    """An SVG error bar: the interval as a line with caps, the value as a dot; drawn on
    ``axis`` (shared by the answers to one query) when given, else on its own span."""
    if not isinstance(value, int | float) or not isinstance(ci, list) or len(ci) != 2:
        return '<span class="muted">no interval</span>'
    if not all(isinstance(t, int | float) for t in ci):
        return '<span class="muted">no interval</span>'
    lo, hi = float(ci[0]), float(ci[1])
    if not all(isinstance(t, int | float) and math.isfinite(t) for t in (lo, hi, value)):
        return '<span class="muted">no interval</span>'
    a, b = min(lo, float(value)), max(hi, float(value))
    pad = (b - a) * 0.25 or 1.0
    a, b = a - pad, b + pad
    if axis is not None and axis[0] <= a + pad and b - pad <= axis[1] and axis[0] < axis[1]:
        a, b = axis

    def x(t: float) -> float:
        return 10 + (width - 20) * (t - a) / (b - a)

    return (
        f'<svg width="{width}" height="22" role="img" aria-label="error bar" '
        f'data-axis="{a:.6g},{b:.6g}">'
        f'<line x1="{x(lo):.1f}" y1="11" x2="{x(hi):.1f}" y2="11" stroke="#2a7ae2" '
        'stroke-width="2"/>'
        f'<line x1="{x(lo):.1f}" y1="5" x2="{x(lo):.1f}" y2="17" stroke="#2a7ae2" '
        'stroke-width="2"/>'
        f'<line x1="{x(hi):.1f}" y1="5" x2="{x(hi):.1f}" y2="17" stroke="#2a7ae2" '
        'stroke-width="2"/>'
        f'<circle cx="{x(value):.1f}" cy="11" r="4" fill="#d62728"/></svg>'
    )


def _budget_rows(budgets: list[dict[str, Any]], with_name: bool) -> list[list[str]]:
    rows = []
    for b in budgets:
        row = [_e(b["name"])] if with_name else []
        if "rho" in b:  # a budget in zCDP: its amounts are ρ (dpkit.server._rho)
            row += [
                _e(b["dataset"]),
                f"ρ {b['rho']:.4g}",
                f"ρ {b['spent_rho']:.4g}",
                f"ρ {b['remaining_rho']:.4g}",
                "",
                _bar(b["spent_rho"], b["rho"]),
            ]
            rows.append(row)
            continue
        row += [
            _e(b["dataset"]),
            f"{b['epsilon']:.4g}",
            f"{b['spent_epsilon']:.4g}",
            f"{b['remaining_epsilon']:.4g}",
            f"{b['delta']:.3g}",
            _bar(b["spent_epsilon"], b["epsilon"]),
        ]
        rows.append(row)
    return rows


def _what(req: dict[str, Any]) -> str:
    return str(req.get("column") or ",".join(map(str, req.get("columns", []))) or "")


def _key(c: Any) -> tuple[str, str, str]:
    return (str(c.dataset), str(c.request.get("query")), _what(c.request))


def _charge_rows(charges: list[Any], names: dict[str, str] | None) -> list[list[str]]:
    """One row per charge; ``names`` (id -> name) adds the analyst column."""
    axes = shared_axes((_key(c), (c.result or {}).get("value"), (c.result or {}).get("ci"))
                       for c in charges)  # fmt: skip
    rows = []
    for c in charges:
        res = c.result or {}
        value = res.get("value")
        row = [time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(c.created))]
        if names is not None:
            row += [f'<span title="{_e(c.analyst)}">{_e(names.get(c.analyst, c.analyst))}</span>']
        table = rows_table(value, error_bar) if isinstance(value, list) else ""
        row += [
            _e(c.dataset),
            _e(c.request.get("query")),
            _e(_what(c.request)),
            f"{c.epsilon:.4g}",
            f'<span class="{_e(c.status)}">{_e(c.status)}</span>',
            table or _e(_num(value)),
            "" if table else _e(_num(res.get("ci"))),
            "" if table else error_bar(value, res.get("ci"), axis=axes.get(_key(c))),
        ]
        rows.append(row)
    return rows


def _charts(
    charges: list[Any], owners: dict[Any, tuple[str, dict[str, float]]], key_of: Any
) -> str:
    """Spending over time, one chart per resource (ε, δ, ρ) that anything was spent of.

    ``owners``: who pays (a dataset's total, or an analyst's budget on a dataset) -> its label
    and its totals by unit (ε and δ, or ρ for a budget in zCDP); ``key_of(charge)`` the owner
    that paid it. A budget in ρ is drawn with what it was charged in ρ."""
    series: dict[str, dict[str, list[tuple[float, float]]]] = {u: {} for u in _UNITS}
    totals: dict[str, dict[str, float]] = {u: {} for u in _UNITS}
    for label, tot in owners.values():
        for u, t in tot.items():
            totals[u][label] = t
    for c in charges:
        own = owners.get(key_of(c))
        if c.status == "refunded" or own is None:
            continue
        label, tot = own
        paid = {"ε": c.epsilon, "δ": c.delta, "ρ": c.rho or 0.0}
        for u in tot:
            if paid[u] > 0:
                series[u].setdefault(label, []).append((float(c.created), float(paid[u])))
    charts = [
        budget_over_time(series[u], totals[u], height=170, unit=u) for u in _UNITS if series[u]
    ]
    return "".join(charts) or '<p class="muted">nothing spent yet</p>'


def _units_of(row: dict[str, Any], eps: str, dlt: str, rho: str) -> dict[str, float]:
    """A budget's totals by unit: ρ for a budget in zCDP, else ε and δ."""
    if rho in row:
        return {"ρ": float(row[rho])}
    return {"ε": float(row[eps]), "δ": float(row[dlt])}


_UNITS = ("ε", "δ", "ρ")
_REFUSALS = ("BudgetExceededError", "PrivacyParameterError", "DataError", "NotFoundError")


def _refused_rows(audit: list[dict[str, Any]], names: dict[str, str] | None) -> list[list[str]]:
    """Queries the service refused (over budget, bad parameters or input): nothing was charged."""
    rows = []
    for a in audit:
        if not a.get("query") or str(a.get("outcome") or "") not in _REFUSALS:
            continue
        row = [time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(a["ts"]))]
        if names is not None:
            who = str(a.get("principal") or "")
            row += [f'<span title="{_e(who)}">{_e(names.get(who, who or "–"))}</span>']
        row += [_e(a.get("dataset") or "–"), _e(a["query"]),
                f'<span class="refused">{_e(a["outcome"])}</span>']  # fmt: skip
        rows.append(row)
    return rows


def dashboard_page(curator: Curator, who: Principal) -> str:
    """The dashboard HTML for ``who`` (admin: everything; analyst: their own)."""
    led = curator.ledger
    parts = [f"<h1>dpkit curator — {_e(who.name)} ({_e(who.role)})</h1>"]
    ch_head = ["time (UTC)", "dataset", "query", "column(s)", "ε", "status", "value",
               "interval", "error bar"]  # fmt: skip
    b_head = ["dataset", "budget (ε or ρ)", "spent", "left", "δ budget", "used"]
    r_head = ["time (UTC)", "dataset", "query", "refused with"]
    if who.role == "admin":
        names = {str(p["id"]): str(p["name"]) for p in led.principals()}
        ds_rows = [
            [_e(d["name"]), _e(", ".join(c["name"] for c in d["schema"]["columns"])),
             f"ρ {d['total_rho']:.4g}", f"ρ {d['spent_rho']:.4g}",
             _bar(d["spent_rho"], d["total_rho"])]
            if "total_rho" in d else
            [_e(d["name"]), _e(", ".join(c["name"] for c in d["schema"]["columns"])),
             f"{d['total_epsilon']:.4g}", f"{d['spent_epsilon']:.4g}",
             _bar(d["spent_epsilon"], d["total_epsilon"])]
            for d in led.datasets()
        ]  # fmt: skip
        parts.append("<h2>Datasets</h2>" + _table(
            ["name", "columns", "total (ε or ρ)", "spent", "used"], ds_rows))  # fmt: skip
        charges = led.charges(None, 10_000)
        totals = {
            str(d["name"]): (
                str(d["name"]),
                _units_of(d, "total_epsilon", "total_delta", "total_rho"),
            )
            for d in led.datasets()
        }
        parts.append("<h2>Budget spent over time</h2>"
                     + _charts(charges, totals, lambda c: str(c.dataset)))  # fmt: skip
        owners = {
            (str(b["analyst"]), str(b["dataset"])): (
                f"{b['name']} · {b['dataset']}",
                _units_of(b, "epsilon", "delta", "rho"),
            )
            for b in led.budgets()
        }
        by_budget = _charts(charges, owners, lambda c: (str(c.analyst), str(c.dataset)))
        parts.append("<h2>Analysts' budgets spent over time</h2>" + by_budget)
        people = [[_e(p["id"]), _e(p["name"]), _e(p["role"])] for p in led.principals()]
        parts.append("<h2>Analysts</h2>" + _table(["id", "name", "role"], people))
        parts.append("<h2>Budgets</h2>" + _table(["analyst", *b_head],
                                                  _budget_rows(led.budgets(), True)))  # fmt: skip
        rows = _charge_rows(led.charges(None, 50), names)
        ch_head.insert(1, "analyst")
        parts.append("<h2>Ledger (latest 50 charges)</h2>" + _table(ch_head, rows))
        refused = _refused_rows(led.audit(None, 500), names)
        parts.append("<h2>Refused queries (nothing charged)</h2>"
                     + _table(["time (UTC)", "analyst", *r_head[1:]], refused[:50]))  # fmt: skip
    else:
        budgets = led.budgets(who.id)
        mine = _budget_rows(budgets, False)
        parts.append("<h2>Your budgets</h2>" + _table(b_head, mine))
        mine_by: dict[Any, tuple[str, dict[str, float]]] = {
            str(b["dataset"]): (str(b["dataset"]), _units_of(b, "epsilon", "delta", "rho"))
            for b in budgets
        }
        spent = _charts(led.charges(who.id, 10_000), mine_by, lambda c: str(c.dataset))
        parts.append("<h2>Your budget spent over time</h2>" + spent)
        rows = _charge_rows(led.charges(who.id, 50), None)
        parts.append("<h2>Your answers (95% noise intervals unless asked otherwise)</h2>"
                     + _table(ch_head, rows))  # fmt: skip
        refused = _refused_rows(led.audit(who.id, 500), None)
        parts.append("<h2>Your refused queries (nothing charged)</h2>"
                     + _table(r_head, refused[:50]))  # fmt: skip
    return (
        '<!doctype html><html><head><meta charset="utf-8"><title>dpkit curator</title>'
        f"<style>{_CSS}</style></head><body>{''.join(parts)}</body></html>"
    )
