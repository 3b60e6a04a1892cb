"""Client factories for the three servers, and the one place DSNs are parsed and redacted."""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass
from typing import Mapping
from urllib.parse import parse_qsl, unquote

# SQLAlchemy imports its ORM lazily, from whichever thread first needs it (an engine's error path inspects with it):
# two trials' threads doing so at once once met a half-initialised sqlalchemy.orm.exc (AttributeError, measured in
# a full run). Imported here, once, before any trial's thread exists.
import sqlalchemy.orm  # noqa: F401
from sqlalchemy import create_engine, text
from sqlalchemy.engine import URL, Engine, make_url
from sqlalchemy.exc import ArgumentError, OperationalError
from sqlalchemy.pool import NullPool

from lab.errors import LabError, ServiceError
from lab.servers.pooler_settings import fall_back_when_refused


def parse_pg_dsn(dsn: str) -> URL:
    """A PostgreSQL URL for SQLAlchemy with the psycopg2 driver; LabError when it is not one."""
    url = _sql_url(dsn, "PostgreSQL DSN", "postgresql://user:password@host:port/dbname", ("postgresql", "postgres"),
                   "a postgresql://")
    return url.set(drivername="postgresql+psycopg2")


def _sql_url(text: str, what: str, expected: str, schemes: tuple[str, ...], scheme_words: str) -> URL:
    """The text as a URL of one of these schemes; a LabError saying which it is not. The value is never echoed: an
    unparseable one may still hold a password."""
    try:
        url = make_url(text)
    except ArgumentError:
        raise LabError(f"the {what} is not a URL (expected {expected})") from None
    if url.get_backend_name() not in schemes:
        raise LabError(f"the {what} must be {scheme_words} URL, not {url.get_backend_name()}://")
    return url


def parse_mariadb_url(dsn: str) -> URL:
    """A MariaDB URL for SQLAlchemy's MariaDB dialect on PyMySQL (from mysql://, mariadb://, either +pymysql);
    LabError when it is not one."""
    url = _sql_url(dsn, "MariaDB URL", "mysql://user:password@host:port/", ("mysql", "mariadb"),
                   "a mysql:// or mariadb://")
    driver = url.drivername.partition("+")[2]
    if driver not in ("", "pymysql"):
        raise LabError(f"the MariaDB URL's driver must be PyMySQL (mysql+pymysql://), not {driver}")
    return url.set(drivername="mariadb+pymysql")


def pg_hosts(url: URL) -> list[tuple[str | None, int]]:
    """Every (host, port) a PostgreSQL URL names: one, or several in a multi-host URL (host=h:p repeated in
    the query, as SQLAlchemy writes libpq's host list)."""
    given = url.query.get("host")
    if url.host is None and given:
        hosts = [given] if isinstance(given, str) else list(given)
        return [(h.partition(":")[0], int(h.partition(":")[2] or 5432)) for h in hosts]
    return [(url.host, url.port or 5432)]


def redact(url: URL | str) -> str:
    """The URL as text with any password replaced by ***."""
    if isinstance(url, str):
        if url.startswith(SENTINEL_SCHEME + "://"):  # several hosts: not a URL SQLAlchemy parses
            return redact_text(url)
        try:
            parsed = make_url(url)
        except ArgumentError:
            return redact_text(url)
        return parsed.render_as_string(hide_password=True)
    return url.render_as_string(hide_password=True)


def redact_text(text: str) -> str:
    """Blank out a password in a URL-looking string that SQLAlchemy could not parse."""
    import re

    text = re.sub(r"(://[^:/@\s]*:)[^@\s]+@", r"\1***@", text)
    return re.sub(r"(sentinel_password=)[^&\s'\"]+", r"\1***", text)  # a Sentinel address's second password


def first_line(exc: BaseException | str) -> str:
    """The first line of a driver error (or of any message), password-free: what a one-line error shows."""
    message = str(getattr(exc, "orig", None) or exc).strip()
    lines = [ln.strip() for ln in message.splitlines() if ln.strip()]
    return redact_text(lines[0] if lines else "" if isinstance(exc, str) else type(exc).__name__)


# Settings a scenario may rely on. A server the lab did not start can set any of them per database or
# per role; every lab session pins each one it is not given to 0 (off), so a verdict does not depend
# on where the server came from. Names a server does not know (transaction_timeout before 17) are skipped.
PINNED_SETTINGS = ("idle_in_transaction_session_timeout", "idle_session_timeout", "statement_timeout",
                   "lock_timeout", "transaction_timeout")

_KNOWN: dict[tuple, frozenset] = {}  # (host, port, database, user) -> the pinned names that server knows
_KNOWN_LOCK = threading.Lock()


