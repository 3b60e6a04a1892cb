"""`lab run` and `lab report` as a user runs them: real servers, real signals, real files."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lab.report import published
from scenarios.failover import Failover
from tests.server.helpers import alive, processes_under, shared_tmp

pytestmark = pytest.mark.server


def lab_env(tmp: Path) -> dict:
    env = dict(os.environ)
    env["TMPDIR"] = str(tmp)  # the embedded servers' temp dir lands here, so leaks are visible
    for name in ("LAB_PG_DSN", "LAB_REDIS_URL", "LAB_ETCD_ENDPOINT"):
        env.pop(name, None)
    return env


def lab(*args, cwd: Path, tmp: Path | None = None, timeout=180):
    own_tmp = tmp is None
    tmp = shared_tmp(cwd) if own_tmp else tmp
    try:
        return subprocess.run([sys.executable, "-m", "lab.cli", *args], capture_output=True, text=True,
                              cwd=cwd, env=lab_env(tmp), timeout=timeout)
    finally:
        if own_tmp:
            shutil.rmtree(tmp, ignore_errors=True)


def trials_of(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "trials.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    """One quick run of every backend through cases and calibrate, shared by the tests below."""
    cwd = tmp_path_factory.mktemp("quick")
    tmp = shared_tmp(cwd)
    result = lab("run", "--profile", "quick", "--backend", "all", "--scenario", "cases,calibrate",
                 cwd=cwd, tmp=tmp)
    assert result.returncode == 0, result.stderr
    (run,) = (cwd / "results").iterdir()
    yield cwd, run, result, tmp
    tmp.rmdir()


def test_run_prints_outcomes_and_leaves_nothing_running(quick_run):
    cwd, run, result, tmp = quick_run
    assert "outcomes" in result.stdout and "lost 1/1" in result.stdout
    assert processes_under(tmp) == []
    assert list(tmp.iterdir()) == []


def test_run_folder_describes_itself(quick_run):
    _, run, _, _ = quick_run
    meta = json.loads((run / "meta.json").read_text())
    assert meta["profile"] == "quick" and meta["scenarios"] == ["cases", "calibrate"]
    assert meta["services"]["postgres"]["version"].startswith("18.")
    assert meta["services"]["postgres"]["embedded"] is True
    assert "redis" not in meta["services"]  # no chosen backend needs it, so it was not started
    assert meta["versions"]["sqlalchemy"] and meta["machine"]["cores"] >= 1


def test_outcomes_match_the_post(quick_run):
    _, run, _, _ = quick_run
    # the post's methods on PostgreSQL (the MariaDB locks' cases are set beside them: test_mariadb_locks.py)
    by_case = {t["measures"]["case"]: t for t in trials_of(run) if t["scenario"] == "cases" and t["status"] == "ok"
               and t["measures"]["case"] and t["measures"].get("lock_server", "postgres") == "postgres"}
    assert {k: v["verdict"] for k, v in by_case.items()} == {
        "A": "lost", "B": "held", "C": "held", "D": "lost", "E": "lost"}
    assert by_case["A"]["measures"]["next_query"] == "OperationalError"
    calibration = [t for t in trials_of(run) if t["scenario"] == "calibrate"
                   and t["backend"] == "session_autocommit"]
    assert len(calibration) == 5
    # The detector sees every loss after the kill at 2.00 s; whether within its 50 ms poll is a timing a busy
    # machine may stretch (the suite's own load once made one poll late), so the words may say either.
    assert all(t["verdict"] in ("lost within one poll", "lost, detected late") and t["measures"]["got_at"] >= 2.0
               for t in calibration)
    assert all(t["judgement"]["figures"]["detection"] in ("within one poll", "late") and t["safety"] == "untested"
               for t in calibration)  # the detector's figure, and no write to judge


def test_backends_without_a_session_lock_are_skipped_with_the_reason(quick_run):
    _, run, _, _ = quick_run
    skipped = [t for t in trials_of(run) if t["backend"] == "xact" and t["scenario"] == "cases"]
    assert [t["status"] for t in skipped] == ["skipped"] and "session_lock" in skipped[0]["reason"]


def test_report_prints_the_posts_lines_and_is_byte_stable(quick_run):
    cwd, run, _, _ = quick_run
    first = lab("report", run.name, "--output", "R1.md", cwd=cwd)
    second = lab("report", str(run), "--output", "R2.md", cwd=cwd)
    assert first.returncode == 0 and second.returncode == 0, first.stderr
    text = (cwd / "R1.md").read_text()
    assert text == (cwd / "R2.md").read_text()
    for letter in "ABCDE":
        assert f"| {letter} | {published.CASE_TITLES[letter]} | match (1/1 trials) |" in text
        for line in published.CASE_LINES[letter]:
            assert f"| `{line}` | `{line}` |" in text
    assert re.search(r"\*\*session_autocommit\*\*: within one poll in [0-5] of 5 runs", text), text  # see above


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_interrupt_keeps_finished_trials_and_resume_completes(tmp_path, sig):
    tmp = shared_tmp(tmp_path)
    args = [sys.executable, "-m", "lab.cli", "run", "--profile", "quick", "--backend",
            "session,session_autocommit", "--scenario", "cases,calibrate"]
    proc = subprocess.Popen(args, cwd=tmp_path, env=lab_env(tmp), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    trials = tmp_path / "results"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # wait for the first finished trial, then interrupt mid-run
        done = list(trials.glob("*/trials.jsonl"))
        if done and done[0].read_text().strip():
            break
        time.sleep(0.05)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "finished trials kept" in err and "Traceback" not in err
    assert processes_under(tmp) == [] and list(tmp.iterdir()) == []
    (run,) = trials.iterdir()
    kept = trials_of(run)
    assert 1 <= len(kept) < 20  # 6 cases, 4 n/a (MariaDB's two guards), 10 calibrations when complete

    resumed = lab("run", "--resume", run.name, cwd=tmp_path, tmp=tmp)
    assert resumed.returncode == 0, resumed.stderr
    final = trials_of(run)
    assert final[:len(kept)] == kept  # nothing rewritten
    assert len({t["id"] for t in final}) == len(final) == 20
    assert processes_under(tmp) == []
    tmp.rmdir()


def test_ctrl_c_while_two_lanes_run_stops_both_and_resume_completes(tmp_path):
    """failover (servers of its own) runs beside cases: a Ctrl-C in the middle stops both lanes, leaves no
    server (the failover pairs included) and no temp dir, and --resume finishes what is missing. A failover event
    serves both backends: one the Ctrl-C cut short left no record, and the resumed run runs it again whole."""
    tmp = shared_tmp(tmp_path)
    args = [sys.executable, "-m", "lab.cli", "run", "--profile", "quick", "--backend", "session,xact",
            "--scenario", "cases,failover"]
    proc = subprocess.Popen(args, cwd=tmp_path, env=lab_env(tmp), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # interrupt once a trial is kept and a failover pair is up beside it
        done = list((tmp_path / "results").glob("*/trials.jsonl"))
        if done and done[0].read_text().strip() and any(tmp.glob("locklab-*/failover-*")):
            break
        time.sleep(0.05)
    else:
        proc.kill()
        pytest.fail("no failover pair started within 120 s")
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert processes_under(tmp) == [] and list(tmp.iterdir()) == []
    (run,) = (tmp_path / "results").iterdir()
    kept = trials_of(run)
    resumed = lab("run", "--resume", run.name, cwd=tmp_path, tmp=tmp)
    assert resumed.returncode == 0, resumed.stderr
    final = trials_of(run)
    assert final[:len(kept)] == kept and len(kept) < len(final)  # nothing rewritten; the interrupt cut it short
    assert {t["scenario"] for t in final} == {"cases", "failover"} and len({t["id"] for t in final}) == len(final)
    for trials in (kept, final):  # every event kept is kept whole: both its subjects, recorded together
        events = [t["event"]["id"] for t in trials if t["scenario"] == "failover" and t["status"] == "ok"]
        assert all(events.count(event) == 2 for event in events)
        assert all(events[i] == events[i + 1] for i in range(0, len(events), 2))
    assert len({t["event"]["id"] for t in final if t["scenario"] == "failover"}) == len(Failover.variants)
    assert processes_under(tmp) == []
    tmp.rmdir()


def test_unreachable_dsn_is_one_line_and_writes_nothing(tmp_path):
    start = time.monotonic()
    result = lab("run", "--pg-dsn", "postgresql://app:s3cret@127.0.0.1:1/db", cwd=tmp_path, timeout=30)
    assert time.monotonic() - start < 10
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("lab: error: postgres at ") and "unreachable" in lines[0]
    assert "s3cret" not in result.stderr + result.stdout
    assert not (tmp_path / "results").exists() or not any((tmp_path / "results").iterdir())


@pytest.mark.parametrize("flag, value, service", [
    ("--redis-url", "redis://127.0.0.1:1/0", "redis"),
    ("--etcd-endpoint", "127.0.0.1:1", "etcd"),
    ("--pg-dsn", "mysql://u:p@h/db", "PostgreSQL DSN"),
])
def test_other_bad_addresses_are_one_line(tmp_path, flag, value, service):
    tmp = shared_tmp(tmp_path)
    result = lab("run", "--scenario", "cases", flag, value, cwd=tmp_path, tmp=tmp, timeout=30)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and service in lines[0]
    assert processes_under(tmp) == [] and list(tmp.iterdir()) == []
    tmp.rmdir()


def test_services_up_stops_on_sigint_even_as_a_background_job(services, tmp_path):
    """A non-interactive shell starts background jobs with SIGINT ignored; kill -INT must still stop them."""
    tmp = shared_tmp(tmp_path)
    log = tmp_path / "services.log"
    launcher = subprocess.run(["bash", "-c", f"{sys.executable} -m lab.cli services up > {log} 2>&1 & echo $!"],
                              capture_output=True, text=True, env=lab_env(tmp), timeout=30)
    pid = int(launcher.stdout.strip())
    deadline = time.monotonic() + 60
    while "Ctrl-C stops them" not in (log.read_text() if log.exists() else ""):
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.1)
    # The person who asked gets working addresses, passwords included (and only here).
    exports = dict(line.strip().removeprefix("export ").split("=", 1) for line in log.read_text().splitlines()
                   if line.strip().startswith("export "))
    # ZooKeeper is exported where Debian's package let the lab start one (the fixture's own services tell).
    # So are ZooKeeper and MariaDB, where Debian's packages let the lab start them (the fixture's services tell).
    packaged = ({"LAB_ZK_HOSTS"} if "zookeeper" in services.embedded else set()) | \
        ({"LAB_MARIADB_URL"} if "mariadb" in services.embedded else set())
    assert set(exports) == {"LAB_PG_DSN", "LAB_REDIS_URL", "LAB_ETCD_ENDPOINT", "LAB_REDLOCK_URLS"} | packaged
    import redis
    from sqlalchemy import text

    from lab.servers.clients import pg_engine
    engine = pg_engine(exports["LAB_PG_DSN"].strip("'"), poolclass=None)
    with engine.connect() as conn:
        assert conn.execute(text("select 1")).scalar() == 1
    engine.dispose()
    client = redis.Redis.from_url(exports["LAB_REDIS_URL"].strip("'"))
    assert client.ping()
    client.close()
    os.kill(pid, signal.SIGINT)
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(pid) and log.read_text().strip().endswith("stopped")
    assert processes_under(tmp) == [] and list(tmp.iterdir()) == []
    tmp.rmdir()


def test_a_server_with_too_few_free_connections_is_refused_in_one_line(services, engines, tmp_path):
    """A role whose CONNECTION LIMIT leaves less than one trial needs: exit 2, one line with both numbers,
    before any result folder is written."""
    from sqlalchemy import text

    from lab.servers.embedded import new_password

    monitor, _ = engines
    password = new_password()
    with monitor.connect() as conn:
        conn.execute(text(f"create role lab_limited login connection limit 15 password '{password}'"))
        # The test session's schema is the postgres role's: without these the preflight refuses the role first
        # (it could not use the lab's schema), a line of its own (tests/server/test_preflight.py).
        conn.execute(text("grant usage, create on schema locklab to lab_limited"))
    try:
        dsn = services.pg_url.set(username="lab_limited", password=password).render_as_string(hide_password=False)
        result = lab("run", "--profile", "quick", "--backend", "session", "--scenario", "cases", "--pg-dsn", dsn,
                     cwd=tmp_path)
        assert result.returncode == 2, result.stderr
        [line] = result.stderr.strip().splitlines()
        assert "too few free connections: scenario cases needs 24 (4 for one trial, 20 for the lab's pools)" in line
        assert "the server allows 15" in line and "CONNECTION LIMIT leaves 15" in line
        assert password not in line and not (tmp_path / "results").exists()
    finally:
        with monitor.connect() as conn:
            conn.execute(text("revoke usage, create on schema locklab from lab_limited"))
            conn.execute(text("drop role lab_limited"))


def test_a_piped_run_is_quiet_and_says_where_each_scenario_stands(tmp_path):
    """Not a terminal (CI, `| tee`): a line when each scenario starts and ends, and nothing from a lock
    library on the console, whatever the kill points do to the adapters; libraries.log keeps it."""
    import re

    import backends

    # The adapters are the lock libraries that log, raise in threads and finalizers: the registry of them.
    result = lab("run", "--profile", "quick", "--backend", ",".join(backends.ADAPTERS), "--scenario",
                 "killpoints,pause", cwd=tmp_path, timeout=900)
    assert result.returncode == 0, result.stderr[-2000:]
    console = result.stdout + result.stderr
    assert "Traceback" not in console and "Exception ignored" not in console
    assert "background thread" not in console
    for scenario in ("killpoints", "pause"):
        assert re.search(rf"^{scenario}: \d+ trials, about \d+ (s|min)$", result.stderr, re.M), result.stderr
        assert re.search(rf"^{scenario}: done in [\d.]+ s, \d+ trials", result.stderr, re.M), result.stderr
    [run] = (tmp_path / "results").iterdir()
    kept = (run / "libraries.log").read_text()
    counted = re.search(r"^(\d+) messages from lock libraries", result.stderr, re.M)
    assert (counted is None) == (kept == "")
