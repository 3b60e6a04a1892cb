"""Clock faults on real servers and holders (lab/faults/server_clock.py, redlock_clock.py, scenarios/holder_clock.py),
and the margin search on a real fault (scenarios/margin.py). Each needs Debian's libfaketime."""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import psutil
import pytest

from lab.checkers import ops
from lab.measures.margin import Outcome, Step, bounds
from lab.servers import fake_clock
from lab.servers.clients import etcd_client
from lab.servers.etcd.server import EmbeddedEtcd
from lab.servers.redis.server import EmbeddedRedis
from scenarios.holder_clock import HolderAllClocksBack, HolderClock
from scenarios.margin import Margin
from scenarios.server_clock import ServerClock
from tests.server.helpers import outcome_of, trial_env
from tests.server.test_lease_faults import no_holder_left, plant
from tests.server import planted_backends

pytestmark = [pytest.mark.server, pytest.mark.os_packages("libfaketime")]


def run(services, engines, scenario, backend: str, variant: str, **params):
    env = trial_env(services, engines, scenario.name, backend, variant, {**scenario.profile_params("quick"), **params})
    measures = scenario.run_trial(env)
    assert no_holder_left()
    assert not _clocked_servers_left(services.tmp)
    return measures, outcome_of(scenario, measures, backend)


def _clocked_servers_left(tmp: Path) -> list[str]:
    """Processes still running with a fake clock file of the lab's temp dir in their environment."""
    left = []
    for proc in psutil.process_iter(["pid", "status"]):
        try:
            if proc.info["status"] != psutil.STATUS_ZOMBIE and str(tmp) in proc.environ().get("FAKETIME_TIMESTAMP_FILE", ""):
                left.append(f"{proc.pid} {' '.join(proc.cmdline())}")
        except (psutil.AccessDenied, psutil.NoSuchProcess):
            continue
    return left


def _clock_readings(measures: dict) -> list[ops.Op]:
    return [op for op in ops.from_json(measures["history"]) if op.f is ops.F.CLOCK]


@pytest.mark.parametrize("backend, verdict", [("redis", "stale write accepted"), ("lease_row", "stale write rejected")])
def test_a_lock_servers_clock_jumped_past_the_ttl_hands_the_lease_over_at_once(services, engines, backend, verdict):
    m, outcome = run(services, engines, ServerClock(), backend, "jump")
    ttl = m["ttl_s"]
    assert abs(m["evidence"]["offset_after_s"] - 2 * ttl) < 0.1 and abs(m["evidence"]["offset_after_heal_s"]) < 0.1
    assert outcome["judgement"]["lock"] == "false" and outcome["verdict"] == verdict  # the fence saves lease_row alone
    assert m["contender"]["acquired"] and m["contender"]["granted_at"] < ttl  # inside the holder's own TTL
    offsets = [op.get("offset_s") for op in _clock_readings(m)]
    assert offsets[0] == pytest.approx(0, abs=0.05) and max(offsets) == pytest.approx(2 * ttl, abs=0.1)


def test_kleppmanns_case_two_clients_each_hold_a_majority_and_with_no_jump_the_second_is_refused(services, engines):
    m, outcome = run(services, engines, ServerClock(), "redlock", "kleppmann")
    evidence = m["evidence"]
    assert evidence["masters"] == 5 and len(evidence["granted_by"]) == 3  # the holder's majority, exactly
    assert not evidence["key_on_struck_after"] and len(evidence["granted_by_after"]) == 2
    assert m["contender"]["acquired"]  # so it holds three of five: the jumped master and the two that refused the holder
    assert evidence["refused_while_asking"] == [3, 4] and 0 in evidence["granted_by"]
    assert outcome["judgement"]["lock"] == "false"  # granted while the holder still believed it held
    assert outcome["judgement"]["kind"] in ("lost", "stale write accepted")
    m, outcome = run(services, engines, ServerClock(), "redlock", "kleppmann_control")
    assert abs(m["evidence"]["offset_after_s"]) < 0.05 and m["evidence"]["key_on_struck_after"]
    assert not m["contender"]["acquired"] and outcome["verdict"] == "held"


def test_a_fast_clock_is_measured_as_its_rate(services, engines):
    m, _ = run(services, engines, ServerClock(), "redis", "fast")
    assert m["evidence"]["measured_rate"] == pytest.approx(2.0, abs=0.1)
    assert m["contender"]["acquired"]  # a lease not renewed lapses in half its TTL on a clock twice as fast


def test_the_holders_wall_clock_stepped_back_stops_a_wall_clock_renewal_and_not_a_monotonic_one(services, engines,
                                                                                                  monkeypatch):
    planted = plant(monkeypatch, planted_backends.RenewsByTheWallClock)
    params = {"ttl_s": 2.0}  # room for a renewal every TTL/3 on a busy machine
    for backend, kept in ((planted, False), ("sherlock_redis", True)):
        control, _ = run(services, engines, HolderClock(), backend, "control", **params)
        assert control["contender"]["acquired"] is False, backend  # both renew in time with the clock left alone
        m, outcome = run(services, engines, HolderClock(), backend, "wall_back", **params)
        assert m["evidence"]["holder_wall_offset_s"] == pytest.approx(-20, abs=0.1)
        assert m["evidence"]["holder_monotonic_offset_s"] == pytest.approx(0, abs=0.1)
        assert (outcome["verdict"] == "held") is kept, (backend, outcome["verdict"])
        readings = [op for op in _clock_readings(m) if op.process == "holder"]
        assert min(op.get("offset_s") for op in readings) == pytest.approx(-20, abs=0.1)
        assert len(readings) < 60  # asked for a tenth of a second at most, while the file is reread once a second


