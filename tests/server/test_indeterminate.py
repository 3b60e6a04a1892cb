"""A broken connection while COMMIT is in flight: indeterminate, then resolved by a read (issue 13, point 8).

Real PostgreSQL throughout. Two ways the answer to COMMIT goes missing:
- the write's session is ended (pg_terminate_backend) at before_commit: COMMIT meets a closed
  connection, nothing committed;
- a TCP relay in front of PostgreSQL passes COMMIT to the server and loses its reply (the
  server had already committed), then closes the client's connection.
The old code called both "failed"; the second one was a lie.
"""

import socket
import threading
import time

import pytest
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from backends import load
from backends._fence import fenced_write
from backends._writes import sqlstate, write_transaction
from backends.base import BackendContext, RebuildResult, describe_error
from lab.checkers.ops import F, Recorder, Type
from lab.servers.clients import pg_engine
from lab.servers.postgres import sql as pg
from lab.workload.job import run_job
from lab.workload.table import CompanyTable, table_name

pytestmark = pytest.mark.server


def old_write_transaction(engine, table, companies, rows, run_id, *, point):
    """What backends/_writes.py did before: any error, COMMIT included, is "failed"."""
    try:
        with engine.connect() as conn:
            with conn.begin():
                point("begin", conn)
                for company in companies:
                    table.rebuild(conn, company, rows, run_id, point)
            point("after_commit", None)
        return RebuildResult("committed")
    except SQLAlchemyError as exc:
        return RebuildResult("failed", error=describe_error(exc), sqlstate=sqlstate(exc))


def new_write(kind):
    """The write under test, as a function of (engine, table, companies, rows, run_id, point)."""
    if kind == "write_transaction":
        return lambda engine, table, companies, rows, run_id, *, point: write_transaction(
            engine, table, companies, rows, run_id, point=point)
    key = f"indeterminate-{time.monotonic_ns()}"
    return lambda engine, table, companies, rows, run_id, *, point: fenced_write(
        engine, table, companies[0], rows, run_id, lock_key=key, token=1, point=point)


WRITES = {"old": lambda: old_write_transaction, "write_transaction": lambda: new_write("write_transaction"),
          "fenced_write": lambda: new_write("fenced_write")}


