"""Every lock's own write path, timed per company: its rebuild() beside the same transactions with no lock.

The cost table (scenarios/perf.py) reproduces the post's configurations, so it times only the no-lock control and
the post's method 4. A decision between locks needs every candidate's cost per company the way it writes: a lock
inside the write, SERIALIZABLE's retry loop, a claimed row, a marker, a job row, and a fenced lock's fence upsert.
Each trial times one backend: every company rebuilt in a transaction of its own through the backend's rebuild()
(its lock, fence or retry inside the write), and the same companies rebuilt by the no-lock control on a table of
its own on the same store (a MariaDB lock against a MariaDB control), each table fresh, filled and vacuumed before
the clock. The two sides take turns in blocks of companies, A B B A A B ..., the first side drawn per trial: each
pair of adjacent blocks, one per side, gives a ratio, and the trial's ratio is the median of its pairs', its seconds
per company the median of its blocks' (a neighbour's burst on a shared machine slows a block or two, not the
median). Each repetition runs every backend once in an order of its own; a backend's repetitions stop by the
precision rule (RULE_TOLERANCE, at least RULE_FLOOR, the profile's trials the cap) once its own ratios are tight
enough.

A lock held across the run's transactions (a session lock, Redis, etcd, ZooKeeper, a lease row) is acquired once
before the clock and released after it: what its side times is the write alone, or the write with its fence
upsert, and its acquire + release once per run is the latency scenario's figure (timed once here, as a
reminder, not a measurement). Every key is the trial's own, so each timed rebuild is the company's first under
it: a parent row, a fence row or a job row is made in its transaction, as on a lock's first run. An untimed warm-up
company on each side first opens the connections it writes on (and makes idempotent's unique key). The store's
floor (a select 1 round trip and a one-row commit, lab/servers/floors.py) is sampled between the blocks, so the
report can state the cost against it.
"""

from __future__ import annotations

import random
import statistics
import time
from contextlib import ExitStack, contextmanager
from typing import Iterator

from sqlalchemy import text

import backends
from backends.base import Backend
from lab.measures.kinds import Measured
from lab.measures.precision import Rule
from lab.measures.shapes import CompanyCostArm, CompanyCostMeasures, LockScope
from lab.declarations.pacing import Lane, Pacing, Repeats
from lab.declarations.post_role import PostRole
from lab.servers.floors import FloorProbe, probe_for
from lab.declarations.where import Service
from lab.workload.table import SCHEMA, CompanyTable, table_name
from scenarios.base import Scenario, TrialEnv, TrialSpec, release_said
from scenarios.perf import ROWS

# A backend's ratios to the control within +-10% of their median, after three repetitions, as the cost table's.
RULE_TOLERANCE, RULE_FLOOR = 0.10, 3
BLOCKS = 8  # blocks of companies per side, in the order A B B A A B B A ...
FLOOR_SAMPLES = 1  # each floor call, before every block and after the last
TTL_S = 30.0  # a lease outlives the trial: its renewals are not a company's cost
FRESH_TRIES = 3  # a fresh key is free: a refusal is the library's, on a busy machine
LOCK, BASELINE = "lock", "baseline"
_COMMIT_TABLE = f"{SCHEMA}.company_cost_commits"


