"""Small HTML tables for notebooks' rich display (``_repr_html_``), escaped and dependency-free.

Everything shown is what the object's repr already shows (released values, public parameters,
costs in user units): rich display changes the layout, never what is revealed.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence

__all__ = ["table"]


def table(
    title: str | None, rows: Iterable[Sequence[object]], *, header: Sequence[str] | None = None
) -> str:
    """An HTML table with an optional caption and header row; every cell is escaped.

    >>> table("Budget", [("spent", "PureDP(epsilon=0.5)")])
    '<table><caption>Budget</caption><tr><th>spent</th><td>PureDP(epsilon=0.5)</td></tr></table>'
    """
    out = ["<table>"]
    if title:
        out.append(f"<caption>{html.escape(title)}</caption>")
    if header:
        out.append("<tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in header) + "</tr>")
    for row in rows:
        cells = [html.escape(str(c)) for c in row]
        if header is None and len(cells) == 2:  # a key/value row: the key as a row header
            out.append(f"<tr><th>{cells[0]}</th><td>{cells[1]}</td></tr>")
        else:
            out.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    out.append("</table>")
    return "".join(out)
