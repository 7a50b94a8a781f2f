"""What the dashboard shows: analysts by name, group-by answers as tables, error bars on one axis
per query, refused queries, the budget spent over time (one chart per resource spent: ε, δ, and
ρ for budgets in zCDP; per dataset and per analyst) — in the HTML and, laid out, in headless
Chromium (where each part lands on the page, not its pixels)."""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

import dpkit.frame as dpf
from dpkit.client import Curator
from dpkit.errors import BudgetExceededError

RED = np.array([0xD6, 0x27, 0x28])  # released values
GREY = np.array([0x88, 0x88, 0x88])  # the axes of the budget plot


@pytest.fixture(scope="module")
def hopper(server: Any) -> tuple[str, str, str]:
    aid, key = server.analyst("hopper", 2.0)
    with Curator(server.url, key) as c:
        c.mean("survey", "age", epsilon=0.3)
        c.mean("survey", "age", epsilon=0.3)
        c.group_by("survey", "sex", dpf.count(), dpf.mean("income", bounds=(0, 200)),
                   epsilon=0.4)  # fmt: skip
        with pytest.raises(BudgetExceededError):
            c.mean("survey", "income", epsilon=5.0)
    # one analyst who spends δ, one whose budget is in ρ (an ε-DP query costs it ε²/2)
    _, gkey = server.analyst("grace", 1.0, 1e-5)
    with Curator(server.url, gkey) as c:
        c.var("survey", "age", epsilon=0.2, delta=1e-6)
    n = server.admin("POST", "/v1/admin/analysts", {"name": "noether"})
    server.admin("PUT", "/v1/admin/budgets", {"analyst": n["id"], "dataset": "survey", "rho": 0.5})
    with Curator(server.url, n["key"]) as c:
        c.count("survey", epsilon=0.3)
    return aid, key, n["key"]


def _charts(page: str) -> dict[str, str]:
    """Each budget chart's unit -> its SVG, in a section of the page."""
    return {
        m.group(1): m.group(0)
        for m in re.finditer(r'<svg[^>]*aria-label="budget over time" data-unit="(.)".*?</svg>',
                             page, flags=re.S)
    }  # fmt: skip


def _page(server: Any, key: str, must_show: str) -> str:
    """The dashboard's HTML, once it shows ``must_show`` (audit rows are written in batches)."""
    for _ in range(100):
        with httpx.Client(base_url=server.url, follow_redirects=True) as http:
            link = http.post("/v1/dashboard/token", headers={"X-API-Key": key}).json()["url"]
            page = http.get(link).text
        if must_show in page:
            return page
        time.sleep(0.2)
    raise AssertionError(f"the dashboard never showed {must_show!r}")


def test_admin_page_names_analysts_and_lists_refusals(server: Any, hopper: Any) -> None:
    aid, _, _ = hopper
    page = _page(server, server.admin_key, "BudgetExceededError")
    assert f'<span title="{aid}">hopper</span>' in page  # by name, the id on hover
    refused = page.split("Refused queries", 1)[1]
    assert "hopper" in refused and "BudgetExceededError" in refused
    assert 'aria-label="budget over time"' in page and 'data-series="survey"' in page
    # per analyst, each resource in its own chart: ε (hopper, grace), δ (grace), ρ (noether)
    mine = page.split("Analysts' budgets spent over time", 1)[1].split("<h2>", 1)[0]
    charts = _charts(mine)
    assert set(charts) == {"ε", "δ", "ρ"}
    assert 'data-series="hopper · survey"' in charts["ε"]
    assert 'data-series="grace · survey"' in charts["δ"] and "hopper" not in charts["δ"]
    assert 'data-series="noether · survey"' in charts["ρ"] and "ρ 0.045 spent" in charts["ρ"]
    assert "noether" not in charts["ε"]  # a ρ budget is drawn in ρ only
    # the group-by answer is a table, one row per group, with its own error bars
    table = re.search(r'<table class="rows">(.*?)</table>', page, flags=re.S)
    assert table is not None
    assert "<td>f</td>" in table.group(1) and "<td>m</td>" in table.group(1)
    assert table.group(1).count('aria-label="error bar"') >= 2


