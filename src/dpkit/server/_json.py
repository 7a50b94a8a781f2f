"""The service's JSON: one encoder or decoder of each kind, made once.

``json.dumps`` and ``json.loads`` with any keyword argument build a new encoder or decoder on
every call; the service encodes a few documents per answer, so it keeps one of each. The output
is exactly that of the corresponding ``json.dumps`` / ``json.loads`` call.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["canonical", "canonical_strict", "compact", "parse_strict"]


def _reject_constant(name: str) -> Any:
    raise ValueError("NaN and Infinity are not JSON numbers")


canonical = json.JSONEncoder(sort_keys=True).encode
"""``json.dumps(obj, sort_keys=True)``: a request as the ledger stores and compares it."""

canonical_strict = json.JSONEncoder(sort_keys=True, allow_nan=False).encode
"""``json.dumps(obj, sort_keys=True, allow_nan=False)``: raises ValueError on NaN or infinity."""

compact = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode
"""What Starlette's ``JSONResponse`` renders (before its UTF-8 encoding)."""

_STRICT = json.JSONDecoder(parse_constant=_reject_constant)


def parse_strict(buf: bytes) -> Any:
    """``json.loads(buf, parse_constant=...)`` refusing NaN and Infinity (ValueError).

    Bytes are decoded as ``json.loads`` decodes them (UTF-8, -16 or -32, by their first bytes).
    """
    return _STRICT.decode(buf.decode(json.detect_encoding(buf), "surrogatepass"))
