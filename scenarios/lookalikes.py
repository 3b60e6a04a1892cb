"""The post's lookalikes, measured: timers that might end a lock session, and why they do not.

idle_session_timeout: ends only sessions idle *outside* a transaction, so it
leaves a default (autobegin) lock connection alone. pool_recycle: acts only at
checkout, so it never touches the checked-out lock connection. close(): returns
a pooled connection with its session, and its session lock, alive; invalidate()
ends the session and frees the lock.
"""

from __future__ import annotations

from sqlalchemy import text

from lab.measures.kinds import Measured
from lab.declarations.post_role import PostRole
from lab.servers.clients import pg_engine
from lab.servers.postgres import sql as pg
from scenarios.base import Scenario, TrialEnv

_TRY = text("select pg_try_advisory_lock(hashtextextended(:k, 0))")
_UNLOCK = text("select pg_advisory_unlock(hashtextextended(:k, 0))")
_PID_AND_KEY = text("select pg_backend_pid(), hashtextextended(:k, 0)")


class Lookalikes(Scenario):
    name = "lookalikes"
    measured = Measured.LOOKALIKE
    default_run = True
    summary = "lookalike timers ruled out: idle_session_timeout in a transaction, pool_recycle, close() vs invalidate()"
    variants = ("idle_session_in_transaction", "pool_recycle_checked_out", "close_keeps_lock")
    params = {
        "quick": {"timeout_s": 1.0, "trials": 1, "parallel": 3},
        "default": {"timeout_s": 3.0, "trials": 3, "parallel": 9},
    }

    def applies_to(self, backend_cls) -> str | None:
        if backend_cls.post_role is PostRole.METHOD_1:
            return None
        return "the lookalike checks run once, on the session lock"

    def run_trial(self, env: TrialEnv) -> dict:
        check = {"idle_session_in_transaction": self._idle_session, "pool_recycle_checked_out": self._recycle,
                 "close_keeps_lock": self._close}[env.spec.variant]
        return {"check": env.spec.variant, "timeout_s": env.params["timeout_s"], **check(env, env.params["timeout_s"])}

    def _other_gets(self, env: TrialEnv, key: str) -> bool:
        with env.monitor.connect() as conn:
            got = conn.execute(_TRY, {"k": key}).scalar()
            if got:
                conn.execute(_UNLOCK, {"k": key})
            return bool(got)

    def _idle_session(self, env: TrialEnv, timeout: float) -> dict:
        key = env.key()
        engine = pg_engine(env.services.pg(), {"idle_session_timeout": f"{int(timeout * 1000)}ms"})
        try:
            conn = engine.connect()  # default: autobegin, the post's method 1
            conn.execute(_TRY, {"k": key})
            pid, _ = conn.execute(_PID_AND_KEY, {"k": key}).one()
            env.pause(timeout * 1.7)
            return {"state": pg.session_state(env.monitor, pid), "other_got_lock": self._other_gets(env, key),
                    "server_said": pg.why_session_ended(env.services.pg_log, pid)}
        finally:
            engine.dispose()

    def _recycle(self, env: TrialEnv, timeout: float) -> dict:
        key = env.key()
        engine = pg_engine(env.services.pg(), pool_recycle=timeout, pool_size=1,
                           isolation_level="AUTOCOMMIT")
        try:
            with engine.connect() as conn:
                conn.execute(_TRY, {"k": key})
                pid, key_int = conn.execute(_PID_AND_KEY, {"k": key}).one()
                env.pause(timeout * 1.7)  # past pool_recycle, still checked out
                still_held = pg.holds_advisory_lock(env.monitor, pid, key_int)
                same_session = conn.execute(text("select pg_backend_pid()")).scalar() == pid
            with engine.connect() as again:  # the next checkout is where recycle acts
                new_pid = again.execute(text("select pg_backend_pid()")).scalar()
            pg.wait_gone(env.monitor, pid, within=2)
            return {"held_while_checked_out": still_held, "same_session": same_session,
                    "recycled_at_checkout": new_pid != pid, "other_got_lock_after": self._other_gets(env, key)}
        finally:
            engine.dispose()

    def _close(self, env: TrialEnv, timeout: float) -> dict:
        key = env.key()
        engine = pg_engine(env.services.pg(), pool_size=1, isolation_level="AUTOCOMMIT")
        try:
            conn = engine.connect()
            conn.execute(_TRY, {"k": key})
            pid, key_int = conn.execute(_PID_AND_KEY, {"k": key}).one()
            conn.close()  # back to the pool; its reset is a rollback, which leaves session locks alone
            held_after_close = pg.holds_advisory_lock(env.monitor, pid, key_int)
            other_after_close = self._other_gets(env, key)
            conn = engine.connect()
            conn.invalidate()  # ends the session
            conn.close()
            pg.wait_gone(env.monitor, pid, within=2)
            return {"held_after_close": held_after_close, "other_got_lock_after_close": other_after_close,
                    "other_got_lock_after_invalidate": self._other_gets(env, key)}
        finally:
            engine.dispose()

    def verdict(self, measures: dict) -> str:
        check = measures["check"]
        if check == "idle_session_in_transaction":
            ruled_out = measures["state"] == "idle in transaction" and not measures["other_got_lock"]
        elif check == "pool_recycle_checked_out":
            ruled_out = measures["held_while_checked_out"] and measures["same_session"]
        else:
            ruled_out = (measures["held_after_close"] and not measures["other_got_lock_after_close"]
                         and measures["other_got_lock_after_invalidate"])
        return "as the post says" if ruled_out else "differs from the post"
