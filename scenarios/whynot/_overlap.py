"""Two overlapping rebuilds as the alternatives that write stage them (row locks, backstop, inputs, queue): run1
held inside its write while run2 starts, and the table two_runs made for the trial."""

from __future__ import annotations

from lab.workload.table import table_name
from scenarios.base import TrialEnv


def hold_run1_at(env: TrialEnv, point: str = "after_delete"):
    """two_runs' hook for run1: at `point` it lets run2 start and stays there for the profile's hold_s, and
    until run2 has reached it."""
    hold = env.params["hold_s"]

    def hook(name, conn, sync):
        if name == point:
            sync.started.set()
            sync.hold_until_met(env, conn, hold)  # run1 stays inside its write, so run2 overlaps it

    return hook


def two_runs_table(env: TrialEnv) -> str:
    """The company table two_runs made for this trial (it names it from the trial, label 'rows')."""
    return table_name(f"{env.run_id}_{env.spec.id}_rows")