def pin_session(cursor, keep: Mapping[str, object] | None = None) -> list[str]:
    """On a psycopg2 cursor, in one round trip: set each of keep's settings to its value, and to 0 every
    other pinned setting the server set to anything else; returns the names pinned to 0. For lock
    libraries that open their own connection (the lab's own sessions pin in their startup packet
    instead, see pg_engine). current_setting(name, true) is NULL for a name the server does not know."""
    keep = {name: str(value) for name, value in (keep or {}).items()}
    names = [n for n in PINNED_SETTINGS if n not in keep]
    cursor.execute("select n, set_config(n, v, false) from ("
                   "select n, '0' from unnest(%s::text[]) n where current_setting(n, true) <> '0' "
                   "union all select * from unnest(%s::text[], %s::text[])) s(n, v)",
                   (names, list(keep), list(keep.values())))
    return [name for name, _ in cursor.fetchall() if name not in keep]


def known_settings(url: URL, connect_args: Mapping[str, object]) -> frozenset:
    """Which PINNED_SETTINGS this server knows, asked once per server and database, then remembered.

    The asking session pins the three every supported server knows in its startup packet, so a
    database's idle guard cannot end it before it has answered."""
    key = (url.host, url.port, url.query.get("host"), url.database, url.username)  # query: a multi-host URL
    with _KNOWN_LOCK:
        if key in _KNOWN:
            return _KNOWN[key]
    asking = {n: 0 for n in ("idle_in_transaction_session_timeout", "statement_timeout", "lock_timeout")}
    names = _ask_known(url, connect_args, asking)
    if names is None:
        # A database's idle_session_timeout (14 and later; an older server refuses the name at startup) ended the
        # asking session between its set-up queries on a loaded machine: ask again with that guard pinned too.
        names = _ask_known(url, connect_args, {**asking, "idle_session_timeout": 0})
    if names is None:
        raise ServiceError(f"PostgreSQL at {url.host}:{url.port} ended the session that asked for its settings")
    with _KNOWN_LOCK:
        _KNOWN[key] = names
    return names


def _ask_known(url: URL, connect_args: Mapping[str, object],
               asking: Mapping[str, object]) -> frozenset[str] | None:
    """The PINNED_SETTINGS this server knows, asked on one session that starts with `asking` pinned; None when the
    server ended that session after it connected. A failure to connect is raised as it is."""
    engine = create_engine(url, connect_args=dict(connect_args, options=_options(asking)), poolclass=NullPool)
    fall_back_when_refused(engine, dict(asking))  # a pooler refuses startup options: SET LOCAL instead
    try:
        with engine.connect() as conn:
            try:
                return frozenset(conn.execute(text("select name from pg_settings where name = any(:n)"),
                                              {"n": list(PINNED_SETTINGS)}).scalars())
            except OperationalError:
                conn.invalidate()
                return None
    finally:
        engine.dispose()


def _options(settings: Mapping[str, object]) -> str:
    return " ".join(f"-c {name}={value}" for name, value in settings.items())


def pg_engine(url: URL | str, settings: Mapping[str, object] | None = None, *, pin: bool = True,
              **kwargs) -> Engine:
    """An engine whose every session starts with the given server settings.

    Settings travel in libpq's startup options, so they hold from the session's first moment and
    never open a transaction: the way the post's holder sets its own timeout. Every other setting of
    PINNED_SETTINGS the server knows is pinned to 0 the same way: startup options outrank what
    ALTER DATABASE or ALTER ROLE set, and a database's 1 s idle guard cannot end a session that a
    busy client has not yet used (a query after connecting would race it). pin=False leaves the
    server's values, for reading what the server would give a session.

    A pooler that refuses the options startup parameter (PgBouncer) gets the settings per
    transaction instead (lab/servers/pooler_settings.py); a direct connection is unchanged.
    """
    url = make_url(url) if isinstance(url, str) else url
    connect_args = dict(kwargs.pop("connect_args", {}))
    connect_args.setdefault("connect_timeout", 5)
    connect_args.setdefault("application_name", "locklab")
    startup = dict(settings or {})
    if pin:
        startup.update({name: 0 for name in sorted(known_settings(url, connect_args)) if name not in startup})
    if startup:
        connect_args["options"] = _options(startup)
    engine = create_engine(url, connect_args=connect_args, **kwargs)
    if startup:
        fall_back_when_refused(engine, startup)
    _STARTUP[engine] = dict(startup)
    return engine


SENTINEL_SCHEME = "redis+sentinel"


@dataclass(frozen=True)
class SentinelAddress:
    """A Redis service found through its Sentinels, as one address:
    `redis+sentinel://[user][:password]@host:port[,host:port...]/SERVICE[/DB][?sentinel_password=...]`.

    The user and password are the Redis servers' (requirepass, or an ACL user); the Sentinels are asked
    without a password unless sentinel_password is given (the name tooz's redis driver gives that option).
    One string carries it through every seam a Redis URL travels (Services, a holder's stdin, a plugin's
    ctx.lock_services), so each lock's client finds the primary where Sentinel says it is.
    """

    sentinels: tuple[tuple[str, int], ...]
    service: str
    db: int = 0
    username: str | None = None
    password: str | None = None
    sentinel_password: str | None = None


def is_sentinel_url(url: str | None) -> bool:
    return bool(url) and str(url).startswith(SENTINEL_SCHEME + "://")


