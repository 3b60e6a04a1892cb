"""The guard set to 0 on a role, on a real PostgreSQL: the lock outlives a guard set on the database, which ends
a session of the lab's own user in the same trial, and the role the lab made is gone afterwards."""

import pytest
from sqlalchemy import text

from scenarios.whynot import WhyNot
from tests.server.helpers import trial_env

pytestmark = pytest.mark.server

PARAMS = WhyNot().profile_params("quick")


def test_the_lock_on_a_role_with_the_guard_off_survives_the_databases_guard(services, engines):
    scenario = WhyNot()
    m = scenario.run_trial(trial_env(services, engines, "whynot", "session_guard_off", "guard_off_role", PARAMS))
    holder, control = m["holder"], m["control"]
    assert m["role_settings"] == ["idle_in_transaction_session_timeout=0"]
    assert (holder["guard"], holder["source"]) == ("0", "user")  # the role's setting, over the database's
    assert holder["held_after"] and holder["state"] == "idle in transaction" and holder["release"] == "released"
    assert (control["guard"], control["source"]) == (str(int(PARAMS["timeout_s"] * 1000)), "database")
    assert control["state"] == "gone"
    assert control["server_said"] == "terminating connection due to idle-in-transaction timeout"
    assert scenario.verdict(m) == "survived the database's guard"
    monitor, _ = engines
    with monitor.connect() as conn:  # healed: no role left behind, no guard left on the database
        assert conn.execute(text("select count(*) from pg_roles where rolname like 'locklab_guard_off_%'")).scalar() == 0
        assert conn.execute(text("select count(*) from pg_db_role_setting s join pg_database d "
                                 "on d.oid = s.setdatabase where s.setrole = 0 and d.datname = current_database()")
                            ).scalar() == 0
