"""What sits at a PostgreSQL DSN, read in one session and a second client, reading only (every transaction BEGIN
READ ONLY, SELECT and SHOW only).

It reads: whether a pooler sits in between and its mode (two clients, lab/preflight/pooler.py), whether the server
is a standby in recovery, whether this role's transactions are read-only by default and where that is set, the
idle guards a session gets and the settings per database and per role (pg_db_role_setting), the connections the
lab's role may still open, and whether that role may create the lab's schema. `judge` turns it into a Finding,
with the one line that says what to give where the lab cannot measure through this address.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

from sqlalchemy import text
from sqlalchemy.engine import URL, Connection, Engine
from sqlalchemy.exc import DBAPIError, OperationalError

from lab.errors import ServiceError
from lab.preflight.findings import Finding, Problem, Refusal, Sits
from lab.preflight.pooler import PoolerSeen, see_pooler
from lab.servers.clients import first_line, parse_pg_dsn, pg_engine, redact
from lab.servers.pooler_settings import refusal
from lab.servers.postgres.capacity import Capacity, capacity_on
from lab.servers.postgres.sql import ScopedSetting, ident, scoped_settings
from lab.stack.description import Guard, PoolMode
from lab.workload.table import SCHEMA, SCHEMA_MARK

GUARDS = ("idle_in_transaction_session_timeout", "idle_session_timeout")
READ_ONLY = "default_transaction_read_only"

STATE_SQL = ("select pg_is_in_recovery() as in_recovery, current_setting('server_version') as version, "
             "pg_postmaster_start_time()::text as started, "
             "current_user as role, current_database() as database, s.setting as read_only, s.source as read_only_source, "
             "has_database_privilege(current_database(), 'CREATE') as may_create, "
             "n.mark as schema_mark, n.usable as schema_usable "
             "from pg_settings s left join lateral (select obj_description(oid, 'pg_namespace') as mark, "
             "has_schema_privilege(oid, 'CREATE, USAGE') as usable from pg_namespace where nspname = :schema) n on true "
             "where s.name = :read_only")
# Where a standby streams from: the columns stay NULL for a role without pg_read_all_stats.
UPSTREAM_SQL = "select sender_host, sender_port from pg_stat_wal_receiver"
GUARD_SETTINGS_SQL = ("select name, setting, unit, source from pg_settings where name in "
                      "('idle_in_transaction_session_timeout', 'idle_session_timeout') order by name")


@dataclass(frozen=True)
class State:
    """The server, the role and the database as one session of theirs sees them."""

    version: str
    started: str  # pg_postmaster_start_time(): with the database, which server a pooler reaches
    role: str
    database: str
    in_recovery: bool
    read_only: bool  # default_transaction_read_only for a session of this role and database
    read_only_source: str  # pg_settings.source: default, configuration file, database, user, database user, client
    may_create: bool  # CREATE on the database: the right to create a schema
    schema_mark: str | None  # the lab's schema's comment, when a schema of its name exists
    schema_usable: bool | None  # CREATE and USAGE on that schema, when it exists
    upstream: str | None = None  # host:port a standby streams from, where the role may read it


@dataclass(frozen=True)
class PostgresLook:
    """Everything one look read, for the run (capacity, the finding), the doctor (the guards, the pooler) and
    meta.json."""

    finding: Finding
    state: State
    pooler: PoolerSeen
    guards: dict[str, Guard]
    scoped: tuple[ScopedSetting, ...]
    capacity: Capacity  # the connections the lab's role may still open, read before the second client


def look_engine(url: URL, application_name: str = "locklab-preflight") -> Engine:
    """An engine for looking: no pooling of its own (the second client must be a new connection) and nothing pinned
    (the look reads what the server gives a session, the doctor its timeouts too); `.execution_options(
    postgresql_readonly=True)` on it makes each transaction BEGIN READ ONLY. Its name goes in libpq's options as
    well as in the startup packet, since the options parameter is how a pooler such as PgBouncer shows itself: it
    refuses it (lab/servers/pooler_settings.py), and the settings then go with each transaction."""
    return pg_engine(url, {"application_name": application_name}, pin=False, poolclass=None,
                     connect_args={"application_name": application_name})


def look(dsn: URL | str, tries: int = 2) -> PostgresLook:
    """Look at the PostgreSQL a DSN reaches; ServiceError (one line, no password) when it cannot be reached, or when
    the server ended the look's session on each try (a 1 s idle guard on a loaded machine may end one)."""
    url = parse_pg_dsn(dsn) if isinstance(dsn, str) else dsn
    for attempt in range(1, tries + 1):
        engine = look_engine(url)
        try:
            reading = engine.execution_options(postgresql_readonly=True)
            try:
                conn = reading.connect()
            except Exception as exc:
                raise ServiceError(f"postgres at {redact(url)} is unreachable: {first_line(exc)}") from None
            with conn:
                return look_on(engine, reading, conn, url)
        except DBAPIError as exc:
            if isinstance(exc, OperationalError) and attempt < tries:
                continue
            raise ServiceError(f"postgres at {redact(url)}: the preflight could not read what sits there: "
                               f"{first_line(exc)}") from None
        finally:
            engine.dispose()
    raise AssertionError("unreachable: the last try returns or raises")


