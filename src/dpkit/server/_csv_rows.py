"""Which lines of a CSV file are records: what the service's reading has always skipped (blank
lines) and refused (a record with fewer or more fields than the header), found in NumPy.

Polars reads a blank line as a record of empty fields, and a short record as one padded with
empty fields, where the service skipped the first and refused the second: read as Polars does,
a file ending with a blank line would gain a row (of missing values, filled by the policy).
This scan finds the record boundaries itself: a line feed or a comma outside double quotes
(the quote state is the parity of the quotes before it; an escaped quote ``""`` counts twice,
so it keeps the state). It reads the file in blocks, in a bounded amount of memory.

A carriage return outside quotes that is not part of a ``\r\n`` line end (nor the file's last
byte) is refused: the service's reading took it for a line end, Polars keeps it in the field,
so ``1,a\r\r\n`` would store the text ``"a\r"`` (an undeclared category; an id numbered apart
from ``"a"``: one person split in two) where ``"a"`` was stored before.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt

from dpkit.errors import DataError

__all__ = ["csv_records"]

_BLOCK = 1 << 23  # 8 MiB of the file at a time: a few 64 MiB arrays at most
_QUOTE, _COMMA, _LF, _CR = 34, 44, 10, 13


def _refused() -> DataError:
    return DataError(
        "could not read the file: every line must have as many fields as the header (blank "
        "lines are skipped); check the file's quoting and line ends."
    )


def csv_records(path: Path) -> tuple[int, npt.NDArray[np.bool_]]:
    """The number of blank lines before the header, and for each line after it (in the order
    Polars returns its rows): whether it is a record (``False``: a blank line, to be skipped).
    Raises :class:`DataError` when a non-blank line has another number of fields than the
    header, or the file has no header."""
    fields: list[npt.NDArray[np.int64]] = []
    blank: list[npt.NDArray[np.bool_]] = []
    parity = 0  # quotes seen so far, mod 2
    commas = 0  # commas outside quotes since the last line end
    length = 0  # bytes since the last line end
    last_byte = -1
    open_cr = False  # the previous block ended with a carriage return outside quotes
    with open(path, "rb") as f:
        while block := f.read(_BLOCK):
            b = np.frombuffer(block, dtype=np.uint8)
            quotes = np.cumsum(b == _QUOTE)
            outside = ((quotes + parity) & 1) == 0
            parity = (parity + int(quotes[-1])) & 1
            if open_cr and b[0] != _LF:
                raise _refused()
            cr = np.flatnonzero((b == _CR) & outside)
            open_cr = bool(len(cr)) and int(cr[-1]) == len(b) - 1
            inner = cr[:-1] if open_cr else cr  # one at the block's end is checked with the next
            if bool(np.any(b[inner + 1] != _LF)):
                raise _refused()
            ends = np.flatnonzero((b == _LF) & outside)
            comma_count = np.cumsum((b == _COMMA) & outside)
            if len(ends):
                at_end = comma_count[ends]
                per_line = np.diff(at_end, prepend=0)
                per_line[0] += commas
                starts = np.concatenate(([0], ends[:-1] + 1))
                sizes = ends - starts
                sizes[0] += length
                # a blank line: nothing, or only a carriage return, before its line feed
                cr_only = (sizes == 1) & (b[np.maximum(ends - 1, 0)] == _CR)
                if length and sizes[0] == 1:  # its one byte is the previous block's last one
                    cr_only[0] = last_byte == _CR
                fields.append(per_line + 1)
                blank.append((sizes == 0) | cr_only)
                commas = int(comma_count[-1] - at_end[-1])
                length = len(b) - int(ends[-1]) - 1
            else:
                commas += int(comma_count[-1])
                length += len(b)
            last_byte = int(b[-1])
    if length:  # a last line without a line feed
        fields.append(np.array([commas + 1]))
        blank.append(np.array([length == 1 and last_byte == _CR]))
    if not fields:
        raise _refused()
    n = np.concatenate(fields)
    empty = np.concatenate(blank)
    if bool(np.all(empty)):
        raise _refused()
    header = int(np.argmin(empty))  # the first line that is not blank
    if bool(np.any(n[~empty] != n[header])):
        raise _refused()
    return header, ~empty[header + 1 :]
