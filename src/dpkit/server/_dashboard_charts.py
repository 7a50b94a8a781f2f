"""The dashboard's pictures, drawn server-side in SVG from released values only (post-processing):
error bars on a shared axis, group-by answers as tables, the budget spent over time.

>>> axes = shared_axes([("mean", 10.0, [9.0, 11.0]), ("mean", 12.0, [11.5, 12.5])])
>>> axes["mean"]
(8.7, 12.8)
>>> 'aria-label="budget over time"' in budget_over_time({"survey": [(0.0, 0.5), (60.0, 1.0)]},
...                                                    {"survey": 3.0})
True
"""

from __future__ import annotations

import html
import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any

__all__ = ["budget_over_time", "interval_of", "rows_table", "shared_axes"]

_COLOURS = ("#2a7ae2", "#9467bd", "#2ca02c", "#ff7f0e", "#8c564b", "#e377c2")
_AXIS = 'stroke="#888" shape-rendering="crispEdges"'
MAX_ROWS = 12  # group-by rows shown per answer (the rest are counted)


def _e(v: object) -> str:
    return html.escape(str(v), quote=True)


def _finite(*ts: Any) -> bool:
    return all(isinstance(t, int | float) and not isinstance(t, bool) and math.isfinite(t)
               for t in ts)  # fmt: skip


def interval_of(value: Any, ci: Any) -> tuple[float, float, float] | None:
    """``(value, lo, hi)`` when the answer is one number with a two-sided finite interval."""
    if isinstance(ci, list | tuple) and len(ci) == 2 and _finite(value, *ci):
        return float(value), float(ci[0]), float(ci[1])
    return None


def shared_axes(
    answers: Iterable[tuple[Hashable, Any, Any]], pad: float = 0.1
) -> dict[Hashable, tuple[float, float]]:
    """One axis per key (dataset, query, column) covering every answer's interval and value, so
    that repeated answers to the same query are drawn to the same scale."""
    spans: dict[Hashable, list[float]] = {}
    for key, value, ci in answers:
        iv = interval_of(value, ci)
        if iv is None:
            continue
        lo, hi = min(iv), max(iv)
        if key in spans:
            spans[key] = [min(spans[key][0], lo), max(spans[key][1], hi)]
        else:
            spans[key] = [lo, hi]
    out = {}
    for key, (a, b) in spans.items():
        m = (b - a) * pad or max(abs(a) * pad, 1.0)
        out[key] = (round(a - m, 12), round(b + m, 12))
    return out


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return "–" if v is None else str(v)


def rows_table(rows: Sequence[Any], error_bar: Any) -> str:
    """A group-by answer as a table: its key and estimate columns, and for the first estimate
    with an interval (``x_lo``/``x_hi``) an error bar per group on one shared axis."""
    if not rows or not all(isinstance(r, Mapping) for r in rows):
        return ""
    cols = [str(k) for k in rows[0] if not str(k).endswith(("_lo", "_hi"))]
    with_ci = next((c for c in cols if f"{c}_lo" in rows[0] and f"{c}_hi" in rows[0]), None)
    shown = list(rows[:MAX_ROWS])
    axis = None
    if with_ci is not None:
        axes = shared_axes((0, r.get(with_ci), [r.get(f"{with_ci}_lo"), r.get(f"{with_ci}_hi")])
                           for r in shown)  # fmt: skip
        axis = axes.get(0)
    head = "".join(f"<th>{_e(c)}</th>" for c in cols)
    if with_ci is not None:
        head += f"<th>{_e(with_ci)}, 95% interval</th>"
    body = []
    for r in shown:
        cells = "".join(f"<td>{_e(_fmt(r.get(c)))}</td>" for c in cols)
        if with_ci is not None:
            ci = [r.get(f"{with_ci}_lo"), r.get(f"{with_ci}_hi")]
            cells += f"<td>{error_bar(r.get(with_ci), ci, width=160, axis=axis)}</td>"
        body.append(f"<tr>{cells}</tr>")
    more = len(rows) - len(shown)
    tail = f'<div class="muted">and {more} more rows</div>' if more > 0 else ""
    return f'<table class="rows"><tr>{head}</tr>{"".join(body)}</table>{tail}'


def budget_over_time(
    series: Mapping[str, Sequence[tuple[float, float]]],
    totals: Mapping[str, float],
    width: int = 640,
    height: int = 200,
    unit: str = "ε",
) -> str:
    """Cumulative spending of one resource (``unit``: ε, δ or ρ) against time, one step line
    per series (a dataset, or an analyst's budget on one), with each series' total as a dashed
    line. ``series``: ``label -> [(time, amount of one charge), ...]``."""
    pts = {k: sorted(v) for k, v in series.items() if v}
    if not pts:
        return '<p class="muted">nothing spent yet</p>'
    t0 = min(p[0][0] for p in pts.values())
    t1 = max(p[-1][0] for p in pts.values())
    t1 = t1 if t1 > t0 else t0 + 1.0
    top = max([*(sum(e for _, e in p) for p in pts.values()), *(totals.get(k, 0.0) for k in pts)])
    top = top if top > 0 else 1.0
    left, right, up, down = 48, 12, 10, 28

    def x(t: float) -> float:
        return left + (width - left - right) * (t - t0) / (t1 - t0)

    def y(e: float) -> float:
        return height - down - (height - up - down) * e / top

    parts = [
        f'<svg width="{width}" height="{height}" role="img" aria-label="budget over time" '
        f'data-unit="{_e(unit)}">',
        # crisp axes: a 1-px line drawn on a pixel boundary would be a blurred 2-px one
        f'<line x1="{left}" y1="{y(0):.1f}" x2="{width - right}" y2="{y(0):.1f}" {_AXIS}/>',
        f'<line x1="{left}" y1="{up}" x2="{left}" y2="{y(0):.1f}" {_AXIS}/>',
        f'<text x="4" y="{up + 10}" font-size="11">{_e(unit)} {top:.3g}</text>',
        f'<text x="4" y="{y(0):.1f}" font-size="11">0</text>',
        f'<text x="{left}" y="{height - 8}" font-size="11">time →</text>',
    ]
    for i, (label, p) in enumerate(pts.items()):
        colour = _COLOURS[i % len(_COLOURS)]
        path, total = [f"{x(t0):.1f},{y(0):.1f}"], 0.0
        for t, e in p:
            path.append(f"{x(t):.1f},{y(total):.1f}")
            total += e
            path.append(f"{x(t):.1f},{y(total):.1f}")
        path.append(f"{x(t1):.1f},{y(total):.1f}")
        parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" '
                     f'points="{" ".join(path)}" data-series="{_e(label)}"/>')  # fmt: skip
        if label in totals:
            yt = y(totals[label])
            parts.append(f'<line x1="{left}" y1="{yt:.1f}" x2="{width - right}" y2="{yt:.1f}" '
                         f'stroke="{colour}" stroke-dasharray="4 3"/>')  # fmt: skip
        parts.append(f'<text x="{width - right - 150}" y="{up + 14 * (i + 1)}" font-size="11" '
                     f'fill="{colour}">{_e(label)}: {unit} {total:.3g} spent</text>')  # fmt: skip
    parts.append("</svg>")
    return "".join(parts)
