"""What a lock told its holder: an exception, a log line, a callback, a False return, a refused write, or nothing.

The holder process reports its library's warnings, exceptions that end library threads, the
callbacks a library makes to say its lock may be gone (kazoo's connection state listener), its
keep-alive's first failed renewal, its write and its release. This module turns those events
into signals (channel, where it surfaced, text, time) for the report's "told" table.
"""

from __future__ import annotations

import re
from typing import Callable

# How a holder can learn its lock is gone, in the words the report uses.
CHANNELS = {
    "exception": "an exception",
    "false": "a False return",
    "log": "a log line",
    "callback": "a callback",
    "refused": "a refused write",
}


def signals(events: list[dict], t0: float) -> list[dict]:
    """Every signal in a holder's events, in time order, with times in seconds from t0."""
    found = []

    def add(t: float, how: str, via: str, text: str | None) -> None:
        found.append({"at": round(t - t0, 3), "how": how, "via": via, "text": text or ""})

    for event in events:
        kind, t = event["event"], event["t"]
        if kind == "log":
            add(t, "log", f"logger {event['logger']}", f"{event['level']}: {event['message']}")
        elif kind == "thread_exception":
            add(t, "exception", f"thread {_thread_name(event['thread'])}", event["error"])
        elif kind == "callback":
            add(t, "callback", event["via"], event["text"])
        elif kind == "write" and event.get("outcome") in ("rejected", "failed"):
            if event["outcome"] == "rejected":
                add(t, "refused", "the fence", event.get("error"))
            else:
                add(t, "exception", "its write", event.get("error"))
        elif kind == "held" and event.get("noticed_loss_at") is not None:
            if event.get("noticed_how") == "returned False":
                add(event["noticed_loss_at"], "false", "renew()", None)
            else:
                add(event["noticed_loss_at"], "exception", "renew()", event["noticed_how"].removeprefix("raised "))
        elif kind == "release" and event.get("result") != "released":
            how = event.get("told", "exception")
            text = event["result"].removeprefix("raised LockLost: ").removeprefix("release failed: ")
            add(t, how, "release()", None if how == "false" else text)
        elif kind == "error":
            add(t, "exception", "the run", event["error"])
    return sorted(found, key=lambda s: s["at"])


def _thread_name(name: str) -> str:
    """'Thread-3 (_lock_renewer)' -> '_lock_renewer': the number differs from run to run, the target does not."""
    match = re.fullmatch(r"Thread-[0-9]+ \((.*)\)", name)
    return match.group(1) if match else name


def first_after(found: list[dict], since: float) -> dict | None:
    """The first signal at or after `since` (seconds from the trial's start), or None: nothing was said."""
    return next((s for s in found if s["at"] >= since), None)


# Where a library's callback goes: the holder process reports it as an event; elsewhere (a contender in
# the lab's own process) nobody is listening and it goes nowhere.
_listener: Callable[[str, str], None] | None = None


def listen(report: Callable[[str, str], None] | None) -> None:
    """Send every callback() from now on to report(via, text) (the holder process's events), or nowhere."""
    global _listener
    _listener = report


def callback(via: str, text: str) -> None:
    """A library called its holder back to say its lock may be gone (via: which callback; text: what it said)."""
    if _listener is not None:
        _listener(via, text)