class ReplyLoser:
    """A TCP relay to PostgreSQL that, once armed, passes the client's next request and loses the answer.

    The first bytes the server sends back on an armed connection are dropped, and the client's
    connection is closed instead: the client sees 'server closed the connection unexpectedly'
    although the server did what it asked. Connections opened after arming relay normally, unless
    refuse_new: then the listener closes, and nothing reaches the server through here any more.
    """

    def __init__(self, host: str, port: int):
        self.target = (host, port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.lost = 0  # bytes of server replies dropped
        self._open: list[dict] = []
        self._lock = threading.Lock()
        self._refuse_new = False
        threading.Thread(target=self._accept, daemon=True).start()

    def arm(self, refuse_new: bool = False) -> None:
        with self._lock:
            for pair in self._open:
                pair["armed"] = True
            self._refuse_new = refuse_new

    def close(self) -> None:
        self._stop_listening()
        with self._lock:
            for pair in self._open:
                self._cut(pair)

    def _stop_listening(self) -> None:
        try:
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes the accept() blocked on it; close() alone would not
        except OSError:
            pass
        self.listener.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return  # closed
            upstream = socket.create_connection(self.target, timeout=5)
            upstream.settimeout(None)
            pair = {"client": client, "upstream": upstream, "armed": False}
            with self._lock:
                self._open.append(pair)
            threading.Thread(target=self._to_server, args=(pair,), daemon=True).start()
            threading.Thread(target=self._to_client, args=(pair,), daemon=True).start()

    def _to_server(self, pair) -> None:
        try:
            while data := pair["client"].recv(65536):
                pair["upstream"].sendall(data)
        except OSError:
            pass
        self._cut(pair)

    def _to_client(self, pair) -> None:
        try:
            while data := pair["upstream"].recv(65536):
                if pair["armed"]:
                    with self._lock:
                        self.lost += len(data)
                        if self._refuse_new:
                            self._stop_listening()
                    break
                pair["client"].sendall(data)
        except OSError:
            pass
        self._cut(pair)

    @staticmethod
    def _cut(pair) -> None:
        for sock in (pair["client"], pair["upstream"]):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()


@pytest.fixture
def table(engines, request):
    monitor, writes = engines
    table = CompanyTable(table_name(f"indeterminate_{request.node.name}"))
    table.create(monitor)
    table.seed(writes, 1, 250)
    return table


@pytest.fixture
def relay(services, engines):
    """An engine for the writes whose connections reach PostgreSQL through a ReplyLoser."""
    loser = ReplyLoser(services.pg_url.host, services.pg_url.port)
    engine = pg_engine(services.pg_url.set(host="127.0.0.1", port=loser.port), pool_pre_ping=True)
    yield engine, loser
    engine.dispose()
    loser.close()


def on_table(engines, table):
    with engines[0].connect() as conn:
        return table.runs_in(conn, 1), table.count(conn, 1)


def terminate_at_before_commit(monitor, seen):
    def point(name, conn):
        seen.append(name)
        if name == "before_commit":
            pid = pg.backend_pid(conn)
            assert pg.terminate(monitor, pid)
            assert pg.wait_gone(monitor, pid) is not None  # the session is gone before COMMIT is sent
    return point


@pytest.mark.parametrize("write", ["old", "write_transaction", "fenced_write"])
def test_a_session_ended_at_before_commit(engines, table, write):
    monitor, writes = engines
    seen = []
    result = WRITES[write]()(writes, table, [1], 250, "run-1", point=terminate_at_before_commit(monitor, seen))

    assert seen[-1] == "before_commit"  # the points ran in order up to COMMIT, and no after_commit
    assert result.sqlstate is None and "server closed the connection unexpectedly" in result.error
    if write == "old":
        assert (result.outcome, result.resolved) == ("failed", None)
    else:
        assert (result.outcome, result.resolved) == ("indeterminate", "not committed")
        assert result.deleted is None
    assert on_table(engines, table) == (["seed"], 250)  # indeed nothing committed


@pytest.mark.parametrize("write", ["old", "write_transaction", "fenced_write"])
def test_a_commit_whose_reply_was_lost(engines, table, relay, write):
    engine, loser = relay

    def point(name, conn):
        if name == "before_commit":
            loser.arm()  # COMMIT will reach the server; its answer will not come back

    result = WRITES[write]()(engine, table, [1], 250, "run-1", point=point)

    assert loser.lost > 0  # the server answered COMMIT, and that answer was dropped
    assert result.sqlstate is None and "server closed the connection unexpectedly" in result.error
    assert on_table(engines, table) == (["run-1"], 250)  # the server committed the rebuild
    if write == "old":
        assert result.outcome == "failed"  # the old code's lie: it says rolled back
    else:
        assert (result.outcome, result.resolved, result.deleted) == ("indeterminate", "committed", 250)


def test_a_lost_commit_reply_with_no_way_back_to_the_server_stays_unknown(engines, table, relay):
    engine, loser = relay

    def point(name, conn):
        if name == "before_commit":
            loser.arm(refuse_new=True)  # and the resolving read cannot reach the server either

    result = write_transaction(engine, table, [1], 250, "run-1", point=point)

    assert loser.lost > 0
    assert (result.outcome, result.resolved) == ("indeterminate", "unknown")
    assert on_table(engines, table) == (["run-1"], 250)  # it had committed: unknown was the honest answer


def test_an_error_the_server_reports_at_commit_is_a_definite_failure(engines, table):
    """A deferred foreign key checked at COMMIT: SQLSTATE 23503, rolled back, not indeterminate."""
    monitor, writes = engines
    parent = f"{table.name}_companies"
    with monitor.connect() as conn:
        conn.execute(text(f"create table {parent} (id int primary key)"))
        # NOT VALID: the seed rows are not checked; the rebuild's inserts are, at COMMIT.
        conn.execute(text(f"alter table {table.name} add foreign key (company_id) references {parent} "
                          f"deferrable initially deferred not valid"))
    seen = []
    for write in ("old", "write_transaction", "fenced_write"):
        result = WRITES[write]()(writes, table, [1], 250, f"run-{write}", point=lambda name, conn: seen.append(name))
        assert seen[-1] == "before_commit"  # every statement succeeded; COMMIT failed
        assert (result.outcome, result.sqlstate, result.resolved) == ("failed", "23503", None), write
    assert on_table(engines, table) == (["seed"], 250)


def test_the_job_records_write_indeterminate_with_its_resolution(services, engines, table, relay):
    engine, loser = relay
    monitor, _ = engines
    backend = load("none")(BackendContext(services, monitor, engine, table, {}, {}), "indeterminate-job")
    history = Recorder()

    def point(name, conn):
        if name == "before_commit":
            loser.arm()

    job = run_job(backend, [1], 250, "run-1", point=point, history=history)

    assert job.outcome == "indeterminate" and job.summary(job.started)["resolved"] == "committed"
    writes = [op for op in history.ops() if op.f is F.WRITE]
    assert [(op.type, op.get("resolved")) for op in writes] == [(Type.INVOKE, None), (Type.INFO, "committed")]
