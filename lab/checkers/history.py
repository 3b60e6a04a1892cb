"""A trial's history: timestamped events from every run, the observer and the fault injector.

Times are CLOCK_MONOTONIC (time.monotonic), one clock for every thread and process
on the machine. Checkers read the history; nothing here judges it. A commit happens on
the server somewhere between commit_requested and write_committed; a run waiting on that
transaction is granted after it, so checkers bound a write by commit_requested.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

# The events a history holds, and what each means.
EVENTS = {
    "acquire_requested": "a run asks for its run-level right",
    "acquire_granted": "the run got the right (token when there is one)",
    "acquire_refused": "another run holds it",
    "acquire_error": "the lock's server did not answer the request (a timeout): no grant heard of, asked again",
    "company_locked": "a lock inside the write transaction was granted for one company",
    "write_begun": "a company's write transaction began",
    "commit_requested": "the write's last statement is done and COMMIT is about to be sent",
    "write_committed": "it committed",
    "write_rejected": "the storage refused it (fence)",
    "write_failed": "it rolled back (error, killed session)",
    "write_indeterminate": "the connection broke while COMMIT was in flight, so the run cannot know whether it "
                           "committed; resolved: what a fresh read of the table found (committed / not committed / "
                           "unknown)",
    "release_requested": "the run is about to call release()",
    "release": "the run released (ok: whether release reported success)",
    "fault_fired": "the fault injector acted",
    "fault_healed": "the fault was undone",
    "observed": "the observer saw a company's row count",
}


@dataclass
class History:
    """Thread-safe, append-only event list."""

    t0: float = field(default_factory=time.monotonic)
    events: list[dict] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, run: str, event: str, **fields) -> None:
        assert event in EVENTS, event
        record = {"t": round(time.monotonic() - self.t0, 4), "run": run, "event": event,
                  **{k: v for k, v in fields.items() if v is not None}}
        with self._lock:
            self.events.append(record)

    def to_list(self) -> list[dict]:
        with self._lock:
            return sorted(self.events, key=lambda e: e["t"])


def timeline(events: list[dict]) -> str:
    """A history as a readable timeline, one event a line."""
    lines = []
    for e in sorted(events, key=lambda e: e["t"]):
        extra = ", ".join(f"{k}={v}" for k, v in e.items() if k not in ("t", "run", "event"))
        lines.append(f"{e['t']:8.3f}s  {e['run']:<9} {e['event']:<18} {extra}".rstrip())
    return "\n".join(lines)
