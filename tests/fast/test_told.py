"""What a holder was told: signals read from planted holder events, and the report's cells built from them."""

from lab.checkers.told import first_after, signals
from lab.report.told import callbacks_cell, plain, release_cell, told_cell

T0 = 100.0


def ev(event, t, **fields):
    return {"event": event, "t": T0 + t, **fields}


def test_each_channel_becomes_a_signal_in_time_order():
    events = [ev("acquire", 0.0, granted=True),
              ev("log", 1.2, logger="tooz.drivers.redis", level="WARNING", message="Unable to heartbeat lock"),
              ev("thread_exception", 1.1, thread="Thread-7 (_lock_renewer)", error="NotAcquired: gone"),
              ev("write", 1.3, outcome="rejected", error="FenceRejected: token 1 is older"),
              ev("held", 1.4, held=False, noticed_loss_at=T0 + 1.0, noticed_how="returned False"),
              ev("release", 1.5, result="raised LockLost: release failed: LockNotOwnedError: not owned",
                 told="exception")]
    found = signals(events, T0)
    assert [(s["at"], s["how"], s["via"]) for s in found] == [
        (1.0, "false", "renew()"), (1.1, "exception", "thread _lock_renewer"),
        (1.2, "log", "logger tooz.drivers.redis"), (1.3, "refused", "the fence"), (1.5, "exception", "release()")]
    assert found[-1]["text"] == "LockNotOwnedError: not owned"  # the library's words, not the lab's wrapper
    assert first_after(found, 1.15)["via"] == "logger tooz.drivers.redis"
    assert first_after(found, 2.0) is None


def test_a_librarys_callback_is_a_signal_of_its_own_and_the_holder_process_reports_it():
    """kazoo's state listener: what the backend passes to told.callback() reaches the holder's events, then the
    table, as a callback (a contender in the lab's own process has no listener: it goes nowhere)."""
    from lab.checkers import told

    heard = []
    told.callback("its state listener", "SUSPENDED")  # nobody listening: nothing happens
    told.listen(lambda via, text: heard.append(ev("callback", 0.7, via=via, text=text)))
    try:
        told.callback("its state listener", "SUSPENDED")
    finally:
        told.listen(None)
    told.callback("its state listener", "LOST")
    assert heard == [ev("callback", 0.7, via="its state listener", text="SUSPENDED")]
    found = signals([ev("acquire", 0.0, granted=True), *heard], T0)
    assert [(s["at"], s["how"], s["via"], s["text"]) for s in found] == [(0.7, "callback", "its state listener",
                                                                            "SUSPENDED")]
    assert told_cell([lease_trial(found)]) == ("a callback from its state listener: `SUSPENDED`; 1/1, -0.30 s, "
                                               "before its stale write committed")


def test_a_quiet_holder_has_no_signal():
    events = [ev("acquire", 0.0), ev("write", 1.3, outcome="committed"), ev("held", 1.4, held=False),
              ev("release", 1.5, result="released")]
    assert signals(events, T0) == []


def lease_trial(found, lost=True, write="committed", granted_at=1.0, write_at=1.3, release="released"):
    measures = {"fault_at": 0.0, "point": "before_write", "lost": lost,
                "holder": {"write": write, "write_at": write_at, "release": release, "signals": found},
                "contender": {"granted_at": granted_at if lost else None}}
    return {"status": "ok", "measures": measures}


def test_a_cell_says_nothing_when_nothing_was_said():
    assert told_cell([lease_trial([]), lease_trial([])]) == "nothing 2/2"


