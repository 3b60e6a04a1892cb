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
from lab.runner.provenance import declarations
from lab.report.decide import section_comparison, section_decide
from lab.report.matrix import section_why_not_leases
from lab.report.matrix_split import section_matrix
from lab.report.sections import RunView
from lab.runner import RunRequest, make_plan
from lab.servers.services import Services

PLANTED = '''
"""A planted fault for the test: it stops nothing, and says so by never confirming."""

from lab.declarations.columns import Column
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
    assert "**Do not use** 1 lock" in section_decide(view)
    assert "the planted column" in section_comparison(view).split("### Do not use", 1)[-1]


def test_a_run_that_recorded_its_declaration_renders_it_without_the_registry(planted, monkeypatch):
    meta = declarations(["redis"], ["planted"])
    monkeypatch.delitem(scenarios.REGISTRY.entries, "planted")
    sys.modules.pop("planted_fault", None)
    from lab.report import declared

    declared.install(scenarios.fault_columns())  # today's lab knows nothing of it
    matrix = section_matrix(RunView.of([_failed_trial("planted", "redis", "only")], meta))
    assert "the planted column" in matrix


def test_a_slow_network_does_not_run_a_lease_on_a_service_its_namespace_does_not_start():
    """slow_network starts every lock service's server the lab has inside its namespace (ZooKeeper's JVM included); a
    lease on any other service would be reached by the fault, so the lab's not starting it there is a lab limit:
    *not run*, never n/a, and never an error in the trial (as it once was: 'zookeeper is not among this run's
    servers'). The services it does start stay applicable."""
    from backends.redis_lock import RedisLock
    from lab.checkers.outcomes import SkipKind, skip_kind_of
    from lab.faults.slow_network import NAMESPACED_SERVICES, NetDelay

    class ElsewhereLease(RedisLock):
        name = "planted_mariadb_lease"
        lock_service = "mariadb"
        services = ("postgres", "mariadb")

    reason = NetDelay(0.5).applies_to(ElsewhereLease)
    assert skip_kind_of(reason) is SkipKind.NOT_RUN and "does not start inside the slow network's namespace" in reason
    for service in ("redis", "zookeeper"):
        assert service in NAMESPACED_SERVICES
    assert NetDelay(0.5).applies_to(RedisLock) is None and NetDelay(0.5).applies_to(backends.load("kazoo")) is None


# --- n/a is the declarations' word alone ------------------------------------------------------------------------

def _disagreements(names: list[str], classes: list, services: Services) -> list[str]:
    """Every cell of these scenarios' columns x these backends whose n/a the declarations do not explain, and every
    cell the declarations put out of the fault's reach that is not n/a.

    A cell is n/a exactly where, by the backend's declarations (lab/declarations/where.py: where its lock, fence and writes live;
    its capabilities) and the column's (the services it strikes, the kinds of right it bears on: Column.reaches), or
    the scenario's requirements, the fault reaches none of the lock, its fence or its writes. As the plan decides it
    (applies_to, then variant_skip), and, for a fault a trial makes, as the trial does on these servers
    (cannot_run); a lab limit is *not run* (or *does not run*), never n/a."""
    from lab import faults
    from lab.checkers.outcomes import SkipKind, skip_kind_of
    from scenarios._lease_faults import LeaseFaultScenario

    found = []
    for name in names:
        scenario = scenarios.load(name)
        for column in scenario.columns:
            for cls in classes:
                out_of_reach = not column.reaches(cls.where(), cls.capabilities) \
                    or not scenario.requires <= cls.capabilities
                reason = scenario.applies_to(cls) or scenario.variant_skip(column.variant, cls)
                if reason is None and isinstance(scenario, LeaseFaultScenario):
                    reason = faults.load(scenario.fault_for(column.variant, cls)).cannot_run(cls, services)
                na = reason is not None and skip_kind_of(reason) is SkipKind.NOT_APPLICABLE
                if na and not out_of_reach:
                    found.append(f"{name}/{column.variant} x {cls.name}: n/a ({reason}), but the fault reaches "
                                 f"{cls.where().describe()}")
                elif out_of_reach and (reason is None or not na):
                    found.append(f"{name}/{column.variant} x {cls.name}: out of the fault's reach by declaration, "
                                 f"yet {'planned' if reason is None else repr(reason)}")
    return found


def test_every_n_a_of_every_column_is_what_the_declarations_say_for_every_backend_here():
    """Every registered scenario column x every backend here (the built-in ones, the adapters whose libraries are
    installed, the Node.js holders): on the lab's own servers as planned, and on servers the lab did not start
    (Services() with nothing embedded: a fault the lab makes only on its own is *not run* there, never n/a)."""
    names = [f.scenario for f in scenarios.fault_columns()]
    classes = [backends.load(name) for name in backends.names()]
    assert len(names) > 15 and len(classes) > 30
    assert _disagreements(names, classes, Services()) == []


PLANTED_DISAGREEMENT = '''
"""Planted: a fault that calls a lab limit n/a, and a column that declares a kind of right its fault never spares."""