def look_on(engine: Engine, reading: Engine, conn: Connection, url: URL) -> PostgresLook:
    """The look on an open connection of `reading` (engine's read-only twin, which the second client comes from)."""
    started = time.monotonic()
    state = _state(conn)
    capacity = capacity_on(conn)  # before the second client: a session just closed may linger in pg_stat_activity
    conn.commit()
    pooler = see_pooler(reading, conn, url.host, url.port, refusal(engine))
    scoped = tuple(scoped_settings(conn))
    guards = guard_facts(conn, scoped)
    conn.rollback()
    finding = judge(state, pooler, scoped, guards, capacity, redact(url), time.monotonic() - started)
    return PostgresLook(finding, state, pooler, guards, scoped, capacity)


def _state(conn: Connection) -> State:
    row = conn.execute(text(STATE_SQL), {"schema": SCHEMA, "read_only": READ_ONLY}).mappings().one()
    upstream = None
    if row["in_recovery"]:
        sender = conn.execute(text(UPSTREAM_SQL)).first()
        if sender is not None and sender.sender_host:
            upstream = f"{sender.sender_host}:{sender.sender_port}"
    conn.commit()
    return State(row["version"], row["started"], row["role"], row["database"], bool(row["in_recovery"]),
                 row["read_only"] == "on",
                 row["read_only_source"], bool(row["may_create"]), row["schema_mark"], row["schema_usable"], upstream)


def guard_facts(conn: Connection, scoped: tuple[ScopedSetting, ...] | None = None) -> dict[str, Guard]:
    """Each idle guard as this session gets it (ms, its source), with the settings per database or role that may
    give another role's sessions of this database a value other than 0."""
    scoped = tuple(scoped_settings(conn, GUARDS)) if scoped is None else scoped
    elsewhere: dict[str, list[str]] = {name: [] for name in GUARDS}
    for setting in scoped:
        if setting.name in GUARDS and setting.here and setting.value.strip() not in ("0", "0ms", "0s", "0min"):
            elsewhere[setting.name].append(f"{setting.scope}: {setting.name}={setting.value}")
    return {r["name"]: Guard(int(r["setting"]), r["source"], tuple(elsewhere[r["name"]]))
            for r in conn.execute(text(GUARD_SETTINGS_SQL)).mappings()}


def _pooler_words(pooler: PoolerSeen) -> str:
    if pooler.queued:
        return "a pooler that kept a second client waiting for a server session (none to spare)"
    by = " (it refuses the options startup parameter, as PgBouncer does)" if pooler.kind and "PgBouncer" in \
        pooler.kind else ""
    mode = "a transaction pooler" if pooler.mode is PoolMode.TRANSACTION else "a pooler or proxy in session mode"
    return mode + by


