"""Client factories for the three servers, and the one place DSNs are parsed and redacted."""

from __future__ import annotations

from typing import Mapping

from sqlalchemy import create_engine
from sqlalchemy.engine import URL, Engine, make_url
from sqlalchemy.exc import ArgumentError

from lab.errors import LabError


def parse_pg_dsn(dsn: str) -> URL:
    """A PostgreSQL URL for SQLAlchemy with the psycopg2 driver; LabError when it is not one."""
    try:
        url = make_url(dsn)
    except ArgumentError:
        # The value is not echoed: an unparseable DSN may still contain a password.
        raise LabError("the PostgreSQL DSN is not a URL (expected postgresql://user:password@host:port/dbname)") from None
    if url.get_backend_name() not in ("postgresql", "postgres"):
        raise LabError(f"the PostgreSQL DSN must be a postgresql:// URL, not {url.get_backend_name()}://")
    return url.set(drivername="postgresql+psycopg2")


def redact(url: URL | str) -> str:
    """The URL as text with any password replaced by ***."""
    if isinstance(url, str):
        try:
            url = make_url(url)
        except ArgumentError:
            return redact_text(url)
    return url.render_as_string(hide_password=True)


def redact_text(text: str) -> str:
    """Blank out a password in a URL-looking string that SQLAlchemy could not parse."""
    import re

    return re.sub(r"(://[^:/@\s]*:)[^@\s]+@", r"\1***@", text)


def first_line(exc: BaseException | str) -> str:
    """The first line of a driver error (or of any message), password-free: what a one-line error shows."""
    message = str(getattr(exc, "orig", None) or exc).strip()
    lines = [ln.strip() for ln in message.splitlines() if ln.strip()]
    return redact_text(lines[0] if lines else "" if isinstance(exc, str) else type(exc).__name__)


def pg_engine(url: URL | str, settings: Mapping[str, object] | None = None, **kwargs) -> Engine:
    """An engine whose every session starts with the given server settings (SET at connect time).

    Settings travel in libpq's startup options, so they hold for the whole session and
    never open a transaction: the way the post's holder sets its own timeout.
    """
    connect_args = dict(kwargs.pop("connect_args", {}))
    connect_args.setdefault("connect_timeout", 5)
    connect_args.setdefault("application_name", "locklab")
    if settings:
        connect_args["options"] = " ".join(f"-c {name}={value}" for name, value in settings.items())
    return create_engine(url, connect_args=connect_args, **kwargs)


def redis_client(url: str, **kwargs):
    import redis

    kwargs.setdefault("socket_connect_timeout", 5)
    return redis.Redis.from_url(url, **kwargs)


def etcd_client(endpoint: str, timeout: float = 5):
    """An etcd v3 client from etcd-sdk-python (pyetcd): see README for why not etcd3."""
    import pyetcd

    host, _, port = endpoint.removeprefix("http://").rpartition(":")
    return pyetcd.client(host=host or "127.0.0.1", port=int(port or 2379), timeout=timeout)
