"""`lab export RUN --format jepsen DIR`: every judged trial's history as Jepsen EDN operations.

One file a trial, `<scenario>__<backend>__<variant>__<index>.edn`: a vector of maps such as
`{:process 0, :type :invoke, :f :acquire, :value nil, :time 123000000}`, so someone with Jepsen can run
Knossos's mutex model on the acquire and release operations. Processes are numbered in the order they
first act and named in `:process-name`; the fault's operations use `:process :nemesis`, as Jepsen's
nemesis does; times are integer nanoseconds on the trial's clock. Jepsen pairs every completion with an
invoke, so a completion the lab recorded alone (a lock taken inside the write) gets an invoke at its own time.
"""

from __future__ import annotations

import re
from pathlib import Path

from lab.checkers import ops
from lab.checkers.ops import F, Op, Type
from lab.checkers.outcomes import judgement_of, latest_per_trial
from lab.errors import LabError
from lab.records.results import RunFolder

NEMESIS = (F.FAULT, F.HEAL, F.CLOCK)  # a clock reading is the nemesis' observation, as Jepsen's clock nemesis logs it


def edn(value) -> str:
    """A Python value as EDN: dicts as maps with keyword keys, strings quoted, None as nil."""
    if value is None:
        return "nil"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    if isinstance(value, dict):
        return "{" + ", ".join(f":{_keyword(k)} {edn(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + " ".join(edn(v) for v in value) + "]"
    return edn(str(value))


def _keyword(name) -> str:
    return re.sub(r"[^A-Za-z0-9*+!?_-]", "-", str(name)).replace("_", "-")


def jepsen_ops(history: list[Op]) -> list[dict]:
    """A history as Jepsen operation maps (keys without the colon), every completion after an invoke."""
    numbers: dict[str, int] = {}
    pending: set[tuple] = set()
    out = []
    for op in history:
        nemesis = op.f in NEMESIS
        process = "nemesis" if nemesis else numbers.setdefault(op.process, len(numbers))
        key = (op.process, op.f, op.get("company"))
        base = {"process": process, "f": op.f.value, "value": op.value or None, "time": int(round(op.time * 1e9)),
                "process-name": op.process}
        if nemesis:
            out.append({**base, "type": Type.INFO.value})  # a nemesis' operations are info in Jepsen
            continue
        if op.type is Type.INVOKE:
            pending.add(key)
        elif key in pending:
            pending.discard(key)
        else:
            out.append({**base, "type": Type.INVOKE.value})
        out.append({**base, "type": op.type.value})
    return out


def to_edn(rows: list[dict]) -> str:
    """The operations as one EDN vector, one map a line, keys in Jepsen's order."""
    order = ("process", "type", "f", "value", "time", "process-name")
    lines = []
    for row in rows:
        parts = []
        for k in order:
            v = row[k]
            text = f":{v}" if k in ("type", "f") or (k == "process" and v == "nemesis") else edn(v)
            parts.append(f":{k} {text}")
        lines.append("{" + ", ".join(parts) + "}")
    return "[" + "\n ".join(lines) + "]\n"


def export_jepsen(folder: RunFolder, out: Path) -> list[Path]:
    """Write every judged trial's history of the run; returns the files written. A run of schema 1 has none."""
    judged = [r for r in latest_per_trial(folder.trials()) if judgement_of(r) is not None and r.get("history")]
    if not judged:
        raise LabError(f"run {folder.run_id} has no trial histories to export (schema 2 records them; "
                       "re-run it with this lab to get them)")
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for record in judged:
        name = "__".join(re.sub(r"[^A-Za-z0-9_.@-]+", "_", part) for part in record["id"].split("/")) + ".edn"
        path = out / name
        path.write_text(to_edn(jepsen_ops(ops.from_json(record["history"]))))
        written.append(path)
    return written
