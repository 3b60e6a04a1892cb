"""MariaDB's floor: a round trip and a committed one-row write on an AUTOCOMMIT PyMySQL connection, as its locks'."""

from __future__ import annotations

from sqlalchemy import text

from lab.servers.floor_probe import FloorProbe
from lab.servers.mariadb.sql import mariadb_engine
from lab.servers.services import Services


class MariaDBFloor(FloorProbe):
    service = "mariadb"
    main = "select 1"

    def open(self, services: Services, key: str, commit_table: str) -> None:
        engine = mariadb_engine(services.mariadb(), isolation_level="AUTOCOMMIT", pool_size=1)
        self._closers.append(engine.dispose)
        conn = engine.connect()
        self._closers.insert(0, conn.close)
        one, row = text("select 1"), {"n": key[-200:]}
        conn.execute(text(f"create table if not exists {commit_table} (name varchar(200) primary key, "
                          f"n bigint not null) engine=InnoDB"))
        upsert = text(f"insert into {commit_table} values (:n, 1) on duplicate key update n = n + 1")
        self.calls["select 1"] = lambda: conn.execute(one).scalar()
        self.calls["one-row commit"] = lambda: conn.execute(upsert, row)
