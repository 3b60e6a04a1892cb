"""The guard turned off on a role: whether a session lock outlives the idle guard an owner set on the database.

The post's first "why not" is SET idle_in_transaction_session_timeout = 0, on the lock's session or on its
role: it works, but it exempts the session from a guard the owner set on purpose. This tests the "it works"
half for the role form, which is how a DBA would grant the exemption. The guard is set on the database
(ALTER DATABASE, as an owner would) and turned off on the holder's role (ALTER ROLE ... SET
idle_in_transaction_session_timeout = 0); the trial reads whether the lock outlives the guard. The control is
a session of the lab's own user under the same database guard, a lock taken and its transaction left open:
the guard must end it, or the trial shows nothing. Only on a PostgreSQL the lab started (it alters the
database and creates a role); otherwise the trial is skipped with the reason, and the database's guard is
reset whatever happens.
"""

from __future__ import annotations

import time
from typing import cast

from sqlalchemy import text

from backends.base import GuardOnRole
from backends.session_guard_off import GUARD, guard_left_to_server
from lab.declarations.capabilities import Capability
from lab.servers.clients import pg_engine
from lab.servers.postgres import sql as pg
from lab.servers.postgres.drivers import DEFAULT as DEFAULT_DRIVER
from scenarios.base import Skip, TrialEnv, release_said
from scenarios.whynot.base import Experiment

_GUARD_IN_FORCE = text(f"select setting, source from pg_settings where name = '{GUARD}'")
_TRY_LOCK = text("select pg_try_advisory_lock(hashtextextended(:k, 0)), pg_backend_pid()")


class GuardOffRole(Experiment):
    """The database's guard against a role that turns it off, with a session the guard must end as control."""

    variants = ("guard_off_role",)
    requires = frozenset({Capability.GUARD_OFF_ON_ROLE})
    reason = "does not declare it turns the guard off on a role (guard_off_on)"

    def run(self, env: TrialEnv, variant: str) -> dict:
        if not env.services.is_embedded("postgres"):
            raise Skip("it sets a guard on the database and creates a role: only on a PostgreSQL the lab started")
        if env.spec.driver != DEFAULT_DRIVER:
            raise Skip(f"the role's session is opened with {DEFAULT_DRIVER} only")
        timeout = env.params["timeout_s"]
        guard = f"{int(timeout * 1000)}ms"
        _database_guard(env, guard)
        try:
            role_settings, holder, control = _hold_beside_control(env, timeout)
        finally:
            _database_guard(env, None)
        return {"timeout_s": timeout, "database_guard": guard, "role_settings": role_settings,
                "holder": holder, "control": control}

    def verdict(self, m: dict) -> str:
        if m["control"]["state"] != "gone":
            return "the database's guard ended nothing: not shown"
        return "survived the database's guard" if m["holder"]["held_after"] else "lock session ended by the guard"


def _hold_beside_control(env: TrialEnv, timeout: float) -> tuple[list[str], dict, dict]:
    """The holder on its role and the control on the lab's own user, both idle in their transactions past the
    guard's timeout: the role's settings, then what each session read as its guard and what became of it."""
    url = env.services.pg()
    control = pg_engine(url, guard_left_to_server(url, {}), pin=False, pool_size=1, max_overflow=0)
    holder = env.backend(key=env.key("role"), options={"guard_off_on": "role"})
    on_role = cast(GuardOnRole, holder)  # the experiment applies only to backends declaring GUARD_OFF_ON_ROLE
    try:
        acquired = holder.acquire()
        held_guard, held_source = on_role.guard_in_force()
        role_settings = _role_settings(env, on_role.guard_role)
        conn = control.connect()  # autobegin: the lock's transaction stays open, as method 1's does
        try:
            got, control_pid = conn.execute(_TRY_LOCK, {"k": env.key("control")}).one()
            control_guard, control_source = conn.execute(_GUARD_IN_FORCE).one()
            t0 = time.monotonic()
            env.wait_until(t0, 2 * timeout)  # past the guard's timeout, both idle in their transactions
            pg.wait_gone(env.monitor, control_pid, within=2 * timeout)  # the guard's timer is not exact
            state, control_state = pg.session_state(env.monitor, holder.lock_pid), pg.session_state(env.monitor,
                                                                                                    control_pid)
            held_after = holder.held()
        finally:
            conn.invalidate()
            conn.close()
        release = release_said(holder)
    finally:
        try:
            holder.close()
        finally:
            control.dispose()
    return (role_settings,
            {"acquired": acquired, "guard": held_guard, "source": held_source,
             "state": state, "held_after": held_after, "release": release,
             "server_said": pg.why_session_ended(env.services.pg_log, holder.lock_pid)},
            {"acquired": got, "guard": control_guard, "source": control_source, "state": control_state,
             "server_said": pg.why_session_ended(env.services.pg_log, control_pid)})


def _database_guard(env: TrialEnv, value: str | None) -> None:
    """Set the guard on the database (new sessions that do not set it get it), or reset it (value None)."""
    database = env.services.pg().database
    with env.monitor.connect() as conn:
        if value is None:
            conn.execute(text(f'alter database "{database}" reset {GUARD}'))
        else:
            conn.execute(text(f"alter database \"{database}\" set {GUARD} = '{value}'"))


def _role_settings(env: TrialEnv, role: str | None) -> list[str]:
    """What pg_db_role_setting keeps for the role (in any database), as lab doctor reads it."""
    with env.monitor.connect() as conn:
        rows = conn.execute(text("select s.setconfig from pg_db_role_setting s join pg_roles r on r.oid = s.setrole "
                                 "where r.rolname = :r"), {"r": role}).scalars()
        return [setting for config in rows for setting in config]