MEANING = {
    Sits.PRIMARY: "a lock your jobs take here is the server's own, so each lock behaves as the lab measures it",
    Sits.STANDBY: "no job can take a lock here that a job on the primary would see (a standby's advisory locks are "
                  "its own) and no write is possible: your jobs' locks live on the primary",
    PoolMode.TRANSACTION: "a client's consecutive transactions run on server sessions other clients share, so a "
                          "session advisory lock stays behind on a session anyone may get; only a lock inside a "
                          "transaction (pg_advisory_xact_lock, a lease row) holds through it",
    PoolMode.SESSION: "each client keeps one server session while connected, so a session lock holds as on the "
                      "server itself, until the pooler resets or closes that session",
}


def judge(state: State, pooler: PoolerSeen, scoped: tuple[ScopedSetting, ...], guards: dict[str, Guard],
          capacity: Capacity | None, shown: str, seconds: float) -> Finding:
    """What sits at the address, what it means for a job's locks, and whether the lab refuses it (and why)."""
    facts = {"version": state.version, "role": state.role, "database": state.database,
             "in_recovery": state.in_recovery, "pool_mode": None if pooler.mode is None else pooler.mode.value,
             "pooler_evidence": list(pooler.evidence), READ_ONLY: f"{'on' if state.read_only else 'off'} "
                                                                 f"({state.read_only_source})",
             "may_create_schema": state.may_create, "guards": {name: asdict(g) for name, g in guards.items()},
             "set_per_database_or_role": [f"{s.scope}: {s.name}={s.value}" for s in scoped],
             "capacity": None if capacity is None else capacity.as_dict()}
    if state.upstream:
        facts["upstream"] = state.upstream
    server = f"PostgreSQL {state.version}"
    if pooler.queued or pooler.mode is PoolMode.TRANSACTION:
        what = f"{_pooler_words(pooler)} in front of {server}"
        return Finding("postgres", shown, Sits.POOLER, what, MEANING[PoolMode.TRANSACTION], PoolMode.TRANSACTION,
                       Refusal(Problem.TRANSACTION_POOLER,
                               f"is {what} (two clients' transactions shared server sessions): the lab's session "
                               "locks and the settings it pins per session do not hold through it, so its cells "
                               "would measure the pooler, not the locks they name",
                               "the database's own address with --pg-dsn, and this pooler with --pg-pooler-dsn "
                               "(the pooler scenario runs every lock through it)"), facts=facts, seconds=seconds)
    notes: tuple[str, ...] = ()
    sits, pool_mode = Sits.PRIMARY, None
    what = f"{server} itself, a primary (not in recovery)"
    meaning = MEANING[Sits.PRIMARY]
    if pooler.mode is PoolMode.SESSION:
        sits, pool_mode = Sits.POOLER, PoolMode.SESSION
        what, meaning = f"{_pooler_words(pooler)} in front of {server}", MEANING[PoolMode.SESSION]
        notes = (f"{what}: each client keeps its own server session, so the run goes on through it",)
    if state.in_recovery:
        upstream = f", streaming from {state.upstream}" if state.upstream else ""
        what = (f"a hot standby in recovery ({server}, pg_is_in_recovery() = true{upstream})" if sits is Sits.PRIMARY
                else f"{_pooler_words(pooler)} in front of a hot standby in recovery ({server}{upstream})")
        return Finding("postgres", shown, Sits.STANDBY, what, MEANING[Sits.STANDBY], pool_mode,
                       Refusal(Problem.STANDBY, f"is {what}: no lock can be taken or row written there",
                               "the primary's address with --pg-dsn"),
                       notes, facts, seconds)
    refused = _refused_by_role(state, scoped)
    return Finding("postgres", shown, sits, what, meaning, pool_mode, refused, notes, facts, seconds)


