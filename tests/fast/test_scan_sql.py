"""lab/scan/sql.py: what a statement does to locks and transactions, read from its tokens, not matched in its text."""

from __future__ import annotations

from lab.scan.findings import LockKind
from lab.scan.sql import Control, facts, options_turn_guard_off


def test_each_advisory_function_by_what_it_takes():
    said = facts(("select pg_try_advisory_lock(1), pg_advisory_xact_lock_shared(2), pg_advisory_unlock(3)",))
    assert said.locks == (("pg_try_advisory_lock", LockKind.SESSION),
                          ("pg_advisory_xact_lock_shared", LockKind.TRANSACTION))
    assert said.unlocks == ("pg_advisory_unlock",) and said.complete


def test_a_name_in_a_string_literal_a_comment_or_dollar_quotes_is_no_call():
    said = facts(("select 'pg_advisory_lock(1)' -- pg_advisory_lock(2)\n/* pg_advisory_lock(3) */, "
                  "$x$pg_advisory_lock(4)$x$, $1",))
    assert said.locks == () and not said.touches_locks


def test_schema_qualified_and_upper_case_calls_count():
    assert facts(("SELECT PG_CATALOG.PG_ADVISORY_LOCK(7)",)).session_locks == ("pg_advisory_lock",)


def test_row_locks_and_transaction_control():
    said = facts(("begin; select id from parents where id = 1 for no key update; commit",))
    assert said.locks == (("FOR NO KEY UPDATE", LockKind.ROW),)
    assert said.control == (Control.BEGIN, Control.COMMIT)
    assert facts(("rollback to savepoint a",)).control == ()


def test_a_hole_keeps_what_is_known_and_says_it_is_incomplete():
    said = facts(("select pg_advisory_lock(", None, ")"))
    assert said.session_locks == ("pg_advisory_lock",) and not said.complete


def test_the_guard_turned_off_three_ways():
    assert facts(("set idle_in_transaction_session_timeout = 0",)).guard_off
    assert facts(("SET SESSION idle_in_transaction_session_timeout TO '0ms'",)).guard_off
    assert facts(("select set_config('idle_in_transaction_session_timeout', '0', false)",)).guard_off
    assert not facts(("set idle_in_transaction_session_timeout = '10s'",)).guard_off
    assert options_turn_guard_off("-c statement_timeout=5 -c idle_in_transaction_session_timeout=0")
    assert not options_turn_guard_off("-c idle_in_transaction_session_timeout=60000")


def test_mariadbs_get_lock_is_named_as_another_servers_lock():
    assert facts(("select get_lock(sha2(:k, 224), 0)",)).locks == (("GET_LOCK", LockKind.MARIADB_NAMED),)
