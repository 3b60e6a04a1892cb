"""One giant transaction against one per company, each killed halfway on a real PostgreSQL: what the kill costs
and what the open transaction holds back from VACUUM, as the server and the table show them."""

import pytest

from scenarios.whynot import WhyNot
from tests.server.helpers import trial_env

pytestmark = pytest.mark.server

PARAMS = WhyNot().profile_params("quick")


@pytest.fixture(scope="module")
def giant(services, engines):
    scenario = WhyNot()
    measures = scenario.run_trial(trial_env(services, engines, "whynot", "xact", "giant_transaction", PARAMS))
    return measures, scenario.verdict(measures), scenario.safety(measures, scenario.verdict(measures))


def test_the_giant_transaction_loses_every_company_it_wrote_and_per_company_loses_one(giant):
    m, verdict, safety = giant
    half = PARAMS["giant_companies"] // 2
    g, each = m["giant"], m["per_company"]
    assert (g["written"], g["committed"], g["lost"], g["transactions"]) == (half, 0, half, 1)
    assert (each["written"], each["committed"], each["lost"], each["transactions"]) == (half + 1, half, 1, half + 1)
    assert g["companies_whole"] and each["companies_whole"]  # rolled back, never torn
    assert verdict.startswith(f"killed halfway: one transaction lost {half} of {half} companies written, "
                              f"one per company lost 1 of {half + 1}")
    assert safety.value == "safe"


def test_the_kill_is_confirmed_by_the_server_and_by_the_client(giant):
    m, _, _ = giant
    for shape in ("giant", "per_company"):
        kill = m[shape]["kill"]
        assert kill["fault"] == "terminate" and kill["gone_after_s"] is not None
        assert kill["client_outcome"] in ("failed", "indeterminate") and kill["client_error"]
        assert kill["resolved"] in (None, "not committed")


def test_the_giant_transactions_open_xid_keeps_every_row_churned_since_it_began(giant):
    m, verdict, _ = giant
    g, each = m["giant"], m["per_company"]
    half = PARAMS["giant_companies"] // 2
    # Other traffic churned one company per company written; all of it stays while the giant is open...
    assert g["churned_while_open"] == half * 250 and g["not_removable"] >= g["churned_while_open"] > 0
    # ...while a per-company transaction holds back only what was churned during its own company.
    assert each["churned_while_open"] == 250 and each["not_removable"] < g["not_removable"]
    # Its transaction id grows older with every company; each per-company transaction starts young again.
    assert g["xid_ages"] == sorted(g["xid_ages"]) and g["xid_ages"][-1] > g["xid_ages"][0]
    assert max(each["xid_ages"]) < g["xid_ages"][-1]
    assert verdict.endswith("; held back more dead rows")
