"""Every lock's own write path per company, beside no lock on the same store, on the real servers (quick profile)."""

import pytest
from sqlalchemy import text

from lab.measures.shapes import LockScope
from lab.report.common import trials_frame
from lab.report.company_cost import company_cost
from scenarios.cost_per_company import CostPerCompany
from tests.server.helpers import trial_env, verdict_of

pytestmark = pytest.mark.server

# backend -> (where its cost falls, whether each write moves a fence first)
DECLARED = {"xact": (LockScope.EACH_COMPANY, False), "serializable": (LockScope.EACH_COMPANY, False),
            "etcd_fenced": (LockScope.ONCE_PER_RUN, True), "lease_row": (LockScope.ONCE_PER_RUN, True)}


def timed(services, engines, backend: str, index: int = 0) -> dict:
    scenario = CostPerCompany()
    env = trial_env(services, engines, scenario.name, backend, scenario.variants[0],
                    scenario.profile_params("quick"), index=index)
    return scenario.run_trial(env)


def record(backend: str, measures: dict, index: int = 0) -> dict:
    """The trial as a run records it, for the report's reading."""
    return {"id": f"cost_per_company/{backend}/transaction_per_company/{index}", "scenario": "cost_per_company",
            "backend": backend, "variant": "transaction_per_company", "index": index, "status": "ok",
            "measures": measures}


@pytest.mark.parametrize("backend", list(DECLARED))
def test_each_lock_is_timed_beside_no_lock_and_every_company_stays_whole(services, engines, backend):
    m = timed(services, engines, backend)
    scope, fenced = DECLARED[backend]
    assert (m["scope"], m["fenced"], m["store"]) == (scope.value, fenced, "postgres"), m
    companies = CostPerCompany().profile_params("quick")["companies"]
    for side in ("lock", "baseline"):
        arm = m[side]
        assert arm["failed"] == 0 and arm["transactions"] == companies, (side, arm)
        assert (arm["companies_final"], arm["rows_final"]) == (companies + 1, (companies + 1) * m["rows"]), (side, arm)
        assert sum(arm["block_companies"]) == companies and all(s > 0 for s in arm["blocks"]), (side, arm)
        with engines[0].connect() as conn:  # each side had a fresh table of its own, gone after it
            assert conn.execute(text("select to_regclass(:t)"), {"t": arm["table"]}).scalar() is None
    assert sorted(m["order"]) == sorted(["lock", "baseline"] * 8) and len(m["pairs"]) == 8
    assert m["ratio"] > 0 and set(m["floors"]) == {"select 1", "one-row commit"}, m
    assert (m["acquire_s"] is not None) == (scope is LockScope.ONCE_PER_RUN), m  # a run-level lock, taken once
    assert m["release"] == ("released" if scope is LockScope.ONCE_PER_RUN else None), m
    assert verdict_of(CostPerCompany(), m, backend).startswith("measured: ")
    cost = company_cost(trials_frame([record(backend, m)], {"measured": {"cost_per_company": "company_cost"}}),
                        backend)
    assert cost is not None and cost.repetitions == 1 and cost.company_seconds == (
        m["lock"]["per_company"], companies, 1)


@pytest.mark.os_packages("mariadb-server")
def test_mariadbs_row_lock_is_timed_against_mariadb_with_no_lock(services, store_engines):
    if "mariadb" in services.unavailable:
        pytest.skip(services.unavailable["mariadb"])
    m = timed(services, store_engines("mariadb"), "mariadb_row_lock")
    assert m["store"] == "mariadb" and m["scope"] == LockScope.EACH_COMPANY.value and not m["fenced"]
    assert m["lock"]["failed"] == m["baseline"]["failed"] == 0 and m["ratio"] > 0
    assert set(m["floors"]) == {"select 1", "one-row commit"}  # MariaDB's own floor