from lab.declarations.capabilities import Capability
from lab.declarations.columns import Column
from planted_fault import PlantedFault
from scenarios._lease_faults import LeaseFaultScenario


class LabLimitAsNa(PlantedFault):
    name = "planted_limit"

    def applies_to(self, backend_cls):
        if backend_cls.lock_service == "postgres":
            return "the lab does not make this fault on PostgreSQL"  # reaches the lock: a lab limit, said as n/a
        return None


class PlantedLimit(LeaseFaultScenario):
    name = "planted_limit"
    fault = LabLimitAsNa
    summary = "planted"
    title = "planted"
    columns = (Column("only", "planted", 8.7, "planted"),)
    params = {"default": {"ttl_s": 1.0, "trials": 1, "parallel": 1}}


class PlantedNeeds(LeaseFaultScenario):
    name = "planted_needs"
    fault = "pause"
    summary = "planted"
    title = "planted"
    columns = (Column("only", "planted", 8.8, "planted", needs=(Capability.LEASE_EXPIRY,)),)
    params = {"default": {"ttl_s": 1.0, "trials": 1, "parallel": 1}}
'''


def test_a_lab_limit_said_as_n_a_and_a_declaration_the_code_ignores_are_both_caught(tmp_path, monkeypatch):
    (tmp_path / "planted_fault.py").write_text(textwrap.dedent(PLANTED))  # its fault, which the limit's extends
    (tmp_path / "planted_limit.py").write_text(textwrap.dedent(PLANTED_DISAGREEMENT))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(scenarios.REGISTRY.entries, "planted_limit", "planted_limit:PlantedLimit")
    monkeypatch.setitem(scenarios.REGISTRY.entries, "planted_needs", "planted_limit:PlantedNeeds")
    try:
        classes = [backends.load(name) for name in ("xact", "redis")]
        found = _disagreements(["planted_limit"], classes, Services())
        assert found == ["planted_limit/only x xact: n/a (the lab does not make this fault on PostgreSQL), but the "
                         "fault reaches its lock and its writes on postgres"]
        found = _disagreements(["planted_needs"], classes, Services())  # declares leases alone; pause runs xact
        assert found == ["planted_needs/only x xact: out of the fault's reach by declaration, yet planned"]
        assert _disagreements(["pause", "server_clock"], classes, Services()) == []
    finally:
        sys.modules.pop("planted_limit", None)
        sys.modules.pop("planted_fault", None)


def test_meta_json_records_the_versions_of_what_each_backend_stands_on():
    """Declared on the backend (its library and packages), never in a list of the lab's: a run of Redlock records
    pottery's version, one of xact alone does not name it."""
    from lab.runner.provenance import package_versions

    redlock = package_versions([backends.load("redlock")])
    assert redlock["pottery"] and redlock["sqlalchemy"]
    assert "pottery" not in package_versions([backends.load("xact")])
