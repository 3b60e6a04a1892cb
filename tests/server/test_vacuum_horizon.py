"""Whose hold VACUUM obeyed, read from its own cutoff on a real PostgreSQL: a planted older snapshot in another
session is said to be another's, and with it gone the measured session's own hold is its own."""

import pytest
from sqlalchemy import text

from lab.workload.table import COMPANY_SIZE
from scenarios.whynot import _vacuum
from scenarios.whynot._vacuum import fresh_table, others_held, session_horizon, vacuum
from tests.server.helpers import trial_env

pytestmark = pytest.mark.server


def test_an_older_snapshot_in_another_session_is_said_and_its_end_gives_the_session_its_own(services, engines,
                                                                                           monkeypatch):
    monkeypatch.setattr(_vacuum, "OTHERS_PATIENCE_S", 0.3)  # the planted hold will not pass: do not wait it out
    env = trial_env(services, engines, "whynot", "xact", "giant_transaction", {})
    table = fresh_table(env, "planted", 2)
    other, mine = env.writes.connect(), env.writes.connect()
    try:
        other.execute(text("select pg_current_xact_id()"))  # planted: another session's transaction, older
        mine.execute(text("select pg_current_xact_id()"))   # the measured session's, younger
        pid = mine.execute(text("select pg_backend_pid()")).scalar()
        with env.writes.begin() as conn:
            table.rebuild(conn, 1, COMPANY_SIZE, "churn")  # dead rows both transactions keep
        horizon, vacuumed = session_horizon(env.monitor, pid), vacuum(env.monitor, table)
        assert vacuumed["not_removable"] == COMPANY_SIZE and others_held(horizon, vacuumed) is True
        other.rollback()
        horizon, vacuumed = session_horizon(env.monitor, pid), vacuum(env.monitor, table)
        assert vacuumed["cutoff_xid"] == horizon["horizon_xid"] and others_held(horizon, vacuumed) is False
        assert vacuumed["not_removable"] == COMPANY_SIZE  # now held by the measured session alone
    finally:
        other.close()
        mine.close()