class CostPerCompany(Scenario):
    name = "cost_per_company"
    measured = Measured.COMPANY_COST
    # Seconds compared with the control beside them: nothing else may run meanwhile. A backend's repetitions stop
    # once its paired ratios are precise enough (still_needed).
    pacing = Pacing(lane=Lane.ALONE, repeats=Repeats.UNTIL_PRECISE)
    summary = "each lock's own write path per company (lock, fence upsert, retry) against no lock on the same store"
    variants = ("transaction_per_company",)
    params = {
        "quick": {"companies": 32, "trials": 1, "parallel": 1},
        "default": {"companies": 96, "trials": 5, "parallel": 1},  # trials: the precision rule's cap
        "full": {"companies": 480, "trials": 5, "parallel": 1},
    }

    def plan(self, backend_classes: list[type[Backend]], profile: str) -> list[TrialSpec]:
        """Repetition by repetition, each repetition's backends in an order of its own (seeded by the repetition,
        so a resumed run plans the same order)."""
        specs = super().plan(backend_classes, profile)
        skipped = [s for s in specs if s.skip is not None]
        ordered: list[TrialSpec] = []
        for index in sorted({s.index for s in specs if s.skip is None}):
            group = [s for s in specs if s.skip is None and s.index == index]
            random.Random(f"{self.name}-{index}").shuffle(group)
            ordered += group
        return skipped + ordered

    def rule(self, profile: str) -> Rule:
        cap = self.profile_params(profile)["trials"]
        return Rule(RULE_TOLERANCE, min(RULE_FLOOR, cap), cap)

    @staticmethod
    def ratios(done: list[dict]) -> dict[str, list[float]]:
        """Each backend's paired ratios (its side's seconds over the control's in the same trial), by repetition."""
        by_backend: dict[str, list[tuple[int, float]]] = {}
        for record in done:
            by_backend.setdefault(record["backend"], []).append((record["index"], record["measures"]["ratio"]))
        return {backend: [r for _, r in sorted(pairs)] for backend, pairs in by_backend.items()}

    def still_needed(self, profile: str, spec: TrialSpec, done: list[dict]) -> bool:
        """Its pacing's Repeats.UNTIL_PRECISE: a backend's next repetition runs only while its own ratios are not
        yet within the rule (each trial carries its own control, so no backend waits on another's)."""
        rule = self.rule(profile)
        if spec.index < rule.floor:
            return True
        mine = self.ratios([r for r in done if r["variant"] == spec.variant]).get(spec.label, [])
        return not rule.enough(mine)

    def precision(self, profile: str, done: list[dict]) -> dict | None:
        """The rule's outcome over every backend's ratios (the widest spread, the fewest repetitions), and each
        backend's own, by which it stopped."""
        by_backend = self.ratios(done)
        if not by_backend:
            return None
        rule = self.rule(profile)
        return {**rule.outcome(*by_backend.values()),
                "backends": {backend: rule.outcome(series) for backend, series in sorted(by_backend.items())}}

    def trial_seconds(self, profile: str) -> float:
        """Filling two tables, then rebuilding every company twice: about 4 ms a company and side here."""
        return 0.5 + self.profile_params(profile)["companies"] * 2 * 0.004

    def measured_seconds(self, measures: dict) -> float:
        """Both sides' timed rebuilds (filling the tables and sampling the floor are not)."""
        return float(measures["lock"]["seconds"] + measures["baseline"]["seconds"]) if "lock" in measures else 0.0

    def pg_sessions(self, backend_cls: type[Backend], profile: str) -> int:
        """The lock's sessions (lease_row keeps two), a writes session per side, the floor's and the monitor's."""
        return 6 if Service.POSTGRES in {backend_cls.lock_service, backend_cls.writes_to} else 2

    def verdict(self, measures: dict) -> str:
        arms = (measures["lock"], measures["baseline"])
        failed = sum(arm["failed"] for arm in arms)
        if failed:
            return f"{failed} transactions failed"
        whole = (measures["filled"], measures["filled"] * measures["rows"])
        if any((arm["companies_final"], arm["rows_final"]) != whole for arm in arms):
            return "a company not whole after the clock"
        return f"measured: {measures['ratio']:.2f}x no lock"

    def run_trial(self, env: TrialEnv) -> dict:
        cls = backends.load(env.spec.backend)
        companies = env.params["companies"]
        run_level = cls.holds_across_writes()
        order = _order(random.Random(f"{env.run_id}:{env.spec.id}"))
        with ExitStack() as stack:  # the first side's table made first too, so neither side always gets the newer
            tables = {side: stack.enter_context(self._table(env, side, companies + 1)) for side in dict.fromkeys(order)}
            floor = probe_for(cls.writes_to)(env.services, env.key("floor"), _COMMIT_TABLE)
            stack.callback(floor.close)
            lock = env.backend(table=tables[LOCK], options={"ttl_s": TTL_S})
            stack.callback(lock.close)
            control = env.backend(backends.playing(PostRole.NO_LOCK), table=tables[BASELINE])
            stack.callback(control.close)
            acquire_s = _acquired(lock) if run_level else None
            sides = {LOCK: _Side(lock, companies, f"{LOCK}-{env.spec.index}"),
                     BASELINE: _Side(control, companies, f"{BASELINE}-{env.spec.index}")}
            floors = _take_turns(sides, floor, order)
            release_s, release = _released(lock) if run_level else (None, None)
            arms = {name: side.arm(env, tables[name]) for name, side in sides.items()}
        pairs = _pairs(order, arms)
        measures: CompanyCostMeasures = {
            "companies": companies, "filled": companies + 1, "rows": ROWS, "store": cls.writes_to,
            "scope": (LockScope.ONCE_PER_RUN if run_level else LockScope.EACH_COMPANY).value,
            "fenced": cls.where().fence is not None, "order": order, "lock": arms[LOCK], "baseline": arms[BASELINE],
            "pairs": pairs, "ratio": round(statistics.median(pairs), 4), "acquire_s": acquire_s,
            "release_s": release_s, "release": release,
            "floors": {name: round(statistics.median(v), 7) for name, v in floors.items()},
            "floor_samples": min(len(v) for v in floors.values())}
        return dict(measures)

    @staticmethod
    @contextmanager
    def _table(env: TrialEnv, side: str, companies: int) -> Iterator[CompanyTable]:
        """A fresh table of the side's own, filled (the warm-up company included), vacuumed and analyzed, so both
        sides start from the same table; dropped after the trial."""
        table = CompanyTable(table_name(f"{env.run_id}_{env.spec.id}_{side}"))
        try:
            table.create(env.monitor, index=True)
            table.fill(env.writes, range(1, companies + 1), ROWS)
            if env.monitor.dialect.name == "postgresql":
                with env.monitor.connect() as conn:  # AUTOCOMMIT: VACUUM cannot run inside a transaction
                    conn.execute(text(f"vacuum analyze {table.name}"))
            yield table
        finally:
            with env.monitor.connect() as conn:
                conn.execute(text(f"drop table if exists {table.name}"))


