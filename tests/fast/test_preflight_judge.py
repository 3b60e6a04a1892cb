"""The preflight's judgement of what it read (lab/preflight/postgres.py judge), planted state by state: each refusal
names what to give, in SQL a DBA can paste, and nothing the lab can measure through is refused."""

from __future__ import annotations

from dataclasses import replace

import pytest

from lab.preflight import Problem, Sits
from lab.preflight.pooler import PoolerSeen
from lab.preflight.postgres import State, judge
from lab.servers.postgres.sql import ScopedSetting
from lab.stack.description import PoolMode
from lab.workload.table import SCHEMA_MARK

PRIMARY = State(version="15.18", started="2026-12-06 12:00:00+00", role="app", database="appdb", in_recovery=False,
                read_only=False, read_only_source="default", may_create=True, schema_mark=None, schema_usable=None)
DIRECT = PoolerSeen(PoolMode.NONE, None, ("client 1 ...",))
SHOWN = "postgresql://app:***@db:5432/appdb"


def judged(state: State = PRIMARY, pooler: PoolerSeen = DIRECT, scoped: tuple[ScopedSetting, ...] = ()):
    return judge(state, pooler, scoped, {}, None, SHOWN, 0.1)


def test_the_server_itself_is_a_primary_and_is_not_refused():
    finding = judged()
    assert finding.sits is Sits.PRIMARY and finding.refusal is None and finding.pool_mode is None
    assert finding.line().startswith(f"postgres at {SHOWN}: PostgreSQL 15.18 itself, a primary")


@pytest.mark.parametrize("pooler", [PoolerSeen(PoolMode.TRANSACTION, "a transaction pooler", ()),
                                    PoolerSeen(None, "a pooler (it queued a client)", (), queued=True)])
def test_a_transaction_pooler_or_one_that_queues_is_refused_naming_both_flags(pooler):
    finding = judged(pooler=pooler)
    assert finding.sits is Sits.POOLER and finding.refusal is not None
    assert finding.refusal.problem is Problem.TRANSACTION_POOLER
    line = finding.refusal.line("postgres", SHOWN)
    assert "--pg-dsn" in line and "--pg-pooler-dsn" in line and "\n" not in line


def test_a_session_pooler_is_run_through_with_a_note():
    finding = judged(pooler=PoolerSeen(PoolMode.SESSION, "a pooler that refuses ..., such as PgBouncer", ()))
    assert finding.refusal is None and finding.pool_mode is PoolMode.SESSION and finding.notes


def test_a_standby_behind_a_session_pooler_is_still_a_standby():
    finding = judged(replace(PRIMARY, in_recovery=True, upstream="10.0.0.1:5432"),
                     PoolerSeen(PoolMode.SESSION, "a pooler", ()))
    assert finding.sits is Sits.STANDBY and finding.refusal.problem is Problem.STANDBY
    assert "in front of a hot standby" in finding.what and "10.0.0.1:5432" in finding.what
    assert "the primary's address with --pg-dsn" in finding.refusal.give


@pytest.mark.parametrize("source, scoped, undo", [
    ("user", (ScopedSetting(None, "app", "default_transaction_read_only", "on", True, True),),
     "ALTER ROLE app RESET default_transaction_read_only"),
    ("database", (ScopedSetting("appdb", None, "default_transaction_read_only", "on", True, True),),
     "ALTER DATABASE appdb RESET default_transaction_read_only"),
    ("database user", (ScopedSetting("appdb", "app", "default_transaction_read_only", "on", True, True),),
     "ALTER ROLE app IN DATABASE appdb RESET default_transaction_read_only"),
    ("configuration file", (), "ALTER ROLE app IN DATABASE appdb SET default_transaction_read_only = off"),
])
def test_a_read_only_default_names_where_it_is_set_and_what_undoes_it(source, scoped, undo):
    finding = judged(replace(PRIMARY, read_only=True, read_only_source=source), scoped=scoped)
    assert finding.refusal.problem is Problem.READ_ONLY_DEFAULT
    assert finding.refusal.give.endswith(undo)


def test_grants_are_written_as_sql_takes_them():
    finding = judged(replace(PRIMARY, role="App Ops", database="sales-db", may_create=False))
    assert finding.refusal.problem is Problem.NO_CREATE
    assert 'GRANT CREATE ON DATABASE "sales-db" TO "App Ops"' in finding.refusal.give


@pytest.mark.parametrize("mark, usable, problem", [
    ("someone else's", True, Problem.FOREIGN_SCHEMA),
    (SCHEMA_MARK, False, Problem.NO_CREATE),
    (SCHEMA_MARK, True, None),
])
def test_a_schema_of_the_labs_name_is_the_labs_and_usable_or_refused(mark, usable, problem):
    finding = judged(replace(PRIMARY, may_create=False, schema_mark=mark, schema_usable=usable))
    assert (None if finding.refusal is None else finding.refusal.problem) is problem
