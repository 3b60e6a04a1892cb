"""procrastinate's side of its job lock, as the lab's adapter drives it (backends/adapters/procrastinate_lock.py):
how its sessions connect, its tables in the lab's schema, which job of a lock comes next, and the docs' recipe for
stalled jobs.
"""

from __future__ import annotations

import psycopg
from psycopg.conninfo import make_conninfo
from procrastinate.schema import SchemaManager

from lab.servers.clients import known_settings, pg_hosts
from lab.workload.table import SCHEMA

_SCHEMA_LOCK = "select pg_advisory_xact_lock(hashtextextended('locklab procrastinate schema', 0))"


def conninfo(url) -> str:
    """libpq's keyword form of a SQLAlchemy PostgreSQL URL, a multi-host one included (host and port lists)."""
    hosts = pg_hosts(url)
    params = {key: value for key, value in url.query.items() if key != "host" and isinstance(value, str)}
    params.update(host=",".join(h or "" for h, _ in hosts), port=",".join(str(p) for _, p in hosts),
                  user=url.username, password=url.password, dbname=url.database)
    return make_conninfo(**{key: value for key, value in params.items() if value is not None})


def session_settings(url, settings: dict) -> dict:
    """What every procrastinate session sets when it connects: the lab's schema first on its search_path, the trial's
    settings (a guard), and every other setting the lab pins, at 0. Set by SET at connect (psycopg_pool's configure),
    not in the startup packet, which a pooler such as PgBouncer refuses."""
    pinned = {name: "0" for name in sorted(known_settings(url, {})) if name not in settings}
    return {"search_path": SCHEMA, **pinned, **{name: str(value) for name, value in settings.items()}}


async def configure(conn: psycopg.AsyncConnection, settings: dict) -> None:
    """psycopg_pool's configure: each new connection's settings, committed so a pool's reset keeps them."""
    for name, value in settings.items():
        await conn.execute("select set_config(%s, %s, false)", (name, value))
    await conn.commit()


async def ensure_tables(url, settings: dict) -> None:
    """The library's tables in the lab's schema, made once per server (every run checks, one makes them)."""
    async with await psycopg.AsyncConnection.connect(conninfo(url)) as conn:
        await configure(conn, settings)
        async with conn.transaction():
            await conn.execute(_SCHEMA_LOCK)
            found = await (await conn.execute("select to_regclass('procrastinate_jobs')")).fetchone()
            if found is None or found[0] is None:
                await conn.execute(SchemaManager.get_schema())  # the library's own SQL


async def another_job_ahead(job_manager, lock: str, job_id: int) -> bool:
    """Whether another job of the lock comes before this run's: one `doing`, or one `todo` deferred earlier."""
    found = await job_manager.list_jobs_async(lock=lock)
    return any(job.id != job_id and (job.status == "doing" or (job.status == "todo" and (job.id or 0)
                                                                < job_id)) for job in found)


async def retry_stalled(job_manager, queue: str, seconds_since_heartbeat: float) -> list[int]:
    """The docs' recipe: every job of a worker whose heartbeat is older than the TTL goes back to todo."""
    stalled = await job_manager.get_stalled_jobs(queue=queue, seconds_since_heartbeat=seconds_since_heartbeat)
    for job in stalled:
        await job_manager.retry_job(job)
    return [job.id for job in stalled if job.id is not None]
