"""The type checker passes: mypy, configured by pyproject.toml's [tool.mypy], over lab, backends and scenarios.

Measured on this repository's 2-core machine: 10-16 s from a fresh clone (no .mypy_cache), 0.5-2.5 s after.
Only the libraries listed in [[tool.mypy.overrides]] may lack types; with only '.[test]' installed the
optional extras' packages are absent and the same check must pass.
"""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]



def test_mypy_reports_no_error(monkeypatch):
    api = pytest.importorskip("mypy.api", reason="mypy not installed (pip install -e '.[test]')")
    # As `mypy` at the top of the checkout: the config's files are relative to it, and so is its cache
    # (.mypy_cache, gitignored).
    monkeypatch.chdir(ROOT)
    out, err, status = api.run(["--config-file", "pyproject.toml"])
    assert status in (0, 1), f"mypy did not run (exit {status}): {err or out}"
    # "Success: no issues found in N source files", or "Found E errors in F files (checked N source files)"
    checked = re.search(r"(\d+) source files\)?$", out.strip())
    assert checked and int(checked.group(1)) > 100, f"mypy checked too little: {out.strip().splitlines()[-1:]}"
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert not errors, f"{len(errors)} mypy errors:\n" + "\n".join(errors)


def test_the_checkers_holder_report_runner_and_servers_have_every_body_checked():
    """Their functions' bodies are type-checked whether annotated or not: the override stays in the config."""
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    checked = {module for override in config.get("overrides", []) if override.get("check_untyped_defs")
               for module in override["module"]}
    assert {"lab.checkers.*", "lab.holder.*", "lab.report.*", "lab.runner.*", "lab.servers.*"} <= checked \
        or config.get("check_untyped_defs")
