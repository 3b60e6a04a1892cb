"""lab doctor on the lab's own Patroni cluster, asynchronous then under synchronous_mode: the stack file reads Patroni's
settings from its REST API, and the advice prints the split brain's store finding for the asynchronous cluster (with
synchronous_mode measured against it), not for the synchronous one. Slow: each cluster takes 20 to 60 s to start."""

from __future__ import annotations

import shutil

import pytest

from lab.servers.patroni.cluster import PatroniCluster, PatroniSettings
from lab.servers.patroni.runtime import runtime, unavailable_reason
from tests.os_packages import skip_for
from tests.server.stack_helpers import doctor_advice, exposed, no_secret

pytestmark = [pytest.mark.server, pytest.mark.slow]


@pytest.fixture(scope="module")
def patroni_here():
    skip_for(unavailable_reason())


def survey_cluster(services, capsys, tmp_path, settings: PatroniSettings, name: str):
    root = services.tmp / name
    root.mkdir()
    root.chmod(0o755)
    cluster = PatroniCluster(root, services.embedded["postgres"].bin, runtime(), settings)
    try:
        cluster.start()
        dsn = cluster.url.render_as_string(hide_password=False)
        found = doctor_advice(capsys, tmp_path, "--dsn", dsn, "--patroni-url", cluster.nodes[0].rest_url,
                              "--lock", "xact")
        secret = cluster.secrets.superuser
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)
    status, stack, printed = found
    no_secret(secret, (tmp_path / "stack.json").read_text(), str(printed))
    return status, stack, printed["advice"]


def finding(advice: dict, variant: str) -> dict | None:
    return next((s for s in advice["store"] if (s["scenario"], s["variant"]) == ("patroni", variant)), None)


def test_an_asynchronous_patroni_cluster_is_told_of_the_split_brain_that_discards_acknowledged_writes(
        patroni_here, services, capsys, tmp_path):
    status, stack, advice = survey_cluster(services, capsys, tmp_path, PatroniSettings(), "stack-patroni-async")
    pg, ha = stack["postgres"], stack["postgres"]["ha"]
    assert pg["replication"] == "async" and pg["pooler"] == "none"
    assert (ha["synchronous_mode"], ha["failsafe_mode"], ha["members"], ha["ttl"]) == (False, False, 2, 20)
    assert "does not report the watchdog" in ha["watchdog"]["unknown"]
    assert {("patroni", "crash"), ("patroni", "agent_paused"), ("patroni", "dcs_cut"), ("patroni", "switchover"),
            ("failover", "async_lagging")} <= exposed(advice)
    assert not exposed(advice) & {("patroni", "agent_paused_sync"), ("patroni", "dcs_cut_failsafe"),
                                  ("patroni", "agent_paused_routed"), ("failover", "sync_lagging")}
    split = finding(advice, "agent_paused")
    assert split is not None and split["lost"] >= 1
    assert split["happens"] == "unknown" and "watchdog" in split["unknown"][0]  # unless a watchdog fences it
    against = {m["variant"]: m for m in split["measured_otherwise"]}
    assert against["agent_paused_sync"]["needs"] == ["Patroni's synchronous_mode on"]
    assert against["agent_paused_sync"]["stack_has_it"] == "no" and against["agent_paused_sync"]["locks_lost"] == 0
    assert status == 0 and "Patroni: the primary's agent paused (split brain)" in advice["lock"]["store"]


def test_under_synchronous_mode_the_split_brain_finding_is_not_printed(patroni_here, services, capsys, tmp_path):
    status, stack, advice = survey_cluster(services, capsys, tmp_path, PatroniSettings(synchronous_mode=True),
                                           "stack-patroni-sync")
    assert stack["postgres"]["replication"] == "sync" and stack["postgres"]["ha"]["synchronous_mode"] is True
    assert ("patroni", "agent_paused_sync") in exposed(advice) and ("patroni", "agent_paused") not in exposed(advice)
    assert finding(advice, "agent_paused") is None
    assert status == 0 and advice["lock"]["fails"] == []
