"""`lab replay`: run a recorded kill-point schedule again, on fresh servers, and print its history."""

from __future__ import annotations

import threading
from pathlib import Path

import backends
from lab.errors import LabError
from lab.harness.history import timeline
from lab.harness.outcomes import latest_per_trial, schema_of
from lab.harness.workload import drop_schema, ensure_schema
from lab.results import RunFolder
from lab.servers import pg
from lab.servers.services import ExternalAddresses, start_services
from scenarios.base import TrialEnv, TrialSpec


def find_trial(folder: RunFolder, trial: str) -> dict:
    wanted = trial if "/" in trial else f"killpoints/{trial}/search/0"
    for record in latest_per_trial(folder.trials()):
        if record["id"] == wanted:
            return record
    raise LabError(f"no trial {wanted!r} in {folder.path}")


# Schema 1's kill-point violation names, in the checkers' kinds of schema 2 (lab/harness/verdict.py).
SCHEMA1_KINDS = {"mixed rows": "merged", "torn state": "torn", "exclusion violated": "overlapping writes"}


def replay(results: Path, run: str, trial: str, external: ExternalAddresses, tries: int = 3,
           png: Path | None = None) -> int:
    """Re-run a recorded schedule until it shows the recorded violations again, at most `tries` times.

    The runs after the fault race each other, so one pass may miss a failure that is real; the
    output says on which try it reproduced, or that it did not in `tries`.
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
    with start_services(set(cls.services) | {"postgres"}, external) as services:
        monitor, writes = pg.monitor_engine(services), pg.writes_engine(services)
        try:
            ensure_schema(monitor)
            backends.prepare_storage(monitor, [cls.name])
            env = TrialEnv(services, monitor, writes, f"replay-{folder.run_id}",
                           TrialSpec("killpoints", cls.name, "replay", 0), {}, threading.Event())
            recorded = sorted({SCHEMA1_KINDS.get(v["kind"], v["kind"]) if schema_of(record) < 2 else v["kind"]
                               for v in minimal["violations"]})
            for attempt in range(1, tries + 1):
                result = run_example(env, schedule, ttl)
                if sorted({v["kind"] for v in result["violations"]}) == recorded:
                    break
        finally:
            drop_schema(monitor)
            monitor.dispose()
            writes.dispose()
    print(timeline(result["events"]))
    print("final: " + ", ".join(f"company {c}: {v['rows']} rows from {v['runs']}" for c, v in result["final"].items()))
    now = sorted({v["kind"] for v in result["violations"]})
    for v in result["violations"]:
        print(f"VIOLATION {v['kind']}: {v['detail']}")
    same = recorded == now
    if png is not None:
        from lab.report.charts import timeline_chart

        timeline_chart(result["events"], f"replay of {record['id']} (try {attempt})", png)
        print(f"timeline: {png}")
    print(f"recorded: {', '.join(recorded)}; replayed: {', '.join(now) or 'none'} -> "
          + (f"reproduced (try {attempt} of {tries})" if same else f"NOT reproduced in {tries} tries"))
    return 0 if same else 1
