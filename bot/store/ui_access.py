"""Who is signed in to the operator's page, the sign-in attempts under way, and what each
person did there.

`ui_sessions` holds one row per signed-in session: a cookie signs in only while its row is
here, so signing out or revoking a session deletes it for every receiver process. A session
signed in with GitHub keeps the login, the rule that let it in (`policies.ui_allow.grant_of`)
and when that rule was last asked of GitHub; one signed in with the shared token has the
login ''. Expired rows go at the next sign-in.

`ui_sign_in_states` holds the `state` of each GitHub sign-in under way until it comes back
once (`take_sign_in_state` deletes it: a replayed callback finds nothing).

`ui_audit` records every action on the page (sign-in, a refused sign-in, sign-out, revoke,
stop, retry): when, who, what, on what, from which address. It is never trimmed by the app.

Both backends share these queries (`Storage` mixes them in); their migrations add the
columns and tables (`SQLITE_STEP`, `POSTGRES_STEP`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bot.store.contract import Sql

__all__ = ["POSTGRES_STEP", "SQLITE_STEP", "AuditEntry", "UiAccess", "UiSession", "handle_of"]

SQLITE_STEP = """
ALTER TABLE ui_sessions ADD COLUMN login TEXT NOT NULL DEFAULT '';
ALTER TABLE ui_sessions ADD COLUMN grant_rule TEXT NOT NULL DEFAULT '';
ALTER TABLE ui_sessions ADD COLUMN checked_at REAL NOT NULL DEFAULT 0;
ALTER TABLE ui_sessions ADD COLUMN client TEXT NOT NULL DEFAULT '';
CREATE TABLE ui_sign_in_states (
    state TEXT PRIMARY KEY,
    expires_at REAL NOT NULL
);
CREATE TABLE ui_audit (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at REAL NOT NULL,
    actor TEXT NOT NULL,
    action TEXT NOT NULL,
    target TEXT NOT NULL,
    detail TEXT NOT NULL,
    client TEXT NOT NULL
)
"""
"""The SQLite migration step."""

POSTGRES_STEP = """
ALTER TABLE ui_sessions ADD COLUMN login text NOT NULL DEFAULT '';
ALTER TABLE ui_sessions ADD COLUMN grant_rule text NOT NULL DEFAULT '';
ALTER TABLE ui_sessions ADD COLUMN checked_at double precision NOT NULL DEFAULT 0;
ALTER TABLE ui_sessions ADD COLUMN client text NOT NULL DEFAULT '';
CREATE TABLE ui_sign_in_states (
    state text PRIMARY KEY,
    expires_at double precision NOT NULL
);
CREATE TABLE ui_audit (
    id bigserial PRIMARY KEY,
    at double precision NOT NULL,
    actor text NOT NULL,
    action text NOT NULL,
    target text NOT NULL,
    detail text NOT NULL,
    client text NOT NULL
);
"""
"""The Postgres migration step."""

_TEXT_CAP = 300  # characters kept of each audit field


def handle_of(session_id: str) -> str:
    """The name a session is shown and revoked by: never its id, which signs its cookie."""
    return hashlib.sha256(f"ui session {session_id}".encode()).hexdigest()[:12]


@dataclass(frozen=True, slots=True)
class UiSession:
    id: str
    login: str
    """'' for a session signed in with the shared token."""
    grant: str
    checked_at: float
    created_at: float
    expires_at: float
    client: str

    @property
    def handle(self) -> str:
        return handle_of(self.id)


@dataclass(frozen=True, slots=True)
class AuditEntry:
    id: int
    at: float
    actor: str
    action: str
    target: str
    detail: str
    client: str


_SESSION_COLUMNS = "id, login, grant_rule, checked_at, created_at, expires_at, client"


def _session(row: tuple[object, ...]) -> UiSession:
    return UiSession(
        id=str(row[0]),
        login=str(row[1]),
        grant=str(row[2]),
        checked_at=float(row[3]),  # type: ignore[arg-type]
        created_at=float(row[4]),  # type: ignore[arg-type]
        expires_at=float(row[5]),  # type: ignore[arg-type]
        client=str(row[6]),
    )


class UiAccess:
    """The page's sessions, sign-in states and audit queries; `Storage` supplies the
    connections and the clock."""

    clock: Callable[[], float]

    def _session(self) -> AbstractContextManager[Sql]:
        raise NotImplementedError

    def _transaction(self) -> AbstractContextManager[Sql]:
        raise NotImplementedError

    # -- sessions --------------------------------------------------------------------------

    def start_ui_session(
        self,
        session_id: str,
        expires_at: float,
        *,
        login: str = "",
        grant: str = "",
        client: str = "",
    ) -> None:
        """Record a signed-in session; sessions past their expiry are forgotten here, so the
        table holds only the live ones."""
        now = self.clock()
        with self._transaction() as db:
            db.run("DELETE FROM ui_sessions WHERE expires_at < ?", (now,))
            db.run(
                f"INSERT INTO ui_sessions ({_SESSION_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (session_id, login, grant, now, now, expires_at, client[:_TEXT_CAP]),
            )

    def ui_session(self, session_id: str) -> UiSession | None:
        """The session, when it was started, has not ended and has not expired."""
        with self._session() as db:
            row = db.one(
                f"SELECT {_SESSION_COLUMNS} FROM ui_sessions WHERE id = ? AND expires_at >= ?",
                (session_id, self.clock()),
            )
        return None if row is None else _session(row)

    def ui_session_active(self, session_id: str) -> bool:
        """Whether the session was started, has not ended and has not expired."""
        return self.ui_session(session_id) is not None

    def ui_session_checked(self, session_id: str, at: float) -> None:
        """Its grant was asked of GitHub again at `at` and still holds."""
        with self._session() as db:
            db.run("UPDATE ui_sessions SET checked_at = ? WHERE id = ?", (at, session_id))

    def end_ui_session(self, session_id: str) -> bool:
        """Sign the session out: its cookie, wherever a copy of it is, signs no one in.
        Whether it was still on."""
        with self._session() as db:
            return db.run("DELETE FROM ui_sessions WHERE id = ?", (session_id,)) > 0

    def ui_sessions(self) -> list[UiSession]:
        """The sessions on now, newest first."""
        with self._session() as db:
            rows = db.all(
                f"SELECT {_SESSION_COLUMNS} FROM ui_sessions WHERE expires_at >= ?"
                " ORDER BY created_at DESC, id",
                (self.clock(),),
            )
        return [_session(row) for row in rows]

    # -- sign-in states --------------------------------------------------------------------

    def add_sign_in_state(self, state: str, expires_at: float) -> None:
        """A GitHub sign-in under way; expired ones are forgotten here."""
        with self._transaction() as db:
            db.run("DELETE FROM ui_sign_in_states WHERE expires_at < ?", (self.clock(),))
            db.run(
                "INSERT INTO ui_sign_in_states (state, expires_at) VALUES (?, ?)",
                (state, expires_at),
            )

    def take_sign_in_state(self, state: str) -> bool:
        """Whether `state` was handed out, unexpired and not used yet; it is used now."""
        with self._session() as db:
            taken = db.run(
                "DELETE FROM ui_sign_in_states WHERE state = ? AND expires_at >= ?",
                (state, self.clock()),
            )
        return taken > 0

    # -- the audit -------------------------------------------------------------------------

    def audit(
        self, actor: str, action: str, target: str = "", detail: str = "", client: str = ""
    ) -> None:
        """Record what `actor` did on the page, now."""
        cells = (actor, action, target, detail, client)
        with self._session() as db:
            db.run(
                "INSERT INTO ui_audit (at, actor, action, target, detail, client)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (self.clock(), *(str(cell)[:_TEXT_CAP] for cell in cells)),
            )

    def audit_entries(self, *, before: int | None = None, limit: int = 100) -> list[AuditEntry]:
        """The newest entries, or those older than entry `before`."""
        where, params = ("WHERE id < ?", [before]) if before is not None else ("", [])
        with self._session() as db:
            rows = db.all(
                "SELECT id, at, actor, action, target, detail, client FROM ui_audit"
                f" {where} ORDER BY id DESC LIMIT ?",
                (*params, limit),
            )
        return [
            AuditEntry(
                int(r[0]), float(r[1]), str(r[2]), str(r[3]), str(r[4]), str(r[5]), str(r[6])
            )
            for r in rows
        ]
