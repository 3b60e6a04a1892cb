"""The answer for a stack (lab report --stack) from planted runs: a ✗ under a column the stack is exposed to fails
the lock in use and exits 1, the same ✗ under a column it is not exposed to does not; fixes and store findings
follow the columns' declarations, and a run recorded before columns declared stacks still reads."""

from __future__ import annotations

import json

import scenarios
from lab.cli import main
from lab.declarations.columns import Column, FaultColumns
from lab.stack.exposure import OFF, ON, Trait, when
from lab.report.meta import provenance_runs
from lab.report.sections import RunView, render_files
from lab.stack.description import Guard, Patroni, PoolMode, Postgres, Replication, Stack, Unknown
from tests.fast.planted import saved_run, trial

LOST_ACK = (("acknowledged writes", "acknowledged write lost"),)
STALE = (("stale write", "stale write accepted"),)
PATRONI = (when(Trait.HA_MANAGER, "patroni"),)


def column(variant, label, order, happens_when, strikes=None, same=None) -> dict:
    return Column(variant, label, order, f"{label}: planted", same_fault_as=same, happens_when=happens_when,
                  strikes=strikes).to_json()


FAULTS = {
    "pause": {"title": "pause", "columns": [column("sigstop", "holder paused", 1, ())]},
    "pooler": {"title": "pooler", "columns": [column("transaction_mode", "transaction pooling", 2,
                                                     (when(Trait.POOLER, "transaction"),), ("postgres",))]},
    "failover": {"title": "failover", "columns": [
        column("async_lagging", "standby behind (async)", 3, (when(Trait.REPLICATION, "async"),), ("postgres",)),
        column("sync_lagging", "standby behind (sync)", 4, (when(Trait.REPLICATION, "sync"),), ("postgres",),
               "async_lagging")]},
    "patroni": {"title": "patroni", "columns": [
        column("agent_paused", "split brain", 5, PATRONI + (when(Trait.SYNCHRONOUS_MODE, OFF),), ("postgres",)),
        column("agent_paused_sync", "split brain, synchronous_mode", 6, PATRONI + (when(Trait.SYNCHRONOUS_MODE, ON),),
               ("postgres",), "agent_paused")]},
}
PG = {"lock": "postgres", "writes": "postgres", "fence": None}
META = {
    "backend_order": ["none", "session", "xact", "lease_row"],
    "capabilities": {"none": [], "session": ["exclusion", "session_lock"], "xact": ["exclusion", "in_transaction"],
                     "lease_row": ["exclusion", "fencing", "lease_expiry"]},
    "lock_service": {b: "postgres" for b in ("none", "session", "xact", "lease_row")},
    "where": {"none": PG, "session": PG, "xact": PG, "lease_row": {**PG, "fence": "postgres"}},
    "summaries": {"xact": "pg_advisory_xact_lock inside each company's write transaction"},
    "post_roles": {"none": "no_lock", "xact": "method_4", "session": "method_1"},
    "faults": FAULTS,
}


def kept(scenario, variant, **kinds) -> list[dict]:
    return [trial(scenario, variant, b, k, index=i) for b, k in kinds.items() for i in range(3)]


def planted(session_in_pooler: str = "stale write accepted") -> list[dict]:
    trials = kept("pause", "sigstop", none="intact", session="held", xact="rolled back", lease_row="stale write rejected")
    trials += kept("pooler", "transaction_mode", none="intact", xact="rolled back", lease_row="stale write rejected")
    bad = session_in_pooler != "held"
    trials += [trial("pooler", "transaction_mode", "session", session_in_pooler, index=i, lock="false" if bad else "true",
                     findings=STALE if bad else ()) for i in range(3)]  # the planted ✗
    trials += kept("failover", "async_lagging", none="intact", session="held", xact="rolled back")
    trials += [trial("failover", "async_lagging", "lease_row", "stale write accepted", index=i, lock="false",
                     findings=STALE) for i in range(2)]
    trials += kept("failover", "sync_lagging", none="intact", session="held", xact="rolled back",
                   lease_row="stale write rejected")
    trials += [trial("patroni", "agent_paused", b, "acknowledged write lost", exercised=b == "none", findings=LOST_ACK)
               for b in ("none", "session", "xact", "lease_row")]
    trials += kept("patroni", "agent_paused_sync", none="intact", session="held", xact="rolled back",
                   lease_row="stale write rejected")
    return trials


def write_run(root, trials, meta=META, name="20990101-000000-aaaa") -> str:
    saved_run(root / name, meta, trials)
    return name


def postgres(**changes) -> Postgres:
    base = dict(version="18.6", idle_in_transaction_session_timeout=Guard(0, "default"),
                idle_session_timeout=Guard(0, "default"), pooler=PoolMode.NONE, pooler_kind=None,
                replication=Replication.NONE, ha=None)
    return Postgres(**{**base, **changes})


