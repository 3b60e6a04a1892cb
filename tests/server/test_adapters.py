"""Library adapters under a real pause: each lets the stale write through, and each tells its caller
something different (a log line, a dead thread, a False, an exception) at a different moment."""

import shutil
import subprocess
import sys
from contextlib import contextmanager

import pytest

from lab.servers.etcd.server import EmbeddedEtcd
from lab.servers.services import Services
from tests.server.helpers import shared_tmp, trial_env, verdict_of

pytestmark = pytest.mark.server

# backend, module it needs, how its release() said the lock was gone, words in what it said
RELEASE_AFTER_LOSS = [
    ("python_redis_lock", "redis_lock", "exception", "NotAcquired"),
    ("python_redis_lock_renew", "redis_lock", "exception", "NotAcquired"),
    ("tooz_redis", "tooz", "false", ""),
    ("tooz_etcd", "etcd3gw", "false", ""),
    ("sherlock_redis", "sherlock", "exception", "LockException"),
    ("sherlock_etcd", "sherlock", "exception", "LockException"),
    ("redis_asyncio", "redis.asyncio", "exception", "LockNotOwnedError"),
    # clear_lock() is a DEL and says nothing; the adapter asked first (the library keeps no token to ask with)
    ("celery_once", "celery_once", "false", ""),
]


@pytest.mark.parametrize("backend, module, how, words", RELEASE_AFTER_LOSS, ids=[r[0] for r in RELEASE_AFTER_LOSS])
def test_a_paused_holders_write_is_accepted_and_release_says_the_lock_was_gone(services, engines, backend,
                                                                             module, how, words):
    pytest.importorskip(module)
    from scenarios.pause import Pause

    scenario = Pause()
    m = scenario.run_trial(trial_env(services, engines, "pause", backend, "sigstop", scenario.profile_params("quick")))
    assert verdict_of(scenario, m, backend) == "stale write accepted"
    assert m["contender"]["granted_at"] < m["holder"]["write_at"]
    release = [s for s in m["holder"]["signals"] if s["via"] == "release()"]
    assert [s["how"] for s in release] == [how] and words in release[0]["text"]
    if backend == "tooz_redis":  # tooz logs the failed renewal, and tells the caller nothing else
        assert any(s["how"] == "log" and s["via"].startswith("logger tooz") for s in m["holder"]["signals"])
    if backend == "tooz_etcd":  # its heartbeat ignores the expired lease: no exception, no False before release
        assert not [s for s in m["holder"]["signals"] if s["how"] in ("exception", "false") and s["via"] != "release()"]
    if backend == "python_redis_lock_renew":
        # After SIGCONT the renewal thread and release() race: the thread dies with NotAcquired (only stderr
        # would see it) when it wakes first, and release() stops it quietly otherwise (once in five CI runs).
        # Either way nothing else told the caller before release().
        others = [s for s in m["holder"]["signals"] if s["via"] != "release()"]
        assert all(s["via"] == "thread _lock_renewer" and "NotAcquired" in s["text"] for s in others), others