def test_a_cell_times_the_signal_from_the_other_runs_grant_and_places_it_against_the_stale_write():
    late = [{"at": 1.5, "how": "exception", "via": "release()", "text": "LockNotOwnedError: not owned"}]
    early = [{"at": 0.4, "how": "false", "via": "renew()", "text": ""}]
    cell = told_cell([lease_trial(late, release="raised LockLost: x"), lease_trial(late, release="raised LockLost: x")])
    assert cell == ("an exception from release(): `LockNotOwnedError: not owned`; 2/2, +0.50 s, "
                    "after its stale write committed")
    assert told_cell([lease_trial(early)]) == "a False return from renew(); 1/1, -0.60 s, before its stale write committed"
    refused = [{"at": 1.3, "how": "refused", "via": "the fence", "text": "FenceRejected: token 1"}]
    assert told_cell([lease_trial(refused, write="rejected")]) == (
        "a refused write from the fence: `FenceRejected: token 1`; 1/1, +0.30 s")


def test_a_cell_names_the_rarer_first_signals_too():
    late = [{"at": 1.5, "how": "exception", "via": "release()", "text": "E"}]
    early = [{"at": 0.4, "how": "false", "via": "renew()", "text": ""}]
    cell = told_cell([lease_trial(late), lease_trial(early), lease_trial(late), lease_trial([])])
    assert cell == ("an exception from release(): `E`; 2/4, +0.50 s, after its stale write committed; "
                    "else a False return from renew() 1/4; else nothing 1/4")


def test_a_cell_for_a_lock_never_lost_or_never_recorded():
    assert told_cell([lease_trial([], lost=False)]) == "not lost 1/1"
    old = lease_trial([])
    del old["measures"]["holder"]["signals"]
    assert told_cell([old]) == "not recorded"
    assert told_cell([]) == "not run"


def test_release_cell_counts_what_release_said_after_a_loss():
    said = [{"at": 1.5, "how": "false", "via": "release()", "text": ""}]
    trials = [lease_trial(said, release="raised LockLost: the lease was no longer ours"),
              lease_trial([], release="released"), lease_trial([], lost=False)]
    assert release_cell(trials) == "a False return 1/2; claimed success 1/2"


def test_plain_drops_what_differs_between_trials():
    text = "Unable to heartbeat lock '<tooz.drivers.redis.RedisLock object at 0x7f9999738190>' on port=37027"
    assert plain(text) == "Unable to heartbeat lock '<tooz.drivers.redis.RedisLock>' on port=…"
    assert plain("Lock lock:locklab:locklab:run-1:pause/x/sigstop/0:lock expired") == "Lock <key> expired"
    assert len(plain("x" * 500)) == 90
    assert plain("ReleaseUnlockedLock: ('redlock:locklab:k', frozenset({<redis.client.Redis(...)>}))") == (
        "ReleaseUnlockedLock")


def test_callbacks_are_counted_beside_the_first_signal_and_placed_against_the_write():
    """kazoo logs a WARNING a millisecond before its listener says SUSPENDED: the cell shows the log line, and
    the callbacks get their own line, each with its trials, its median time and whether it beat the write."""
    log = {"at": 0.5, "how": "log", "via": "logger kazoo.client", "text": "WARNING: Connection dropped"}
    suspended = {"at": 0.501, "how": "callback", "via": "its state listener", "text": "SUSPENDED"}
    lost = {"at": 1.2, "how": "callback", "via": "its state listener", "text": "LOST"}
    trials = [lease_trial([log, suspended, lost]), lease_trial([log, suspended])]
    assert told_cell(trials).startswith("a log line from logger kazoo.client")
    assert callbacks_cell(trials) == ("`SUSPENDED` from its state listener 2/2, -0.50 s, before its write in 2 of 2; "
                                      "`LOST` from its state listener 1/2, +0.20 s, before its write in 1 of 1")
    late = dict(lost, at=1.4)  # planted after the holder's write (1.3): the count moves
    assert callbacks_cell([lease_trial([log, suspended, late])]).endswith("+0.40 s, before its write in 0 of 1")
    assert callbacks_cell([lease_trial([log])]) is None  # no callback: no line, so a run without one renders as before
    assert callbacks_cell([lease_trial([suspended], lost=False)]) is None  # nobody else got the lock: nothing lost
