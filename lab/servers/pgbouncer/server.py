"""PgBouncer from the operating system's packages, started by the lab in front of a PostgreSQL whose password it knows.

A transaction pooler is where session advisory locks break in production. The lab runs one on
127.0.0.1 and a free port with its own config, in session or transaction pool mode, with a small
server pool and room for more clients, so that transactions really move between server sessions.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

from sqlalchemy.engine import URL

from lab.errors import ServiceError
from lab.servers.postgres.server import POSTGRES_OS_USER
from lab.servers.processes import free_port, spawn, stop, wait_ready

MISSING = "pgbouncer not installed (apt-get install pgbouncer)"
SEARCH_AFTER_PATH = "/usr/sbin"  # Debian installs it there, outside an unprivileged user's PATH
# Where to look instead of PATH then /usr/sbin (a PATH-style list); set empty, the lab finds no pgbouncer,
# as on a machine without it: how a test checks that case where pgbouncer is installed.
SEARCH_PATH_VARIABLE = "LAB_PGBOUNCER_SEARCH_PATH"
POOL_MODES = ("session", "transaction")


def find_pgbouncer(path: str | None = None) -> str | None:
    """The pgbouncer binary on path, or None when it is not installed there.

    By default path is $LAB_PGBOUNCER_SEARCH_PATH when set (empty: nowhere), else PATH then /usr/sbin:
    the variable lets a run be told where to look, or to behave as if pgbouncer were not installed."""
    if path is None:
        path = os.environ.get(SEARCH_PATH_VARIABLE)
    if path is None:
        path = os.pathsep.join(p for p in (os.environ.get("PATH", ""), SEARCH_AFTER_PATH) if p)
    return shutil.which("pgbouncer", path=path) if path else None


def _quoted(value: str) -> str:
    """A value in auth_file syntax: double quotes, a quote inside doubled."""
    return '"' + value.replace('"', '""') + '"'


class PgBouncer:
    """One PgBouncer process in front of one PostgreSQL; a context manager that stops it.

    The server's user and password go into an auth_file (mode 0600, readable by PgBouncer's user
    alone, removed on stop), never onto a command line: PgBouncer authenticates its clients with
    that password (scram-sha-256) and logs in to the server with it. PgBouncer refuses to run as
    root, so as root it runs as os_user (by default the embedded server's), and it dies with the lab.
    """

    name = "pgbouncer"

    def __init__(self, root: Path, server: URL, pool_mode: str, *, pool_size: int = 2, max_clients: int = 100,
                 os_user: str | None = None, binary: str | None = None, wait_timeout_s: int = 20):
        """root: a folder every user can traverse (the run's temp dir); server: its URL, password included.
        wait_timeout_s: how long a client waits for a server session before PgBouncer refuses it, so a
        pool that a trial exhausted fails the trial instead of hanging it for PgBouncer's default 120 s."""
        if pool_mode not in POOL_MODES:
            raise ValueError(f"pool_mode must be one of {POOL_MODES}, not {pool_mode!r}")
        if server.password is None:
            raise ServiceError("PgBouncer needs the server's password for its auth_file")
        self.root, self.server, self.pool_mode = root, server, pool_mode
        self.pool_size, self.max_clients, self.wait_timeout_s = pool_size, max_clients, wait_timeout_s
        # PgBouncer refuses to run as root; as root it runs as the embedded server's unprivileged user.
        self.os_user = os_user if os_user is not None or os.geteuid() != 0 else POSTGRES_OS_USER
        self.binary = binary
        self.port = free_port()
        self.folder: Path | None = None
        self.log_path = root / f"pgbouncer-{self.port}.log"
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> URL:
        """The server's URL through this pooler: same user, password and database."""
        return self.server.set(host="127.0.0.1", port=self.port)

    @property
    def pids(self) -> list[int]:
        return [self.proc.pid] if self.proc is not None else []

    def start(self) -> "PgBouncer":
        binary = self.binary or find_pgbouncer()
        if binary is None:
            raise ServiceError(MISSING)
        try:
            self._start(binary)
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self, binary: str) -> None:
        user, password = self.server.username, self.server.password
        if user is None or password is None:  # __init__ refused a URL without a password
            raise ServiceError("PgBouncer needs the server's user and password for its auth_file")
        self.folder = folder = Path(tempfile.mkdtemp(prefix="pgbouncer-", dir=self.root))
        self._own(folder)
        auth_file = self._private_file(folder / "users.txt", f"{_quoted(user)} {_quoted(password)}\n")
        ini = self._private_file(folder / "pgbouncer.ini", self._config(auth_file))
        # Nothing to save on a pooler: SIGKILL when the lab dies, SIGTERM (immediate shutdown) on stop.
        self.proc = spawn([binary, str(ini)], self.log_path, user=self.os_user, cwd=self.folder)
        wait_ready(self._ping, self.proc, "PgBouncer", self.log_path)

    def _config(self, auth_file: Path) -> str:
        server_port = self.server.port or 5432
        return "\n".join([
            "[databases]",
            f"* = host={self.server.host} port={server_port}",
            "[pgbouncer]",
            "listen_addr = 127.0.0.1", f"listen_port = {self.port}",
            "unix_socket_dir =",  # TCP on loopback only
            "auth_type = scram-sha-256", f"auth_file = {auth_file}",
            f"pool_mode = {self.pool_mode}",
            f"default_pool_size = {self.pool_size}", "min_pool_size = 0", "reserve_pool_size = 0",
            f"max_client_conn = {self.max_clients}",
            f"query_wait_timeout = {self.wait_timeout_s}",
            "pidfile =", "logfile =",  # no pid file; the log goes to stderr, which spawn() keeps
            "admin_users =", "stats_users =",
            "", ""])

    def _private_file(self, path: Path, content: str) -> Path:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(content)
        self._own(path)
        return path

    def _own(self, path: Path) -> None:
        """Give path to PgBouncer's user, for its eyes only."""
        path.chmod(0o700 if path.is_dir() else 0o600)
        if self.os_user is not None:
            entry = pwd.getpwnam(self.os_user)
            os.chown(path, entry.pw_uid, entry.pw_gid)

    def _ping(self) -> int:
        import psycopg2

        with psycopg2.connect(host="127.0.0.1", port=self.port, user=self.server.username,
                              password=self.server.password, dbname=self.server.database or "postgres",
                              connect_timeout=2) as conn:
            with conn.cursor() as cur:
                cur.execute("select pg_backend_pid()")
                row = cur.fetchone()
                assert row is not None  # a select without a from: one row
                pid = row[0]
        conn.close()
        return pid

    def server_ports(self) -> set[int]:
        """Local ports of PgBouncer's connections to the server: how pg_stat_activity names its pool's sessions."""
        import psutil

        if self.proc is None:
            return set()
        server_port = self.server.port or 5432
        return {c.laddr.port for c in psutil.Process(self.proc.pid).net_connections(kind="tcp")
                if c.raddr and c.raddr.port == server_port}

    def stop(self) -> None:
        """Stop PgBouncer and remove its folder (the auth_file with it); idempotent."""
        stop(self.proc, signal.SIGTERM, grace=5)
        self.proc = None
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None

    def __enter__(self) -> "PgBouncer":
        return self if self.proc is not None else self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