def test_sherlock_etcd_does_not_run_against_an_etcd_without_the_v2_api(tmp_path):
    pytest.importorskip("sherlock")
    pytest.importorskip("etcd")
    from backends.adapters.sherlock import SherlockEtcdLock

    tmp = shared_tmp(tmp_path)
    etcd = EmbeddedEtcd(tmp, v2=False)
    try:
        etcd.start()
        reason = SherlockEtcdLock.cannot_run(Services(etcd_endpoint=etcd.endpoint))
        assert reason.startswith(f"etcd at {etcd.endpoint} does not serve the v2 API sherlock needs")
        result = subprocess.run([sys.executable, "-m", "lab.cli", "run", "--backend", "sherlock_etcd",
                                 "--scenario", "pause", "--profile", "quick", "--etcd-endpoint", etcd.endpoint,
                                 "--results", str(tmp_path / "r")], capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, result.stderr
        assert "sherlock_etcd does not run: etcd at" in result.stderr
        run = next((tmp_path / "r").iterdir())
        report = subprocess.run([sys.executable, "-m", "lab.cli", "report", run.name, "--results",
                                 str(tmp_path / "r")], capture_output=True, text=True, timeout=120)
        assert report.returncode == 0, report.stderr
        assert "| sherlock_etcd | does not run |" in (run / "REPORT.md").read_text()
        assert (run / "libraries.log").exists()  # library warnings go there, never to the console
    finally:
        etcd.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def test_sherlock_etcd_runs_against_the_labs_etcd(services):
    pytest.importorskip("sherlock")
    pytest.importorskip("etcd")
    from backends.adapters.sherlock import SherlockEtcdLock

    assert SherlockEtcdLock.cannot_run(services) is None  # the lab's embedded etcd serves v2


def test_pglock_session_is_a_session_lock_on_djangos_autocommit_connection(services, engines):
    """Django's connection is autocommit: the lock's session is idle, not idle in transaction, so the post's guard
    never fires (held) and idle_session_timeout ends it (lost), as the lab's session_autocommit."""
    pytest.importorskip("pglock")
    from scenarios.cases import Cases

    scenario = Cases()
    params = scenario.profile_params("quick")
    found = {}
    for variant in ("idle_in_transaction", "idle_session"):
        m = scenario.run_trial(trial_env(services, engines, "cases", "pglock_session", variant, params))
        assert m["holder_state"] == "idle"
        found[variant] = verdict_of(scenario, m, "pglock_session")
    assert found == {"idle_in_transaction": "held", "idle_session": "lost"}


def test_pglock_release_of_a_lock_its_session_no_longer_holds_raises(services, engines):
    """pglock's release() drops pg_advisory_unlock's false; the adapter reads PostgreSQL's WARNING instead."""
    pytest.importorskip("pglock")
    import backends
    from backends.base import BackendContext
    from lab.errors import LockLost

    monitor, writes = engines
    lock = backends.load("pglock_session")(BackendContext(services, monitor, writes, None, {}, {}), "pglock-twice")
    try:
        assert lock.acquire() is True and lock.held() is True
        lock.release()
        with pytest.raises(LockLost, match="you don't own a lock"):
            lock.release()
    finally:
        lock.close()


def test_pglock_xact_takes_its_lock_on_the_write_session_inside_the_write(services, engines):
    """xact=True: the lock is held by the session that writes, during the write, and gone with its commit."""
    pytest.importorskip("pglock")
    import pglock
    from sqlalchemy import text

    import backends
    from backends.base import BackendContext
    from lab.servers.postgres import sql as pg
    from tests.server.helpers import seeded_table

    monitor, writes = engines
    table = seeded_table(engines, "pglock_xact_session")
    backend = backends.load("pglock_xact")(BackendContext(services, monitor, writes, table, {}, {}), "pglock-xact")
    seen = {}

    def point(name, conn):
        if name == "after_lock":
            seen["pid"] = pg.backend_pid(conn)
            with monitor.connect() as observer:
                seen["holders"] = list(observer.execute(text(
                    "select pid from pg_locks where locktype = 'advisory' and granted and objsubid = 1 and "
                    "((classid::bigint << 32) | objid::bigint) = :k"), {"k": pglock.advisory(backend.company_key(1)).int_lock_id}).scalars())

    try:
        result = backend.rebuild(1, 250, "xact-run", point)
        assert result.outcome == "committed" and result.deleted == 250
        assert seen["holders"] == [seen["pid"]]
        assert not pg.holds_advisory_lock(monitor, seen["pid"], pglock.advisory(backend.company_key(1)).int_lock_id)
    finally:
        backend.close()


@contextmanager
def two_locks(services, engines, backend: str, key: str, ttl_s: float):
    """Two locks of backend on one key with a ttl_s lease, as two runs would make them; both closed after."""
    import backends
    from backends.base import BackendContext

    monitor, writes = engines
    make = backends.load(backend)
    ctx = BackendContext(services, monitor, writes, None, {}, {"ttl_s": ttl_s})
    first, second = make(ctx, key), make(ctx, key)
    try:
        yield first, second
    finally:
        first.close()
        second.close()


def test_celery_once_release_after_a_lapse_deletes_the_next_runs_lock(services, engines):
    """clear_lock() is a DEL of the key, whoever set it: the first run's release after its lock lapsed takes the
    second run's lock away (its held() turns False). The adapter's release says LockLost; the library said nothing."""
    pytest.importorskip("celery_once")
    import time

    from lab.errors import LockLost

    with two_locks(services, engines, "celery_once", "celery-once-lapse", ttl_s=0.5) as (first, second):
        assert first.acquire() is True
        time.sleep(1.0)
        assert second.acquire() is True and second.held() is True
        with pytest.raises(LockLost):
            first.release()
        assert second.held() is False


def test_aioredlock_keeps_its_lock_alive_from_its_own_watchdog(services, engines):
    pytest.importorskip("aioredlock")
    import time

    with two_locks(services, engines, "aioredlock", "aioredlock-watchdog", ttl_s=1.0) as (first, second):
        assert first.acquire() is True
        time.sleep(2.5)  # two and a half TTLs: only its watchdog's extensions keep it
        assert first.held() is True and second.acquire() is False
        first.release()
        assert second.acquire() is True
        second.release()


def test_aioredlocks_watchdog_takes_a_lapsed_lock_back_and_its_holder_hears_nothing(services, engines):
    """After a pause the watchdog's extend() finds the key gone (the contender wrote and released) and sets it
    again, as its Lua script sets an absent key: the holder writes after the contender, held() says yes, release()
    succeeds (measured 1 of 1 in the quick run), and no signal ever told it that another run had the company."""
    pytest.importorskip("aioredlock")
    from scenarios.pause import Pause

    scenario = Pause()
    m = scenario.run_trial(trial_env(services, engines, "pause", "aioredlock", "sigstop",
                                     scenario.profile_params("quick")))
    assert verdict_of(scenario, m, "aioredlock") == "stale write accepted"
    assert m["contender"]["granted_at"] < m["holder"]["write_at"]
    # Its watchdog fires as soon as the holder continues; should its release() ask first (a loaded machine), the
    # adapter's release says the lock was gone. Either way nothing told the holder before its write.
    told = [(s["how"], s["via"]) for s in m["holder"]["signals"]]
    assert told in ([], [("false", "release()")])
    assert (m["holder"]["release"] == "released") == (told == [])
