"""Session settings through a pooler that refuses libpq's `options` startup parameter (PgBouncer).

PgBouncer answers "unsupported startup parameter: options" (and, told to ignore it, drops it
silently). Behind a transaction pooler a session SET holds only until the pooler hands that server
session to another client, so the settings go with each transaction instead: set_config(..., true),
SET LOCAL, as the transaction's first statement. An AUTOCOMMIT connection has no transaction to
carry them: it gets a session SET once, which holds on a session pooler and, on a transaction
pooler, only for the server session it ran on. A direct connection is left exactly as it was.
"""

from __future__ import annotations

import threading
import weakref
from typing import Mapping

from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError

from lab.errors import ServiceError

REFUSAL = "unsupported startup parameter: options"
_PER_TRANSACTION = "locklab_settings_per_transaction"  # connection record info: this connection went without options
_SESSION_SET = "locklab_settings_session_set"  # ... and, used as AUTOCOMMIT, got its session SET
# default_transaction_* reach only the transactions that begin after them; their transaction_* twins
# make the current one read-only (BEGIN READ ONLY), of that isolation, deferrable.
_CURRENT = {"default_transaction_read_only": "transaction_read_only",
            "default_transaction_isolation": "transaction_isolation",
            "default_transaction_deferrable": "transaction_deferrable"}

_refusals: "weakref.WeakKeyDictionary[Engine, str]" = weakref.WeakKeyDictionary()
_refusals_lock = threading.Lock()


class SettingsRefused(ServiceError):
    """The server refused the options startup parameter, and setting them after connecting failed too."""


def refusal(engine: Engine) -> str | None:
    """The server's refusal of the options startup parameter, once this engine has met it; None before or never."""
    with _refusals_lock:
        return _refusals.get(engine)


def fall_back_when_refused(engine: Engine, settings: Mapping[str, object]) -> None:
    """Where the server refuses the engine's options startup parameter, connect without it and apply the
    settings per transaction (session-wide on AUTOCOMMIT); where it accepts them, change nothing."""
    pairs = [(name, str(value)) for name, value in settings.items()]
    local = pairs + [(_CURRENT[name], value) for name, value in pairs if name in _CURRENT]
    local_sql = "select " + ", ".join("set_config(%s, %s, true)" for _ in local)
    session_sql = "select " + ", ".join("set_config(%s, %s, false)" for _ in pairs)

    refused: list[str] = []  # the server's refusal, once seen: from then on every connection goes without options

    @event.listens_for(engine, "do_connect")
    def connect(dialect, record, cargs, cparams):
        if not refused:
            try:
                return dialect.connect(*cargs, **cparams)
            except dialect.loaded_dbapi.OperationalError as exc:
                if REFUSAL not in str(exc):
                    raise
                refused.append(_first_line(exc))
                with _refusals_lock:
                    _refusals[engine] = refused[0]
        record.info[_PER_TRANSACTION], record.info[_SESSION_SET] = True, False
        return dialect.connect(*cargs, **{k: v for k, v in cparams.items() if k != "options"})

    @event.listens_for(engine, "begin")
    def begin(conn):
        if not refused:
            return  # a direct connection: nothing here touches it
        info = conn.connection.info
        if not info.get(_PER_TRANSACTION):
            return
        dbapi = conn.connection.dbapi_connection
        if not dbapi.autocommit:
            _apply(dbapi, local_sql, [v for pair in local for v in pair], refused[0], "SET LOCAL")
        elif not info.get(_SESSION_SET):
            _apply(dbapi, session_sql, [v for pair in pairs for v in pair], refused[0], "SET")
            info[_SESSION_SET] = True


def _apply(dbapi, sql: str, params: list[str], refused: str | None, how: str) -> None:
    """One round trip on the raw connection (SQLAlchemy is inside its begin() here); psycopg2 sends BEGIN first."""
    cursor = dbapi.cursor()
    try:
        cursor.execute(sql, params)
    except Exception as exc:
        if isinstance(exc, (dbapi.OperationalError, dbapi.InterfaceError)):  # the connection broke: say so as usual
            raise DBAPIError.instance(sql, params, exc, dbapi.Error) from exc
        raise SettingsRefused(f"the server refused the options startup parameter ({refused}) and the settings "
                              f"could not be applied with {how} either: {_first_line(exc)}") from None
    finally:
        if not dbapi.closed:
            cursor.close()


def _first_line(exc: BaseException) -> str:
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    return lines[0] if lines else type(exc).__name__
