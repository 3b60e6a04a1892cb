"""MariaDB from the operating system's packages, run by the lab on 127.0.0.1 in its temp dir, with a random password.

Debian's `mariadb-server` (10.11) ships `mariadbd` and `mariadb-install-db`; the lab makes a data directory of its
own with the second and runs the first on a free port, dying with the lab (its parent-death signal: mariadbd is
one process, its sessions are threads), never the system service. The superuser gets a random password over the
server's own socket at first start, so no password reaches a command line or a file; clients then come over TCP
as `root@127.0.0.1`. Where the package is missing, every cell that needs MariaDB says *does not run* with the
install line.

The server log is kept and read: MariaDB writes "Aborted connection N ... (Got timeout reading communication
packets)" for every session an idle guard ended (log_warnings 2, its default), which is how a guard's strike is
confirmed, as PostgreSQL's "terminating connection due to idle-in-transaction timeout" is.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import signal
import subprocess
from pathlib import Path

from lab.errors import ServiceError
from lab.servers.embedded import OneProcess
from lab.servers.processes import free_port, on_a_free_port, spawn, stop, wait_ready

MISSING = "mariadb-server not installed (apt-get install mariadb-server)"
# PyMySQL is a base dependency; an environment that lacks it anyway (installed without dependencies, or uninstalled
# since) gets this line in every MariaDB cell instead of a server that cannot even be asked whether it is ready.
NO_DRIVER = "PyMySQL not installed (pip install PyMySQL)"
# Where to look for mariadbd and mariadb-install-db (a PATH-style list of folders); set empty, the lab finds no
# MariaDB, as on a machine without the package: how a test checks that case where it is installed.
SEARCH_PATH_VARIABLE = "LAB_MARIADB_SEARCH_PATH"
SEARCH_PATH = "/usr/sbin:/usr/bin"  # where Debian puts mariadbd and mariadb-install-db
# As many sessions as the lab's PostgreSQL allows (lab/servers/postgres/server.py): trials run many at once.
MAX_CONNECTIONS = 600
USER = "root"
# A small server that starts in seconds: a 32 MB buffer pool, an 8 MB redo log (the default 96 MB would be most of
# the data directory), no binary log, no name lookups (a client is its address, 127.0.0.1).
SERVER_FLAGS = ("--skip-log-bin", "--skip-name-resolve", "--innodb-buffer-pool-size=32M",
                "--innodb-log-file-size=8M", f"--max-connections={MAX_CONNECTIONS}", "--log-warnings=2")
INSTALL_TIMEOUT = 120


def find_mariadb(path: str | None = None) -> tuple[str, str] | None:
    """(mariadbd, mariadb-install-db) of an installed MariaDB, or None when either is missing.

    By default path is $LAB_MARIADB_SEARCH_PATH when set (empty: nowhere), else /usr/sbin:/usr/bin."""
    if path is None:
        path = os.environ.get(SEARCH_PATH_VARIABLE, SEARCH_PATH)
    if not path:
        return None
    server, install = shutil.which("mariadbd", path=path), shutil.which("mariadb-install-db", path=path)
    return None if server is None or install is None else (server, install)


def missing() -> str | None:
    """The one line for a machine without MariaDB (MISSING) or without its driver (NO_DRIVER), or None when both
    are there: the lab starts no MariaDB it could not talk to."""
    if find_mariadb() is None:
        return MISSING
    return None if importlib.util.find_spec("pymysql") is not None else NO_DRIVER


def aborted_connections(log_path: Path | None, connection_id: int | None) -> list[str]:
    """What the server log says about the end of one session: the reason in parentheses of each of its
    "Aborted connection N to db: ... (REASON)" lines ("Got timeout reading communication packets" for a session
    an idle guard ended). Empty when the log cannot be read or says nothing of it."""
    if log_path is None or connection_id is None:
        return []
    try:
        text = log_path.read_text(errors="replace")
    except OSError:
        return []
    return re.findall(rf"\[Warning\] Aborted connection {int(connection_id)} to db: .*\(([^()]*)\)\s*$", text,
                      flags=re.MULTILINE)


class EmbeddedMariaDB(OneProcess):
    """One mariadbd on 127.0.0.1, its data, socket and log under root/name; superuser root with a random password.

    It keeps its data across restart() (InnoDB tables, committed rows); every session ends with the process, and
    every GET_LOCK with its session."""

    name = "mariadb"

    def __init__(self, root: Path, name: str = "mariadb", *, install: tuple[str, str] | None = None,
                 password: str | None = None):
        from lab.servers.embedded import new_password

        found = install or find_mariadb()
        if found is None:
            raise ServiceError(MISSING)
        self.server, self.install_db = found
        self.root = root / name
        self.data = self.root / "data"
        self.socket = self.root / "mariadb.sock"  # the superuser's first way in, before it has a password
        self.log_path = self.root / "server.log"
        # Its temporary tables in a folder of its own: at start a MariaDB removes every '#sql' file in its tmpdir, so
        # two sharing /tmp remove each other's (4 of 24 mariadb-install-db run 6 at a time failed that way here,
        # "Unknown table 'mysql.tmp_user_sys'", and so did a full run's trial).
        self.tmpdir = self.root / "tmp"
        self.port = free_port()
        self.password = password or new_password()
        self.proc: subprocess.Popen | None = None
        self.as_root = os.geteuid() == 0  # mariadbd refuses root unless told --user=root

    @property
    def url(self) -> str:
        """The address a client is given: PyMySQL through SQLAlchemy's MariaDB dialect, no default database."""
        return f"mariadb+pymysql://{USER}:{self.password}@127.0.0.1:{self.port}/"

    def argv(self) -> list[str]:
        user = ["--user=root"] if self.as_root else []
        return [self.server, "--no-defaults", f"--datadir={self.data}", f"--socket={self.socket}",
                f"--port={self.port}", "--bind-address=127.0.0.1", f"--log-error={self.log_path}",
                f"--pid-file={self.root / 'mariadbd.pid'}", f"--tmpdir={self.tmpdir}", *user, *SERVER_FLAGS]

    def start(self) -> None:
        """Make the data directory on first start (and give root its password), then run the server until it
        answers over TCP; a port another process took meanwhile gets a new one."""
        first = not (self.data / "mysql").is_dir()
        if first:
            self.install()
        on_a_free_port(self, lambda: self._start(first))

    def _start(self, first: bool) -> None:
        self.tmpdir.mkdir(parents=True, exist_ok=True)
        logged = self.log_path.stat().st_size if self.log_path.exists() else 0
        self.proc = spawn(self.argv(), self.root / "stdout.log", cwd=self.root)
        try:
            if first:
                wait_ready(self._set_password, self.proc, "embedded MariaDB", self.log_path)
            wait_ready(self.version, self.proc, "embedded MariaDB", self.log_path)
        except ServiceError as exc:
            stop(self.proc, signal.SIGKILL)
            self.proc = None
            said = self.log_path.read_bytes()[logged:].decode(errors="replace") if self.log_path.exists() else ""
            if "Address already in use" in said or "Can't start server: Bind" in said:
                raise ServiceError(f"embedded MariaDB: its port {self.port} was taken before it was listening") \
                    from None
            raise exc

    def install(self) -> None:
        """mariadb-install-db into an empty data directory: the system tables, no test database."""
        self.tmpdir.mkdir(parents=True, exist_ok=True)
        user = ["--user=root"] if self.as_root else []
        argv = [self.install_db, "--no-defaults", f"--datadir={self.data}", "--auth-root-authentication-method=normal",
                "--skip-test-db", "--skip-name-resolve", "--innodb-log-file-size=8M", f"--tmpdir={self.tmpdir}",
                *user]
        result = subprocess.run(argv, capture_output=True, text=True, timeout=INSTALL_TIMEOUT, cwd=self.root)
        if result.returncode != 0:
            tail = (result.stderr or result.stdout).strip().splitlines()[-1:]
            raise ServiceError(f"mariadb-install-db failed: {' '.join(tail)}")

    def _set_password(self) -> None:
        """Over the socket, as the password-less superuser install-db made: a password for root there, a
        root@127.0.0.1 with every privilege and the same password for TCP clients (the lab's way in after), and no
        other root."""
        import pymysql

        conn = pymysql.connect(unix_socket=str(self.socket), user=USER, connect_timeout=2)
        try:
            with conn.cursor() as cursor:
                cursor.execute("create user if not exists 'root'@'127.0.0.1'")
                cursor.execute("grant all privileges on *.* to 'root'@'127.0.0.1' with grant option")
                for host in ("127.0.0.1", "localhost"):
                    cursor.execute(f"alter user 'root'@'{host}' identified by %s", (self.password,))
                # install-db's other password-less roots (the host's name, ::1): nobody's way in
                cursor.execute("select host from mysql.user where user = 'root' and host not in ('127.0.0.1', "
                               "'localhost')")
                for (host,) in cursor.fetchall():
                    cursor.execute("drop user 'root'@%s", (host,))
            conn.commit()
        finally:
            conn.close()

    def version(self) -> str:
        """The server's version over TCP, as a client reaches it: the readiness check."""
        import pymysql

        conn = pymysql.connect(host="127.0.0.1", port=self.port, user=USER, password=self.password, connect_timeout=2)
        try:
            with conn.cursor() as cursor:
                cursor.execute("select version()")
                row = cursor.fetchone()
                assert row is not None  # select: one row
                return str(row[0])
        finally:
            conn.close()

    def stop(self) -> None:
        """SIGTERM: MariaDB's normal shutdown (sessions ended, InnoDB flushed); SIGKILL after the grace."""
        stop(self.proc, signal.SIGTERM)
        self.proc = None

    def restart(self) -> None:
        """Stop and start on the same port and data: every session ends, and every GET_LOCK with it."""
        self.stop()
        self._start(first=False)
