"""The MariaDB cases section: found by what the locks declare, and its case-A sentence computed from the trials
(a planted contradicting figure changes it); PostgreSQL's own cases section keeps MariaDB's trials out."""

from lab.report.mariadb import section_mariadb_cases
from lab.report.sections import RunView
from lab.report.session import section_cases
from tests.fast.test_report_claims import trial

META = {"post_roles": {"session": "method_1"}, "analogues": {"maria1": "method_1", "maria3": "method_3"}}


def case(backend, variant, verdict, server, letter=None, index=0, setting="idle_transaction_timeout"):
    measures = {"case": letter, "lock_server": server, "setting": setting, "timeout_s": 3,
                "acquired": True, "holder_state": "idle", "next_query": "alive",
                "probes": [{"t": 1, "got": False}, {"t": 5, "got": verdict == "lost"}]}
    return trial("cases", backend, variant, verdict, measures, index)


def trials(maria_a="held"):
    return [case("session", "idle_in_transaction", "lost", "postgres", "A",
                 setting="idle_in_transaction_session_timeout"),
            *[case("maria1", "idle_in_transaction", maria_a, "mariadb", "A", index=i) for i in range(3)],
            case("maria1", "read_then_idle_in_transaction", "lost", "mariadb"),
            case("maria3", "idle_session", "lost", "mariadb", "E", setting="wait_timeout")]


def test_case_a_is_said_not_to_reproduce_only_while_the_mariadb_trials_kept_the_lock():
    text = section_mariadb_cases(RunView.of(trials("held"), META))
    assert "**Case A does not reproduce on MariaDB**: `maria1` kept its lock in 3 of 3 trials" in text
    assert "PostgreSQL here (`session`): lost in 1 of 1" in text and "after one read of a table" in text
    assert "| 1 (A) | idle in a transaction past the guard | Lost | lost 1/1 (idle_in_transaction_session_timeout 3 s) " \
           "| held 3/3 (idle_transaction_timeout 3 s) |" in text
    assert "| 3 (E) |" in text and "lost 1/1 (wait_timeout 3 s)" in text
    planted = section_mariadb_cases(RunView.of(trials("lost"), META))
    assert "**Case A reproduces on MariaDB**: `maria1` lost its lock in 3 of 3 trials" in planted
    mixed = trials("held")
    mixed[1] = case("maria1", "idle_in_transaction", "lost", "mariadb", "A")
    assert "**Case A varies on MariaDB**: `maria1` lost its lock in 1 of 3 trials" in \
        section_mariadb_cases(RunView.of(mixed, META))


def test_the_posts_own_cases_section_counts_postgresql_trials_only():
    text = section_cases(RunView.of(trials("held"), META))
    assert "| A | default (autobegin) |" in text
    assert "1 trials" in text.split("| A |")[1].split("\n")[0]  # not the three MariaDB trials of the letter A
    assert section_cases(RunView.of([t for t in trials() if t["measures"]["lock_server"] == "mariadb"], META)) is None


def test_no_mariadb_trials_no_section():
    assert section_mariadb_cases(RunView.of(trials()[:1], META)) is None
