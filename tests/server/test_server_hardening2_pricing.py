"""Pricing a query never runs on the service's event loop unless its price is remembered, and a
request's pricing is bounded in time (503, nothing charged).

An analyst with no budget could send free dry runs of means with δ > 0, each with a new ε: the
noise calibration of each (about a second) ran on the event loop, and every other request of
the service, a no-op included, waited behind it. The assertions here are structural (on which
thread pricing runs, and whether the loop keeps turning while a pricing is held), not timed.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

import dpkit.server._queries as queries
import dpkit.stats as st
from dpkit.server import ServerConfig
from dpkit.server._auth import Principal
from dpkit.server._registry import Answer, Meter, Prepared
from dpkit.server._schema import DatasetSchema, Table
from dpkit.server._service import Curator

pytestmark = pytest.mark.filterwarnings("ignore::dpkit.errors.InsecureRandomnessWarning")


def _on_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _curator(tmp_path: Path, **kw: Any) -> Curator:
    (tmp_path / "imp").mkdir()
    (tmp_path / "imp" / "t.csv").write_text("x\n" + "\n".join(str(i % 10) for i in range(200)))
    cfg = ServerConfig(ledger=str(tmp_path / "l.db"), data_dir=tmp_path / "data",
                       import_dir=tmp_path / "imp", dummy_rows=50, **kw)  # fmt: skip
    return Curator(cfg)


def _started(cur: Curator) -> Principal:
    cur.start()
    cols = [{"name": "x", "type": "float", "bounds": [0, 10]}]
    cur.register_dataset({"name": "t", "source": "t.csv", "total_epsilon": 100.0, "columns": cols})
    a = cur.add_analyst("ana")  # no budget: dry runs only
    return Principal(a["id"], "ana", "analyst")


def test_uncached_pricing_of_inline_queries_runs_off_the_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calibrations: list[bool] = []
    real = queries.mean_steps

    def mean_steps(*a: Any, **kw: Any) -> Any:  # the expensive part of a mean's price (δ > 0)
        calibrations.append(_on_loop())
        return real(*a, **kw)

    monkeypatch.setattr(queries, "mean_steps", mean_steps)
    cur = _curator(tmp_path)
    who = _started(cur)
    bodies = [{"dataset": "t", "query": "mean", "column": "x", "epsilon": 0.5 + i / 100,
               "delta": 1e-6, "dry_run": True} for i in range(4)]  # fmt: skip
    assert all(cur.answers_inline(b) for b in bodies)

    async def flood() -> list[Any]:
        out = await asyncio.gather(*(cur.query_async(who, dict(b)) for b in bodies))
        again = await cur.query_async(who, dict(bodies[0]))  # remembered: a lookup on the loop
        return [*out, again]

    out = asyncio.run(flood())
    assert [o["epsilon"] for o in out] == [b["epsilon"] for b in [*bodies, bodies[0]]]
    assert len(calibrations) == len(bodies), "each new price is calibrated once"
    assert not any(calibrations), "a price was calibrated on the event loop"
    assert cur.ledger.charges(who.id) == []  # dry runs: nothing charged
    cur.pricing.close()


def _held_entry(hold: threading.Event, started: threading.Event, freed: list[bool]) -> Any:
    """An inline query type whose pricing waits for ``hold`` (stands for an expensive one);
    ``freed`` records whether each wait ended because ``hold`` was set (not by its timeout)."""

    def prepare(params: Mapping[str, Any], schema: DatasetSchema) -> Prepared:
        eps = float(params["epsilon"])

        def compute(t: Table, rng: Any, meter: Meter) -> Answer:
            started.set()
            freed.append(hold.wait(10))
            rel = st.count(t.columns["x"], epsilon=eps, accountant=meter, rng=rng)
            return Answer(float(rel.value))

        return Prepared("held", eps, 0.0, compute)

    return prepare


def test_the_loop_keeps_turning_while_a_price_is_computed(tmp_path: Path) -> None:
    cur = _curator(tmp_path)
    hold, started, freed = threading.Event(), threading.Event(), []
    cur.registry.register("held", _held_entry(hold, started, freed), inline=True)
    who = _started(cur)
    body = {"dataset": "t", "query": "held", "epsilon": 1.0, "dry_run": True}

    async def other_requests() -> int:
        # what other requests do meanwhile: run on the loop while the pricing is held
        turns = 0
        while not started.is_set():
            await asyncio.sleep(0.001)
        for _ in range(20):
            await asyncio.sleep(0)
            turns += 1
        hold.set()  # only reached if the loop is free while the pricing runs
        return turns

    async def both() -> tuple[Any, int]:
        return await asyncio.gather(cur.query_async(who, body), other_requests())

    answer, turns = asyncio.run(both())
    assert answer["dry_run"] and turns == 20
    assert freed == [True], "the pricing held the event loop: nothing else ran meanwhile"
    cur.pricing.close()


def test_a_pricing_past_the_limit_is_refused_with_503_and_charges_nothing(tmp_path: Path) -> None:
    from dpkit.server._app import _STATUS
    from dpkit.server._pricing import PricingBusyError

    cur = _curator(tmp_path, max_pricing_seconds=0.2)
    hold, started = threading.Event(), threading.Event()
    cur.registry.register("held", _held_entry(hold, started, []), inline=True)
    who = _started(cur)
    cur.ledger.set_budget(who.id, "t", 5.0, 0.0)
    body = {"dataset": "t", "query": "held", "epsilon": 1.0}
    try:
        with pytest.raises(PricingBusyError, match="could not be priced") as err:
            asyncio.run(cur.query_async(who, dict(body)))
        assert "nothing was charged" in str(err.value)
        with pytest.raises(PricingBusyError):  # the thread path too
            cur.query(who, dict(body))
    finally:
        hold.set()
    assert dict(_STATUS)[PricingBusyError] == 503
    assert cur.ledger.charges(who.id) == []
    assert cur.ledger.budgets(who.id)[0]["spent_epsilon"] == 0.0
    cur.pricing.close()


def test_one_analyst_waits_in_their_own_queue(tmp_path: Path) -> None:
    from dpkit.server._pricing import PricingBusyError, PricingGate

    gate = PricingGate(limit=5.0, threads=2, max_queued=2)
    hold = threading.Event()
    futures = [gate.submit("flood", object(), lambda: hold.wait(30)) for _ in range(2)]
    with pytest.raises(PricingBusyError, match="too many"):
        gate.submit("flood", object(), lambda: True)
    assert gate.price("other", object(), lambda: 7) == 7  # not behind the flood
    hold.set()
    assert [f.result(30) for f in futures] == [True, True]
    gate.close()
