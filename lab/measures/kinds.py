"""What a scenario's trials measure, as the scenario declares it: the report finds a section's trials by it.

A scenario declares one kind (Scenario.measured); a run records them in meta.json (`measured`: scenario name ->
kind), and the report selects the trials a section renders by kind, never by a scenario's name, so a scenario
renamed, or a second one that measures the same thing, renders without a change to the report. A run recorded
before meta.json kept them reads the lab's own declarations (lab/report/declared.py), as for its fault columns.
"""

from __future__ import annotations

from lab.declarations.described_enum import DescribedStrEnum


class Measured(DescribedStrEnum):
    """One kind of measurement, declared as (value, what it is). Most scenarios' trials are read only as matrix
    cells (MATRIX_CELL); a section of its own reads the kind it renders."""

    MATRIX_CELL = ("matrix_cell", "a matrix cell: judged history and final table, nothing a section reads beyond them")
    POST_CASE = ("post_case", "the post's cases A-E: a lock idle under a guard, probed")
    CALIBRATION = ("calibration", "how soon a poller got in: a lock session ended, a poller timed against it")
    GUARD_TIMING = ("guard_timing",
                    "a short run against guard timers: when the lock was lost, against its guard's timeout")
    LOOKALIKE = ("lookalike", "a lookalike setting: settings that look like a guard and are not")
    KEEPALIVE_DROP = ("keepalive_drop",
                      "a lock connection silently dropped: when the server's keepalives ended the session")
    OVERLAP = ("two_runs_overlapping", "two runs overlapping: two rebuilds of one company at once")
    RUN_KILLED = ("run_killed", "a run killed mid-write: what the company held after its rebuild's process died")
    WRITE_RULES = ("write_rules", "the rules the write depends on: isolation level and lock order of the write itself")
    COST = ("cost", "a lock's cost per company, repeated until precise: the lock against one transaction for all")
    COMPANY_COST = ("company_cost", "each lock's own write path per company, repeated until precise: the backend's "
                    "rebuild against the same transactions with no lock, on the same store")
    CONFLICT_COST = ("conflict_cost", "the cost of conflicts: SERIALIZABLE's retries against a lock, by contention")
    LATENCY = ("lock_latency", "a lock's latency over its server's floor: acquire + release and hand-offs, repeated")
    ALTERNATIVES = ("alternatives", "why not another way: the alternatives' experiments (whynot)")
    KILL_POINT_SEARCH = ("kill_point_search",
                         "a search of kill points: hypothesis's schedules, the smallest that failed")
    HOLDER_CLOCK = ("holder_clock_moved", "a holder's clock moved: which clock a lock keeps time by")
    SERVER_CLOCK = ("server_clock_moved", "a server's clock moved: Kleppmann's clock scenario and its control")
    MARGIN_SEARCH = ("margin_search", "a lease's safety margin: a bisection over a fault's strength")
    SERVER_RESTART = ("server_restart", "a lock server restarted: what persistence kept across a restart")
