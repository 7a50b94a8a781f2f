"""Structural timing checks: the Python lines a call runs, to compare neighbouring inputs.

Wall-clock comparisons on a shared machine are noisy; a data-dependent branch is not. Two calls
that run the same lines of a module, the same number of times and in the same order (and consume
the same random words), do the same work up to NumPy's vectorised kernels, whose cost does not
depend on the values they process.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import FrameType
from typing import Any


def lines_run(call: Callable[[], Any], module_file: str) -> list[int]:
    """The sequence of line numbers of ``module_file`` executed by ``call()``."""
    seen: list[int] = []

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        if frame.f_code.co_filename != module_file:
            return None  # do not trace inside other modules
        if event == "line":
            seen.append(frame.f_lineno)
        return tracer

    old = sys.gettrace()
    sys.settrace(tracer)
    try:
        call()
    finally:
        sys.settrace(old)
    return seen