def _refused_by_role(state: State, scoped: tuple[ScopedSetting, ...]) -> Refusal | None:
    """A read-only default, a schema of the lab's name it did not create, or no right to create or use its own."""
    role, database = ident(state.role), ident(state.database)
    if state.read_only:
        where, undo = _read_only_where(state, scoped)
        return Refusal(Problem.READ_ONLY_DEFAULT,
                       f"makes every transaction of role {role} read-only ({READ_ONLY} = on, {where}), and the lab "
                       f"writes its rows in a schema of its own",
                       f"a role whose transactions may write, or undo it: {undo}")
    if state.schema_mark is not None and state.schema_mark != SCHEMA_MARK:
        return Refusal(Problem.FOREIGN_SCHEMA, f"has a schema {SCHEMA} that the lab did not create (it lacks the "
                                               f"lab's comment), and the lab touches only its own",
                       "a database without it, or drop or rename that schema if it is a leftover of yours")
    if state.schema_mark is not None and not state.schema_usable:
        return Refusal(Problem.NO_CREATE, f"keeps the lab's schema {SCHEMA}, which role {role} may not use",
                       f"the role the grant it needs: GRANT USAGE, CREATE ON SCHEMA {SCHEMA} TO {role}")
    if state.schema_mark is None and not state.may_create:
        return Refusal(Problem.NO_CREATE,
                       f"does not let role {role} create the lab's schema {SCHEMA} in database {database} "
                       "(no CREATE on the database)",
                       f"the role the grant it needs: GRANT CREATE ON DATABASE {database} TO {role} (the lab works "
                       f"only in schema {SCHEMA}, which it creates and drops), or a role that has it")
    return None


def _read_only_where(state: State, scoped: tuple[ScopedSetting, ...]) -> tuple[str, str]:
    """Where the read-only default comes from, and the statement that undoes it."""
    role = ident(state.role)
    setting = next((s for s in scoped if s.name == READ_ONLY and s.here and s.mine
                    and s.value.strip().lower() in ("on", "true", "1", "yes")), None)
    if state.read_only_source in ("user", "database", "database user") and setting is not None:
        statement = setting.statement
        set_by = f"set by {statement} = {setting.value}"
        return set_by, statement.replace(f" SET {READ_ONLY}", f" RESET {READ_ONLY}")
    if state.read_only_source == "configuration file":
        return ("set in postgresql.conf or by ALTER SYSTEM",
                f"ALTER ROLE {role} IN DATABASE {ident(state.database)} SET {READ_ONLY} = off")
    return f"source: {state.read_only_source}", f"ALTER ROLE {role} SET {READ_ONLY} = off"


POOLER = "postgres pooler"  # the finding's service: --pg-pooler-dsn is no lock service, but a way to one


def look_pooler(url: URL, database: PostgresLook) -> Finding:
    """The user's pooler (--pg-pooler-dsn): a pooler, in front of the same server and database as --pg-dsn (the
    pooler scenario watches its sessions through the database's own address), in a mode the scenario has a column
    for."""
    looked = look(url)
    state, finding, shown = looked.state, looked.finding, redact(url)
    facts = {**finding.facts, "behind": f"PostgreSQL {state.version} started {state.started}, database {state.database}"}
    mode = looked.pooler.mode
    if mode is None or mode is PoolMode.NONE:
        what = "not a pooler: two clients each kept a server session of their own, on the port the address names" \
            if mode is PoolMode.NONE else "a pooler that kept a second client waiting (no server session to spare)"
        return Finding(POOLER, shown, Sits.PRIMARY if mode else Sits.POOLER, what, finding.meaning, refusal=Refusal(
            Problem.NOT_A_POOLER, f"is {what}", "your pooler's address with --pg-pooler-dsn (one that can lend "
                                                      "a second client a server session), or leave the flag out"),
                       facts=facts, seconds=finding.seconds)
    direct = database.state
    if (state.started, state.database) != (direct.started, direct.database):
        return Finding(POOLER, shown, Sits.POOLER, finding.what, finding.meaning, mode, Refusal(
            Problem.ANOTHER_DATABASE, f"reaches database {state.database} of a server started {state.started}, not "
                                        f"--pg-dsn's (database {direct.database}, started {direct.started})",
            "a pooler in front of --pg-dsn's database: the lab watches the sessions it lends through that address"),
                       facts=facts, seconds=finding.seconds)
    return Finding(POOLER, shown, Sits.POOLER, finding.what, finding.meaning, mode,
                   notes=(f"{POOLER} at {shown}: {finding.what}; the pooler scenario's {mode.value} pooling column "
                          f"runs every lock through it",), facts=facts, seconds=finding.seconds)