class _Side:
    """One side of the trial: a backend rebuilding companies 1..companies, a block at a time, each timed."""

    def __init__(self, backend: Backend, companies: int, run_id: str):
        self.backend, self.companies, self.run_id = backend, companies, run_id
        self.blocks: list[float] = []
        self.block_companies: list[int] = []
        self.outcomes: list[str] = []
        self.attempts = 0

    def warm_up(self) -> None:
        """The company after the timed ones, rebuilt before the clock."""
        result = self.backend.rebuild(self.companies + 1, ROWS, self.run_id)
        if result.outcome != "committed":
            raise RuntimeError(f"the warm-up rebuild did not commit: {result.error}")

    def next_block(self) -> None:
        """Its next BLOCKS-th of the companies (every BLOCKS-th id), timed."""
        ids = list(range(1, self.companies + 1))[len(self.blocks)::BLOCKS]
        start = time.perf_counter()
        results = [self.backend.rebuild(company, ROWS, self.run_id) for company in ids]
        self.blocks.append(round(time.perf_counter() - start, 6))
        self.block_companies.append(len(ids))
        self.outcomes += [r.outcome for r in results]
        self.attempts += sum(r.attempts for r in results)

    def arm(self, env: TrialEnv, table: CompanyTable) -> CompanyCostArm:
        """What the side did, and its table after the clock: every company whole, once."""
        with env.monitor.connect() as conn:
            rows_final, companies_final = conn.execute(
                text(f"select count(*), count(distinct company_id) from {table.name}")).one()
        per_company = statistics.median(s / n for s, n in zip(self.blocks, self.block_companies))
        return {"table": table.name, "seconds": round(sum(self.blocks), 6), "per_company": round(per_company, 7),
                "blocks": self.blocks,
                "block_companies": self.block_companies, "transactions": len(self.outcomes),
                "failed": sum(o != "committed" for o in self.outcomes), "attempts": self.attempts,
                "rows_final": int(rows_final), "companies_final": int(companies_final)}


def _pairs(order: list[str], arms: dict[str, CompanyCostArm]) -> list[float]:
    """The lock's seconds per company over the control's, in each pair of adjacent blocks (one of each side)."""
    per_company = {side: iter(zip(arm["blocks"], arm["block_companies"])) for side, arm in arms.items()}
    blocks = [next(per_company[side]) for side in order]
    ratios = []
    for first, second in zip(order[::2], order[1::2]):
        pair = {first: blocks.pop(0), second: blocks.pop(0)}
        (lock_s, lock_n), (base_s, base_n) = pair[LOCK], pair[BASELINE]
        ratios.append(round((lock_s / lock_n) / (base_s / base_n), 4))
    return ratios


def _take_turns(sides: dict[str, _Side], floor: FloorProbe, order: list[str]) -> dict[str, list[float]]:
    """Both sides warmed up, then their blocks in the order given, the floor sampled before every block and after
    the last: every floor sample, by call."""
    for first in dict.fromkeys(order):  # untimed: connections opened, lazy set-up done, on both sides alike
        sides[first].warm_up()
    samples: dict[str, list[float]] = {}
    for turn in order:
        _sample(floor, samples)
        sides[turn].next_block()
    _sample(floor, samples)
    return samples


def _order(rng: random.Random) -> list[str]:
    """The sides block by block, A B B A repeated BLOCKS / 2 times, A drawn for the trial."""
    first, second = (LOCK, BASELINE) if rng.random() < 0.5 else (BASELINE, LOCK)
    return [first, second, second, first] * (BLOCKS // 2)


def _sample(floor: FloorProbe, samples: dict[str, list[float]]) -> None:
    for _ in range(FLOOR_SAMPLES):
        for name, seconds in floor.sample().items():
            samples.setdefault(name, []).append(seconds)


def _acquired(lock: Backend) -> float:
    """Take a run-level lock on a fresh key before the clock: the seconds its grant took."""
    for _ in range(FRESH_TRIES):
        start = time.perf_counter()
        if lock.acquire():
            return round(time.perf_counter() - start, 6)
        time.sleep(0.2)
    raise RuntimeError(f"a fresh lock was refused {FRESH_TRIES} times")


def _released(lock: Backend) -> tuple[float, str]:
    """Give a run-level lock back after the clock: the seconds it took and what it said. A release that raised
    (aioredlock's IndexError, now and then) is recorded, not a reason to drop the writes timed before it."""
    start = time.perf_counter()
    said = release_said(lock)
    return round(time.perf_counter() - start, 6), said
