"""API keys: generated at random, stored only as hashes, compared in constant time.

A key is ``dpk_<id>_<secret>`` with a 256-bit secret. The ledger stores ``sha256:<hex>`` of the
whole key; a presented key is looked up by its id and its hash compared with
:func:`hmac.compare_digest`. A fast hash suffices here: slow password hashes protect guessable
passwords, and a 256-bit random secret cannot be guessed from its hash.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass

__all__ = ["Principal", "hash_key", "key_id", "new_key", "verify_key"]

_KEY = re.compile(r"dpk_([a-z0-9]{1,32})_([A-Za-z0-9_-]{20,100})")
_DUMMY = "sha256:" + "0" * 64


@dataclass(frozen=True)
class Principal:
    """An authenticated caller: admin or analyst."""

    id: str
    name: str
    role: str


def new_key(pid: str | None = None) -> tuple[str, str, str]:
    """A fresh ``(id, key, hash)``; the key is shown once, only the hash is stored.

    Examples
    --------
    >>> from dpkit.server import hash_key, new_key
    >>> pid, key, h = new_key("admin")
    >>> pid, key.startswith("dpk_admin_"), h == hash_key(key)
    ('admin', True, True)
    """
    pid = pid or secrets.token_hex(6)
    key = f"dpk_{pid}_{secrets.token_urlsafe(32)}"
    return pid, key, hash_key(key)


def hash_key(key: str) -> str:
    """The stored form of a key."""
    return "sha256:" + hashlib.sha256(key.encode()).hexdigest()


def key_id(key: str) -> str | None:
    """The id part of a well-formed key, else ``None``."""
    m = _KEY.fullmatch(key)  # not match+$: `$` passes a final newline
    return m.group(1) if m else None


def verify_key(key: str, stored: str | None) -> bool:
    """Whether ``key`` matches ``stored`` (constant time; also spent on unknown ids)."""
    return hmac.compare_digest(hash_key(key), stored or _DUMMY) and stored is not None
