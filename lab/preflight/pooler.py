"""Transaction pooling, seen with two clients: what sits between a DSN and the PostgreSQL that answers it.

One client's transaction stays open while the other's next one runs. Without a pooler each client keeps its own
server session; a transaction pooler gives the second client the session the first one's last transaction used,
or moves the first one's next transaction to another session (or makes it wait). One client alone cannot see it
(FACTS.md: with one client, PgBouncer handed back the same backend pid twice). A pooler that queues the second
client (no server session to spare) must not hang the look: each client's query runs in a thread of its own and
is hung up on after POOLER_WAIT_S.
"""

from __future__ import annotations

import os
import queue
import socket
import threading
from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.engine import Connection, Engine

from lab.stack.description import PoolMode

POOLER_WAIT_S = 2.0  # how long a client may wait for a server session before the look says why
PID_SQL = "select pg_backend_pid()"
ADDRESS_SQL = "select inet_server_addr()::text as addr, inet_server_port() as port"


class _Pending:
    """One client's query in a daemon thread: a pooler that queues a client for a server session must not hang
    the caller (PgBouncer waits up to 120 s by default)."""

    def __init__(self, fn):
        self._done: queue.Queue = queue.Queue(1)
        threading.Thread(target=self._call, args=(fn,), name="preflight-client", daemon=True).start()

    def _call(self, fn) -> None:
        try:
            self._done.put((True, fn()))
        except BaseException as exc:  # handed back to the caller's thread
            self._done.put((False, exc))

    def result(self, timeout: float) -> tuple[bool, object]:
        """(True, value) when the query answered within timeout, (False, None) while it still waits."""
        try:
            ok, value = self._done.get(timeout=timeout)
        except queue.Empty:
            return False, None
        if not ok:
            raise value
        return True, value


def _hang_up(conn: Connection, waiting: _Pending) -> None:
    """End a client the pooler keeps queueing: shut its socket (a cancel request does not reach a queued client),
    let its query fail in its thread, and throw the connection away."""
    dbapi = conn.connection.dbapi_connection
    if dbapi is None:  # SQLAlchemy detached it: the connection was closed or invalidated
        raise RuntimeError("no driver connection to hang up")
    with socket.socket(fileno=os.dup(dbapi.fileno())) as sock:
        sock.shutdown(socket.SHUT_RDWR)
    try:
        waiting.result(10)
    except Exception:  # the query's own end: "server closed the connection"
        pass
    conn.invalidate()


def _pid(conn: Connection) -> int:
    return conn.execute(text(PID_SQL)).scalar_one()


@dataclass(frozen=True)
class PoolerSeen:
    """What two clients saw between them and the server."""

    mode: PoolMode | None  # None: a pooler queued the second client, so its mode could not be seen
    kind: str | None  # what sits in between, in words; None: nothing
    evidence: tuple[str, ...]
    sql: tuple[str, ...] = (PID_SQL, ADDRESS_SQL)
    waited: bool = False  # client 1's next transaction waited for client 2's session: a pool of one
    queued: bool = False  # client 2 got no server session within POOLER_WAIT_S

    @property
    def in_between(self) -> bool:
        return self.queued or self.mode in (PoolMode.SESSION, PoolMode.TRANSACTION)


def kind_of(refused: str | None) -> str:
    """A pooler, in words, by whether it refused the options startup parameter (PgBouncer does)."""
    return ("a pooler that refuses the options startup parameter, such as PgBouncer" if refused else
            "a pooler or proxy (the server listens on another port than the DSN names)")


def see_pooler(engine: Engine, conn: Connection, dsn_host: str | None, dsn_port: int | None,
               refused: str | None = None) -> PoolerSeen:
    """Two clients of engine (conn, and one more it opens and closes): whether one client's transactions run on
    server sessions another client's use. refused: the server's refusal of the options startup parameter, if seen."""
    first = _pid(conn)
    conn.commit()
    evidence = [f"client 1, a transaction: server session pid {first}"]
    other = engine.connect()
    try:
        waiting = _Pending(lambda: _pid(other))
        answered, open_pid = waiting.result(POOLER_WAIT_S)
        if not answered:
            _hang_up(other, waiting)
            return PoolerSeen(None, "a pooler (it queued a client)", tuple(evidence), queued=True)
        evidence.append(f"client 2, a transaction kept open: pid {open_pid}")
        pending = _Pending(lambda: _pid(conn))
        answered, second = pending.result(POOLER_WAIT_S)
        waited = not answered
        if waited:
            other.rollback()  # frees the server session client 1's transaction waits for
            answered, second = pending.result(30)
        conn.commit()
        evidence.append(f"client 1, its next transaction while client 2's stayed open: pid {second}"
                        + (f" (it waited until client 2's ended, {POOLER_WAIT_S:.0f} s)" if waited else ""))
    finally:
        if not other.invalidated:
            other.rollback()
        other.close()
    where = dict(conn.execute(text(ADDRESS_SQL)).one()._mapping)
    conn.commit()
    evidence.append(f"server sees this session on {where['addr']}:{where['port']}; the DSN names {dsn_host}:{dsn_port}")
    if refused:
        evidence.append(f"the server refused the options startup parameter ({refused}): a pooler such as "
                        f"PgBouncer; the settings went with each transaction (SET LOCAL)")
    if waited or open_pid == first or second != first:
        return PoolerSeen(PoolMode.TRANSACTION, kind_of(refused) if refused else "a transaction pooler",
                          tuple(evidence), waited=waited)
    if refused or (where["port"] is not None and dsn_port is not None and where["port"] != dsn_port):
        return PoolerSeen(PoolMode.SESSION, kind_of(refused), tuple(evidence))
    return PoolerSeen(PoolMode.NONE, None, tuple(evidence))
