"""Helpers every report section shares: the trials as a DataFrame, Markdown tables, number formats."""

from __future__ import annotations

import statistics
from enum import Enum

import pandas as pd

from lab.declarations.capabilities import Capability
from lab.checkers.outcomes import RunOrder, latest_per_trial
from lab.declarations.post_role import PostRole
from lab.measures.kinds import Measured
from lab.report.declared import measured_of, post_roles

COLUMNS = ["id", "scenario", "backend", "variant", "index", "status", "verdict", "reason", "runs_here", "skip",
           "measures", "run", "safety", "exercised", "schema", "judgement", "history"]


def trials_frame(trials: list[dict], meta: dict | None = None) -> pd.DataFrame:
    """One row per trial (latest record per id), with its measures as a dict column.

    Four columns carry what the run's meta.json says (nothing known, for a run whose meta does not):
    `backend_pos`, the backend's place in the run's order, `capabilities`, what the backend declares,
    `post_role`, which of the post's methods it is (lab/report/declared.post_roles), or None, and `measured`,
    what its scenario's trials measure (lab/measures/kinds.py; lab/report/declared.measured_of), or None.
    A field an older run did not write (safety, exercised, runs_here; schema, judgement and history before schema 2)
    is None.
    """
    order = RunOrder.of(meta, trials)
    records = sorted(latest_per_trial(trials), key=order.record_key)
    frame = pd.DataFrame(records, columns=COLUMNS).astype({"safety": object, "exercised": object, "schema": object,
                                                           "judgement": object, "history": object,
                                                           "runs_here": object, "skip": object})
    names = sorted(set(frame.backend), key=order.backend_key)
    frame["backend_pos"] = [names.index(b) for b in frame.backend]
    frame["capabilities"] = [tuple(sorted(order.capabilities_of(b))) for b in frame.backend]
    roles = post_roles(meta or {})
    frame["post_role"] = [roles.get(b) for b in frame.backend]
    kinds = measured_of(meta or {})
    frame["measured"] = [kinds.get(s) for s in frame.scenario]
    return frame.reset_index(drop=True)


def ordered_backends(frame: pd.DataFrame) -> list[str]:
    """The backends of a (filtered) frame in the run's order."""
    pairs = sorted(set(zip(frame.backend_pos, frame.backend)))
    return [name for _, name in pairs]


def with_capability(frame: pd.DataFrame, capability: Capability) -> pd.DataFrame:
    """The rows of backends that declare a capability, as the run's meta.json records it."""
    return frame[frame.capabilities.map(lambda caps: capability in caps).astype(bool)]


def with_role(frame: pd.DataFrame, role: PostRole) -> pd.DataFrame:
    """The rows of the backend that declares it plays this role of the post's (lab/declarations/post_role.py)."""
    return frame[frame.post_role == role]


def backend_with_role(frame: pd.DataFrame, role: PostRole) -> str | None:
    """The name of the backend playing this role of the post's among the frame's rows (None: not among them)."""
    names = ordered_backends(with_role(frame, role))
    return names[0] if names else None


def measuring(frame: pd.DataFrame, kind: Measured) -> pd.DataFrame:
    """The rows of the scenarios whose trials measure this kind (lab/measures/kinds.py), whatever their status."""
    return frame[frame.measured == kind]


def ok_trials(frame: pd.DataFrame, kind: Measured) -> pd.DataFrame:
    """The finished trials of the scenarios that measure this kind: what a section renders."""
    return frame[(frame.measured == kind) & (frame.status == "ok")]


def md_table(headers: list[str], rows: list[list[str]]) -> str:
    def cell(value) -> str:
        return str(value).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def side_by_side(post: list[str], ours: list[str], mask=None) -> list[str]:
    """A two-column table of the post's lines against ours; lines differing (after mask) are marked."""
    mask = mask or (lambda line: line)
    out = ["| post | measured |", "|---|---|"]
    for i in range(max(len(post), len(ours))):
        p = post[i] if i < len(post) else ""
        o = ours[i] if i < len(ours) else ""
        mark = "" if mask(p) == mask(o) else " **(differs)**"
        out.append(f"| `{p}` | `{o}`{mark} |")
    return out


def seconds_summary(values: list[float]) -> str:
    """'1.23 s (1.10-1.40, n=3)': the median with min-max, as the design's timing rule asks."""
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0]:.2f} s (n=1)"
    return f"{statistics.median(values):.2f} s ({min(values):.2f}-{max(values):.2f}, n={len(values)})"


def declaration(meta: dict, key: str, backend: str):
    """What the run's meta.json declares of a backend under key (capabilities, lock_service, ...), or None."""
    return (meta.get(key) or {}).get(backend.partition("@")[0])  # a driver row is declared as its backend


class Verdict(str, Enum):
    """How a figure of ours stands against the post's, under the tolerance its section states."""

    MATCHES = "matches"
    DIFFERS = "differs"
    WITHIN_NOISE = "within noise"  # our spread straddles the tolerance band: no verdict either way
    NOT_RUN = "not run"  # the run holds no trial that measures the figure


FLAG = "⚑"  # every verdict but *matches*, wherever a figure of ours is set against the post's


def verdict_mark(verdict: Verdict) -> str:
    """'matches'; '⚑ **differs**'; '⚑ within noise'; '⚑ not run'."""
    if verdict is Verdict.MATCHES:
        return verdict.value
    return f"{FLAG} " + (f"**{verdict.value}**" if verdict is Verdict.DIFFERS else verdict.value)
