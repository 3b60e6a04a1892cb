"""A PostgreSQL primary and a streaming standby on loopback, from the run's own binaries, that can fail over.

The standby is made with pg_basebackup and streams from the primary through a loopback proxy
(lab/servers/proxy.py), so the lab can hold it back: while the replication link is blackholed the
primary goes on acknowledging commits the standby never receives, which is asynchronous
replication's gap made certain instead of rare. Synchronous mode sets synchronous_standby_names on
the primary alone, so the promoted standby, with no standby of its own, does not wait for one.

Clients use one multi-host URL with target_session_attrs=read-write and find the primary by
themselves after a failover, as libpq users do. The standby's primary_conninfo holds the
password (in its own data dir, 0600, the server user's), as `pg_basebackup -R` would write it.
"""

from __future__ import annotations

import os
import subprocess
import time
from decimal import Decimal
from pathlib import Path

from sqlalchemy import text
from sqlalchemy.engine import URL, Engine

from lab.errors import ServiceError
from lab.servers.clients import parse_pg_dsn, pg_engine
from lab.servers.postgres.server import EmbeddedPostgres
from lab.servers.postgres.template import DataTemplate
from lab.servers.proxy import BlackholeProxy, hold_back, started_link

CATCH_UP_WITHIN = 30.0  # seconds for the standby to replay what the primary has written
# Small servers: two of them per trial, several trials at once on two cores.
NODE_SETTINGS = {"shared_buffers": "16MB", "wal_keep_size": "64MB", "max_wal_senders": "4"}


class PostgresPair:
    """A primary and its standby; fail_over() crashes the primary and promotes the standby."""

    name = "postgres"

    def __init__(self, root: Path, bin_dir: Path, *, synchronous: bool = False, max_connections: int = 40,
                 template: DataTemplate | None = None):
        """template: the run's initdb'd data directory for the primary (lab/servers/postgres/template.py); None runs initdb."""
        self.root = root
        self.synchronous = synchronous
        primary_settings = dict(NODE_SETTINGS)
        if synchronous:  # every commit waits until the standby has flushed it
            primary_settings.update(synchronous_standby_names="*", synchronous_commit="on")
        self.primary = EmbeddedPostgres(root, bin_dir=bin_dir, name="primary", settings=primary_settings,
                                        max_connections=max_connections, template=template)
        self.standby = EmbeddedPostgres(root, bin_dir=bin_dir, name="standby", settings=NODE_SETTINGS,
                                        max_connections=max_connections, password=self.primary.password)
        self.link: BlackholeProxy | None = None  # the standby's replication connection passes here
        self.failed_over = False

    @property
    def pids(self) -> list[int]:
        return self.primary.pids + self.standby.pids

    @property
    def url(self) -> URL:
        """Both nodes in one URL; libpq connects to whichever accepts writes."""
        hosts = "&".join(f"host=127.0.0.1:{node.port}" for node in (self.primary, self.standby))
        return parse_pg_dsn(f"postgresql://postgres:{self.primary.password}@/postgres?{hosts}"
                            f"&target_session_attrs=read-write")

    def node_url(self, node: EmbeddedPostgres) -> URL:
        return parse_pg_dsn(node.dsn)

    def start(self) -> None:
        """Primary first, then the standby from its base backup; returns once the standby streams."""
        try:
            self.primary.start()
            self.link = BlackholeProxy("127.0.0.1", self.primary.port).start()
            make_standby(self.primary, self.standby, self._up_link().port)
            self.standby.start()
            self.wait_streaming()
        except BaseException:
            self.stop()
            raise

    def wait_streaming(self, within: float = CATCH_UP_WITHIN) -> None:
        """Until the primary shows the standby streaming (and, if synchronous, as its sync standby)."""
        engine = self.engine(self.primary)
        try:
            deadline = time.monotonic() + within
            while time.monotonic() < deadline:
                with engine.connect() as conn:
                    state = conn.execute(text("select state, sync_state from pg_stat_replication")).first()
                if state is not None and state.state == "streaming" and (
                        not self.synchronous or state.sync_state == "sync"):
                    return
                time.sleep(0.05)  # no event says a standby has connected: ask again
        finally:
            engine.dispose()
        raise ServiceError(f"the standby did not stream from the primary within {within:.0f} s")

    def engine(self, node: EmbeddedPostgres) -> Engine:
        """An AUTOCOMMIT engine on one node, for reading its state."""
        return pg_engine(self.node_url(node), isolation_level="AUTOCOMMIT", poolclass=None,
                         connect_args={"application_name": "locklab-cluster"})

    def wait_caught_up(self, within: float = CATCH_UP_WITHIN) -> None:
        """Until the standby has replayed everything the primary has written so far."""
        primary, standby = self.engine(self.primary), self.engine(self.standby)
        try:
            with primary.connect() as conn:
                target: str = conn.execute(text("select pg_current_wal_lsn()::text")).scalar_one()
            deadline = time.monotonic() + within
            while time.monotonic() < deadline:
                with standby.connect() as conn:
                    behind: Decimal = conn.execute(text("select pg_wal_lsn_diff(:t, pg_last_wal_replay_lsn())"),
                                                   {"t": target}).scalar_one()  # a numeric
                if behind <= 0:
                    return
                time.sleep(0.02)
        finally:
            primary.dispose()
            standby.dispose()
        raise ServiceError(f"the standby did not replay the primary's WAL within {within:.0f} s")

    def hold_back(self) -> int:
        """Blackhole the replication link: from now on the standby receives nothing. Returns the bytes
        the link had carried (0 would mean the standby never streamed through it)."""
        return hold_back(self._up_link())

    def _up_link(self) -> BlackholeProxy:
        return started_link(self.link, "the replication link")

    def lag(self) -> dict:
        """Where the primary's WAL is, and how far the standby has received and replayed it (bytes behind)."""
        primary, standby = self.engine(self.primary), self.engine(self.standby)
        try:
            with primary.connect() as conn:
                at = conn.execute(text("select pg_current_wal_lsn()::text")).scalar()
            with standby.connect() as conn:
                row = conn.execute(text("select pg_wal_lsn_diff(:a, pg_last_wal_receive_lsn())::bigint as received, "
                                        "pg_wal_lsn_diff(:a, pg_last_wal_replay_lsn())::bigint as replayed"),
                                   {"a": at}).one()
            return {"primary_lsn": at, "received_behind": int(row.received), "replayed_behind": int(row.replayed)}
        finally:
            primary.dispose()
            standby.dispose()

    def fail_over(self) -> None:
        """Crash the primary (immediate shutdown) and promote the standby, as an HA manager would."""
        self.primary.crash()
        engine = self.engine(self.standby)
        try:
            with engine.connect() as conn:
                promoted = conn.execute(text("select pg_promote(true, 30)")).scalar()
        finally:
            engine.dispose()
        if not promoted:
            raise ServiceError("the standby did not finish promotion within 30 s")
        self.failed_over = True

    def stop(self) -> None:
        """Stop both nodes and the link; idempotent."""
        for node in (self.standby, self.primary):
            node.stop()
        if self.link is not None:
            self.link.stop()
            self.link = None


