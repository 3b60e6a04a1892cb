"""An asyncio event loop on a daemon thread of its own, for a library whose API is async (procrastinate): call()
runs a coroutine there and waits for it; stop() cancels what is left on it and ends the thread.
"""

from __future__ import annotations

import asyncio
import threading


async def _cancel_the_rest() -> None:
    """Cancel every task still on the running loop but this one, and wait for them: nothing is left pending when the
    loop stops (a pending psycopg_pool worker complains at exit that its loop is closed)."""
    rest = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
    for task in rest:
        task.cancel()
    if rest:
        await asyncio.wait(rest, timeout=5)


class LoopThread:
    """An event loop running forever on a daemon thread, from construction until stop()."""

    def __init__(self, name: str):
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def call(self, coroutine, timeout: float):
        """Run a coroutine on the loop and wait for it."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def stop(self) -> None:
        """Cancel what is left on the loop (a pool's own tasks, were its close cut short), then end it."""
        try:
            self.call(_cancel_the_rest(), 10)
        except Exception:
            pass
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)
        if not self._thread.is_alive():
            self.loop.close()
