"""The guard-off row's role clause follows the guard_off_role trials: plant a lost lock or a control the guard
did not end, and the words change; a run without them renders the row as before."""

from lab.report import whynot
from lab.report.common import trials_frame
from tests.fast.test_report import META
from tests.fast.test_report_claims import trial


def role(held=True, control_state="gone", said="terminating connection due to idle-in-transaction timeout"):
    return trial("whynot", "session_guard_off", "guard_off_role", "x", {
        "kind": "guard_off_role", "timeout_s": 0.5, "database_guard": "500ms",
        "holder": {"guard": "0", "source": "user", "held_after": held},
        "control": {"guard": "500", "source": "database", "state": control_state,
                    "server_said": said if control_state == "gone" else None}})


def test_the_role_clause_says_the_lock_outlived_the_database_guard_that_ended_the_control():
    text = whynot.guard_off(trials_frame([role()], META))
    assert text.startswith("measured: on a role (ALTER ROLE ... SET idle_in_transaction_session_timeout = 0, the "
                           "guard at 0.5 s set on the database)")
    assert "read the guard as 0 from user 1/1 and kept its lock past it in 1/1 trials" in text
    assert "(500 from database 1/1) was ended by it in 1/1 (server log: terminating connection due to " in text
    assert text.endswith("(whynot/session_guard_off/guard_off_role, n=1)")


def test_planted_figures_change_the_role_clause():
    text = whynot.guard_off(trials_frame([role(held=False, control_state="idle in transaction")], META))
    assert "kept its lock past it in 0/1 trials" in text and "was ended by it in 0/1" in text
    assert "server log" not in text
    assert whynot.guard_off(trials_frame([trial("overlap", "xact", "two_runs", "x", {})], META)) is None
