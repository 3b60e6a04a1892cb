"""Plugins: a package installed with pip and never named in the lab's code, a module given on the command line,
and broken plugins skipped with their reason."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

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


def lab(*args, site=None, cwd=None, tmp=None):
    env = dict(os.environ)
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


def readme_example() -> str:
    """The 'Write a backend' example, exactly as README.md shows it."""
    import re

    readme = (Path(__file__).parents[2] / "README.md").read_text()
    return re.search(r"```python\n# my_lock.py\n(.*?)```", readme, re.S).group(1)


def test_the_readme_plugin_lands_in_every_column_it_qualifies_for(tmp_path):
    """Written in a temp folder from the README, with no edit in the tree: checked, run, reported."""
    import json

    import scenarios
    from lab.registry import import_entry

    (tmp_path / "my_lock.py").write_text(readme_example())
    tmp = shared_tmp(tmp_path)
    try:
        checked = lab("check-backend", "my_lock", "--backend-module", "my_lock:MyLock", cwd=tmp_path, tmp=tmp)
        assert checked.returncode == 0 and "8 of 8 promises kept" in checked.stdout, checked.stdout + checked.stderr
        run = lab("run", "--backend-module", "my_lock:MyLock", "--backend", "my_lock", "--scenario", "all",
                  "--profile", "quick", "--results", str(tmp_path / "r"), cwd=tmp_path, tmp=tmp)
        assert run.returncode == 0, run.stderr
        (folder,) = (tmp_path / "r").iterdir()
        trials = [json.loads(line) for line in (folder / "trials.jsonl").read_text().splitlines()]
        ran = {(t["scenario"], t["variant"]) for t in trials if t["status"] == "ok"}
        assert not [t for t in trials if t["status"] == "error"], [t["reason"] for t in trials if t["status"] == "error"]
        # Every (scenario, variant) whose declarations admit this backend ran, chosen by declaration alone.
        sys.path.insert(0, str(tmp_path))
        try:
            cls = import_entry("my_lock:MyLock")
        finally:
            sys.path.remove(str(tmp_path))
        qualifies = {(name, variant) for name in scenarios.names() for scenario in [scenarios.load(name)]
                     if scenario.applies_to(cls) is None for variant in scenario.variants_in_profile(cls, "quick")
                     if scenario.variant_skip(variant, cls) is None}
        assert {("cases", "idle_session"), ("calibrate", "terminate"), ("cut", "blackhole"),
                ("timing", "cron"), ("killpoints", "search")} <= qualifies
        assert qualifies <= ran, qualifies - ran
        report = lab("report", folder.name, "--results", str(tmp_path / "r"), cwd=tmp_path, tmp=tmp)
        assert report.returncode == 0, report.stderr
        text = (folder / "REPORT.md").read_text()
        row = next(line for line in text.splitlines() if line.startswith("| my_lock |"))
        assert "not run" not in row and "error" not in row
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