def make_standby(primary: EmbeddedPostgres, standby: EmbeddedPostgres, link_port: int) -> None:
    """The standby's data directory from the primary's base backup, set to stream from it through link_port."""
    standby.root.mkdir(parents=True, exist_ok=True)
    standby._as_server_user(standby.root)
    argv = [str(standby.bin / "pg_basebackup"), "-D", str(standby.data),
            "-d", f"host=127.0.0.1 port={primary.port} user=postgres dbname=postgres",
            "-X", "stream", "-c", "fast", "--no-sync"]
    # The password goes in the environment, which only its own user and root can read, not argv.
    env = dict(os.environ, PGPASSWORD=primary.password)
    result = subprocess.run(argv, capture_output=True, text=True, user=standby.user, env=env, timeout=120)
    if result.returncode != 0:
        tail = (result.stderr or result.stdout).strip().splitlines()[-1:]
        raise ServiceError(f"pg_basebackup failed: {' '.join(tail)}")
    conninfo = (f"host=127.0.0.1 port={link_port} user=postgres password={primary.password} "
                f"application_name=standby")
    auto = standby.data / "postgresql.auto.conf"
    with open(auto, "a") as handle:
        handle.write(f"primary_conninfo = '{conninfo}'\n")
    (standby.data / "standby.signal").touch()
    for path in (auto, standby.data / "standby.signal"):
        standby._as_server_user(path)
        path.chmod(0o600)


def timeline(engine: Engine) -> int:
    """The timeline a server writes on now: the first eight hex digits of its current WAL file's name."""
    with engine.connect() as conn:
        name: str = conn.execute(text("select pg_walfile_name(pg_current_wal_lsn())")).scalar_one()
    return int(name[:8], 16)


def in_recovery(engine: Engine) -> bool:
    with engine.connect() as conn:
        return bool(conn.execute(text("select pg_is_in_recovery()")).scalar())