def parse_sentinel_url(url: str) -> SentinelAddress:
    """The parts of a redis+sentinel:// address; LabError (password-free) when it is not one."""
    rest = url.removeprefix(SENTINEL_SCHEME + "://")
    rest, _, query = rest.partition("?")
    userinfo, at, hosts_and_path = rest.rpartition("@")
    if not at:
        userinfo, hosts_and_path = "", rest
    hosts, _, path = hosts_and_path.partition("/")
    parts = [p for p in path.split("/") if p]
    sentinels = []
    for host in hosts.split(","):
        name, colon, port = host.rpartition(":")
        if not colon or not name or not port.isdigit():
            raise LabError(f"a Sentinel address names each Sentinel as host:port: {redact_text(url)}")
        sentinels.append((name, int(port)))
    if not parts or len(parts) > 2 or (len(parts) == 2 and not parts[1].isdigit()):
        raise LabError(f"a Sentinel address is {SENTINEL_SCHEME}://[:password@]host:port[,host:port...]/SERVICE[/DB]:"
                       f" {redact_text(url)}")
    user, colon, password = userinfo.partition(":")
    options = dict(parse_qsl(query))
    return SentinelAddress(tuple(sentinels), unquote(parts[0]), int(parts[1]) if len(parts) == 2 else 0,
                           unquote(user) or None, unquote(password) if colon else None,
                           options.get("sentinel_password"))


def server_url(address: SentinelAddress, host: str, port: int) -> str:
    """A plain redis:// URL for one server of a Sentinel-watched service, with the service's credentials."""
    from urllib.parse import quote

    user = quote(address.username or "", safe="")
    auth = f"{user}:{quote(address.password, safe='')}@" if address.password is not None else (f"{user}@" if user else "")
    return f"redis://{auth}{host}:{port}/{address.db}"


def sentinel_manager(address: SentinelAddress, **kwargs):
    """redis-py's Sentinel for these Sentinels: socket options as given, the Sentinels' own password if any."""
    from redis.sentinel import Sentinel

    asked = {k: v for k, v in kwargs.items() if k.startswith("socket_")}
    if address.sentinel_password is not None:
        asked["password"] = address.sentinel_password
    return Sentinel(list(address.sentinels), sentinel_kwargs=asked)


def no_retry():
    """A redis-py retry policy that never retries: the lab's own view of a server must see each failure as it
    is (redis-py retries a failed command by default, and a retried write can land after the server came back)."""
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    return Retry(NoBackoff(), 0)


_STARTUP: "weakref.WeakKeyDictionary[Engine, dict]" = weakref.WeakKeyDictionary()


def session_settings(engine: Engine) -> dict:
    """The settings every session of a pg_engine starts with (the given and the pinned), for a library that opens
    its sessions on the engine's address itself and must start them the same way."""
    return dict(_STARTUP.get(engine, {}))


def redis_client(url: str, **kwargs):
    """A redis-py client for a redis://, rediss://, unix:// or redis+sentinel:// address. The last is
    redis-py's own `Sentinel(...).master_for(SERVICE)`: every new connection asks the Sentinels where the
    primary is, and one open to a primary that was demoted is dropped on its first READONLY error."""
    import redis

    kwargs.setdefault("socket_connect_timeout", 5)
    if is_sentinel_url(url):
        address = parse_sentinel_url(url)
        return sentinel_manager(address, **kwargs).master_for(
            address.service, db=address.db, username=address.username, password=address.password, **kwargs)
    return redis.Redis.from_url(url, **kwargs)


def redis_asyncio_client(url: str, **kwargs):
    """redis.asyncio's client for the same addresses: from_url, or for a redis+sentinel:// address the
    library's own asyncio Sentinel (redis.asyncio.sentinel.Sentinel(...).master_for(SERVICE))."""
    import redis.asyncio

    if not is_sentinel_url(url):
        return redis.asyncio.Redis.from_url(url, **kwargs)
    from redis.asyncio.sentinel import Sentinel

    address = parse_sentinel_url(url)
    asked = {k: v for k, v in kwargs.items() if k.startswith("socket_")}
    if address.sentinel_password is not None:
        asked["password"] = address.sentinel_password
    return Sentinel(list(address.sentinels), sentinel_kwargs=asked).master_for(
        address.service, db=address.db, username=address.username, password=address.password, **kwargs)


def etcd_client(endpoint: str, timeout: float = 5):
    """An etcd v3 client from etcd-sdk-python (pyetcd): see README for why not etcd3."""
    import pyetcd

    host, _, port = endpoint.removeprefix("http://").rpartition(":")
    return pyetcd.client(host=host or "127.0.0.1", port=int(port or 2379), timeout=timeout)


def one_row(engine: Engine, query: str, params: Mapping[str, object] | None = None):
    """The one row a query returns, on an engine of its own that is disposed of afterwards."""
    try:
        with engine.connect() as conn:
            return conn.execute(text(query), dict(params or {})).one()
    finally:
        engine.dispose()