def test_faking_the_holders_monotonic_clock_runs_only_where_libfaketime_can(services, engines):
    from scenarios.base import Skip

    reason = HolderAllClocksBack().missing()
    if reason is None:  # a libfaketime that fakes a Python process's monotonic clock (0.9.11 and later)
        m, _ = run(services, engines, HolderClock(), "sherlock_redis", "all_back")
        assert m["evidence"]["holder_monotonic_offset_s"] == pytest.approx(-10, abs=0.1)
        return
    assert "cannot fake a Python process's monotonic clock" in reason
    env = trial_env(services, engines, "holder_clock", "sherlock_redis", "all_back", HolderClock().profile_params("quick"))
    with pytest.raises(Skip, match="does not run: this libfaketime cannot fake"):
        HolderClock().run_trial(env)


def test_the_margin_search_bisects_a_real_fault_within_its_budget(services, engines):
    m, outcome = run(services, engines, Margin(), "redis", "server_jump", budget=3, confirm=1, resolution=0.1)
    steps = [Step(s["strength"], Outcome(s["outcome"])) for s in m["steps"]]
    assert [s.strength for s in steps] == [1.5, 0.0, 0.75] and len(m["steps"]) == 3  # top, bottom, one bisection
    assert steps[0].outcome is Outcome.BROKE and steps[1].outcome is Outcome.SURVIVED
    margin = bounds(steps)
    assert margin.to_json() == m["margin"] and margin.broke is not None and margin.survived is not None
    assert margin.survived < margin.broke and margin.trials == 3
    assert all(s["history"] and s["judgement"] for s in m["steps"])  # every step judged from its own history
    assert "margin" in outcome["judgement"]["figures"] and "TTL" in outcome["verdict"]


def test_etcd_is_out_of_libfaketimes_reach_its_binary_is_static_and_its_lease_keeps_its_ttl():
    """The evidence behind etcd's *not run* (a lab limit, never n/a): no program interpreter in its binary, and a lease
    granted by an etcd started with the preload lasts its TTL although the clock file says sixty seconds later."""
    from backends import load
    from lab.checkers.outcomes import SkipKind, skip_kind_of
    from lab.faults.server_clock import ServerClockJump, server_out_of_reach
    from lab.servers.services import Services

    reason = server_out_of_reach("etcd", Services())
    assert reason is not None and skip_kind_of(reason) is SkipKind.NOT_RUN and "static binary" in reason
    assert ServerClockJump().applies_to(load("etcd_fenced")) is None  # the fault reaches its lock: the lab cannot
    assert skip_kind_of(ServerClockJump().applies_to(load("redlock"))) is SkipKind.NOT_RUN  # one of five: Kleppmann's
    assert not fake_clock.dynamically_linked(EmbeddedEtcd.binary_path())
    assert fake_clock.dynamically_linked(EmbeddedRedis.binary_path())
    library = fake_clock.find_libfaketime()
    assert library is not None
    root = Path(tempfile.mkdtemp(prefix="locklab-etcd-clock-"))
    clock = fake_clock.FakeClock(root / "clocks", "etcd", library)
    server = EmbeddedEtcd(root, environment=clock.environment())
    try:
        server.start()
        client = etcd_client(server.endpoint, timeout=5)
        lease = client.lease(5)
        clock.jump(60.0)
        time.sleep(1.0)
        assert lease.remaining_ttl >= 2  # a server on the moved clock would have expired it at once
        time.sleep(5.5)
        assert lease.remaining_ttl <= 0  # and it does expire, at its TTL
        client.close()
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.os_packages("zookeeper")
@pytest.mark.parametrize("variant", ["jump", "fast"])
def test_zookeepers_jvm_runs_on_a_fake_wall_clock_and_its_sessions_keep_their_own_time(services, engines, variant):
    """libfaketime preloaded into ZooKeeper's JVM (Debian's OpenJDK 17, dynamically linked) moves the server's wall
    clock, read back as the mtime the server stamps on a znode it writes; its monotonic clock, which times the
    sessions (ExpiryQueue on System.nanoTime), is left alone. So the jump and the fast clock strike, and are
    confirmed, and the holder's session, its lock and its fence are measured under them, not declared n/a."""
    from backends import load
    from lab.faults.server_clock import ServerClockFast, ServerClockJump

    fault = ServerClockJump if variant == "jump" else ServerClockFast
    assert fault().applies_to(load("zookeeper_fenced")) is None
    assert fault().cannot_run(load("zookeeper_fenced"), services) is None
    m, outcome = run(services, engines, ServerClock(), "zookeeper_fenced", variant)
    evidence, ttl = m["evidence"], m["ttl_s"]
    assert evidence["clock"] == "zookeeper", evidence
    if variant == "jump":
        assert abs(evidence["offset_after_s"] - 2 * ttl) < 0.1, evidence
    else:
        assert evidence["measured_rate"] == pytest.approx(2.0, abs=0.1), evidence
    assert abs(evidence["offset_after_heal_s"]) < 0.1
    assert outcome["verdict"] in ("held", "intact (250 rows)", "stale write rejected"), outcome
    assert m["rows_final"] == 250
