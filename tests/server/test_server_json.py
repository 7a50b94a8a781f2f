"""The service's reusable JSON encoders and decoder give exactly what json.dumps/loads give."""

from __future__ import annotations

import json
import math

import pytest

from dpkit.server._json import canonical, canonical_strict, compact, parse_strict

_DOCS: list[object] = [
    {"query": "mean", "dataset": "big", "epsilon": 0.001, "column": "age"},
    {"b": [1, 2.5, None, True], "a": {"z": "é\u2028", "y": -0.0}, "c": 10**30},
    {"value": 53.961812345678, "ci": [53.61787067726444, 54.312015482954415], "labels": None},
    ["\ud800 lone surrogate", 1e-300, 5e-324],
]


@pytest.mark.parametrize("doc", _DOCS)
def test_encoders_match_json_dumps(doc: object) -> None:
    assert canonical(doc) == json.dumps(doc, sort_keys=True)
    assert canonical_strict(doc) == json.dumps(doc, sort_keys=True, allow_nan=False)
    assert compact(doc) == json.dumps(
        doc, ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":")
    )


def test_strict_encoders_refuse_nan_and_infinity() -> None:
    for bad in (math.nan, math.inf, -math.inf):
        with pytest.raises(ValueError):
            canonical_strict({"epsilon": bad})
        with pytest.raises(ValueError):
            compact([bad])
    assert canonical({"x": math.nan}) == '{"x": NaN}'  # (the ledger's copy of a parsed request)


@pytest.mark.parametrize("doc", _DOCS[:3])
@pytest.mark.parametrize("encoding", ["utf-8", "utf-8-sig", "utf-16", "utf-16-le", "utf-32"])
def test_parse_matches_json_loads(doc: object, encoding: str) -> None:
    raw = json.dumps(doc, ensure_ascii=False).encode(encoding)
    assert parse_strict(raw) == json.loads(raw)


@pytest.mark.parametrize(
    "raw", [b'{"e": NaN}', b"[Infinity]", b"-Infinity", b"{", b"\xff\xfe\xfd", b"", b'{"a": 1}x']
)
def test_parse_refuses_what_the_service_refuses(raw: bytes) -> None:
    with pytest.raises(ValueError):
        parse_strict(raw)