def test_answers_to_one_query_share_an_axis(server: Any, hopper: Any) -> None:
    page = _page(server, hopper[1], "BudgetExceededError")
    ledger = page.split("Your answers", 1)[1].split("Your refused", 1)[0]
    rows = [r for r in ledger.split("<tr>") if "<td>mean</td>" in r and "<td>age</td>" in r]
    axes = {re.search(r'data-axis="([^"]+)"', r).group(1) for r in rows}  # type: ignore[union-attr]
    assert len(rows) == 2 and len(axes) == 1  # two answers, one scale


def test_an_analyst_with_a_rho_budget_sees_it_spent_in_rho(server: Any, hopper: Any) -> None:
    page = _page(server, hopper[2], "Your budget spent over time")
    charts = _charts(page)
    assert set(charts) == {"ρ"} and 'data-series="survey"' in charts["ρ"]
    assert "ρ 0.5" in charts["ρ"] and "ρ 0.045 spent" in charts["ρ"]  # its budget, its spending


def _chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.fail("chromium is required (make system-deps installs it)")
    return exe


def _where(img: Any, colour: Any) -> tuple[np.ndarray, np.ndarray]:
    ys, xs = np.nonzero(np.abs(img - colour).sum(axis=2) < 30)
    return ys, xs


def test_admin_layout_in_a_browser(server: Any, hopper: Any, tmp_path: Path) -> None:
    from PIL import Image

    _page(server, server.admin_key, "BudgetExceededError")
    link = httpx.post(
        server.url + "/v1/dashboard/token", headers={"X-API-Key": server.admin_key}
    ).json()["url"]
    out = tmp_path / "admin.png"
    args = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
            f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1280,3600",
            f"--screenshot={out}", server.url + link]  # fmt: skip
    r = subprocess.run(args, capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stderr[-2000:]
    with Image.open(out) as im:
        img = np.asarray(im.convert("RGB")).astype(int)
    width = img.shape[1]
    # The budget plot's y axis: the longest vertical grey line (text is grey only at its
    # anti-aliased edges), in the left half, before the ledger.
    gy, gx = _where(img, GREY)
    axis_x = int(np.bincount(gx).argmax())
    column = np.sort(gy[gx == axis_x])
    runs = np.split(column, np.nonzero(np.diff(column) > 1)[0] + 1)
    line = max(runs, key=len)
    assert line.size > 100 and axis_x < width // 2
    # one chart per resource spent, stacked on one left edge: the datasets' ε and δ, then the
    # analysts' ε, δ and ρ
    # (a dashed total line crossing an axis breaks it for a pixel or two: joined again)
    joined = np.split(column, np.nonzero(np.diff(column) > 4)[0] + 1)
    axes = [r for r in joined if r.size > 100]
    assert len(axes) == 5
    plot_top, plot_bottom = int(axes[0][0]), int(axes[-1][-1])
    # The value dots of the error bars are in the ledger, below the plot, in its last columns
    # (each answer's own bar, or its group-by table's bars).
    ry, rx = _where(img, RED)
    assert ry.size > 5 * 20  # three answers' dots and the group-by table's
    assert int(ry.min()) > plot_bottom > plot_top
    assert int(np.median(rx)) > width // 3


def test_group_by_tables_escape_and_cap_their_rows() -> None:
    from dpkit.server._dashboard import error_bar
    from dpkit.server._dashboard_charts import MAX_ROWS, rows_table

    rows = [{"k<b>": "<script>x</script>", "n": float(i), "n_lo": i - 1.0, "n_hi": i + 1.0}
            for i in range(MAX_ROWS + 3)]  # fmt: skip
    html = rows_table(rows, error_bar)
    assert "<script>" not in html and "&lt;script&gt;" in html and "k&lt;b&gt;" in html
    assert html.count('aria-label="error bar"') == MAX_ROWS and "and 3 more rows" in html
    assert len(set(re.findall(r'data-axis="([^"]+)"', html))) == 1  # one axis for the groups
