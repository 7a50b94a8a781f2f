"""Dashboard login links and sessions, kept in the ledger.

A one-time link (2 minutes) is made with an API key and opens a session (8 hours) held in a
cookie. Both live in the ledger's ``sessions`` table, so every worker process of the service
sees them (a link made by one worker opens on another), and each records the key hash its
principal had when it was made: a session is valid only while the principal still has that key,
so a new key (``POST /v1/admin/analysts/{id}/key``, or a new ``admin_key_hash``) ends every
session and link made with the old one, in every process at once. Only the SHA-256 of a link
or session id is stored: the ledger's contents do not open anyone's dashboard.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from typing import TYPE_CHECKING

from dpkit.server._auth import Principal

if TYPE_CHECKING:  # pragma: no cover
    from dpkit.server._ledger import Ledger

__all__ = ["LINK_SECONDS", "SESSION_SECONDS", "SessionStore"]

LINK_SECONDS = 120.0
SESSION_SECONDS = 8 * 3600.0


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "replace")).hexdigest()


class SessionStore:
    """Links and sessions of the dashboard in ``ledger`` (see the module).

    Examples
    --------
    >>> import tempfile, os
    >>> from dpkit.server import Ledger
    >>> from dpkit.server._auth import Principal
    >>> led = Ledger(os.path.join(tempfile.mkdtemp(), "l.db")); _ = led.migrate()
    >>> led.add_principal("a1", "ada", "analyst", "sha256:old")
    >>> store = SessionStore(led)
    >>> sid = store.login(store.new_link(Principal("a1", "ada", "analyst")))
    >>> store.principal(sid)
    Principal(id='a1', name='ada', role='analyst')
    >>> led.set_key_hash("a1", "sha256:new")   # a new key ends the session
    >>> store.principal(sid) is None
    True
    """

    def __init__(self, ledger: Ledger) -> None:
        self._ledger = ledger

    def new_link(self, who: Principal) -> str:
        """A one-time login link's token for ``who`` (valid :data:`LINK_SECONDS`)."""
        token = secrets.token_urlsafe(24)
        now = time.time()
        q = self._ledger._sql
        with self._ledger._tx() as conn:
            # expired links and sessions are forgotten as new ones are made
            conn.execute(q("DELETE FROM sessions WHERE expires < ?"), (now,))
            conn.execute(
                q("INSERT INTO sessions (id, kind, principal, key_hash, expires) "
                  "SELECT ?, 'link', id, key_hash, ? FROM principals WHERE id = ?"),
                (_digest(token), now + LINK_SECONDS, who.id),
            )  # fmt: skip
        return token

    def login(self, token: str) -> str | None:
        """Use a link (once): a new session id, or ``None`` if the link is invalid, expired,
        used, or made with a key its principal no longer has."""
        now = time.time()
        sid, digest = secrets.token_urlsafe(24), _digest(token)
        q = self._ledger._sql
        with self._ledger._tx() as conn:
            # The link is taken by its deletion: of requests racing on one link, one deletes it
            # (PostgreSQL's read committed let each read it before any deletion was committed,
            # and each opened a session).
            rows = conn.execute(
                q("DELETE FROM sessions WHERE id = ? AND kind = 'link' "
                  "RETURNING principal, key_hash, expires"), (digest,),
            ).fetchall()  # fmt: skip
            if not rows or rows[0][2] < now:
                return None
            row = rows[0]
            current = conn.execute(
                q("SELECT 1 FROM principals WHERE id = ? AND key_hash = ?"), (row[0], row[1])
            ).fetchone()
            if current is None:  # made with a key its principal no longer has
                return None
            conn.execute(
                q("INSERT INTO sessions (id, kind, principal, key_hash, expires) "
                  "VALUES (?, 'session', ?, ?, ?)"),
                (_digest(sid), row[0], row[1], now + SESSION_SECONDS),
            )  # fmt: skip
        return sid

    def principal(self, sid: str) -> Principal | None:
        """The principal of a live session whose key is still the principal's, or ``None``."""
        if not sid:
            return None
        row = self._ledger._exec(
            "SELECT p.id, p.name, p.role FROM sessions s JOIN principals p "
            "ON p.id = s.principal AND p.key_hash = s.key_hash "
            "WHERE s.id = ? AND s.kind = 'session' AND s.expires > ?",
            (_digest(sid), time.time()),
        ).fetchone()
        return None if row is None else Principal(row[0], row[1], row[2])

    def end(self, pid: str) -> None:
        """Forget every link and session of ``pid`` (they already stopped working if its key
        changed; this only frees their rows)."""
        with self._ledger._tx() as conn:
            conn.execute(self._ledger._sql("DELETE FROM sessions WHERE principal = ?"), (pid,))
