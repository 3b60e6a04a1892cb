"""The scanner's verdict on a planted sample, and the same sample run for real: the flagged code loses its lock.

Two of tests/fast/test_scan_samples.py's samples (psycopg2's default connection, and the same with autocommit on)
are scanned, then executed against the embedded PostgreSQL with idle_in_transaction_session_timeout = 1 s in the
connection's options. While the sample's job "works" (2 s), a second session asks for the same lock: it gets it from
the code the scanner flagged, and is refused by the code it found fine.
"""

from __future__ import annotations

import textwrap
import time

import psycopg2
import pytest

from lab.scan.findings import Bug, Status
from lab.scan.scanner import scan
from lab.servers.services import start_services
from tests.fast.test_scan_samples import PSYCOPG2_DEFAULT

pytestmark = pytest.mark.server

GUARD_MS = 1000
WORK_S = 2.0  # twice the guard: the job is idle in its transaction past the timeout
LOCK_KEY = 42  # the samples' key


@pytest.fixture(scope="module")
def pg_url():
    with start_services(["postgres"]) as running:
        yield running.pg_url


def conninfo(url, guard: bool) -> str:
    """libpq's keyword form of the server's address, with the guard in the session's options."""
    parts = {"host": url.host or "127.0.0.1", "port": url.port, "user": url.username, "password": url.password,
             "dbname": url.database, "connect_timeout": 5}
    line = " ".join(f"{k}={v}" for k, v in parts.items() if v is not None)
    return line + (f" options='-c idle_in_transaction_session_timeout={GUARD_MS}'" if guard else "")


def run_sample(source: str, url) -> bool:
    """Execute the sample's run(dsn, work): work() waits past the guard, then a second session asks for the lock.
    True when that second session got it while the sample still believed it held it."""
    namespace: dict = {}
    exec(compile(textwrap.dedent(source), "<sample>", "exec"), namespace)
    got: list[bool] = []

    def work() -> None:
        time.sleep(WORK_S)
        other = psycopg2.connect(conninfo(url, guard=False))
        other.autocommit = True
        try:
            with other.cursor() as cur:
                cur.execute("select pg_try_advisory_lock(%s)", (LOCK_KEY,))
                got.append(bool(cur.fetchone()[0]))
        finally:
            other.close()  # its own lock, if it got one, ends with it

    namespace["run"](conninfo(url, guard=True), work)
    return got == [True]


def scanned_bugs(tmp_path, source: str) -> set:
    (tmp_path / "job.py").write_text(textwrap.dedent(source))
    report = scan([str(tmp_path / "job.py")])
    return {(r.status, r.bug) for r in report.results}


def test_the_flagged_sample_loses_its_lock_on_a_real_server(pg_url, tmp_path):
    assert scanned_bugs(tmp_path, PSYCOPG2_DEFAULT) == {(Status.FINDING, Bug.LEFT_OPEN)}
    assert run_sample(PSYCOPG2_DEFAULT, pg_url), "the second session was refused: the lock outlived the guard"


def test_the_sample_found_fine_keeps_it(pg_url, tmp_path):
    fine = PSYCOPG2_DEFAULT.replace("conn = psycopg2.connect(dsn)\n",
                                    "conn = psycopg2.connect(dsn)\n        conn.autocommit = True\n")
    assert scanned_bugs(tmp_path, fine) == {(Status.FINE, None)}
    assert not run_sample(fine, pg_url), "the second session got the lock from the autocommit connection"
