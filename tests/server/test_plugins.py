"""Plugins: a package installed with pip and never named in the lab's code, a module given on the command line,
and broken plugins skipped with their reason."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lab.checkers.outcomes import does_not_run as cannot_work_here

from lab.servers.pgbouncer.server import SEARCH_PATH_VARIABLE
from tests import os_packages
from tests.server.helpers import shared_tmp

pytestmark = pytest.mark.server
PACKAGE = Path(__file__).parent / "plugin_package"


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory):
    """The demo plugin installed with pip into a folder of its own (the test's environment stays as it was)."""
    site = tmp_path_factory.mktemp("site")
    build = tmp_path_factory.mktemp("build")
    shutil.copytree(PACKAGE, build / "pkg")
    result = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site),
                             str(build / "pkg")], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return site


def lab(*args, site=None, cwd=None, tmp=None, env=None):
    env = {**os.environ, **(env or {})}
    if site is not None:
        env["PYTHONPATH"] = str(site)
    if tmp is not None:
        env["TMPDIR"] = str(tmp)
    return subprocess.run([sys.executable, "-m", "lab.cli", *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=300)


def test_an_installed_plugin_is_listed_and_broken_ones_are_named_with_the_reason(plugin_site):
    result = lab("list", site=plugin_site)
    assert result.returncode == 0, result.stderr
    assert "  demo_lock " in result.stdout
    assert "! broken_import" in result.stdout and "ModuleNotFoundError" in result.stdout
    assert "! broken_methods" in result.stdout and "missing acquire, held, rebuild, release" in result.stdout


def test_an_installed_plugin_runs_through_the_scenarios_and_broken_ones_do_not_stop_the_run(plugin_site, tmp_path):
    tmp = shared_tmp(tmp_path)
    try:
        result = lab("run", "--backend", "all", "--scenario", "cases", "--profile", "quick",
                     "--results", str(tmp_path / "r"), site=plugin_site, tmp=tmp)
        assert result.returncode == 0, result.stderr
        assert "demo_lock" in result.stdout and "broken" not in result.stdout
        named = lab("run", "--backend", "broken_methods", "--results", str(tmp_path / "r"), site=plugin_site)
        assert named.returncode == 2 and "broken plugin: missing" in named.stderr
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test_a_backend_module_from_the_command_line(tmp_path):
    (tmp_path / "my_lock.py").write_text(
        "from backends._session import SessionLockBackend\n\n"
        "class MyLock(SessionLockBackend):\n"
        "    name = 'my_lock'\n    summary = 'mine'\n    commit_after_acquire = True\n")
    tmp = shared_tmp(tmp_path)
    try:
        result = lab("run", "--backend-module", "my_lock:MyLock", "--backend", "my_lock", "--scenario",
                     "cases,pause", "--profile", "quick", "--results", str(tmp_path / "r"), cwd=tmp_path, tmp=tmp)
        assert result.returncode == 0, result.stderr
        assert "my_lock" in result.stdout and "held 1/1" in result.stdout and "error" not in result.stdout
        bad = lab("run", "--backend-module", "my_lock:Nothing", cwd=tmp_path)
        assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test_tooz_postgres_lock_is_the_posts_method_1(services, engines):
    """tooz takes its advisory lock on a default psycopg2 connection: the session idles in a transaction."""
    pytest.importorskip("tooz")
    from scenarios.cases import Cases
    from tests.server.helpers import trial_env

    m = Cases().run_trial(trial_env(services, engines, "cases", "tooz_pgsql", "idle_in_transaction",
                                    {"timeout_s": 1.0}))
    assert m["holder_state"] == "idle in transaction"
    assert [p["got"] for p in m["probes"]] == [False, True]
    assert m["server_said"] == "terminating connection due to idle-in-transaction timeout"
    assert m["release"].startswith("raised LockLost: tooz release failed: ToozError")  # what tooz told its caller


def docs_example() -> str:
    """The 'Write a backend' example, exactly as docs/write-a-backend.md shows it."""
    import re

    page = (Path(__file__).parents[2] / "docs" / "write-a-backend.md").read_text()
    return re.search(r"```python\n# my_lock.py\n(.*?)```", page, re.S).group(1)


def plugin_run(scenario: str, results: Path, cwd: Path, tmp: Path, *, hide_pgbouncer: bool) -> Path:
    """The docs example plugin run through `scenario` at the quick profile; its run folder.

    hide_pgbouncer: tell the lab to find no pgbouncer (LAB_PGBOUNCER_SEARCH_PATH empty), so that a machine
    which has it runs as one without it. Every trial has a result or a reason; none errored."""
    before = set(results.iterdir()) if results.exists() else set()
    env = {SEARCH_PATH_VARIABLE: ""} if hide_pgbouncer else {}
    run = lab("run", "--backend-module", "my_lock:MyLock", "--backend", "my_lock", "--scenario", scenario,
              "--profile", "quick", "--results", str(results), cwd=cwd, tmp=tmp, env=env)
    assert run.returncode == 0, run.stderr
    (folder,) = set(results.iterdir()) - before
    trials = read_trials(folder)
    assert not [t for t in trials if t["status"] == "error"], [t["reason"] for t in trials if t["status"] == "error"]
    return folder


def read_trials(folder: Path) -> list[dict]:
    """A run folder's trials, one dict per line of trials.jsonl."""
    import json

    return [json.loads(line) for line in (folder / "trials.jsonl").read_text().splitlines()]


def qualifying(cwd: Path) -> set[tuple[str, str]]:
    """Every (scenario, variant) whose declarations admit the docs example plugin here, chosen by declaration alone."""
    import scenarios
    from lab.declarations.registry import import_entry

    sys.path.insert(0, str(cwd))
    try:
        cls = import_entry("my_lock:MyLock")
    finally:
        sys.path.remove(str(cwd))
    return {(name, variant) for name in scenarios.names() for scenario in [scenarios.load(name)]
            if scenario.applies_to(cls) is None for variant in scenario.variants_in_profile(cls, "quick")
            if scenario.variant_skip(variant, cls) is None}


def landed(trials: list[dict], does_not_run: set[str]) -> tuple[set, set]:
    """The (scenario, variant) cells that ran, and those that did not run only because a package is missing here.

    A trial that says 'does not run' for any other reason fails the test: only a missing package excuses one."""
    ran = {(t["scenario"], t["variant"]) for t in trials if t["status"] == "ok"}
    skipped = [t for t in trials if t["status"] == "skipped" and cannot_work_here(t)]
    assert {t["reason"] for t in skipped} <= does_not_run, {t["reason"] for t in skipped} - does_not_run
    return ran, {(t["scenario"], t["variant"]) for t in skipped} - ran


def report_row(runs: list[Path], results: Path, cwd: Path, tmp: Path) -> list[str]:
    """The plugin's row of the matrix in the report of these runs (a later run's trial replaces an earlier one's)."""
    report = lab("report", *[f.name for f in runs], "--results", str(results), cwd=cwd, tmp=tmp)
    assert report.returncode == 0, report.stderr
    text = (runs[-1] / "REPORT.md").read_text()
    row = next(line for line in text.splitlines() if line.startswith("| my_lock |"))
    return [cell.strip() for cell in row.split("|")[2:-1]]


def assert_lands(row: list[str], excused: set) -> None:
    """No cell errored, and the only cells that did not run say 'does not run', none where nothing was excused.

    A matrix column may gather several variants (netdrop's three are one, the pooler's two), so excused cells bound
    the count; such a cell counts its variants ('does not run 2')."""
    assert not [cell for cell in row if "error" in cell], row
    not_run = [cell for cell in row if "not run" in cell]
    assert all(re.fullmatch(r"does not run( \d+)?", cell) for cell in not_run), row
    assert (0 < len(not_run) <= len(excused)) if excused else not not_run, (not_run, excused)


@pytest.mark.slow
def test_the_docs_example_plugin_lands_in_every_column_it_qualifies_for(tmp_path, monkeypatch):
    """Written in a temp folder from docs/write-a-backend.md, with no edit in the tree: checked, run, reported.

    The run of every scenario has pgbouncer hidden from the lab, as on a fresh machine (the case README's
    test command meets there, which CI, where pgbouncer is always installed, would not see otherwise): its
    two pooler cells say 'does not run: pgbouncer not installed' and every other qualifying column lands.
    Where pgbouncer is installed, a run of the pooler alone merged into the report fills those two cells,
    so the row holds no 'not run': one run of every scenario serves both cases. A column that cannot run
    for want of another package (iproute2 for netdrop) says 'does not run' with that package's line."""
    from lab.servers.pgbouncer.server import MISSING

    (tmp_path / "my_lock.py").write_text(docs_example())
    tmp, results = shared_tmp(tmp_path), tmp_path / "r"
    try:
        checked = lab("check-backend", "my_lock", "--backend-module", "my_lock:MyLock", cwd=tmp_path, tmp=tmp)
        assert checked.returncode == 0 and "8 of 8 promises kept" in checked.stdout, checked.stdout + checked.stderr
        qualifies = qualifying(tmp_path)
        assert {("cases", "idle_session"), ("calibrate", "terminate"), ("cut", "blackhole"),
                ("timing", "cron"), ("killpoints", "search")} <= qualifies
        with monkeypatch.context() as hidden:
            hidden.setenv(SEARCH_PATH_VARIABLE, "")
            qualifies_without = qualifying(tmp_path)

        everything = plugin_run("all", results, tmp_path, tmp, hide_pgbouncer=True)
        trials = read_trials(everything)
        pooler = [t for t in trials if t["scenario"] == "pooler"]
        assert len(pooler) == 2 and {(t["status"], t["reason"]) for t in pooler} == {("skipped", f"does not run: {MISSING}")}
        ran, excused = landed(trials, os_packages.does_not_run(hidden={"pgbouncer"}))
        assert qualifies_without <= ran | excused, qualifies_without - ran - excused
        assert_lands(report_row([everything], results, tmp_path, tmp), excused)

        runs = [everything]
        if not os_packages.missing("pgbouncer"):
            runs.append(plugin_run("pooler", results, tmp_path, tmp, hide_pgbouncer=False))
        merged = {t["id"]: t for run in runs for t in read_trials(run)}.values()
        ran, excused = landed(list(merged), os_packages.does_not_run())
        assert qualifies <= ran | excused, qualifies - ran - excused
        assert_lands(report_row(runs, results, tmp_path, tmp), excused)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
