"""The added trials find an intermittent failure and rate it: a plugin lock that takes no lock one trial in five.

The planted lock (a plugin given with --backend-module, as docs/write-a-backend.md shows) is the docs' session
advisory lock on an AUTOCOMMIT connection with idle_session_timeout turned off on its own session (as
session_guard_off does), so that no other column of the run fails it (a lock a fault already ruled out is spared the
added trials, run-wide), except that on every fifth trial (trial index 4, 9, 14, ...: the same
trials on every run) its acquire takes nothing on the real PostgreSQL and says it holds, so the post's contender
is granted the company while the holder believes it holds it. The planned trial of the quick profile (index 0)
misses it, as three trials miss a one-in-five failure half the time; `--settle` must find it, because the column
decides (the plain session lock fails there), and, once the cell's mark differs from the run before, rate it on
20 trials.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from lab.checkers.outcomes import latest_per_trial
from lab.cli import EXIT_INTERRUPTED
from lab.runner.settle_rule import RATE_TRIALS, Harm, failed
from tests.server.helpers import shared_tmp

pytestmark = pytest.mark.server

FLAKY = '''
from sqlalchemy import text

from backends.api import Backend, LockLost, no_point, pg_engine, write_transaction


class FlakyLock(Backend):
    """A session advisory lock on an AUTOCOMMIT connection that takes none on every fifth trial."""

    name = "flaky_lock"
    summary = "a session advisory lock that takes nothing one trial in five"
    capabilities = frozenset({"session_lock", "exclusion"})

    def __init__(self, ctx, key):
        super().__init__(ctx, key)
        self.engine = pg_engine(ctx.lock_services.pg_url, ctx.lock_settings, pool_size=1,
                                isolation_level="AUTOCOMMIT")
        self.conn, self.pid = None, None

    @property
    def lock_pid(self):
        return self.pid

    def skips(self):
        # The key names the trial ("locklab:<run>:<scenario>/<backend>/<variant>/<index>:lock"): its index is the
        # seed, so the same trials skip on every run.
        return int(self.key.split(":")[2].rsplit("/", 1)[1]) % 5 == 4

    def acquire(self):
        if self.conn is None:
            self.conn = self.engine.connect()
            self.conn.execute(text("set idle_session_timeout = 0"))  # only the planted trials fail
        if self.skips():
            self.pid = self.conn.execute(text("select pg_backend_pid()")).scalar()
            return True
        got, self.pid = self.conn.execute(text("select pg_try_advisory_lock(hashtextextended(:k, 0)), "
                                               "pg_backend_pid()"), {"k": self.key}).one()
        return bool(got)

    def rebuild(self, company, rows, run_id, point=no_point):
        return write_transaction(self.ctx.writes, self.ctx.table, [company], rows, run_id, point=point)

    def touch(self):
        self.conn.execute(text("select 1"))

    def held(self):
        with self.ctx.monitor.connect() as conn:
            return conn.execute(text("select count(*) > 0 from pg_locks where locktype = 'advisory' "
                                     "and granted and pid = :p"), {"p": self.pid}).scalar()

    def release(self):
        try:
            released = self.conn.execute(text("select pg_advisory_unlock(hashtextextended(:k, 0))"),
                                         {"k": self.key}).scalar()
        except Exception as exc:
            raise LockLost(f"the lock's session is gone: {type(exc).__name__}") from exc
        if not released:
            raise LockLost("pg_advisory_unlock returned false", told="false")

    def close(self):
        if self.conn is not None:
            self.conn.invalidate()
            self.conn = None
        self.engine.dispose()
'''
CELL = ("cases", "flaky_lock", "idle_in_transaction")


def lab_run(*args: str, cwd: Path, tmp: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "TMPDIR": str(tmp)}
    return subprocess.run([sys.executable, "-m", "lab.cli", "run", "--backend-module", "flaky_lock:FlakyLock",
                           "--backend", "flaky_lock,session", "--scenario", "cases", "--profile", "quick", *args],
                          capture_output=True, text=True, env=env, cwd=cwd, timeout=600)


def new_run(results: Path, before: set[Path]) -> Path:
    (folder,) = set(results.iterdir()) - before
    return folder


def cell_records(folder: Path) -> list[dict]:
    records = latest_per_trial([json.loads(line) for line in (folder / "trials.jsonl").read_text().splitlines()])
    return [r for r in records if (r["scenario"], r["backend"], r["variant"]) == CELL]


def test_an_intermittent_failure_is_found_by_the_added_trials_and_rated(tmp_path):
    (tmp_path / "flaky_lock.py").write_text(FLAKY)
    results, tmp = tmp_path / "results", shared_tmp(tmp_path)
    try:
        planned = lab_run("--results", str(results), cwd=tmp_path, tmp=tmp)
        assert planned.returncode == 0, planned.stderr
        first = new_run(results, set())
        missed = cell_records(first)
        # Before: the planned trial misses the failure.
        assert [r["index"] for r in missed] == [0] and not any(failed(r, Harm.SURVIVING_COMPANY) for r in missed)

        settled = lab_run("--results", str(results), "--settle-minutes", "5", "--previous", str(first),
                          cwd=tmp_path, tmp=tmp)
        assert settled.returncode == 0, settled.stderr
        second = new_run(results, {first})
        records = [r for r in cell_records(second) if r["status"] == "ok"]
        failures = sorted(r["index"] for r in records if failed(r, Harm.SURVIVING_COMPANY))
        # Found: exactly the planted trials failed, every one of them, and none other.
        assert failures and failures == sorted(r["index"] for r in records if r["index"] % 5 == 4)
        # Rated: once its mark differed from the run before (✗ against ○), the cell ran on to 20 finished trials.
        assert len(records) >= RATE_TRIALS
        ids = [json.loads(line)["id"] for line in (second / "trials.jsonl").read_text().splitlines()]
        assert len(ids) == len(set(ids))  # every added trial under an id of its own
        meta = json.loads((second / "meta.json").read_text())["settle"]
        (cell,) = [c for c in meta["scenarios"]["cases"]["cells"]
                   if (c["backend"], c["variant"]) == CELL[1:]]
        assert cell["why"] == ["deciding", "flipped"] and cell["ended"] == "rate stated"
        assert (cell["finished"], cell["failures"]) == (len(records), len(failures))
        assert meta["budget_s"] == 300.0 and meta["previous"][0]["run"] == first.name
        # The column's other candidate failed at its planned trial: nothing was added to it.
        session = [c for c in meta["scenarios"]["cases"]["cells"]
                   if (c["backend"], c["variant"]) == ("session", "idle_in_transaction")]
        assert session[0]["ended"] == "failure found" and session[0]["finished"] == 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test_added_trials_survive_ctrl_c_and_a_resumed_run_settles_on_without_running_one_twice(tmp_path):
    """Interrupted while it adds trials (wherever the Ctrl-C lands in the round), the run keeps what finished; the
    resumed run plans from trials.jsonl, so it adds only what each cell still lacks, under new ids."""
    (tmp_path / "flaky_lock.py").write_text(FLAKY)
    results, tmp = tmp_path / "results", shared_tmp(tmp_path)
    env = {**os.environ, "TMPDIR": str(tmp)}
    try:
        started = subprocess.Popen([sys.executable, "-m", "lab.cli", "run", "--backend-module", "flaky_lock:FlakyLock",
                                    "--backend", "flaky_lock,session", "--scenario", "cases", "--profile", "quick",
                                    "--results", str(results), "--settle", "--previous", "none"],
                                   stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
        assert started.stderr is not None
        for line in started.stderr:
            if "added round 1" in line:
                started.send_signal(signal.SIGINT)
                break
        _, err = started.communicate(timeout=300)
        assert started.returncode in (0, EXIT_INTERRUPTED), err  # 0: the round ended before the Ctrl-C came
        (folder,) = results.iterdir()
        before = [json.loads(line)["id"] for line in (folder / "trials.jsonl").read_text().splitlines()]

        resumed = subprocess.run([sys.executable, "-m", "lab.cli", "run", "--resume", folder.name, "--results",
                                  str(results)], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
        assert resumed.returncode == 0, resumed.stderr
        after = [json.loads(line)["id"] for line in (folder / "trials.jsonl").read_text().splitlines()]
        assert after[:len(before)] == before and len(after) == len(set(after))  # kept, and none run twice
        meta = json.loads((folder / "meta.json").read_text())["settle"]
        assert len(meta["commands"]) == 2 and meta["spent_s"] > 0
        cells = {(c["backend"], c["variant"]): c for c in meta["scenarios"]["cases"]["cells"]}
        flaky = cells[CELL[1:]]
        assert flaky["ended"] == "failure found" and flaky["failures"] >= 1  # found, the run resumed or not
        assert all(c["ended"] not in (None, "budget spent") for c in cells.values())
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
