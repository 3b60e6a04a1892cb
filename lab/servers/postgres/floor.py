"""PostgreSQL's floor: a round trip and a committed one-row write, on an AUTOCOMMIT psycopg2 session."""

from __future__ import annotations

from sqlalchemy import text

from lab.servers.clients import pg_engine
from lab.servers.floor_probe import FloorProbe
from lab.servers.services import Services


class PostgresFloor(FloorProbe):
    service = "postgres"
    main = "select 1"

    def open(self, services: Services, key: str, commit_table: str) -> None:
        engine = pg_engine(services.pg(), {}, isolation_level="AUTOCOMMIT", pool_size=1)
        self._closers.append(engine.dispose)
        conn = engine.connect()
        self._closers.insert(0, conn.close)
        one, row = text("select 1"), {"n": key}
        conn.execute(text(f"create table if not exists {commit_table} (name text primary key, n bigint not null)"))
        upsert = text(f"insert into {commit_table} values (:n, 1) on conflict (name) do update "
                      f"set n = {commit_table}.n + 1")
        self.calls["select 1"] = lambda: conn.execute(one).scalar()
        # What a lock that writes a row pays at least: one committed (WAL-flushed) one-row write.
        self.calls["one-row commit"] = lambda: conn.execute(upsert, row)
