"""Capacity before work: a scenario's trials share the sessions the server allows, or the run is refused."""

import pytest

from lab.errors import LabError
from lab.runner.waves import LAB_OVERHEAD, Demand, Dispatch, SessionBudget, describe, fit
from lab.servers.postgres.capacity import Capacity

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


def test_trials_start_in_plan_order_as_their_sessions_come_free_and_cheap_ones_pass_the_queue():
    budget = SessionBudget(5)
    queue = Dispatch([("pg1", 2), ("pg2", 2), ("pg3", 2), ("redis1", 0), ("pg4", 2), ("redis2", 0)], budget)
    first = queue.ready(slots=10)
    # Two PostgreSQL trials fit in five sessions; the third waits, and the Redis trials behind it start.
    assert [name for name, _ in first] == ["pg1", "pg2", "redis1", "redis2"] and budget.free == 1
    assert queue.ready(slots=10) == []  # nothing came free
    budget.give(2)  # pg1 finished
    assert queue.ready(slots=10) == [("pg3", 2)]
    budget.give(2)
    budget.give(2)
    assert queue.ready(slots=10) == [("pg4", 2)] and not queue


def test_when_sessions_are_scarce_the_trials_needing_them_get_the_workers_first():
    budget = SessionBudget(4)
    trials = [("redis1", 0), ("pg1", 2), ("redis2", 0), ("pg2", 2), ("pg3", 2), ("redis3", 0)]
    in_plan_order = Dispatch(trials, SessionBudget(4)).ready(slots=3)
    assert [name for name, _ in in_plan_order] == ["redis1", "pg1", "redis2"]  # two free sessions left idle
    scarce_first = Dispatch(trials, budget, scarce_first=True)
    assert [name for name, _ in scarce_first.ready(slots=3)] == ["pg1", "pg2", "redis1"] and budget.free == 0


def test_a_trial_that_must_run_alone_waits_for_the_others_and_nothing_starts_beside_it():
    budget = SessionBudget(100)
    queue = Dispatch([("own1", 0), ("shared1", 4), ("own2", 0), ("shared2", 4), ("own3", 0)], budget)
    alone = lambda name: name.startswith("shared")  # noqa: E731  the planted declaration
    # Three workers, nothing running: the first alone trial would have to start by itself, so the others go first.
    first = queue.ready(slots=3, alone=alone, busy=False)
    assert [name for name, _ in first] == ["own1", "own2", "own3"]
    assert queue.ready(slots=0, alone=alone, busy=True) == []  # while they run, it waits
    # Nothing running: the alone trial starts, and nothing beside it though slots are free.
    assert queue.ready(slots=3, alone=alone, busy=False) == [("shared1", 4)]
    assert queue.ready(slots=3, alone=alone, busy=False) == [("shared2", 4)] and not queue


def test_workers_limit_what_starts_even_when_sessions_are_free():
    budget = SessionBudget(100)
    queue = Dispatch([(f"t{i}", 1) for i in range(10)], budget)
    assert len(queue.ready(slots=3)) == 3 and budget.free == 97


def test_a_trial_bigger_than_the_budget_waits_for_all_of_it():
    budget = SessionBudget(4)
    assert budget.try_take(10) and budget.free == 0
    assert not budget.try_take(1)
    budget.give(10)
    assert budget.free == 4


def test_the_reports_provenance_shows_the_limits_and_each_fitted_scenario():
    from lab.report.meta import capacity_rows

    [wave] = fit([Demand("timing", (2, 0) * 340, 240)], SMALL, "db")
    meta = {"capacity": [{"server": SMALL.as_dict(),
                          "waves": {"timing": {**wave.as_dict(), "peak_sessions_on_server": 61}}}]}
    rows = dict(capacity_rows(meta))
    assert rows["PostgreSQL connections"] == "max_connections 100, 3 reserved for other roles, 97 free for the lab"
    assert rows["fitted: timing"] == ("would hold 480 sessions at once; ran its trials within 77 (about 9 waves), "
                                      "peak on the server 61")
    assert capacity_rows({}) == []  # a run from before capacity was recorded renders as it did


def test_a_timing_trial_counts_its_long_run_and_its_short_run_on_postgresql_and_nothing_elsewhere():
    import backends
    import scenarios

    timing = scenarios.load("timing")
    assert timing.pg_sessions(backends.load("session"), "default") == 2
    assert timing.pg_sessions(backends.load("redis"), "default") == 0
