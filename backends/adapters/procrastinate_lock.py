"""procrastinate's job lock, as a user runs it: a job deferred with `lock=...`, a worker whose task rebuilds the
company, and the stalled-job retry its documentation recommends.

What the library does (procrastinate 3, sql/schema.sql procrastinate_fetch_job_v2): a worker fetches a job only
when no other job with the same lock is `doing` (nor `todo` ahead of it), so the jobs of one lock run one at a
time; the lock is the job's status, held while the job runs and given up when its worker finishes it. Nothing
expires it: a worker that stops keeps its job `doing`. Workers send heartbeats (update_heartbeat_interval), and
the docs' recipe for stalled jobs ("Retry stalled jobs": JobManager.get_stalled_jobs(seconds_since_heartbeat),
then retry_job) puts the job of a worker whose heartbeat is older than that back to `todo`, where any worker of
its queue fetches it again: that threshold is the lock's TTL, and the heartbeats its renewal. No fencing.

Here a run is a worker on the trial's queue (every run's), on an event loop of its own: acquire() defers the run's
job (lock = the run's key) once, and before each try runs the stalled-job recipe with seconds_since_heartbeat =
TTL, as a periodic task would; the worker (concurrency 1, heartbeat every TTL/4, polling every TTL/10) fetches
whichever job of the lock is next, and its task, the lab's rebuild, holds it: acquire() is True once the task runs.
rebuild() is done by that task, on its worker's thread; release() lets the task return, so the worker marks the
job succeeded and stops (a task middleware stops it after one job). held() reads the job through
JobManager.list_jobs: `doing`, by this worker. The library's tables live in the lab's schema (search_path, set with
the lab's pinned settings when each connection opens).
"""

from __future__ import annotations

import asyncio
import hashlib
import queue
import threading
from concurrent.futures import Future
from typing import Any, Callable

import psycopg
from procrastinate import App, PsycopgConnector

from backends._writes import write_transaction
from backends.adapters._loop_thread import LoopThread
from backends.adapters._procrastinate_jobs import (another_job_ahead, configure, conninfo, ensure_tables,
                                                   retry_stalled, session_settings)
from backends.base import Backend, Point, RebuildResult, describe_error, no_point
from lab.declarations.capabilities import Capability
from lab.errors import LockLost
from lab.workload.table import ensure_schema

TASK = "locklab_rebuild"
DEFAULT_TTL_S = 2.0
STEP_TIMEOUT_S = 30.0
FETCH_WITHIN_S = 30.0  # how long a worker whose job is next may take to fetch it (its first poll, on a busy machine)  # a call into the worker's loop that takes longer has hung: the trial errors, it does not hang


