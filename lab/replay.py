"""`lab replay`: run a recorded kill-point schedule again, on fresh servers, and print its history."""

from __future__ import annotations

import threading
from pathlib import Path

import backends
from lab import preflight
from lab.checkers.ops import Op
from lab.checkers.outcomes import latest_per_trial, schema_of
from lab.errors import LabError
from lab.records.results import RunFolder
from lab.servers.postgres import sql as pg
from lab.servers.services import ExternalAddresses, start_services
from lab.workload.table import drop_schema, ensure_schema
from scenarios.base import TrialEnv, TrialSpec


def find_trial(folder: RunFolder, trial: str) -> dict:
    wanted = trial if "/" in trial else f"killpoints/{trial}/search/0"
    for record in latest_per_trial(folder.trials()):
        if record["id"] == wanted:
            return record
    raise LabError(f"no trial {wanted!r} in {folder.path}")


# Schema 1's kill-point violation names, in the checkers' kinds of schema 2 (lab/checkers/verdict.py).
SCHEMA1_KINDS = {"mixed rows": "merged", "torn state": "torn", "exclusion violated": "overlapping writes"}


def as_lines(history: list[Op]) -> str:
    """A history as text, one operation a line: time, process, how it completed, what, and its value."""
    return "\n".join(f"{op.time:8.3f}s  {op.process:<9} {op.type.value:<6} {op.f.value:<8} "
                     f"{', '.join(f'{k}={v}' for k, v in op.value.items())}".rstrip() for op in history)


def replay(results: Path, run: str, trial: str, external: ExternalAddresses, tries: int = 3,
           png: Path | None = None) -> int:
    """Re-run a recorded schedule until every recorded finding has shown again, at most `tries` times.

    The runs after the fault race each other, so one pass may show some of a counterexample's findings and not
    others (overlapping writes and a merged company come and go with timing; a stale write accepted is the
    schedule's own). The output says, for each recorded finding, on which try it showed again or that it did not,
    and the exit status follows the safety verdict: 0 when some try was unsafe again, 1 when every try was safe.
    """
    folder = RunFolder.open(results, run)
    record = find_trial(folder, trial)
    minimal = (record.get("measures") or {}).get("minimal")
    if not minimal:
        raise LabError(f"{record['id']} recorded no failing schedule to replay")
    from scenarios.killpoints import describe, run_example

    schedule, ttl = minimal["schedule"], record["measures"]["ttl_s"]
    cls = backends.load(record["backend"])
    print(f"replaying {record['id']} from {folder.path}: {describe(schedule)}")
    with start_services(set(cls.services) | {"postgres"}, external, check=preflight.Gate()) as services:
        monitor, writes = pg.monitor_engine(services), pg.writes_engine(services)
        try:
            ensure_schema(monitor)
            backends.prepare_storage(monitor, [cls.name])
            env = TrialEnv(services, monitor, writes, f"replay-{folder.run_id}",
                           TrialSpec("killpoints", cls.name, "replay", 0), {}, threading.Event())
            recorded = sorted({SCHEMA1_KINDS.get(v["kind"], v["kind"]) if schema_of(record) < 2 else v["kind"]
                               for v in minimal["violations"]})
            shown: dict[str, int] = {}  # finding -> the first try it showed in
            unsafe_result = None
            for attempt in range(1, tries + 1):
                result = run_example(env, schedule, ttl)
                for kind in {v["kind"] for v in result["violations"]}:
                    shown.setdefault(kind, attempt)
                if result["violations"] and unsafe_result is None:
                    unsafe_result = (attempt, result)
                if set(recorded) <= set(shown):
                    break
            if unsafe_result is not None:  # the history shown is an unsafe one, when a try was unsafe
                attempt, result = unsafe_result
        finally:
            drop_schema(monitor)
            monitor.dispose()
            writes.dispose()
    print(as_lines(result["history"]))
    print("final: " + ", ".join(f"company {c}: {v['rows']} rows from {v['runs']}" for c, v in result["final"].items()))
    for v in result["violations"]:
        print(f"VIOLATION {v['kind']}: {v['detail']}")
    if png is not None:
        from lab.report.history_chart import history_chart

        lease = "lease_expiry" in (record.get("capabilities") or ())
        history_chart(result["history"], f"replay of {record['id']} (try {attempt})", png, ttl if lease else None)
        print(f"timeline: {png}")
    for kind in recorded:
        print(f"recorded {kind}: " + (f"shown again (try {shown[kind]})" if kind in shown else
                                      f"not shown in {tries} tries"))
    for kind in sorted(set(shown) - set(recorded)):
        print(f"not recorded, shown now: {kind} (try {shown[kind]})")
    unsafe = unsafe_result is not None
    print(("UNSAFE again: the counterexample reproduces" if unsafe else f"safe in all {tries} tries: NOT reproduced")
          + f" ({sum(k in shown for k in recorded)} of {len(recorded)} recorded findings shown again)")
    return 0 if unsafe else 1
