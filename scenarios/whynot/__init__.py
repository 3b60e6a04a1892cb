"""The post's "Why not just...?" alternatives, measured: what each one costs, and where it stops holding.

Each alternative is one experiment in a module of its own, whose docstring says what it measures and
which of the post's arguments it tests; each runs for the backends whose declared capabilities make it
apply, never for a list of names:

- horizon: the xmin horizon a session lock held across writes keeps from VACUUM (xmin_horizon);
- guard_role: the idle guard set on the database and turned off on the holder's role (guard_off_role);
- giant: one transaction for every company killed halfway, against one per company (giant_transaction);
- throughput: companies per second with 1, 2 and 4 workers on one run's lock, against xact (throughput);
- row_locks: a child insert under the parent's row lock, and a company with no parent row (fk_child_insert,
  no_parent_row);
- backstop: what the loser of two overlapping rebuilds sees under a unique marker (backstop_loser);
- inputs: an idempotent upsert with the same inputs and with each run's own (same_inputs, different_inputs);
- queue: whether a queue ever gives one company to two runs (queue_exclusion).

This scenario gathers them from EXPERIMENTS, whose order is the variants' order in meta.json and the
report, and hands each trial, verdict and safety to the experiment that declares the trial's variant;
it records the variant as the measures' kind. The scenario runs with nothing beside it (throughput wants the
machine); within it, the trials of an experiment that reads VACUUM's horizon (the database's), sets the
database's guard or times throughput run alone (Experiment.alone), and the others, whose runs only wait on each
other's locks, three at once.
"""

from __future__ import annotations

from lab.checkers.outcomes import Safety
from lab.measures.kinds import Measured
from lab.declarations.pacing import Exclusive, Floor, Lane, Pacing
from scenarios.base import Scenario, TrialEnv, TrialSpec
from scenarios.whynot.backstop import Backstop
from scenarios.whynot.base import Experiment
from scenarios.whynot.giant import GiantTransaction
from scenarios.whynot.guard_role import GuardOffRole
from scenarios.whynot.horizon import XminHorizon
from scenarios.whynot.inputs import IdempotentInputs
from scenarios.whynot.queue import Queue
from scenarios.whynot.row_locks import RowLocks
from scenarios.whynot.throughput import WORKERS, Throughput

EXPERIMENTS: tuple[Experiment, ...] = (XminHorizon(), GuardOffRole(), GiantTransaction(), Throughput(), RowLocks(),
                                       Backstop(), IdempotentInputs(), Queue())


def experiment_of(variant: str) -> Experiment:
    """The one experiment that declares the variant (a variant, and so a measures' kind, names one)."""
    for experiment in EXPERIMENTS:
        if variant in experiment.variants:
            return experiment
    raise ValueError(f"no whynot experiment declares the variant {variant!r}")


class WhyNot(Scenario):
    name = "whynot"
    measured = Measured.ALTERNATIVES
    # Throughput wants the machine, and VACUUM's horizon is the whole server's: nothing beside it. No floor is
    # declared: the experiments wait on different timers (the horizon two guard timeouts, throughput none), so
    # each trial's floor is the waits it was seen to sit through and its measured seconds. Some experiments run
    # alone (exclusive).
    pacing = Pacing(lane=Lane.ALONE, floor=Floor.NONE, exclusive=Exclusive.PER_TRIAL)
    summary = ("the post's Why-not alternatives measured: xmin horizon with the guard off, one giant transaction "
               "killed halfway, workers on the lock's connection, FK inserts under a row lock, the unique backstop's "
               "loser, idempotent inputs, a queue")
    variants = tuple(variant for experiment in EXPERIMENTS for variant in experiment.variants)
    params = {
        "quick": {"trials": 1, "parallel": 2, "timeout_s": 0.5, "companies": 12, "hold_s": 0.4,
                  "giant_companies": 8, "throughput_companies": 32, "throughput_reps": 3, "queue_companies": 24},
        # timeout_s: the guard's idle_in_transaction_session_timeout. What the horizon and guard-role experiments
        # find past it (the lock session gone, or holding back vacuum) does not depend on its length: 0.5 s, as the
        # quick profile has always used, not 2 s, takes 9 s off each of their trials, which wait it out twice per
        # run (issue 34).
        "default": {"trials": 3, "parallel": 3, "timeout_s": 0.5, "companies": 40, "hold_s": 1.0,
                    "giant_companies": 40, "throughput_companies": 200, "throughput_reps": 8, "queue_companies": 120},
    }

    def variant_skip(self, variant: str, backend_cls) -> str | None:
        return experiment_of(variant).applies(backend_cls)

    def exclusive(self, spec: TrialSpec, services) -> bool:
        """Its pacing's Exclusive.PER_TRIAL, a hook because it depends on the variant: as its experiment declares
        (Experiment.alone)."""
        return experiment_of(spec.variant).alone

    def pg_sessions(self, backend_cls, profile: str) -> int:
        """Four workers' write sessions, the lock's, the monitor's (VACUUM, pg_stat_activity) and an observer."""
        return max(WORKERS) + 3

    def variant_trials(self, variant: str, trials: int) -> int:
        """The experiment's own count where it declares one (throughput repeats inside its trial), else the profile's."""
        return min(trials, experiment_of(variant).trials or trials)

    def measured_seconds(self, measures: dict) -> float:
        """The throughput experiment's timed rebuilds (every configuration of every repetition)."""
        return float(measures.get("measured_s", 0.0))

    def trial_seconds(self, profile: str) -> float:
        p = self.profile_params(profile)
        return 1.0 + 4 * p["timeout_s"] + 2 * p["hold_s"]

    def run_trial(self, env: TrialEnv) -> dict:
        variant = env.spec.variant
        return {"kind": variant, **experiment_of(variant).run(env, variant)}

    def verdict(self, m: dict) -> str:
        return experiment_of(m["kind"]).verdict(m)

    def safety(self, m: dict, verdict: str) -> Safety:
        """Unsafe only where two runs rebuilt one company at once as the backend is configured by default."""
        return experiment_of(m["kind"]).safety(m)

    # exercised: the base's measures["exercised"]. Only giant_transaction records one (a confirmed kill, which
    # ends the transaction its lock lives in); the others measure costs and edges, not a lock taken away.
