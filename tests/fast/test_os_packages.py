"""The one list of optional operating-system packages (.ci/os-packages): the table and install command of
docs/os-packages.md are that list, .ci/run reads it and names none by hand, and the lab's own lines for a
missing one match it."""

import re
from pathlib import Path

from tests import os_packages

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "os-packages.md"


def page_table() -> list[tuple[str, str]]:
    """docs/os-packages.md's rows of `| package | what it enables |`, in order."""
    text = PAGE.read_text()
    table = text.split("| package | what it enables |\n|---|---|\n", 1)[1].split("\n\n", 1)[0]
    return [re.fullmatch(r"\| `([^`]+)` \| (.*) \|", row).groups() for row in table.splitlines()]


def test_the_page_lists_exactly_the_packages_of_the_list_with_what_each_enables():
    assert all(p.binaries and p.enables for p in os_packages.packages().values())
    assert page_table() == [(p.name, p.enables) for p in os_packages.packages().values()]


def test_the_page_gives_the_one_command_that_installs_them_all():
    assert f"```sh\n{os_packages.install_command()}\n```" in PAGE.read_text()


def test_readme_links_the_page():
    assert "(docs/os-packages.md)" in (ROOT / "README.md").read_text()


def test_ci_installs_from_the_list_and_names_no_package_by_hand():
    """Its apt-get line names no package: they come from the list. (It runs what one installs: npm ci.)"""
    run = (ROOT / ".ci" / "run").read_text()
    assert "done < .ci/os-packages" in run
    code = [line for line in run.splitlines() if not line.lstrip().startswith("#")]
    installs = "\n".join(line for line in code if "apt-get" in line)
    assert "apt-get install" in installs and "need[@]" in installs
    assert not [name for name in os_packages.packages() if name in installs]


def test_the_labs_line_for_a_missing_package_is_the_lists():
    """The lab says its own 'does not run: ...' for pgbouncer and iproute2; the tests accept exactly that line."""
    from lab.servers import netns, slow_link
    from lab.servers.pgbouncer import server as pgbouncer
    from lab.servers.zookeeper import server as zookeeper

    assert pgbouncer.MISSING == os_packages.not_installed("pgbouncer")
    assert netns.MISSING == os_packages.not_installed("iproute2")
    assert slow_link.MISSING == os_packages.not_installed("iptables")
    assert set(slow_link.TOOLS) == set(os_packages.packages()["iptables"].binaries)
    assert zookeeper.MISSING == os_packages.not_installed("zookeeper")
    from lab.servers.mariadb import server as mariadb

    assert mariadb.MISSING == os_packages.not_installed("mariadb-server")
    assert os_packages.not_installed("pgbouncer") == "pgbouncer not installed (apt-get install pgbouncer)"
    from lab.servers import fake_clock

    assert fake_clock.MISSING == os_packages.not_installed("libfaketime")


def test_one_line_names_every_missing_package_and_the_command_for_them(monkeypatch):
    monkeypatch.setattr(os_packages.OsPackage, "installed", lambda self: self.name == "pgbouncer")
    assert os_packages.missing() == [name for name in os_packages.packages() if name != "pgbouncer"]
    assert os_packages.missing()[:3] == ["iproute2", "postgresql-15", "redis-server"]
    assert os_packages.missing("pgbouncer", hidden={"pgbouncer"}) == ["pgbouncer"]
    assert os_packages.missing_line("pgbouncer") is None
    assert os_packages.missing_line("postgresql-15", "redis-server") == (
        "postgresql-15 and redis-server not installed (apt-get install postgresql-15 redis-server)")


def test_lab_pgbouncer_search_path_tells_the_lab_where_to_look_or_not_to(monkeypatch, tmp_path):
    """An executable file named pgbouncer (never run: this is where the lab looks, not a server)."""
    from lab.servers.pgbouncer.server import SEARCH_PATH_VARIABLE, find_pgbouncer

    binary = tmp_path / "pgbouncer"
    binary.write_text("")
    binary.chmod(0o755)
    monkeypatch.setenv(SEARCH_PATH_VARIABLE, str(tmp_path))
    assert find_pgbouncer() == str(binary)
    monkeypatch.setenv(SEARCH_PATH_VARIABLE, "")
    assert find_pgbouncer() is None
    assert find_pgbouncer(str(tmp_path)) == str(binary)  # an explicit path is the caller's, whatever the variable


def test_without_iptables_the_slow_network_cells_say_does_not_run_and_the_others_stay_n_a(monkeypatch, tmp_path):
    """The lab looks for iptables on PATH, then in /usr/sbin: with neither holding it (and the namespace's own needs
    met), every lease's cell says the list's line, and a lock without a lease keeps its own reason."""
    import backends
    from lab.servers import slow_link
    from scenarios.slow_network import SlowNetwork

    monkeypatch.setattr(slow_link, "namespace_unavailable", lambda: None)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(slow_link, "SEARCH_AFTER_PATH", str(tmp_path))
    specs = {s.backend: s.skip for s in SlowNetwork().plan([backends.load("redis"), backends.load("session")], "quick")}
    assert specs["redis"] == f"does not run: {os_packages.not_installed('iptables')}"
    assert "no lease" in specs["session"]


def test_lab_zookeeper_search_path_tells_the_lab_where_its_jars_are_or_that_there_are_none(monkeypatch, tmp_path):
    """A file named zookeeper.jar (never run: this is where the lab looks) beside java from PATH."""
    import shutil

    from lab.servers.services import not_installed
    from lab.servers.zookeeper.server import MISSING, SEARCH_PATH_VARIABLE, find_zookeeper

    (tmp_path / "zookeeper.jar").write_bytes(b"")
    monkeypatch.setenv(SEARCH_PATH_VARIABLE, str(tmp_path))
    if shutil.which("java") is not None:
        assert find_zookeeper() == (shutil.which("java"), [str(tmp_path / "zookeeper.jar")])
        assert not_installed("zookeeper") is None
    monkeypatch.setenv(SEARCH_PATH_VARIABLE, "")
    assert find_zookeeper() is None and not_installed("zookeeper") == MISSING
    assert not_installed("redis") is None  # the servers from pip wheels are always there
    monkeypatch.setenv("PATH", str(tmp_path))  # no java: the package's own dependency, so the same line
    assert find_zookeeper(str(tmp_path)) is None


def test_lab_mariadb_search_path_tells_the_lab_where_mariadbd_is_or_that_there_is_none(monkeypatch, tmp_path):
    """Two executable files named as MariaDB's (never run: this is where the lab looks, not a server)."""
    from lab.servers.mariadb.server import MISSING, SEARCH_PATH_VARIABLE, find_mariadb
    from lab.servers.services import not_installed

    for name in ("mariadbd", "mariadb-install-db"):
        (tmp_path / name).write_text("")
        (tmp_path / name).chmod(0o755)
    monkeypatch.setenv(SEARCH_PATH_VARIABLE, str(tmp_path))
    assert find_mariadb() == (str(tmp_path / "mariadbd"), str(tmp_path / "mariadb-install-db"))
    assert not_installed("mariadb") is None
    monkeypatch.setenv(SEARCH_PATH_VARIABLE, "")
    assert find_mariadb() is None and not_installed("mariadb") == MISSING
    (tmp_path / "mariadb-install-db").unlink()
    assert find_mariadb(str(tmp_path)) is None  # one of the two is not enough
