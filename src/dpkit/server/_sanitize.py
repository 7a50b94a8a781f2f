"""Text of a request made storable and harmless before it reaches the audit log.

A request's path, and the dataset and query names of its body, are recorded with every request
(:mod:`._audit`). They come from the client, so they may hold anything JSON or HTTP can carry:
a NUL character (which PostgreSQL refuses in any text column: the whole batch of audit rows in
that transaction was lost with it), lone surrogates (not valid UTF-8), control characters
(which forge lines in a log viewer), markup, or megabytes of text. Here

* a path is stored percent-encoded (what was on the wire: ``/v1/results/%3Cb%3E``), so only
  printable ASCII is ever stored, and cut at ``limit`` characters;
* a name (dataset, query type) is stored only if it is a valid name (:data:`NAME_PATTERN`), as
  ``"(invalid)"`` otherwise: it is then no name the service knows, and what it was is of no use;
* any other text has its NUL, control and unpaired surrogate characters replaced by U+FFFD and
  is cut at ``limit`` characters.
"""

from __future__ import annotations

import re
from urllib.parse import quote

from dpkit.server._schema import NAME_PATTERN

__all__ = ["INVALID", "audit_name", "audit_path", "audit_text"]

INVALID = "(invalid)"
"""What the audit stores in place of a name that is not a valid one."""

_UNSTORABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
"""NUL, C0 and C1 control characters, DEL, and surrogates (valid in a Python string decoded
from JSON's ``\\ud800`` escapes, invalid in UTF-8 and in every database's text)."""


def audit_text(value: object, limit: int) -> str | None:
    """``value`` as text any database stores: at most ``limit`` characters, no control or
    surrogate character.

    Examples
    --------
    >>> audit_text("a\\x00b\\ud800", 10)
    'a\\ufffdb\\ufffd'
    """
    if value is None:
        return None
    return _UNSTORABLE.sub("\ufffd", str(value)[:limit])


def audit_path(value: object, limit: int = 200) -> str | None:
    """A request path percent-encoded (printable ASCII only), at most ``limit`` characters.

    Examples
    --------
    >>> audit_path("/v1/results/<b>\\x00")
    '/v1/results/%3Cb%3E%00'
    """
    if value is None:
        return None
    text = str(value)[: limit * 3]  # no more than can survive the cut below
    return quote(text, safe="/-_.~:@!$&'()*+,;=", errors="replace")[:limit]


def audit_name(value: object) -> str | None:
    """``value`` if it is a valid dataset or query name, :data:`INVALID` otherwise.

    Examples
    --------
    >>> audit_name("survey"), audit_name("<script>"), audit_name(None)
    ('survey', '(invalid)', None)
    """
    if value is None:
        return None
    if isinstance(value, str) and NAME_PATTERN.fullmatch(value):
        return value
    return INVALID
