"""What each lock told its holder once the lock was lost, and how long after another run got it.

Read from the lease-fault trials (pause, cut, restart) of locks held across writes on a
connection of their own: the first signal the holder's process saw from the fault on (an
exception, a log line, a False return, a refused write), timed from the contender's grant.
"""

from __future__ import annotations

import re
import statistics
from collections import Counter


from lab.checkers.outcomes import judgement_of
from lab.checkers.told import CHANNELS, first_after
from lab.checkers.verdict import Kind
from lab.measures.shapes import LeaseFaultMeasures
from lab.report.common import md_table, ordered_backends
from lab.report.matrix import lease_faults_run
from lab.report.sections import RunView, section

TEXT_LIMIT = 90


def plain(text: str) -> str:
    """A signal's text without what differs from trial to trial (object addresses, keys, ports), cut short."""
    text = re.sub(r" (object )?at 0x[0-9a-f]+", "", text)
    text = re.sub(r"\b(?:lock:)?locklab[:\-][^\s'\")]*", "<key>", text)
    text = re.sub(r"^(\w+): \(.*", r"\1", text)  # an exception whose message is a tuple's repr: its name says it
    text = re.sub(r"port=\d+", "port=…", text)
    text = re.sub(r"\b[0-9a-f]{32}\b", "<id>", text)  # a library's random lock id
    return text if len(text) <= TEXT_LIMIT else text[:TEXT_LIMIT - 1].rstrip() + "…"


def lost_trials(records: list[dict]) -> list[dict]:
    """Trials where another run was granted the lock while the holder still had it (and recorded signals).
    A holder whose grant never came back to it (a commit waiting for a lost standby) had nothing to lose."""
    return [r for r in records if r["status"] == "ok" and "signals" in r["measures"]["holder"]
            and r["measures"]["holder"].get("granted", True)
            and r["measures"]["contender"].get("granted_at") is not None]


def stale_accepted(record: dict) -> bool:
    """Whether the trial's lapsed holder had its write accepted: the checkers' kind (schema 2), or on a
    schema-1 run the scenario's own `lost` and the holder's committed write."""
    judgement = judgement_of(record)
    if judgement is not None:
        return judgement["kind"] == Kind.STALE_WRITE_ACCEPTED.value
    m = record["measures"]
    return bool(m.get("lost")) and m["holder"]["write"] == "committed"


def first_signal(measures: LeaseFaultMeasures) -> dict | None:
    return first_after(measures["holder"]["signals"], measures["fault_at"])


def told_cell(records: list[dict]) -> str:
    """'an exception from release(): `...`; 3/3, +0.02 s, after its stale write committed' / 'nothing 3/3'."""
    recorded = [r for r in records if r["status"] == "ok" and "signals" in r["measures"]["holder"]]
    if not recorded:
        if not records:
            return "not run"
        return "n/a" if all(r["status"] == "skipped" for r in records) else "not recorded"
    lost = lost_trials(recorded)
    if not lost:
        return f"not lost {len(recorded)}/{len(recorded)}"
    firsts = [(r, first_signal(r["measures"])) for r in lost]
    kinds = Counter((s["how"], s["via"]) if s else None for _, s in firsts)
    ranked = sorted(kinds.items(), key=lambda kv: (-kv[1], str(kv[0])))
    (kind, n), others = ranked[0], ranked[1:]
    if kind is None:
        text = f"nothing {n}/{len(lost)}"
    else:
        same = [(r, s) for r, s in firsts if s and (s["how"], s["via"]) == kind]
        delay = statistics.median(s["at"] - r["measures"]["contender"]["granted_at"] for r, s in same)
        said = plain(same[0][1]["text"])
        text = (f"{_kind(kind)}" + (f": `{said}`" if said else "")
                + f"; {n}/{len(lost)}, {delay:+.2f} s{_against_write(same)}")
    return text + "".join(f"; else {_kind(k)} {c}/{len(lost)}" for k, c in others)


def _kind(kind: tuple[str, str] | None) -> str:
    return "nothing" if kind is None else f"{CHANNELS[kind[0]]} from {kind[1]}"


def _against_write(same: list[tuple[dict, dict]]) -> str:  # (record, its first signal)
    """Whether the signal came before or after the stale write it could have stopped."""
    stale = [(r, s) for r, s in same if stale_accepted(r)]
    if not stale:
        return ""
    after = sum(s["at"] >= r["measures"]["holder"]["write_at"] for r, s in stale)
    if after == len(stale) == len(same):
        return ", after its stale write committed"
    if after == 0 and len(stale) == len(same):
        return ", before its stale write committed"
    return f", after its stale write committed in {after} of them"


def release_cell(records: list[dict]) -> str:
    """What release() said in the trials where the lock was lost (the last chance to tell the caller)."""
    said: Counter = Counter()
    for record in lost_trials(records):
        result = record["measures"]["holder"].get("release")
        if result is None:
            continue
        if result == "released":
            said["claimed success"] += 1
        else:
            release = next((s for s in record["measures"]["holder"]["signals"] if s["via"] == "release()"), None)
            text = f": `{plain(release['text'])}`" if release and release["text"] else ""
            said[f"{CHANNELS[release['how']]}{text}" if release else result] += 1
    total = sum(said.values())
    return "; ".join(f"{k} {n}/{total}" for k, n in sorted(said.items(), key=lambda kv: (-kv[1], kv[0]))) or "-"


