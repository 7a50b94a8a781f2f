"""The web dashboard: one server-rendered page, no JavaScript, every value HTML-escaped.

The admin sees datasets (total and spent budget), principals, budgets and the latest charges; an
analyst sees their remaining budgets and past answers with their error bars (drawn in SVG from the
released value and interval only: post-processing, no data).
"""

from __future__ import annotations

import html
import math
import time
from typing import TYPE_CHECKING, Any

from dpkit.server._auth import Principal

if TYPE_CHECKING:
    from dpkit.server._service import Curator

__all__ = ["dashboard_page"]

_CSS = """
body{font-family:sans-serif;margin:24px;color:#222;background:#fafafa}
h1{font-size:22px}h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ccc}
table{border-collapse:collapse;background:#fff}td,th{border:1px solid #ddd;padding:4px 8px;
font-size:13px;text-align:left}th{background:#eef}.bar{width:160px;height:12px;background:#ddd;
display:inline-block}.bar span{display:block;height:12px;background:#2a7ae2}
.released{color:#176b2c}.reserved,.failed{color:#a33}.muted{color:#777;font-size:12px}
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


def error_bar(value: Any, ci: Any, width: int = 220) -> str:
    """An SVG error bar: the interval as a line with caps, the value as a dot."""
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

    def x(t: float) -> float:
        return 10 + (width - 20) * (t - a) / (b - a)

    return (
        f'<svg width="{width}" height="22" role="img" aria-label="error bar">'
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


def _charge_rows(charges: list[Any], with_who: bool) -> list[list[str]]:
    rows = []
    for c in charges:
        res = c.result or {}
        req = c.request
        what = req.get("column") or ",".join(map(str, req.get("columns", []))) or ""
        row = [time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(c.created))]
        row += [_e(c.analyst)] if with_who else []
        row += [
            _e(c.dataset),
            _e(req.get("query")),
            _e(what),
            f"{c.epsilon:.4g}",
            f'<span class="{_e(c.status)}">{_e(c.status)}</span>',
            _e(_num(res.get("value"))),
            _e(_num(res.get("ci"))),
            error_bar(res.get("value"), res.get("ci")),
        ]
        rows.append(row)
    return rows


def dashboard_page(curator: Curator, who: Principal) -> str:
    """The dashboard HTML for ``who`` (admin: everything; analyst: their own)."""
    led = curator.ledger
    parts = [f"<h1>dpkit curator — {_e(who.name)} ({_e(who.role)})</h1>"]
    ch_head = ["time (UTC)", "dataset", "query", "column(s)", "ε", "status", "value",
               "interval", "error bar"]  # fmt: skip
    b_head = ["dataset", "ε budget", "ε spent", "ε left", "δ budget", "used"]
    if who.role == "admin":
        ds_rows = [
            [_e(d["name"]), _e(", ".join(c["name"] for c in d["schema"]["columns"])),
             f"{d['total_epsilon']:.4g}", f"{d['spent_epsilon']:.4g}",
             _bar(d["spent_epsilon"], d["total_epsilon"])]
            for d in led.datasets()
        ]  # fmt: skip
        parts.append("<h2>Datasets</h2>" + _table(
            ["name", "columns", "total ε", "spent ε", "used"], ds_rows))  # fmt: skip
        people = [[_e(p["id"]), _e(p["name"]), _e(p["role"])] for p in led.principals()]
        parts.append("<h2>Analysts</h2>" + _table(["id", "name", "role"], people))
        parts.append("<h2>Budgets</h2>" + _table(["analyst", *b_head],
                                                  _budget_rows(led.budgets(), True)))  # fmt: skip
        rows = _charge_rows(led.charges(None, 50), True)
        ch_head.insert(1, "analyst")
        parts.append("<h2>Ledger (latest 50 charges)</h2>" + _table(ch_head, rows))
    else:
        mine = _budget_rows(led.budgets(who.id), False)
        parts.append("<h2>Your budgets</h2>" + _table(b_head, mine))
        rows = _charge_rows(led.charges(who.id, 50), False)
        parts.append("<h2>Your answers (95% noise intervals unless asked otherwise)</h2>"
                     + _table(ch_head, rows))  # fmt: skip
    return (
        '<!doctype html><html><head><meta charset="utf-8"><title>dpkit curator</title>'
        f"<style>{_CSS}</style></head><body>{''.join(parts)}</body></html>"
    )
