"""What a Redis failover did, measured from the fault's injection: when the new primary answered as one, and
what the old primary went on acknowledging meanwhile.

Why: the scripted failover and Sentinel's differ exactly there (how long the promotion takes, whether
the old primary is demoted or keeps taking writes), and the report sets them side by side from these
figures (the "promotion" measures every managed failover and its scripted control record). Two threads:
one asks the candidate every 50 ms whether it answers ROLE as a master; a probe client connected
straight to the old primary (its real port: no proxy, no Sentinel) writes a key of its own every 100 ms
until the old primary refuses (NOREPLICAS), is demoted (READONLY) or the trial stops the probe. A write
that times out (a paused server) is not acknowledged and is not counted. At the end, the acknowledged
keys that the primary of that moment holds are the writes that survived.
"""

from __future__ import annotations

import threading
import time
from typing import Callable

PROBE_EVERY_S = 0.1
ASK_EVERY_S = 0.05
PROBE_TIMEOUT_S = 0.3  # a paused server must not hold the probe past a few of its ticks


class PromotionWatch:
    """Start at the fault's injection, stop when the trial no longer needs it, then read result()."""

    def __init__(self, manager: str, old_primary: Callable[[], object], promoted: Callable[[], bool],
                 key_prefix: str):
        """old_primary: makes a client straight to the old primary (given a timeout, without retries);
        promoted: whether the new primary answers as a primary now (a read over its own protocol)."""
        self.manager = manager
        self._old_primary = old_primary
        self._promoted = promoted
        self.key_prefix = key_prefix
        self.t_fault: float | None = None
        self.promoted_at: float | None = None
        self.acknowledged: list[tuple[str, float]] = []  # (key, monotonic time of its acknowledgement)
        self.ended_by: str | None = None  # refused, demoted, stopped
        self.last_error: str | None = None
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self, t_fault: float | None = None) -> None:
        """Ask for the promotion from t_fault (its injection); the probe starts with struck()."""
        self.t_fault = time.monotonic() if t_fault is None else t_fault
        self._threads = [threading.Thread(target=self._ask, name="promotion-ask", daemon=True)]
        self._threads[0].start()

    def struck(self) -> None:
        """The fault has struck: from now on the old primary's acknowledgements are counted."""
        probe = threading.Thread(target=self._probe, name="old-primary-probe", daemon=True)
        self._threads.append(probe)
        probe.start()

    def _ask(self) -> None:
        while not self._stop.is_set() and self.promoted_at is None:
            try:
                if self._promoted():
                    self.promoted_at = time.monotonic()
                    return
            except Exception:  # the candidate does not answer yet
                pass
            self._stop.wait(ASK_EVERY_S)

    def _probe(self) -> None:
        from redis.exceptions import ReadOnlyError, ResponseError

        client = None
        n = 0
        try:
            while not self._stop.is_set():
                tick = time.monotonic()
                key = f"{self.key_prefix}:{n}"
                n += 1
                try:
                    client = client or self._old_primary()
                    client.set(key, str(n))  # type: ignore[attr-defined]
                    self.acknowledged.append((key, time.monotonic()))
                except ReadOnlyError:
                    self.ended_by = "demoted"
                    return
                except ResponseError as exc:
                    self.last_error = str(exc).splitlines()[0][:200]
                    if "NOREPLICAS" in str(exc):
                        self.ended_by = "refused"
                        return
                except Exception as exc:  # unreachable (paused, restarting): not acknowledged, ask again
                    self.last_error = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
                    _close(client)
                    client = None
                self._stop.wait(max(0.0, tick + PROBE_EVERY_S - time.monotonic()))
            self.ended_by = self.ended_by or "stopped"
        finally:
            _close(client)

    @property
    def probing(self) -> bool:
        return self.ended_by is None and any(t.is_alive() for t in self._threads[1:])

    def wait_promoted(self, within: float) -> float | None:
        """Seconds from the fault until the candidate answered as a primary, waiting up to within."""
        deadline = time.monotonic() + within
        while self.promoted_at is None and time.monotonic() < deadline and not self._stop.is_set():
            time.sleep(ASK_EVERY_S)
        return self.promote_s

    def wait_probe_ended(self, within: float) -> str | None:
        """Until the old primary refused or was demoted (what ended the probe), or None after within."""
        deadline = time.monotonic() + within
        while self.ended_by is None and time.monotonic() < deadline:
            time.sleep(PROBE_EVERY_S)
        return self.ended_by

    @property
    def promote_s(self) -> float | None:
        if self.promoted_at is None or self.t_fault is None:
            return None
        return round(self.promoted_at - self.t_fault, 3)

    def stop(self) -> None:
        """No more probe writes (the trial healed or ended); idempotent."""
        self._stop.set()
        for thread in self._threads:
            thread.join(PROBE_TIMEOUT_S + 2.0)

    def result(self, final_primary: Callable[[], object] | None) -> dict:
        """The contract's "promotion" measures; final_primary makes a client on the primary of now (None: there
        is none to read, and survival is unknown)."""
        self.stop()
        t_fault = self.t_fault or 0.0
        last = self.acknowledged[-1][1] if self.acknowledged else None
        return {"manager": self.manager, "promote_s": self.promote_s,
                "old_primary_accepted": len(self.acknowledged),
                "old_primary_accepting_s": None if last is None else round(last - t_fault, 3),
                "old_primary_writes_survived": self._survived(final_primary)}

    def _survived(self, final_primary: Callable[[], object] | None) -> int | None:
        if final_primary is None:
            return None
        if not self.acknowledged:
            return 0
        client = None
        try:
            client = final_primary()
            return int(sum(bool(client.exists(key)) for key, _ in self.acknowledged))  # type: ignore[attr-defined]
        except Exception:  # the primary of now does not answer: survival cannot be read
            return None
        finally:
            _close(client)

    def evidence(self) -> dict:
        """How the probe ended, for the trial's evidence."""
        return {"probe_ended_by": self.ended_by, "probe_last_error": self.last_error}


def answers_master(url: str) -> bool:
    """Whether the server at url (a plain redis:// address) answers ROLE as a master right now."""
    from lab.servers.clients import no_retry, redis_client

    client = redis_client(url, socket_timeout=PROBE_TIMEOUT_S, socket_connect_timeout=PROBE_TIMEOUT_S, retry=no_retry())
    try:
        role = client.execute_command("ROLE")[0]
        return (role.decode() if isinstance(role, bytes) else str(role)) == "master"
    finally:
        client.close()


def straight_to(url: str, timeout: float = PROBE_TIMEOUT_S):
    """A probe's client for one server: short timeouts, no retries (a retried write could land later)."""
    from lab.servers.clients import no_retry, redis_client

    return redis_client(url, socket_timeout=timeout, socket_connect_timeout=timeout, retry=no_retry())


def _close(client) -> None:
    if client is not None:
        try:
            client.close()
        except Exception:
            pass
