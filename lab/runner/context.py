"""RunContext: what every scenario and trial of one run shares, handed down as one object.

Frozen, and built once the servers, pools and run folder exist, so a step's signature says what it
does (a scenario, a trial) instead of listing the run's plumbing again.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Mapping

from rich.progress import Progress

import backends
from sqlalchemy.engine import Engine

from lab.records.results import RunFolder
from lab.runner.plan import Plan
from lab.runner.waves import Wave
from lab.servers.postgres.capacity import SessionSampler
from lab.servers.services import Services
from scenarios.base import Scenario, TrialEnv, TrialSpec


@dataclass(frozen=True)
class RunContext:
    profile: str
    plan: Plan
    services: Services
    monitor: Engine  # the lab's own pool: schema, evidence, observers
    writes: Engine  # the pool the rebuilds write through
    folder: RunFolder
    progress: Progress  # its console is the run's console
    sampler: SessionSampler  # the run's PostgreSQL sessions, for each scenario's peak
    stop: threading.Event  # set by an error or Ctrl-C: every trial winds down and nothing more is recorded
    waves: Mapping[str, Wave]  # scenario -> how many trials at once, fitted to the server's connections
    # store -> (monitor, writes) on the SQL servers besides PostgreSQL that the run's backends write to (MariaDB)
    stores: Mapping[str, tuple[Engine, Engine]] = field(default_factory=dict)

    def wave(self, scenario: Scenario) -> Wave | None:
        return self.waves.get(scenario.name)

    def trial_env(self, spec: TrialSpec, params: dict) -> TrialEnv:
        """What one trial may use: the run's servers, the pools on the server its backend writes to, its own key
        space, the stop flag."""
        monitor, writes = self.stores.get(backends.load(spec.backend).writes_to, (self.monitor, self.writes))
        return TrialEnv(self.services, monitor, writes, self.folder.run_id, spec, params, self.stop, self.folder.path)
