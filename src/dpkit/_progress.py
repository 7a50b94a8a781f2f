"""One progress API for every layer: a bar that long calls report to, off unless asked for.

Long calls (an audit, a synthesizer's fit) take ``progress=``, a callable
``progress(done, total)`` called as work completes; it is ``None`` by default, so a library call
prints nothing. The ``dpkit`` command line passes a :class:`ProgressBar` (on by default there,
``--quiet`` turns it off). The bar draws with tqdm when tqdm is installed (``pip install
'dpkit[progress]'``) and the stream is a terminal, and as one plain line redrawn in place
otherwise (logs, pipes, captured output).

This module imports nothing from dpkit, so every layer may import it.

>>> import io
>>> out = io.StringIO()
>>> with ProgressBar(4, stream=out, width=8, backend="text") as bar:
...     bar(2, 4)                       # progress(done, total), as long calls report it
...     bar.advance(2, "last step")
>>> out.getvalue().splitlines()[-1].split()[:2]
['[########]', '100.0%']
>>> progress_bar(10, enabled=False) is None   # off: the call gets progress=None
True
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any, TextIO

__all__ = ["Progress", "ProgressBar", "progress_bar"]

Progress = Callable[[int, int], None]
"""``progress(done, total)``: what long calls accept as ``progress=``."""


def _tqdm_class() -> Any:
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm


class ProgressBar:
    """A progress bar over ``total`` units of work, drawn on a stream (stderr by default).

    Parameters
    ----------
    total : int
        Units of work (runs, steps); at least 1.
    stream : file-like, optional
        Where to draw (default ``sys.stderr``).
    width : int
        Width of the plain bar in characters.
    label : str
        What is running, shown after the bar.
    backend : {"auto", "tqdm", "text"}
        ``"auto"``: tqdm when it is installed and ``stream`` is a terminal, else the plain line.

    Notes
    -----
    Call the bar as ``bar(done, total)`` (it is a ``progress`` callback) or
    ``bar.advance(k, label)``; ``close()`` (or leaving a ``with`` block) ends the line. The bar
    shows only counts of work and elapsed time, never data.
    """

    def __init__(
        self,
        total: int,
        *,
        stream: TextIO | None = None,
        width: int = 30,
        label: str = "",
        backend: str = "auto",
    ) -> None:
        if backend not in ("auto", "tqdm", "text"):
            raise ValueError("backend must be 'auto', 'tqdm' or 'text'.")
        self.total = max(1, int(total))
        self.done = 0
        self.stream = sys.stderr if stream is None else stream
        self.width = width
        self.label = label
        self._last = -1
        self._start = time.monotonic()
        self._tqdm: Any = None
        if backend != "text":
            tqdm = _tqdm_class()
            if tqdm is None and backend == "tqdm":
                raise ImportError("backend='tqdm' needs tqdm: pip install 'dpkit[progress]'")
            isatty = getattr(self.stream, "isatty", None)
            if tqdm is not None and (backend == "tqdm" or (callable(isatty) and isatty())):
                self._tqdm = tqdm(total=self.total, file=self.stream, desc=label or None)

    def __call__(self, done: int, total: int) -> None:
        """Record that ``done`` of ``total`` units are complete (a ``progress`` callback)."""
        if total != self.total and total > 0:
            self.total = int(total)
            if self._tqdm is not None:
                self._tqdm.total = self.total
        self.advance(done - self.done)

    def advance(self, k: int, label: str | None = None) -> None:
        """Record ``k`` more units done (and optionally what is running) and redraw if needed."""
        k = max(0, min(self.total - self.done, k))
        self.done += k
        if label is not None:
            self.label = label
        if self._tqdm is not None:
            if label is not None:
                self._tqdm.set_description_str(label[:40], refresh=False)
            self._tqdm.update(k)
            return
        permille = 1000 * self.done // self.total
        if permille != self._last:
            self._last = permille
            filled = self.width * self.done // self.total
            bar = "#" * filled + "." * (self.width - filled)
            secs = time.monotonic() - self._start
            self.stream.write(f"\r[{bar}] {permille / 10:5.1f}% {secs:5.0f}s {self.label[:40]:<40}")
            self.stream.flush()

    def close(self) -> None:
        """Finish the line."""
        if self._tqdm is not None:
            self._tqdm.close()
            return
        self.stream.write("\n")
        self.stream.flush()

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def progress_bar(
    total: int, *, enabled: bool = True, label: str = "", stream: TextIO | None = None
) -> ProgressBar | None:
    """A :class:`ProgressBar` to pass as ``progress=``, or ``None`` when not ``enabled``.

    Examples
    --------
    >>> progress_bar(3, enabled=False) is None
    True
    """
    return ProgressBar(total, stream=stream, label=label) if enabled else None
