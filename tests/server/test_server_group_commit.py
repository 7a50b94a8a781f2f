"""Group commit: one transaction per batch, refusals fail alone, other failures roll back."""

from __future__ import annotations

import sqlite3
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

from dpkit.errors import DataError, DPKitError


def _batch(
    sqlite_group: Callable[..., Any], one_batch: Callable[..., None], fail: dict[int, str]
) -> tuple[list[int], dict[int, str], Counter[int]]:
    """Run nine writes as one batch; ``fail[v]`` is "refuse" (before writing) or "break" (after
    its insert). Returns the stored values, each write's error and how often each work ran."""
    group, lock, path = sqlite_group(refusal=lambda e: isinstance(e, DPKitError))
    errors: dict[int, str] = {}
    runs: Counter[int] = Counter()

    def job(v: int) -> None:
        def work(c: Any) -> int:
            runs[v] += 1
            if fail.get(v) == "refuse":
                raise DataError(f"refused {v}")
            c.execute("INSERT INTO t VALUES (?)", (v,))
            if fail.get(v) == "break":
                raise ValueError(f"broke {v}")
            return v

        try:
            assert group.run(work) == v
        except (DataError, ValueError) as exc:
            errors[v] = str(exc)

    one_batch(group, lock, [threading.Thread(target=job, args=(v,)) for v in range(1, 10)], 9)
    check = sqlite3.connect(path)
    stored = sorted(r[0] for r in check.execute("SELECT v FROM t"))
    check.close()
    return stored, errors, runs


def test_refusals_fail_alone_in_one_transaction(
    sqlite_group: Callable[..., Any], one_batch: Callable[..., None]
) -> None:
    stored, errors, runs = _batch(sqlite_group, one_batch, {3: "refuse", 7: "refuse"})
    assert stored == [1, 2, 4, 5, 6, 8, 9]
    assert errors == {3: "refused 3", 7: "refused 7"}
    assert set(runs.values()) == {1}  # one pass: the batch was not split


def test_a_failure_after_writing_rolls_back_and_splits_the_batch(
    sqlite_group: Callable[..., Any], one_batch: Callable[..., None]
) -> None:
    stored, errors, runs = _batch(sqlite_group, one_batch, {2: "refuse", 5: "break"})
    assert stored == [1, 3, 4, 6, 7, 8, 9]  # 5's insert was rolled back, nobody else's lost
    assert errors == {2: "refused 2", 5: "broke 5"}
    # The batch ran until 5 broke (writes queued after it had not run yet), then every write
    # again alone.
    assert runs[5] == 2 and all(1 <= r <= 2 for r in runs.values()) and len(runs) == 9
