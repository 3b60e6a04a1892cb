"""Capacity before work: a scenario's trials share the sessions the server allows, or the run is refused."""

import threading

import pytest

from lab.errors import Interrupted, LabError
from lab.servers.capacity import Capacity
from lab.waves import LAB_OVERHEAD, Demand, SessionBudget, describe, fit

SMALL = Capacity(max_connections=100, reserved=3, in_use=1, role_left=None, database_left=None)


def test_a_server_with_room_runs_every_scenario_as_it_wants():
    big = Capacity(max_connections=600, reserved=0, in_use=1, role_left=None, database_left=None)
    [wave] = fit([Demand("timing", (2, 0) * 340, 240)], big, "db")
    assert not wave.limited and wave.budget == 600 - LAB_OVERHEAD and wave.waves == 3  # 680 trials, 240 at once


def test_a_small_server_gets_waves_and_a_line_naming_the_numbers():
    [wave] = fit([Demand("timing", (2, 0) * 340, 240)], SMALL, "db")
    assert SMALL.available == 97 and wave.budget == 97 - LAB_OVERHEAD
    assert wave.limited and wave.would_use == 480 and wave.waves == 9  # 680 sessions over a budget of 77
    line = describe(wave, SMALL)
    assert "up to 480 PostgreSQL sessions" in line and "allows the lab 97" in line and "max_connections 100" in line


def test_when_one_trial_cannot_fit_the_run_is_refused_in_one_line():
    tiny = Capacity(max_connections=30, reserved=3, in_use=10, role_left=None, database_left=None)
    with pytest.raises(LabError) as refused:
        fit([Demand("cases", (4,), 40), Demand("perf", (10,), 1)], tiny, "postgresql://app:***@db/x")
    message = str(refused.value)
    assert "\n" not in message and "scenario cases needs 24" in message and "the server allows 18" in message


def test_a_role_or_database_limit_is_the_tighter_one():
    role = Capacity(max_connections=100, reserved=3, in_use=40, role_left=24, database_left=None)
    assert role.available == 25 and "CONNECTION LIMIT leaves 25" in role.describe()
    database = Capacity(max_connections=100, reserved=3, in_use=40, role_left=None, database_left=5)
    assert database.available == 6


def test_the_budget_never_lets_trials_hold_more_than_it_has():
    budget, stop = SessionBudget(5), threading.Event()
    holding, peak, lock = [0], [0], threading.Lock()

    def trial():
        budget.take(2, stop)
        with lock:
            holding[0] += 2
            peak[0] = max(peak[0], holding[0])
        stop.wait(0.02)
        with lock:
            holding[0] -= 2
        budget.give(2)

    threads = [threading.Thread(target=trial) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert peak[0] == 4  # two trials of two sessions fit in five; a third never got in


def test_a_waiting_trial_leaves_when_the_run_stops():
    budget, stop = SessionBudget(1), threading.Event()
    budget.take(1, stop)
    stop.set()
    with pytest.raises(Interrupted):
        budget.take(1, stop)