def callbacks_cell(records: list[dict]) -> str | None:
    """What a library's callbacks said in the trials where the lock was lost, beside the first signal (which a log
    line of the same library often beats by a millisecond): each text with its trials, its median time from the
    other run's grant and how often it came before the holder's write. None when no callback came."""
    lost = lost_trials(records)
    said: dict[tuple[str, str], list[tuple[dict, dict]]] = {}
    for record in lost:
        m = record["measures"]
        for signal in m["holder"]["signals"]:
            if signal["how"] == "callback" and signal["at"] >= m["fault_at"]:
                said.setdefault((signal["via"], signal["text"]), [])
                if not any(r is record for r, _ in said[(signal["via"], signal["text"])]):  # the first per trial
                    said[(signal["via"], signal["text"])].append((record, signal))
    if not said:
        return None
    parts = []
    for (via, text), heard in said.items():
        delay = statistics.median(s["at"] - r["measures"]["contender"]["granted_at"] for r, s in heard)
        written = [(r, s) for r, s in heard if r["measures"]["holder"].get("write_at") is not None]
        before = sum(s["at"] < r["measures"]["holder"]["write_at"] for r, s in written)
        parts.append(f"`{plain(text)}` from {via} {len(heard)}/{len(lost)}, {delay:+.2f} s"
                     + (f", before its write in {before} of {len(written)}" if written else ""))
    return "; ".join(parts)


def _all(count: int) -> str:
    return "its one fault" if count == 1 else f"all {NUMBERS.get(count, count)} faults"


NUMBERS = {2: "two", 3: "three", 4: "four", 5: "five", 6: "six"}


@section(30)
def section_told(run: RunView) -> str | None:
    frame = run.frame
    columns = [(f.scenario, f.title) for f in lease_faults_run(run)]  # the lease faults these runs ran
    relevant = frame[frame.scenario.isin([s for s, _ in columns])]
    by_backend: dict[str, list[dict]] = {}  # each backend's records, in the frame's order
    for record in relevant.to_dict("records"):
        by_backend.setdefault(record["backend"], []).append(record)
    rows = []
    callbacks = []  # (backend, what its library's callbacks said)
    stale = []  # (first signal, measures) of every trial whose stale write was accepted
    fenced = []  # backends that refused a lapsed holder's write
    for backend in ordered_backends(relevant):
        mine = by_backend[backend]
        if not any(r["status"] == "ok" and r["measures"].get("point") == "before_write"
                   and "signals" in r["measures"]["holder"] for r in mine):
            continue  # no lock held across writes, or trials recorded before signals were
        cells = [told_cell([r for r in mine if r["scenario"] == s]) for s, _ in columns]
        rows.append([backend, *cells, release_cell(mine)])
        if (said := callbacks_cell(mine)) is not None:
            callbacks.append(f"- `{backend}`: {said}")
        stale += [(first_signal(r["measures"]), r["measures"]) for r in lost_trials(mine) if stale_accepted(r)]
        if any(r["measures"]["holder"]["write"] == "rejected" for r in lost_trials(mine)):
            fenced.append(backend)
    if not rows:
        return None
    before = sum(s is not None and s["at"] < m["holder"]["write_at"] for s, m in stale)
    silent = sum(s is None for s, _ in stale)
    return "\n".join([
        "## What the holder was told when its lock was lost", "",
        "For every lock held across writes (on a connection or lease of its own), the first thing the holder's "
        "process heard once the fault struck: an exception (from a call, or one that ended a library thread), "
        "a log line of WARNING or above, a False return (from the library's renew or release), a write the "
        "fence refused, or nothing. The time is from the moment another run was granted the lock (negative: the "
        "holder heard first). *after its stale write committed*: too late to stop it; *before*: the write went "
        "ahead anyway, since a renewal thread's news does not stop the writing code unless it checks. "
        "*from renew()* is the lab's keep-alive calling the library's own renew every TTL/3, which it does "
        "only where the library leaves renewal to its caller (`lab list` says which). The last column is what "
        f"release() said afterwards, over {_all(len(columns))}. *not lost*: no other run got the lock.", "",
        md_table(["backend", *[label for _, label in columns], "release() after the loss"], rows), "",
        *(["What a library's callback said in those trials (the state listener kazoo's documentation asks for), "
           "over every fault above, timed the same way:", "", *callbacks, ""] if callbacks else []),
        f"In the {len(stale)} trials above whose stale write was accepted, the holder heard something before "
        f"that write committed in {before}, only afterwards in {len(stale) - before - silent}, and nothing at all "
        f"in {silent}: hearing is not stopping. Stale writes were refused only by the fence of "
        + (", ".join(f"`{b}`" for b in fenced) or "no backend") + " (a token checked inside the write's "
        "transaction).", ""])
