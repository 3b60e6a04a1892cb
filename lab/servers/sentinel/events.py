"""What the Sentinels said about the service (+sdown, +odown, +switch-master, ...): every Sentinel's event
channels, read from the moment it is started."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from lab.errors import ServiceError
from lab.servers.sentinel.process import READY_WITHIN, EmbeddedSentinel, text_of


@dataclass
class Event:
    """One message a Sentinel published about the service (+sdown, +odown, +switch-master, ...)."""

    at: float  # monotonic
    sentinel: str
    channel: str
    data: str


class SentinelEvents:
    """Every Sentinel's event channels, read from the moment it is started: the Sentinels' own account."""

    def __init__(self, sentinels: list[EmbeddedSentinel]):
        self.events: list[Event] = []
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._listen, args=(s,), name=f"sentinel-events-{s.name}",
                                          daemon=True) for s in sentinels]
        self._subscribed = threading.Barrier(len(sentinels) + 1)

    def start(self) -> None:
        for thread in self._threads:
            thread.start()
        try:
            self._subscribed.wait(READY_WITHIN)
        except threading.BrokenBarrierError:
            raise ServiceError("a Sentinel's event channels could not be subscribed") from None

    def _listen(self, sentinel: EmbeddedSentinel) -> None:
        client = sentinel.client(timeout=5.0)
        pubsub = client.pubsub(ignore_subscribe_messages=True)
        try:
            pubsub.psubscribe("*")
            pubsub.get_message(timeout=1.0)  # its subscription confirmed
            self._subscribed.wait()
            while not self._stop.is_set():
                try:
                    message = pubsub.get_message(timeout=0.2)
                except Exception:  # the Sentinel stopped: the trial is ending
                    return
                if message is None or message.get("type") != "pmessage":
                    continue
                event = Event(time.monotonic(), sentinel.name, text_of(message["channel"]), text_of(message["data"]))
                with self._changed:
                    self.events.append(event)
                    self._changed.notify_all()
        except threading.BrokenBarrierError:
            return
        finally:
            try:
                pubsub.close()
                client.close()
            except Exception:
                pass

    def since(self, t0: float, channel: str | None = None) -> list[Event]:
        with self._lock:
            return [e for e in self.events if e.at >= t0 and (channel is None or e.channel == channel)]

    def wait_for(self, channel: str, since: float, within: float, matching=lambda e: True) -> Event | None:
        """The first event on channel after since that matches, waiting up to within seconds."""
        deadline = time.monotonic() + within
        with self._changed:
            while True:
                found = next((e for e in self.events if e.at >= since and e.channel == channel and matching(e)),
                             None)
                if found is not None or time.monotonic() >= deadline:
                    return found
                self._changed.wait(max(0.0, deadline - time.monotonic()))

    def stop(self) -> None:
        self._stop.set()
        self._subscribed.abort()
        for thread in self._threads:
            thread.join(2.0)
