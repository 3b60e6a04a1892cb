"""Plan the trials of a run, start the servers they need, run them, and keep every finished one.

Data flows one way: cli -> runner -> scenario -> (backend, faults, checkers) -> results.
This package is split by job, and this module is its front door (the cli and tests import from here):
- plan.py: what was asked (RunRequest) and the trials still to run (Plan);
- resume.py: a resumed run's request, as its meta.json has it, and its trials already done;
- run.py: Runner, the order of a run: servers, capacity, meta.json, then each scenario;
- lanes.py: which scenarios run side by side, and how a stop or Ctrl-C winds every lane down;
- trials.py: one scenario's trials on a pool under the server's session budget, each finished one kept;
- records.py: the one record a trial leaves in trials.jsonl, and its verdict;
- context.py: RunContext, what every scenario and trial of a run shares, as one object.
- pacing.py: from a scenario's declared Pacing, which trials still run, its floors, bounds and estimates;
- waves.py: how many trials fit at once in the server's session budget, and in how many waves;
- progress.py: a scenario's progress line or bar, its estimate, and its wall time against its bound;
- settle.py: trials added after the planned ones where the answer depends on them (--settle), in rounds, within
  a time budget; settle_cells.py picks the cells (the decision's one entry point), settle_rule.py says when a cell
  has trials enough, settle_rounds.py what a round runs, settle_progress.py how it shows;
- meta.py: meta.json changed by one thread at a time.
"""

from lab.runner.context import RunContext
from lab.runner.lanes import LANE_WIND_DOWN_S, run_lanes, schedule
from lab.runner.plan import Plan, RunRequest, SettleAsk, make_plan
from lab.runner.records import Outcome, TrialRecord, outcome_fields
from lab.runner.resume import resumed
from lab.runner.run import Runner

__all__ = ["LANE_WIND_DOWN_S", "Outcome", "Plan", "RunContext", "RunRequest", "Runner", "SettleAsk", "TrialRecord", "make_plan",
           "outcome_fields", "resumed", "run_lanes", "schedule"]
