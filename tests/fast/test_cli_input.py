"""Bad input on the command line: one line on stderr, exit 2, nothing written."""

import subprocess
import sys

import pytest

import backends


def lab(*args, cwd):
    return subprocess.run([sys.executable, "-m", "lab.cli", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=60)


def test_unknown_backend_is_one_line_listing_valid_names(tmp_path):
    result = lab("run", "--backend", "nope", "--results", str(tmp_path / "results"), cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"lab: error: unknown backend 'nope'; choose from: all, {', '.join(backends.names())}"]
    assert not (tmp_path / "results").exists()


def test_unknown_scenario_is_one_line(tmp_path):
    result = lab("run", "--scenario", "cases,bogus", "--results", str(tmp_path / "r"), cwd=tmp_path)
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1 and "'bogus'" in result.stderr


def test_report_without_runs_is_one_line(tmp_path):
    result = lab("report", "--results", str(tmp_path / "none"), cwd=tmp_path)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1


def test_list_names_every_backend_and_scenario(tmp_path):
    result = lab("list", cwd=tmp_path)
    assert result.returncode == 0
    for name in backends.names():  # "!" marks one whose server is not installed here (ZooKeeper's, say)
        assert f"  {name} " in result.stdout or f"! {name} " in result.stdout
    assert "* cases " in result.stdout and "  killpoints " in result.stdout


@pytest.mark.parametrize("known", ["psycopg2", "psycopg"])
def test_unknown_driver_is_one_line_listing_the_drivers(tmp_path, known):
    """An unknown driver is one line listing the drivers, also after a known one.

    psycopg2 is always installed; psycopg comes with the drivers extra, and the fast tier runs with only the
    test extra, so there that case skips with its install line."""
    if known != "psycopg2":
        pytest.importorskip(known, reason=f"{known} not installed (pip install -e '.[drivers]')")
    result = lab("run", "--driver", f"{known},nope", "--results", str(tmp_path / "r"), cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "lab: error: unknown driver 'nope'; drivers: psycopg2, psycopg, asyncpg, sqlalchemy+psycopg, "
        "sqlalchemy+asyncpg, django, django_atomic"]
    assert not (tmp_path / "r").exists()


def test_list_shows_the_driver_axis(tmp_path):
    result = lab("list", cwd=tmp_path)
    assert "drivers of a session lock's connection" in result.stdout
    assert "asyncpg" in result.stdout and "django_atomic" in result.stdout
