"""The one workload: per-company rows rebuilt as delete + insert in one transaction.

Everything lives in the lab's own schema, so a run against a user's database
touches nothing else. Named points (before_delete, after_delete, before_commit)
let scenarios and faults act at exact moments of a rebuild, not at guessed times.

The same table lives on PostgreSQL or on MariaDB (a backend's writes_to), the lab's schema being a database of
its own there, marked by its comment; the rows are made server-side on each (generate_series, MariaDB's
sequence engine), and the connection's dialect says which SQL a statement takes.
"""

from __future__ import annotations

import hashlib
import io
import re
import threading
from dataclasses import dataclass, field
from functools import cached_property
from typing import Callable

from sqlalchemy import text
from sqlalchemy.engine import Connection, Engine

from lab.errors import LabError
from lab.workload.statements import Statement

SCHEMA = "locklab"
SCHEMA_MARK = "created by locklab; dropped by locklab"  # the comment that tells the lab's schema from a namesake
COMPANY_SIZE = 250  # rows per company in the post's company_design runs


def no_point(name: str, conn=None) -> None:
    """The hook that does nothing at every named point."""
    return None


def _on_mariadb(engine: Engine | Connection) -> bool:
    return engine.dialect.name == "mariadb"


def ensure_schema(engine: Engine) -> bool:
    """Create the lab's schema, refusing to adopt a same-named schema that someone else owns; True when this call
    created it (so its caller owns its removal)."""
    if _on_mariadb(engine):
        return _ensure_database(engine)
    with engine.begin() as conn:
        exists = conn.execute(text("select obj_description(oid, 'pg_namespace') from pg_namespace "
                                   "where nspname = :s"), {"s": SCHEMA}).first()
        if exists is not None and exists[0] != SCHEMA_MARK:
            raise LabError(f"schema {SCHEMA!r} exists and was not created by locklab; "
                           f"the lab will not touch it")
        if exists is None:
            conn.execute(text(f"create schema {SCHEMA}"))
            conn.execute(text(f"comment on schema {SCHEMA} is '{SCHEMA_MARK}'"))
    return exists is None


def _ensure_database(engine: Engine) -> bool:
    """On MariaDB a schema is a database: the lab's, marked by its comment, as the PostgreSQL schema is."""
    with engine.begin() as conn:
        mark = conn.execute(text("select schema_comment from information_schema.schemata where schema_name = :s"),
                            {"s": SCHEMA}).first()
        if mark is not None and mark[0] != SCHEMA_MARK:
            raise LabError(f"database {SCHEMA!r} exists and was not created by locklab; the lab will not touch it")
        if mark is None:
            conn.execute(text(f"create database {SCHEMA} comment '{SCHEMA_MARK}'"))
    return mark is None


def drop_schema(engine: Engine) -> None:
    """Drop the lab's schema and everything in it, and nothing else."""
    if _on_mariadb(engine):
        with engine.begin() as conn:
            mark = conn.execute(text("select schema_comment from information_schema.schemata "
                                     "where schema_name = :s"), {"s": SCHEMA}).scalar()
            if mark == SCHEMA_MARK:
                conn.execute(text(f"drop database {SCHEMA}"))
        return
    with engine.begin() as conn:
        mark = conn.execute(text("select obj_description(oid, 'pg_namespace') from pg_namespace "
                                 "where nspname = :s"), {"s": SCHEMA}).scalar()
        if mark == SCHEMA_MARK:
            conn.execute(text(f"drop schema {SCHEMA} cascade"))


def table_name(label: str) -> str:
    """A safe, schema-qualified table name derived from a trial label."""
    # Identifiers stop at 63 bytes: keep a readable tail and a hash that keeps names distinct.
    slug = re.sub(r"[^a-z0-9]+", "_", label.lower()).strip("_")[-36:].strip("_")
    digest = hashlib.sha1(label.encode()).hexdigest()[:8]
    return f"{SCHEMA}.rows_{digest}_{slug}"