def patroni(synchronous_mode: bool) -> Patroni:
    return Patroni("4.1.5", 2, synchronous_mode, False, False, Unknown("not reported"), 20, 1, 5, 1048576)


def advise(tmp_path, capsys, stack: Stack, trials=None, meta=META) -> tuple[int, dict]:
    run = write_run(tmp_path / "results", planted() if trials is None else trials, meta)
    path = tmp_path / "stack.json"
    stack.save(path)
    status = main(["report", "--stack", str(path), "--results", str(tmp_path / "results"), run, "--json"])
    return status, json.loads(capsys.readouterr().out)["advice"]


def labels(items) -> set[str]:
    return {item["label"] for item in items}


def test_a_failure_under_an_exposed_column_fails_the_lock_in_use_and_exits_1(tmp_path, capsys):
    status, advice = advise(tmp_path, capsys, Stack(postgres=postgres(pooler=PoolMode.TRANSACTION), lock="session"))
    assert status == 1 and advice["lock_fails"]
    assert [(f["scenario"], f["variant"], f["happens"]) for f in advice["lock"]["fails"]] == \
        [("pooler", "transaction_mode", "yes")]
    # For transaction pooling no session lock is recommended: no need's qualifying lock is the session lock.
    assert all(k["backend"] != "session" for need in advice["needs"] for k in need["qualifying"])
    fixes = advice["lock"]["fixes"]
    assert fixes[0]["kind"] == "setting" and (fixes[0]["trait"], fixes[0]["value"]) == ("postgres.pooler", "session")
    assert fixes[0]["removes"] == ["transaction pooling"]
    assert [f["backend"] for f in fixes if f["kind"] == "lock"][:1] == ["xact"]  # the same services, a need shared


def test_the_same_failure_under_a_column_the_stack_is_not_exposed_to_does_not(tmp_path, capsys):
    status, advice = advise(tmp_path, capsys, Stack(postgres=postgres(), lock="session"))
    assert status == 0 and not advice["lock_fails"] and advice["lock"]["fails"] == []
    assert "transaction pooling" not in labels(advice["exposed"])
    assert {"transaction pooling": "needs a transaction-pooling PgBouncer (or alike) in front"}.items() <= \
        {r["label"]: r["because"] for r in advice["ruled_out"]}.items()
    qualifying = {k["backend"] for need in advice["needs"] for k in need["qualifying"]}
    assert "session" in qualifying  # nothing it faces here failed it


def test_an_unknown_fact_keeps_the_fault_possible_and_says_why(tmp_path, capsys):
    stack = Stack(postgres=postgres(pooler=Unknown("a second client waited")), lock="session")
    status, advice = advise(tmp_path, capsys, stack)
    assert status == 1
    (failure,) = advice["lock"]["fails"]
    assert failure["happens"] == "unknown" and "a second client waited" in failure["unknown"][0]


def test_a_setting_that_moves_the_stack_to_a_column_the_lock_kept_is_a_fix(tmp_path, capsys):
    """lease_row fails with the standby behind under asynchronous replication and keeps it under synchronous."""
    stack = Stack(postgres=postgres(replication=Replication.ASYNC), lock="lease_row")
    status, advice = advise(tmp_path, capsys, stack)
    assert status == 1 and labels(advice["lock"]["fails"]) == {"standby behind (async)"}
    setting = next(f for f in advice["lock"]["fixes"] if f["kind"] == "setting")
    assert (setting["trait"], setting["value"]) == ("postgres.replication", "sync")
    assert setting["removes"] == ["standby behind (async)"] and setting["adds"] == ["standby behind (sync)"]


def test_under_patroni_the_setting_that_makes_replication_synchronous_is_synchronous_mode(tmp_path, capsys):
    """Patroni rewrites synchronous_standby_names: there the fix is its synchronous_mode, which also makes the
    replication synchronous, and brings the split brain's synchronous column instead of the asynchronous one."""
    stack = Stack(postgres=postgres(replication=Replication.ASYNC, ha=patroni(False)), lock="lease_row")
    status, advice = advise(tmp_path, capsys, stack)
    settings = [f for f in advice["lock"]["fixes"] if f["kind"] == "setting"]
    assert status == 1 and [(f["trait"], f["value"]) for f in settings] == [("postgres.ha.synchronous_mode", "on")]
    assert settings[0]["removes"] == ["split brain", "standby behind (async)"]
    assert settings[0]["adds"] == ["split brain, synchronous_mode", "standby behind (sync)"]


