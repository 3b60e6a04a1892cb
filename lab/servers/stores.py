"""The SQL server a lock's company rows live on (its writes_to: PostgreSQL or MariaDB), and the lab's engines to it.

A run keeps one monitor (AUTOCOMMIT, for evidence and observers) and one writes pool per store; a holder process
makes its own pair. The post's guard, a session idle inside a transaction ended after a while, has a name on
each server: idle_in_transaction_session_timeout, MariaDB's idle_transaction_timeout (whole seconds).
"""

from __future__ import annotations

import math
from typing import Mapping

from sqlalchemy.engine import URL, Engine, make_url

from lab.servers.clients import pg_engine
from lab.servers.mariadb import sql as mariadb_sql
from lab.servers.postgres import sql as pg
from lab.servers.services import Services
from lab.declarations.where import DATABASES

SQL_STORES = DATABASES


def url_of(services: Services, store: str) -> URL:
    """The address of a store among these servers (ServiceError naming it when it is not among them)."""
    return services.mariadb() if store == "mariadb" else services.pg()


def run_engines(services: Services, store: str) -> tuple[Engine, Engine]:
    """The run's monitor and writes pools on a store, shared by its trials."""
    if store == "mariadb":
        url = services.mariadb()
        return mariadb_sql.monitor_engine(url), mariadb_sql.writes_engine(url)
    return pg.monitor_engine(services), pg.writes_engine(services)


def holder_engines(services: Services, store: str, write_settings: Mapping[str, object],
                   writes_url: URL | str | None = None) -> tuple[Engine, Engine]:
    """A holder process's monitor and writes engines on a store; writes_url: its writes through a fault's proxy."""
    monitor = store_engine(services, store, {}, isolation_level="AUTOCOMMIT", pool_pre_ping=True)
    return monitor, writes_engine(services, store, write_settings, writes_url, pool_pre_ping=True)


def writes_engine(services: Services, store: str, settings: Mapping[str, object], url: URL | str | None = None,
                  **kwargs) -> Engine:
    """An engine for writes on a store, at its own address or at url (the same server through a fault's proxy)."""
    if store == "mariadb":
        return mariadb_sql.mariadb_engine(services.mariadb() if url is None else make_url(url), _whole(settings),
                                          **kwargs)
    return pg_engine(url or services.pg(), settings, **kwargs)


def store_engine(services: Services, store: str, settings: Mapping[str, object], **kwargs) -> Engine:
    """An engine of its own on a store whose sessions start with these settings (a trial's own writes pool)."""
    if store == "mariadb":
        return mariadb_sql.mariadb_engine(services.mariadb(), _whole(settings), **kwargs)
    return pg_engine(services.pg(), settings, **kwargs)


def idle_transaction_guard(store: str, seconds: float) -> dict:
    """The post's guard for sessions of this store: a session idle inside a transaction for `seconds` is ended.
    MariaDB takes whole seconds: a fraction is rounded up (never a guard shorter than asked)."""
    if store == "mariadb":
        return {"idle_transaction_timeout": max(1, math.ceil(seconds))}
    return {"idle_in_transaction_session_timeout": f"{int(round(seconds * 1000))}ms"}


def _whole(settings: Mapping[str, object]) -> dict[str, int]:
    """MariaDB settings as the integers it takes; a PostgreSQL setting given to a MariaDB session is a mistake."""
    out = {}
    for name, value in settings.items():
        if not isinstance(value, (int, float)):
            raise ValueError(f"{name}={value!r} is not a MariaDB setting (whole seconds)")
        out[name] = int(value)
    return out