@dataclass
class CompanyTable:
    """One company_rows table: (company_id, run_id, n), indexed on company_id."""

    name: str
    split_insert_at: int | None = None  # insert rows 1..k and k+1..N in two statements

    def create(self, engine: Engine, index: bool = True) -> None:
        with engine.begin() as conn:
            conn.execute(text(f"drop table if exists {self.name}"))
            if _on_mariadb(engine):  # InnoDB: row locks and transactions, as the rebuild needs
                conn.execute(text(f"create table {self.name} (company_id int not null, run_id varchar(200) not null, "
                                  f"n int not null{', index (company_id)' if index else ''}) engine=InnoDB"))
                return
            conn.execute(text(f"create table {self.name} (company_id int not null, "
                              f"run_id text not null, n int not null)"))
            if index:
                conn.execute(text(f"create index on {self.name} (company_id)"))

    def seed(self, engine: Engine, company: int, rows: int = COMPANY_SIZE, run_id: str = "seed") -> None:
        with engine.begin() as conn:
            self.insert(conn, company, rows, run_id)

    def fill(self, engine: Engine, companies, rows: int, run_id: str = "seed") -> None:
        """Seed many companies at once, server-side, in one statement (no client-side rows)."""
        companies = list(companies)
        if _on_mariadb(engine):
            with engine.begin() as conn:
                for company in companies:
                    self.insert(conn, company, rows, run_id)
                conn.execute(text(f"analyze table {self.name}"))
            return
        with engine.begin() as conn:
            conn.execute(text(f"insert into {self.name} (company_id, run_id, n) "
                              f"select c, :r, g from unnest(cast(:cs as int[])) c, generate_series(1, :rows) g"),
                         {"cs": companies, "r": run_id, "rows": rows})
            conn.execute(text(f"analyze {self.name}"))

    @cached_property
    def _delete(self) -> Statement:
        return Statement(f"delete from {self.name} where company_id = :c")

    @cached_property
    def _insert(self) -> Statement:
        return Statement(f"insert into {self.name} (company_id, run_id, n) "
                         f"select :c, :r, g from generate_series(:first, :rows) g")

    def insert(self, conn: Connection, company: int, rows: int, run_id: str, first: int = 1) -> None:
        if _on_mariadb(conn):  # the sequence engine's seq_A_to_B table has the rows A..B (ints: nothing else gets in)
            if first > rows:  # seq_5_to_1 counts down, where generate_series(5, 1) is empty
                return
            Statement(f"insert into {self.name} (company_id, run_id, n) select :c, :r, seq "
                      f"from {SCHEMA}.seq_{int(first)}_to_{int(rows)}").run(conn, {"c": company, "r": run_id})
            return
        self._insert.run(conn, {"c": company, "r": run_id, "rows": rows, "first": first})

    def copy_in(self, conn: Connection, company: int, rows: int, run_id: str) -> None:
        """The same rows as insert(), sent with COPY FROM STDIN, one company at a time."""
        data = io.StringIO("".join(f"{company}\t{run_id}\t{n}\n" for n in range(1, rows + 1)))
        if _on_mariadb(conn):
            raise LabError("COPY is PostgreSQL's: a MariaDB table is filled by insert()")
        dbapi = conn.connection.dbapi_connection
        if dbapi is None:  # SQLAlchemy detached it: the connection was closed or invalidated
            raise RuntimeError("COPY needs the driver's connection, and this one has none")
        cursor = dbapi.cursor()
        sql = f"copy {self.name} (company_id, run_id, n) from stdin"
        try:
            if hasattr(cursor, "copy_expert"):  # psycopg2
                cursor.copy_expert(sql, data)
            else:  # psycopg 3 (a library's own connection, django-pglock's): COPY through its copy() block
                with cursor.copy(sql) as copy:
                    copy.write(data.getvalue())
        finally:
            cursor.close()

    def rebuild(self, conn: Connection, company: int, rows: int, run_id: str,
                point=no_point, use_copy: bool = False) -> int:
        """Delete the company's rows and insert fresh ones, in the caller's transaction.

        Returns how many rows the delete removed (0 means it missed a concurrent rebuild).
        """
        point("before_delete", conn)
        deleted = self._delete.run(conn, {"c": company})
        point("after_delete", conn)
        if self.split_insert_at and not use_copy:
            # Two statements, so a fault can land between row k and row k+1 ('mid_insert').
            self.insert(conn, company, self.split_insert_at, run_id)
            point("mid_insert", conn)
            self.insert(conn, company, rows, run_id, first=self.split_insert_at + 1)
        else:
            (self.copy_in if use_copy else self.insert)(conn, company, rows, run_id)
        point("before_commit", conn)
        return deleted

    def count(self, conn: Connection, company: int) -> int:
        return conn.execute(text(f"select count(*) from {self.name} where company_id = :c"),
                            {"c": company}).scalar_one()

    def runs_in(self, conn: Connection, company: int) -> list[str]:
        """Which runs' rows the company holds now: more than one means two rebuilds merged."""
        return list(conn.execute(text(f"select distinct run_id from {self.name} "
                                      f"where company_id = :c order by 1"), {"c": company}).scalars())


@dataclass
class Observer:
    """Polls a company's row count from its own session and keeps every distinct value seen."""

    engine: Engine
    table: CompanyTable
    company: int
    interval: float = 0.02
    seen: list[int] = field(default_factory=list)
    on_change: Callable[[int, int], None] | None = None  # (company, count), e.g. into a history
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> "Observer":
        self._thread = threading.Thread(target=self._poll, name="observer", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)

    def _poll(self) -> None:
        with self.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            while True:
                stopping = self._stop.is_set()  # one last look after the trial ends: the final state
                count = self.table.count(conn, self.company)
                if not self.seen or self.seen[-1] != count:
                    self.seen.append(count)
                    if self.on_change is not None:
                        self.on_change(self.company, count)
                if stopping:
                    return
                self._stop.wait(self.interval)