def test_an_async_patroni_cluster_gets_the_split_brain_store_finding_with_synchronous_mode_measured_against_it(
        tmp_path, capsys):
    stack = Stack(postgres=postgres(replication=Replication.ASYNC, ha=patroni(False)), lock="xact")
    status, advice = advise(tmp_path, capsys, stack)
    assert status == 0  # the store lost the write whatever the lock: no lock's failure
    (finding,) = advice["store"]
    assert (finding["scenario"], finding["variant"], finding["lost"]) == ("patroni", "agent_paused", 1)
    assert set(finding["store"]) == {"session", "xact", "lease_row"}
    (sync,) = finding["measured_otherwise"]
    assert sync["variant"] == "agent_paused_sync" and sync["needs"] == ["Patroni's synchronous_mode on"]
    assert sync["stack_has_it"] == "no" and sync["locks_lost"] == 0 and sync["control_lost"] == 0
    assert {k["backend"]: k["store"] for need in advice["needs"] for k in need["qualifying"]}["xact"] == ["split brain"]


def test_under_synchronous_mode_the_split_brain_finding_does_not_concern_the_stack(tmp_path, capsys):
    stack = Stack(postgres=postgres(replication=Replication.SYNC, ha=patroni(True)), lock="xact")
    status, advice = advise(tmp_path, capsys, stack)
    assert status == 0 and advice["store"] == []
    assert "split brain, synchronous_mode" in labels(advice["exposed"]) and "split brain" not in labels(
        advice["exposed"])


def test_a_run_recorded_before_columns_declared_stacks_reads_the_labs_own_or_every_stack(tmp_path, capsys):
    meta = json.loads(json.dumps(META))
    for scenario in meta["faults"].values():
        for c in scenario["columns"]:
            del c["happens_when"], c["strikes"]
    meta["faults"]["made_up"] = {"title": "made up", "columns": [
        {"variant": "only_here", "label": "a fault no lab declares", "order": 9, "legend": "planted"}]}
    trials = planted() + kept("made_up", "only_here", none="intact", session="held", xact="rolled back")
    status, advice = advise(tmp_path, capsys, Stack(postgres=postgres(), lock="session"), trials, meta)
    # pooler, failover and patroni: this lab declares those columns, so a plain stack is not exposed to them.
    exposed = {e["label"]: e["declared"] for e in advice["exposed"]}
    assert exposed["holder paused"].startswith("by this lab") and "transaction pooling" not in exposed
    assert exposed["a fault no lab declares"].startswith("nowhere") and advice["undeclared"] == 1
    assert status == 0


def test_a_lock_the_run_has_no_row_for_is_one_line_and_exit_2(tmp_path, capsys):
    run = write_run(tmp_path / "results", planted())
    path = tmp_path / "stack.json"
    Stack(postgres=postgres(), lock="sesion").save(path)
    status = main(["report", "--stack", str(path), "--results", str(tmp_path / "results"), run])
    err = capsys.readouterr().err
    assert status == 2 and "'sesion', has no row in this run" in err and len(err.strip().splitlines()) == 1


def test_the_plain_text_names_the_failure_the_fix_and_the_finding(tmp_path, capsys):
    run = write_run(tmp_path / "results", planted())
    path = tmp_path / "stack.json"
    Stack(postgres=postgres(pooler=PoolMode.TRANSACTION, replication=Replication.ASYNC, ha=patroni(False)),
          lock="session").save(path)
    status = main(["report", "--stack", str(path), "--results", str(tmp_path / "results"), run])
    text = capsys.readouterr().out
    assert status == 1
    assert "The lock in use, session, FAILS under 1 of the faults this stack is exposed to:" in text
    assert "✗ transaction pooling: stale write accepted 3/3" in text
    assert "- setting: pool_mode = session" in text and "- lock: use `xact`" in text
    assert "◆ split brain: the no-lock control lost an acknowledged write in 1 of 1 trials" in text
    assert "measured against it: split brain, synchronous_mode (Patroni's synchronous_mode on)" in text


def test_every_registered_column_declares_where_its_fault_can_happen():
    services = {"postgres", "redis", "redlock", "etcd", "zookeeper", "mariadb"}
    for declared in scenarios.fault_columns():
        for c in declared.columns:
            assert c.happens_when is not None, f"{declared.scenario}/{c.variant} declares no happens_when"
            assert c.strikes is None or set(c.strikes) <= services, (declared.scenario, c.variant, c.strikes)
        again = FaultColumns.from_json(declared.scenario, json.loads(json.dumps(declared.to_json())))
        assert again == declared  # as meta.json records it


def test_the_reference_runs_are_read_from_the_provenance_table_the_report_writes(tmp_path):
    trials = planted()
    text = render_files(RunView.of(trials, META, "20990101-000000-aaaa + 20990102-000000-bbbb"))["REPORT.md"]
    assert provenance_runs(text) == ["20990101-000000-aaaa", "20990102-000000-bbbb"]
    assert provenance_runs("# a report with no provenance\n") is None

