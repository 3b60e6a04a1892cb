"""`lab run --scenario pooler` as a user runs it: a verdict in every cell, the pooler's evidence, nothing left behind."""

import shutil

import pytest

from tests.server.helpers import processes_under, shared_tmp
from tests.server.pooler_helpers import needs_pgbouncer
from tests.server.test_cli_run import lab, trials_of

pytestmark = [pytest.mark.server, needs_pgbouncer]

BACKENDS = ["session", "session_autocommit", "xact", "lease_row"]


@pytest.fixture(scope="module")
def pooler_run(tmp_path_factory):
    cwd = tmp_path_factory.mktemp("pooler")
    tmp = shared_tmp(cwd)
    result = lab("run", "--profile", "quick", "--backend", ",".join(BACKENDS), "--scenario", "pooler",
                 cwd=cwd, tmp=tmp)
    (run,) = (cwd / "results").iterdir()
    yield result, {(t["backend"], t["variant"]): t for t in trials_of(run)}, tmp
    shutil.rmtree(tmp, ignore_errors=True)


def test_every_cell_has_a_verdict_and_no_pooler_is_left(pooler_run):
    result, trials, tmp = pooler_run
    assert result.returncode == 0, result.stderr
    assert set(trials) == {(b, v) for b in BACKENDS for v in ("session_mode", "transaction_mode")}
    assert all(t["status"] == "ok" and t["verdict"] for t in trials.values()), [
        (k, t.get("reason")) for k, t in trials.items() if t["status"] != "ok"]
    assert processes_under(tmp) == [] and list(tmp.iterdir()) == []


def test_transaction_pooling_lends_the_holders_lock_session_to_the_second_run(pooler_run):
    _, trials, _ = pooler_run
    measures = trials[("session_autocommit", "transaction_mode")]["measures"]
    assert measures["server_sessions_at_hold"] < measures["clients_at_hold"]  # more clients than server sessions
    assert measures["lock_session_lent"] and measures["second"]["on_holder_session"]
    assert measures["holder"]["held_when_second_got_in"] is True and measures["second"]["held"] is True
    assert trials[("session_autocommit", "transaction_mode")]["safety"] == "unsafe"


def test_xact_and_the_lease_row_hold_through_transaction_pooling_and_session_pooling_moves_nothing(pooler_run):
    _, trials, _ = pooler_run
    # The checkers, as without a pooler: run2 waited on xact's lock inside the write and rebuilt after run1 had
    # committed (nobody was granted while run1 believed it held: not exercised); the lease row and session's open
    # transaction refused it (held: not exercised).
    expected = {"xact": ("intact (250 rows)", "safe", False), "lease_row": ("held", "safe", False),
                "session": ("held", "safe", False)}
    for backend, outcome in expected.items():
        trial = trials[(backend, "transaction_mode")]
        assert (trial["verdict"], trial["safety"], trial["exercised"]) == outcome, backend
        assert trial["measures"]["sessions_moved"] is True  # the pooler's own evidence: it moved transactions
    assert not any(trials[(b, "session_mode")]["measures"]["sessions_moved"] for b in BACKENDS)
    assert all(trials[(b, "session_mode")]["verdict"] == trials[(b, "transaction_mode")]["verdict"]
               for b in ("xact", "lease_row", "session"))  # session pooling changes nothing
