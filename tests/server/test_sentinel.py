"""Redis under Sentinel: real primaries, replicas and three Sentinels per trial, failed over by Sentinel itself.

Each fault is confirmed by the Sentinels' view and the servers'; where a race is real, the test asserts what
holds either way, and a fenced lock never has a stale write accepted.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import replace

import pytest

import backends
from lab.faults import FaultNotConfirmed, Target
from lab.faults import sentinel as sentinel_faults
from lab.servers.clients import parse_sentinel_url, redis_client
from lab.servers.sentinel.cluster import SentinelRedis, SentinelSettings
from scenarios.sentinel import Sentinel
from tests.server.helpers import lock_lost, processes_under, quick_trial

pytestmark = [pytest.mark.server, pytest.mark.slow]


def run(services, engines, backend: str, variant: str) -> tuple[dict, str]:
    scenario = Sentinel()
    assert scenario.variant_skip(variant, backends.load(backend)) is None
    return quick_trial(services, engines, scenario, backend, variant, "sentinel-")


def confirmed_by_sentinel(m: dict) -> None:
    """The failover as Sentinel and the servers saw it: +switch-master, a majority naming the new primary, which
    answers ROLE master; at the end the old primary is a replica again and every Sentinel names the new one."""
    e = m["evidence"]
    assert 0 < e["switch_master_after_s"] < 30 and e["new_primary_role"]["role"] == "master"
    named = [tuple(a) for a in e["sentinels_name"].values() if a]
    after = {tuple(a) for a in e["sentinels_name_after"].values() if a}
    assert len(after) == 1 and sum(a in after for a in named) >= 2  # a majority named the primary of the end
    assert e["old_primary_demoted_after_fault_s"] > e["switch_master_after_s"]
    assert m["sentinel"]["quorum"] == 2 and m["sentinel"]["sentinels"] == 3 and m["sentinel"]["down_after_ms"] == 1000
    p = m["promotion"]
    assert p["manager"].startswith("sentinel 6.") and p["promote_s"] is not None
    assert p["promote_s"] <= e["switch_master_after_s"] + 0.5  # the replica answers as primary before the switch
    assert p["old_primary_writes_survived"] is not None and 0 <= p["old_primary_writes_survived"] <= \
        p["old_primary_accepted"]


def test_a_paused_primary_is_replaced_and_comes_back_believing_it_is_the_primary(services, engines):
    m, verdict = run(services, engines, "redis_fenced", "primary_paused")
    confirmed_by_sentinel(m)
    e = m["evidence"]
    assert e["process_state"] == "T" and e["paused_s"] * 1000 > m["sentinel"]["down_after_ms"]
    # SIGCONTed after the switch, it answers as a master: nothing told it, until the Sentinels demote it.
    assert e["old_primary_role_after_resume"]["role"] == "master"
    assert e["probe_ended_by"] == "demoted"
    assert m["promotion"]["old_primary_accepted"] > 0 and m["promotion"]["old_primary_writes_survived"] == 0
    assert verdict != "stale write accepted"  # the caught-up replica had the fence counter


def test_the_stale_master_window_a_cut_off_primary_goes_on_taking_writes(services, engines):
    m, verdict = run(services, engines, "redis", "primary_cut")
    confirmed_by_sentinel(m)
    e = m["evidence"]
    assert e["old_primary_role_during_cut"]["role"] == "master"  # while the Sentinels name the other server
    assert {"sentinel0", "sentinel1", "sentinel2", "second"} <= set(e["dialers_to_old_primary"])
    p = m["promotion"]
    # The probe wrote straight to it every 100 ms through the cut and until its demotion: all of it acknowledged,
    # none of it on the primary of the end.
    assert p["old_primary_accepted"] > 10 and p["old_primary_writes_survived"] == 0
    assert p["old_primary_accepting_s"] > e["switch_master_after_s"]
    if m["contender"]["acquired"]:  # no fence: the second holder's lock and the holder's stale write both stand
        assert lock_lost(Sentinel(), m, "redis") and verdict == "stale write accepted"


def test_a_fence_never_takes_the_stale_write_through_the_stale_master_window(services, engines):
    m, verdict = run(services, engines, "redis_fenced", "primary_cut")
    confirmed_by_sentinel(m)
    assert verdict != "stale write accepted" and m["holder"]["write"] != "committed" or \
        not m["contender"]["acquired"], verdict
    if m["contender"]["acquired"]:
        assert m["token_reused"] is False and m["contender"]["token"] > m["holder"]["token"]


def test_min_replicas_to_write_refuses_the_cut_off_primary_and_the_new_one_alike(services, engines):
    m, verdict = run(services, engines, "redis", "primary_cut_min1")
    confirmed_by_sentinel(m)
    assert m["sentinel"]["min_replicas_to_write"] == 1
    e, p = m["evidence"], m["promotion"]
    assert e["probe_ended_by"] == "refused" and "NOREPLICAS" in (e["probe_last_error"] or "")
    # It refuses once its replica has been silent past min-replicas-max-lag (1 s): a few probe writes at most.
    assert p["old_primary_accepting_s"] is None or p["old_primary_accepting_s"] < 4.0
    # The new primary has no replica either (the old one rejoins only after the heal): it refuses the contender.
    assert m["contender"]["acquired"] is False and verdict != "stale write accepted"


def test_a_forced_failover_demotes_the_old_primary_only_seconds_later(services, engines):
    m, verdict = run(services, engines, "redis_fenced", "forced")
    confirmed_by_sentinel(m)
    e = m["evidence"]
    assert e["sentinel_failover"] == "OK" and e["switch_master_after_s"] < 10
    assert e["old_primary_role_after_failover"]["role"] == "master"  # every server up, and still a stale window
    assert verdict != "stale write accepted"


def test_a_failover_that_never_comes_is_not_confirmed(services, monkeypatch):
    """Sentinels told to wait a minute before calling the primary down: the pause is not confirmed within the
    bound, and the trial would be an error, never a verdict. The heal continues the primary."""
    monkeypatch.setattr(sentinel_faults, "FAILOVER_WITHIN", 3.0)
    root = services.tmp / "sentinel-unconfirmed"
    servers = SentinelRedis(root, SentinelSettings(down_after_ms=60_000))
    fault = sentinel_faults.SentinelPause()
    try:
        servers.start()
        target = Target(replace(services, redis_url=servers.url, embedded={"redis": servers}, tmp=None), None,
                        backends.load("redis"))
        fault.inject(target)
        with pytest.raises(FaultNotConfirmed, match=r"no Sentinel published \+switch-master"):
            fault.confirm(target)
        fault.heal(target)
        assert servers.role(servers.first)["role"] == "master"  # continued, and never replaced
    finally:
        fault.stop_watch()
        servers.stop()
        shutil.rmtree(root, ignore_errors=True)
    assert not [p for p in processes_under(services.tmp) if "sentinel-unconfirmed" in p]


def test_a_client_finds_the_primary_through_the_sentinels_and_follows_a_failover(services):
    root = services.tmp / "sentinel-client"
    servers = SentinelRedis(root)
    try:
        servers.start()
        address = parse_sentinel_url(servers.url)
        assert len(address.sentinels) == 3 and address.service == "locklab"
        client = redis_client(servers.url, socket_timeout=2)
        client.set("before", "1")
        assert client.connection_pool.get_master_address() == servers.address(servers.first)
        t0 = time.monotonic()
        servers.force_failover()
        assert servers.events.wait_for("+switch-master", t0, 30) is not None
        deadline = time.monotonic() + 20
        while client.connection_pool.get_master_address() != servers.address(servers.second):
            assert time.monotonic() < deadline
            time.sleep(0.1)
        client.connection_pool.disconnect()
        client.set("after", "1")  # a new connection goes where the Sentinels now say
        assert redis_client(servers.second.url).get("after") == b"1"
        client.close()
    finally:
        servers.stop()
        shutil.rmtree(root, ignore_errors=True)
