"""The network-drop section computes "agrees" from the figures: a planted late ending is counted as not agreeing."""

from lab.report.sections import RunView
from lab.report.netdrop import ending_summary, section_netdrop


def trial(index: int, ended: float | None, estimate: int = 8, interval: int = 1, stuck: bool = False) -> dict:
    client = ({"stuck_at": "release", "still_waiting_after_s": 6.0, "steps": {}} if stuck else
              {"stuck_at": None, "steps": {"release": {"after_go_s": 1.95, "result": "raised LockLost: gone"}}})
    return {"id": f"netdrop/session/server_keepalives/{index}", "scenario": "netdrop", "backend": "session",
            "variant": "server_keepalives", "index": index, "status": "ok", "verdict": "stale write accepted",
            "safety": "unsafe", "exercised": True,
            "measures": {"keepalive": {"server": {"idle": 5, "interval": interval, "count": 3},
                                       "doctor_estimate_s": estimate, "probe_interval_s": interval,
                                       "session_ended": ended is not None, "ended_after_last_use_s": ended,
                                       "agrees_within_interval": True, "waited_s": 15.0},
                         "client": client}}


def test_a_late_ending_does_not_agree_even_when_the_trial_said_it_did():
    records = [trial(0, 8.2), trial(1, 9.6)]  # 9.6 s is 1.6 s past 8 s, more than one 1 s interval
    assert ending_summary(records)["agreed"] == 1


def test_the_section_shows_the_median_range_and_what_the_holder_heard():
    text = section_netdrop(RunView.of([trial(0, 8.1), trial(1, 8.3, stuck=True)]))
    assert "8.20 s (8.10-8.30 s, n=2)" in text
    assert "release raised LockLost after 1.95 s 1/2" in text and "release still waiting after 6 s 1/2" in text
    assert "in 2 of 2 trials" in text


def test_a_client_setting_that_changed_nothing_is_named():
    stuck = trial(0, 8.1, stuck=True)
    stuck.update(variant="client_user_timeout", id="netdrop/session/client_user_timeout/0")
    text = section_netdrop(RunView.of([stuck, trial(1, 8.2)]))
    assert "session still waited: the settings never reached the lock's own connection" in text
    assert "still waited" not in section_netdrop(RunView.of([trial(1, 8.2, stuck=True)]))


def test_the_os_defaults_read_in_hours():
    text = section_netdrop(RunView.of([trial(0, 7875.4, estimate=7875, interval=75)]))
    assert "| 7875 s (2 h 11 min) | 7875.40 s (2 h 11 min) (n=1) | 1/1 |" in text


def test_the_kernels_timer_lateness_widens_agreement_only_on_the_late_side():
    """The OS defaults' first probe may fire one 131 s wheel bucket late at HZ=250: 7990 s agrees with 7875 s
    then, but 7700 s (early) and 8100 s (past the lateness and one interval) do not."""
    def late(index: int, ended: float) -> dict:
        record = trial(index, ended, estimate=7875, interval=75)
        record["measures"]["keepalive"].update(kernel_hz=250, timer_lateness_s=149.504)
        return record
    assert ending_summary([late(0, 7990.0), late(1, 7700.0), late(2, 8100.0)])["agreed"] == 1
    assert "7875 s (2 h 11 min) (+ up to 150 s at HZ 250)" in section_netdrop(RunView.of([late(0, 7990.0)]))


def test_a_client_that_is_not_libpq_is_not_run_for_the_variants_that_tune_libpq():
    """netdrop's client variants set libpq parameters; a lock client that declares it takes none of them
    (node-postgres: pg_parameters) is *not run* there with which (the drop would reach its session: the lab cannot
    tune that client so), never n/a and never run with them silently left out."""
    from lab.checkers.outcomes import SkipKind, skip_kind_of

    from backends.node.node_pg_session import NodePgSession
    from scenarios.netdrop import CLIENT_PARAMETERS, NetDrop, client_settings

    scenario = NetDrop()
    for profile in ("quick", "default", "full"):
        params = scenario.profile_params(profile)
        for variant in scenario.variants:
            assert set(client_settings(variant, params)) == set(CLIENT_PARAMETERS.get(variant, ()))
    assert scenario.variant_skip("server_keepalives", NodePgSession) is None
    reason = scenario.variant_skip("client_user_timeout", NodePgSession)
    assert reason == "not run: its lock's client takes none of libpq's tcp_user_timeout"
    assert skip_kind_of(reason) is SkipKind.NOT_RUN
    import backends

    assert scenario.variant_skip("client_user_timeout", backends.load("session_autocommit")) is None