class ProcrastinateJobLock(Backend):
    """A procrastinate worker: its job deferred with lock=key, fetched when the lock is free, its task the rebuild."""

    name = "procrastinate"
    summary = ("procrastinate's job lock: a job deferred with lock=..., run by a worker whose task rebuilds; stalled "
               "jobs retried by heartbeat (its docs' recipe); no fencing")
    capabilities = frozenset({Capability.LEASE_EXPIRY, Capability.EXCLUSION})
    library = "procrastinate"
    session_settings = True  # the lab's schema on the search path, set when each of its connections opens

    def __init__(self, ctx, key):
        super().__init__(ctx, key)
        self.lease_s = float(ctx.options.get("ttl_s", DEFAULT_TTL_S))  # the heartbeat age a worker is stalled at
        self.ttl = self.lease_s
        url = ctx.lock_services.pg()
        self.url, self.settings = url, session_settings(url, dict(ctx.lock_settings))
        self.lock_name = f"locklab:{key}"
        self.queue_name = "locklab-" + hashlib.sha1(key.encode()).hexdigest()[:16]  # every run of the trial's key
        self._loop = LoopThread("procrastinate-loop")
        self.app = App(connector=PsycopgConnector(conninfo=conninfo(url), configure=self._configure, min_size=1,
                                                  max_size=2))
        self.app.task(name=TASK, pass_context=True)(self._task)
        self._call(self._open())
        self._fresh()

    def _fresh(self) -> None:
        """No job, no worker: how a run starts, and starts again after its release (a new job, a new worker)."""
        self._job_id: int | None = None  # the job this run deferred
        self._running: int | None = None  # the job its task is running (its own, or a stalled one retried)
        self._worker_id: int | None = None
        self._worker: asyncio.Future | None = None  # the worker, on its loop
        self._granted = threading.Event()
        self._work: queue.Queue = queue.Queue()  # what the task does next: a rebuild, or None to return

    # --- the library's side: the task, and the worker that runs it -------------------------------------------

    def _task(self, context, **kwargs) -> None:
        """The job's task (any run's job this worker fetches): hold the lock, rebuild as asked, return when released."""
        self._running = context.job.id
        self._granted.set()
        while (step := self._work.get()) is not None:
            call, done = step
            try:
                done.set_result(call())
            except BaseException as exc:  # handed to the run's thread, which raises it there
                done.set_exception(exc)

    def _one_job(self, call_next: Callable[[], Any], context, worker) -> Any:
        """A task middleware: note the worker's id, run the task, then stop the worker (one job a run)."""
        self._worker_id = worker.worker_id
        try:
            return call_next()
        finally:
            worker.stop()

    def _call(self, coroutine, timeout: float = STEP_TIMEOUT_S):
        """Run a coroutine on the worker's loop and wait for it."""
        return self._loop.call(coroutine, timeout)

    async def _open(self) -> None:
        await self.app.open_async()  # an awaitable context: awaited, it opens the connector's pool

    async def _configure(self, conn: psycopg.AsyncConnection) -> None:
        await configure(conn, self.settings)  # psycopg_pool's configure: each new connection's settings

    async def _start(self) -> None:
        await ensure_tables(self.url, self.settings)
        task = self.app.tasks[TASK].configure(lock=self.lock_name, queue=self.queue_name)
        self._job_id = await task.defer_async()
        self._worker = asyncio.ensure_future(self.app.run_worker_async(
            queues=[self.queue_name], concurrency=1, wait=True, listen_notify=False, install_signal_handlers=False,
            fetch_job_polling_interval=self.lease_s / 10, update_heartbeat_interval=self.lease_s / 4,
            stalled_worker_timeout=self.lease_s, task_middleware=[self._one_job], name=f"locklab-{self._job_id}"))

    async def _stop_worker(self) -> None:
        """Cancel a worker still running (one that never got its job): the library's way to stop it from outside,
        which shuts it down gracefully; wait for that."""
        if self._worker is not None and not self._worker.done():
            self._worker.cancel()
            await asyncio.wait([self._worker], timeout=10)

    # --- the lab's side ----------------------------------------------------------------------------------------

    @classmethod
    def cannot_run(cls, services) -> str | None:
        return None if services.pg_url is not None else "no PostgreSQL among this run's servers"

    def acquire(self) -> bool:
        """One try: defer the run's job and start its worker (the first time), or run the stalled-job recipe; then
        wait for the worker's task while no other job of the lock is ahead (it is then the worker's next fetch)."""
        if self._job_id is None:
            ensure_schema(self.ctx.monitor)  # the lab's schema, where the library's tables go (a trial's own server)
            self._call(self._start())
        elif not self._granted.is_set():
            self._call(retry_stalled(self.app.job_manager, self.queue_name, self.lease_s))
        assert self._job_id is not None  # deferred by the first acquire
        ahead = not self._granted.is_set() and self._call(another_job_ahead(self.app.job_manager, self.lock_name,
                                                                            self._job_id))
        self._granted.wait(min(0.2, self.lease_s / 4) if ahead else FETCH_WITHIN_S)
        return self._granted.is_set()

    def held(self) -> bool:
        """The job its task runs is `doing`, fetched by this run's worker (not retried and taken by another)."""
        if self._running is None:
            return False
        try:
            [job] = self._call(self.app.job_manager.list_jobs_async(id=self._running))
        except Exception:  # cannot confirm it: not known to be held
            return False
        return job.status == "doing" and job.worker_id == self._worker_id and self._worker_id is not None

    def rebuild(self, company: int, rows: int, run_id: str, point: Point = no_point) -> RebuildResult:
        """Done by the job's task, on its worker's thread, while the job holds the lock."""
        done: Future = Future()
        self._work.put((lambda: write_transaction(self.ctx.writes, self.ctx.company_table, [company], rows, run_id,
                                                  point=point), done))
        return done.result()

    def release(self) -> None:
        """Let the task return: the worker marks its job succeeded (the library's finish) and stops. LockLost when the
        job was no longer this worker's, or the worker could not finish it."""
        if not self._granted.is_set():
            raise LockLost("release without a job running")
        ours = self.held()
        self._work.put(None)
        worker = self._worker
        self._fresh()  # the next acquire defers a new job for a new worker, as the next run would
        try:
            if worker is not None:
                self._call(asyncio.wait_for(asyncio.shield(worker), STEP_TIMEOUT_S), STEP_TIMEOUT_S + 1)
        except Exception as exc:
            raise LockLost(f"the worker could not finish its job: {describe_error(exc)}") from exc
        if not ours:
            raise LockLost("its job was no longer this worker's at release (retried as stalled, or gone)", told="false")

    def suspend(self, seconds: float) -> None:
        """Nothing of the lab's keeps it: the worker's own heartbeat does, and a process-wide pause stops it."""

    def close(self) -> None:
        self._work.put(None)  # a task still holding returns
        try:
            self._call(self._stop_worker(), 15)
            self._call(self.app.close_async(), 10)
        except Exception:  # a server a fault took away: what is left on the loop is cancelled below
            pass
        finally:
            self._loop.stop()  # the pool's own tasks, were its close cut short, cancelled first
