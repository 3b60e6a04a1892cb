"""A new fault is one file plus one registry line: a fault planted from a temp module is found in every place
a fault belongs (lab list, the plan, meta.json, the matrix and its legend, the lease table, the decision
page), with nothing else edited."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

import backends
import scenarios
from lab import cli
from lab.provenance import declarations
from lab.report.decide import section_decide
from lab.report.matrix import section_why_not_leases
from lab.report.matrix_split import section_matrix
from lab.report.sections import RunView
from lab.runner import RunRequest, make_plan
from lab.servers.services import Services

PLANTED = '''
"""A planted fault for the test: it stops nothing, and says so by never confirming."""

from lab.columns import Column
from lab.faults.base import Fault, FaultNotConfirmed
from scenarios._lease_faults import LeaseFaultScenario


class PlantedFault(Fault):
    name = "planted"
    label = "planted fault"

    def applies_to(self, backend_cls):
        return None if backend_cls.lock_service == "redis" else "the planted fault strikes Redis locks only"

    def inject(self, target):
        pass

    def confirm(self, target):
        raise FaultNotConfirmed("a planted fault never strikes")


class Planted(LeaseFaultScenario):
    name = "planted"
    fault = PlantedFault
    summary = "a planted fault for the declaration test"
    title = "the planted fault's title"
    breaks_leases = True
    columns = (Column("only", "the planted column", 8.5, "plants a column; confirmed never"),)
    params = {"default": {"ttl_s": 1.0, "trials": 2, "parallel": 1}}
'''


@pytest.fixture
def planted(tmp_path, monkeypatch):
    (tmp_path / "planted_fault.py").write_text(textwrap.dedent(PLANTED))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(scenarios.REGISTRY.entries, "planted", "planted_fault:Planted")  # its one registry line
    yield "planted"
    sys.modules.pop("planted_fault", None)


def test_lab_list_shows_it(planted, capsys):
    assert cli.main(["list"]) == 0
    assert "planted  " in capsys.readouterr().out.replace("planted fault for", "")


def test_the_plan_runs_it_where_its_declarations_say_and_names_why_not_elsewhere(planted):
    plan = make_plan(RunRequest(["redis", "xact"], ["planted"], "default", Path("results")))
    specs = {(s.backend, s.index): s.skip for s in plan.pending["planted"]}
    assert specs[("redis", 0)] is None and specs[("redis", 1)] is None
    assert specs[("xact", 0)] == "the planted fault strikes Redis locks only"


def test_a_fault_that_cannot_confirm_has_no_server_requirement_it_did_not_declare(planted):
    fault = scenarios.load("planted").fault()
    assert fault.cannot_run(backends.load("redis"), Services()) is None


def test_meta_json_records_its_declaration(planted):
    meta = declarations(["redis"], ["planted"])
    assert meta["faults"]["planted"]["columns"][0]["label"] == "the planted column"
    assert meta["faults"]["planted"]["breaks_leases"] is True


def test_meta_json_records_what_each_scenario_measures(planted):
    meta = declarations(["redis"], ["planted", "perf"])
    assert meta["measured"] == {"planted": "matrix_cell", "perf": "cost"}


def test_a_section_finds_its_trials_by_what_they_measure_never_by_name():
    """A scenario renamed (or a second one measuring the same) is read by the kind its run recorded."""
    from lab.measures.kinds import Measured
    from lab.report.common import ok_trials, trials_frame

    record = {**_failed_trial("costs_renamed", "none", "one_transaction_for_all"), "verdict": "completed"}
    frame = trials_frame([record], {"measured": {"costs_renamed": "cost"}})
    assert list(ok_trials(frame, Measured.COST).id) == [record["id"]]
    assert ok_trials(trials_frame([record], {}), Measured.COST).empty  # the lab declares no such scenario


def _failed_trial(scenario, backend, variant):
    return {"id": f"{scenario}/{backend}/{variant}/0", "scenario": scenario, "backend": backend, "variant": variant,
            "index": 0, "status": "ok", "verdict": "stale write accepted", "safety": "unsafe", "exercised": True,
            "measures": {}}


def test_the_report_puts_it_in_the_matrix_its_legend_the_lease_table_and_the_decision_page(planted):
    meta = {**declarations(["redis"], ["planted", "pause"]), "faults": declarations(["redis"], ["planted"])["faults"]}
    view = RunView.of([_failed_trial("planted", "redis", "only")], meta)
    matrix = section_matrix(view)
    header = next(line for line in matrix.splitlines() if line.startswith("| backend |"))
    assert "the planted column" in header
    assert "- *the planted column* (`planted`/`only`): plants a column; confirmed never." in matrix
    assert "| redis | ✗ stale write accepted 1/1 · rate 1/1 (95 %: 2–100 %) |" in matrix
    assert "the planted fault's title" in section_why_not_leases(view)
    decision = section_decide(view)
    assert "the planted column" in decision.split("Do not use", 1)[-1]


def test_a_run_that_recorded_its_declaration_renders_it_without_the_registry(planted, monkeypatch):
    meta = declarations(["redis"], ["planted"])
    monkeypatch.delitem(scenarios.REGISTRY.entries, "planted")
    sys.modules.pop("planted_fault", None)
    from lab.report import declared

    declared.install(scenarios.fault_columns())  # today's lab knows nothing of it
    matrix = section_matrix(RunView.of([_failed_trial("planted", "redis", "only")], meta))
    assert "the planted column" in matrix


def test_a_slow_network_is_na_for_a_lock_service_its_namespace_does_not_start():
    """slow_network starts PostgreSQL, Redis, Redlock masters and etcd in its namespace; a lease on any other
    service (ZooKeeper's) is n/a by the fault's declaration, never an error in the trial (as it was: 'zookeeper is
    not among this run's servers'), and the services it does start stay applicable."""
    from backends.redis_lock import RedisLock
    from lab.faults.slow_network import NAMESPACED_SERVICES, NetDelay

    class ElsewhereLease(RedisLock):
        name = "planted_zookeeper_lease"
        lock_service = "zookeeper"
        services = ("postgres", "zookeeper")

    assert "does not start inside the slow network's namespace" in NetDelay(0.5).applies_to(ElsewhereLease)
    assert NetDelay(0.5).applies_to(RedisLock) is None and RedisLock.lock_service in NAMESPACED_SERVICES


def test_meta_json_records_the_versions_of_what_each_backend_stands_on():
    """Declared on the backend (its library and packages), never in a list of the lab's: a run of Redlock records
    pottery's version, one of xact alone does not name it."""
    from lab.provenance import package_versions

    redlock = package_versions([backends.load("redlock")])
    assert redlock["pottery"] and redlock["sqlalchemy"]
    assert "pottery" not in package_versions([backends.load("xact")])
