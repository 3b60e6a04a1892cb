"""A lock client outside the lab, spoken to over the holder protocol, is paused, cut and killed like a Python holder.

The client is tests/server/holder_programs/fenced_lease.py: a Redis lease with a fencing token that imports
nothing of the lab, run as a child process, declared by a subclass of ExternalLock below, as a program in
any language would be. It needs no Node.js, so these tests run on every machine the server tier runs on."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

import backends
from backends.base import BackendContext
from backends.external import IDLE, ExternalLock
from lab.declarations.capabilities import Capability
from lab.contract import check_backend
from lab.holder.protocol import ProtocolError
from tests.server.helpers import alive, seeded_table, trial_env, verdict_of

pytestmark = pytest.mark.server

PROGRAMS = Path(__file__).resolve().parent / "holder_programs"


class FencedLeaseProgram(ExternalLock):
    """The declaration: its command, its folder, what it is."""

    name = "fenced_lease_program"
    summary = "a Redis lease with a fencing token, held by a child program over the holder protocol"
    capabilities = frozenset({Capability.LEASE_EXPIRY, Capability.EXCLUSION, Capability.FENCING})
    services = ("postgres", "redis")
    library = "redis"
    command = (sys.executable, "fenced_lease.py")
    folder = PROGRAMS


class BrokenProgram(FencedLeaseProgram):
    name = "broken_program"
    command = (sys.executable, "broken.py")


@pytest.fixture
def registered(monkeypatch):
    """Both declarations registered as a plugin would be (a holder process loads them from this module)."""
    for cls in (FencedLeaseProgram, BrokenProgram):
        monkeypatch.setitem(backends.REGISTRY.entries, cls.name, f"{__name__}:{cls.__name__}")
    yield
    IDLE.end_all()


@pytest.fixture(scope="module")
def own_servers():
    """check-backend creates and drops the lab's schema: servers of this module's own."""
    from lab.servers.services import start_services

    with start_services(["postgres", "redis"]) as running:
        yield running


def program_pids(evidence: dict) -> list[int]:
    return list(evidence.get("children_stopped", []))


def test_check_backend_keeps_every_promise_through_the_protocol(registered, own_servers, capsys):
    assert check_backend(FencedLeaseProgram.name, own_servers) == 0
    out = capsys.readouterr().out
    assert "9 of 9 promises kept" in out, out


def test_a_program_that_breaks_the_protocol_is_one_broken_promise(registered, own_servers, capsys):
    start = time.monotonic()
    assert check_backend(BrokenProgram.name, own_servers) == 1
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    (broken,) = [line for line in out.splitlines() if line.startswith("BROKEN")]
    assert broken.startswith("BROKEN BrokenProgram(ctx, key): it raised ProtocolError: broken_program's holder "
                             "program broke the holder protocol with a line that is not JSON: 'ready when you are'")
    assert time.monotonic() - start < 60  # at once, not after a request's timeout


def test_a_paused_holder_stops_with_its_program_and_the_fence_refuses_its_write(registered, services, engines):
    """The pause stops the holder process and its program (state T, both), as one process would be; the lease
    lapses, a contender takes it, and the holder's write carries the token its program reported: refused."""
    from scenarios.pause import Pause

    scenario = Pause()
    m = scenario.run_trial(trial_env(services, engines, "pause", FencedLeaseProgram.name, "sigstop",
                                     scenario.profile_params("quick")))
    assert m["evidence"]["process_state"] == "T" and len(program_pids(m["evidence"])) == 1
    assert verdict_of(scenario, m, FencedLeaseProgram.name) == "stale write rejected"
    assert m["contender"]["token"] > m["holder"]["token"] > 0
    told = {(s["how"], s["via"]) for s in m["holder"]["signals"]}
    assert ("refused", "the fence") in told  # the write's refusal tells it at the latest
    assert ("false", "release()") in told  # its program's release found the value gone: a fail without an error


def test_a_cut_reaches_the_programs_connection(registered, services, engines):
    """The program connects where its start request's `lock` says: the cut's proxy carries its connection."""
    from scenarios.cut import Cut

    scenario = Cut()
    m = scenario.run_trial(trial_env(services, engines, "cut", FencedLeaseProgram.name, "blackhole",
                                     scenario.profile_params("quick")))
    assert m["evidence"]["connections"] >= 1 and m["evidence"]["bytes_before"] > 0
    assert m["evidence"]["relayed_during"] == 0
    assert verdict_of(scenario, m, FencedLeaseProgram.name) == "stale write rejected"
    signals = m["holder"]["signals"]
    # Its renewal through the dead proxy either timed out in the program (an `info` answer: an exception to the
    # lab) or, its bytes relayed once the cut healed, found the value gone (a `fail`: a False return).
    renewals = [s for s in signals if s["via"] == "renew()"]
    assert renewals and (renewals[0]["how"], "Timeout" in renewals[0]["text"]) in (("exception", True), ("false", False))


def test_abandon_kills_the_program_and_releases_nothing(registered, services, engines):
    monitor, writes = engines
    table = seeded_table(engines, "holder_program_abandon")
    ctx = BackendContext(services, monitor, writes, table, {}, {"ttl_s": 5.0})
    first = FencedLeaseProgram(ctx, "abandoned")
    second = FencedLeaseProgram(ctx, "abandoned")
    try:
        assert first.acquire() is True
        pid = first.program.pid
        first.abandon()
        assert not alive(pid)
        assert second.acquire() is False  # the lease is still there: a killed holder releases nothing
    finally:
        second.close()


def test_a_closed_program_is_reused_with_new_connections(registered, services, engines):
    """A program whose backend closed is kept and started again for the next instance: a new lock, not the old."""
    monitor, writes = engines
    ctx = BackendContext(services, monitor, writes, None, {}, {"ttl_s": 5.0})
    first = FencedLeaseProgram(ctx, "reused-1")
    pid = first.program.pid
    assert first.acquire() is True
    first.close()
    second = FencedLeaseProgram(ctx, "reused-2")
    assert second.program.pid == pid
    assert second.acquire() is True and second.held() is True
    second.abandon()  # killed: never handed out again
    with pytest.raises(ProtocolError):
        second.program.request("held", 5)
    assert not alive(pid)
    third = FencedLeaseProgram(ctx, "reused-3")
    try:
        assert third.program.pid != pid
    finally:
        third.close()
