"""What `lab scan` reports: typed values for each lock it looked at, never strings to be parsed again.

A result says where (the line in the scanned code, and the calls down to the statement), which lock (session,
transaction-level, row, or MariaDB's named lock), the connection it ran on and that connection's transaction mode as
far as the code shows it, and a status: a finding (one of the post's two bugs), fine, or unknown with why. The
evidence from the lab's committed reference is attached afterwards (lab/scan/evidence.py), so the analysis itself
never reads a run.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from lab.declarations.described_enum import DescribedStrEnum
from lab.declarations.post_role import PostRole


class Status(DescribedStrEnum):
    """What the scanner concluded about one lock on one connection."""

    FINDING = ("finding", "one of the post's two bugs, shown by the code")
    FINE = ("fine", "looked at: this lock, taken this way, does not have either bug")
    UNKNOWN = ("unknown", "the code does not show enough to decide; the result says why")
    NOT_JUDGED = ("not_judged", "a lock of another server (MariaDB's GET_LOCK), shown so a reader sees it was seen")


class Bug(DescribedStrEnum):
    """The post's two bugs; the first in its two forms (cases A and D)."""

    LEFT_OPEN = ("left_open", "bug 1 (case A): a session lock whose connection is left idle in the transaction the "
                              "lock's statement opened, so idle_in_transaction_session_timeout ends the session and "
                              "the lock")
    REOPENED = ("reopened", "bug 1 (case D): the lock's transaction was committed, then another statement on the "
                            "lock's connection opened a new one and left it open")
    RELEASE_FALSE_IGNORED = ("release_false_ignored", "bug 2: pg_advisory_unlock's answer is never read, so a false "
                                                      "(the lock was already gone) passes as a clean release")
    RELEASE_ERROR_SWALLOWED = ("release_error_swallowed", "bug 2: the release's exception is caught and not raised "
                                                          "again, so a release on a dead session passes as a clean one")

    @property
    def number(self) -> int:
        """1 for the lost lock, 2 for the release that lies."""
        return 1 if self in (Bug.LEFT_OPEN, Bug.REOPENED) else 2


class LockKind(DescribedStrEnum):
    """Which kind of lock a statement takes."""

    SESSION = ("session", "a session-level advisory lock: held until unlocked or until the session ends")
    TRANSACTION = ("transaction", "a transaction-level advisory lock: ends with its transaction, with the writes")
    ROW = ("row", "a row lock (SELECT ... FOR UPDATE / FOR SHARE): ends with its transaction")
    UNLOCK = ("unlock", "a release of a session-level advisory lock")
    MARIADB_NAMED = ("mariadb_named", "MariaDB's GET_LOCK: a named lock of its session")


class TxMode(DescribedStrEnum):
    """How a connection treats transactions, as far as the code shows it."""

    AUTOBEGIN = ("autobegin", "the driver opens a transaction before the first statement and keeps it open until a "
                              "commit or rollback (psycopg2's and psycopg's default, SQLAlchemy's autobegin)")
    AUTOCOMMIT = ("autocommit", "every statement commits on its own: no transaction stays open between statements")
    UNKNOWN = ("unknown", "the code does not show it; the connection says why")


class Driver(DescribedStrEnum):
    """Which client made the connection."""

    PSYCOPG2 = ("psycopg2", "psycopg2.connect()")
    PSYCOPG = ("psycopg", "psycopg 3's connect()")
    ASYNCPG = ("asyncpg", "asyncpg.connect(): no transaction unless the code opens one")
    SQLALCHEMY = ("sqlalchemy", "a SQLAlchemy Connection or Session")
    SQLALCHEMY_ASYNC = ("sqlalchemy_async", "SQLAlchemy's asyncio Connection or Session")
    DJANGO = ("django", "Django's database connection")
    UNKNOWN = ("unknown", "a connection the scanner could not trace to the call that made it")


@dataclass(frozen=True, order=True)
class Site:
    """A place in a source file: its path as the scanner read it, its line and column (1-based line)."""

    path: str
    line: int
    col: int = 0

    def __str__(self) -> str:
        return self.shown(Path.cwd())

    def shown(self, root: Path | None = None) -> str:
        """path:line, the path relative to root when it lies under it."""
        path = Path(self.path)
        if root is not None:
            try:
                path = path.resolve().relative_to(root.resolve())
            except ValueError:
                pass
        return f"{path}:{self.line}"


@dataclass(frozen=True)
class Connection:
    """The connection a statement ran on: who made it and where, and its transaction mode then, with why."""

    driver: Driver
    made_at: Site | None
    mode: TxMode
    why: str  # where the mode comes from: "psycopg2.connect() at x.py:3: autocommit off (its default)"
    in_block: bool = False  # inside an explicit transaction block (with conn.begin(), transaction.atomic())
    dialect: str | None = None  # for SQLAlchemy: the DB-API driver its URL names ("psycopg2", "psycopg", "asyncpg")


@dataclass(frozen=True)
class Evidence:
    """A cell of the lab's committed reference: the backend that takes the lock the same way, under one fault."""

    run: str
    backend: str  # the matrix row: a backend, or backend@driver
    column: str  # the fault column's label
    mark: str  # the cell's mark as the report prints it (✗, ⚠, ○, ✓ ...)
    text: str  # the cell's words
    why_this_backend: str  # why this row is the one that takes the lock the same way


@dataclass(frozen=True)
class Result:
    """One lock statement (or release) on one connection, and what the scanner concluded."""

    status: Status
    site: Site  # where to look: the line in the scanned code that leads to the statement
    call: str  # the SQL function or library call: "pg_try_advisory_lock", "FOR UPDATE", "GET_LOCK"
    lock: LockKind
    why: str  # one or two sentences: what the code does, as the scanner followed it
    bug: Bug | None = None
    via: tuple[Site, ...] = ()  # the calls from `site` down to the statement itself (empty: the statement is at site)
    connection: Connection | None = None
    related: Site | None = None  # the other line that matters: the statement that reopened, the handler that swallowed
    fix: str = ""
    library: str | None = None  # the installed distribution whose code runs the statement, if not the scanned code
    method: PostRole | None = None  # which of the post's methods the code turned out to be, where it is one
    assumed: tuple[str, ...] = ()  # what the scan took as given on the way (an option left at its default)
    owners: tuple[str, ...] = ()  # the scanned functions and classes whose code reached it
    evidence: tuple[Evidence, ...] = field(default=())

    @property
    def statement(self) -> Site:
        """The line of the SQL statement itself."""
        return self.via[-1] if self.via else self.site

    def key(self) -> tuple:
        """Two results with the same key say the same thing about the same lock: the scanner keeps one."""
        made = self.connection.made_at if self.connection else None
        return (self.site, self.via, self.call, self.status, self.bug, made, self.related)

    def with_owners(self, owners: tuple[str, ...]) -> Result:
        return replace(self, owners=tuple(sorted(set(self.owners) | set(owners))))


@dataclass(frozen=True)
class Warning_:
    """A file the scanner could not read, or a limit it reached: said, never a crash."""

    site: Site | None
    message: str


@dataclass(frozen=True)
class ScanReport:
    """Everything one `lab scan` saw: the results (findings first), the warnings, and how many files it read."""

    results: tuple[Result, ...]
    warnings: tuple[Warning_, ...]
    files: int
    reference: str | None = None  # the reference run the evidence comes from, or why there is none
    unreached: int = 0  # files from which no PostgreSQL client can be reached: not interpreted

    @property
    def findings(self) -> tuple[Result, ...]:
        return tuple(r for r in self.results if r.status is Status.FINDING)
