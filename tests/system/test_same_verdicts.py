"""A user's servers give the same verdicts as the embedded ones: PostgreSQL 15 and Redis 7, set up by a
cautious DBA (guards on idle sessions, few connections, passwords), against PostgreSQL 18 and Redis 6.2
that the lab starts itself."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lab.checkers.outcomes import Safety, exercised_of
from lab.checkers.verdict import SAFETY_OF, Kind
from tests.server.helpers import shared_tmp
from tests.system.conftest import DATABASE_GUARDS, MAX_CONNECTIONS

# Skipped before the fixture starts anything, in one line for the tier, without the packages.
pytestmark = [pytest.mark.system, pytest.mark.slow, pytest.mark.os_packages("postgresql-15", "redis-server")]

SCENARIOS = "cases,calibrate,overlap,pause,cut,lookalikes"


def lab(*args, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    tmp = shared_tmp(cwd)
    try:
        import os

        env = {k: v for k, v in os.environ.items() if not k.startswith("LAB_")}
        env["TMPDIR"] = str(tmp)
        return subprocess.run([sys.executable, "-m", "lab.cli", *args], capture_output=True, text=True,
                              cwd=cwd, env=env, timeout=timeout)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run_folder(result: subprocess.CompletedProcess, results: Path) -> Path:
    assert result.returncode == 0, result.stderr[-3000:]
    [folder] = [p for p in results.iterdir() if (p / "meta.json").is_file()]
    return folder


@pytest.fixture(scope="module")
def two_runs(dba_servers, tmp_path_factory):
    """The same quick run on embedded servers and on the DBA's, each in its own results folder."""
    cwd = tmp_path_factory.mktemp("same")
    common = ["run", "--profile", "quick", "--backend", "all", "--scenario", SCENARIOS]
    embedded = run_folder(lab(*common, "--results", str(cwd / "embedded"), cwd=cwd), cwd / "embedded")
    result = lab(*common, "--results", str(cwd / "dba"), "--pg-dsn", dba_servers.pg_dsn,
                 "--redis-url", dba_servers.redis_url, cwd=cwd)
    dba = run_folder(result, cwd / "dba")
    report = lab("report", dba.name, "--results", str(cwd / "dba"), cwd=cwd)
    assert report.returncode == 0, report.stderr
    return embedded, dba, result


def trials(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "trials.jsonl").read_text().splitlines()]


def _cells(folder: Path) -> dict[tuple[str, str, str], list[dict]]:
    cells: dict[tuple[str, str, str], list[dict]] = {}
    for t in trials(folder):
        if t["status"] == "ok":
            cells.setdefault((t["scenario"], t["backend"], t["variant"]), []).append(t)
    return cells


def passed_unexercised(folder: Path) -> set[tuple[str, str, str]]:
    """(scenario, backend, variant) of the cells whose every finished trial is safe and says its fault never took
    the lock away: no pass, as the matrix shows it (not exercised)."""
    return {cell for cell, ts in _cells(folder).items()
            if all(t.get("safety") == "safe" and exercised_of(t) is False for t in ts)}


def exercised(folder: Path) -> set[tuple[str, str, str]]:
    """The cells whose every finished trial says its fault took the lock away."""
    return {cell for cell, ts in _cells(folder).items() if all(exercised_of(t) is True for t in ts)}


def lost_deciding_nothing(folder: Path) -> set[tuple[str, str, str]]:
    """The cells whose every finished trial lost the lock and decided no safety (untested: nothing the holder
    wrote came after the newer holder's; unknown: its write indeterminate)."""
    return {cell for cell, ts in _cells(folder).items()
            if all((t.get("judgement") or {}).get("lock") == "false" and t.get("safety") in ("untested", "unknown") for t in ts)}


def lost_on_both(a: Path, b: Path) -> set[tuple[str, str, str]]:
    """The cells whose every finished trial, in both runs, says the lock was lost."""
    def lost(folder):
        return {cell for cell, ts in _cells(folder).items() if all((t.get("judgement") or {}).get("lock") == "false" for t in ts)}
    return lost(a) & lost(b)


def only_safe(cell: str) -> bool:
    """Whether a compare cell ('rolled back 2/3, held 1/3', 'intact (250 rows) 1/3') names safe outcomes only."""
    words = [re.sub(r"( \(.*\))? \d+/\d+$", "", part.strip(" |")) for part in cell.split(", ")]
    known = {kind.value: kind for kind in Kind}
    return all(word in known and SAFETY_OF[known[word]] is Safety.SAFE for word in words)


def test_no_trial_errored_on_the_dbas_servers(two_runs):
    _, dba, _ = two_runs
    errored = [f"{t['id']}: {t.get('reason')}" for t in trials(dba) if t["status"] == "error"]
    assert errored == []


def test_every_verdict_matches_the_embedded_run(two_runs, tmp_path):
    embedded, dba, _ = two_runs
    shutil.copytree(embedded, tmp_path / embedded.name)
    shutil.copytree(dba, tmp_path / dba.name)
    compared = lab("report", "--compare", embedded.name, dba.name, "--results", str(tmp_path), cwd=tmp_path)
    assert compared.returncode == 0, compared.stderr
    # The only difference the header shows is where the servers came from and their versions.
    assert "postgres 15." in compared.stdout and "redis 7." in compared.stdout
    rows = [line.split(" | ") for line in compared.stdout.splitlines() if line.startswith("| ") and "---" not in line]
    differing = rows[1:]
    # One difference belongs to the server version, not to its setup: PostgreSQL 15.18 sometimes still holds a
    # terminated session's advisory lock 80-150 ms after pg_terminate_backend returns, where 18.6 has freed it
    # within 50 ms (measured here: 15 in 5 of 30 trials with TLS and 3 of 30 without, 18 in 0 of 30). calibrate then
    # says "late" with the server's evidence (a poll that started after the kill still refused). Whether the
    # lock was freed at all must match.
    allowed = [row for row in differing if row[0] == "| calibrate"
               and not any(words in " ".join(row) for words in ("not detected", "never detected"))]
    # A library that cannot work against the DBA's servers says why instead of a verdict, which is the setting
    # that made the difference: celery-once's parse_url drops the URL's user name, so it cannot log in as the
    # Redis ACL user (measured: AuthenticationError). Every trial of that backend says so, none gives a verdict.
    allowed += [row for row in differing if row[-1].startswith("n/a: does not run: ")
                and "cannot use the Redis" in row[-1] and "user name" in row[-1]]
    # Words that differ while every trial on both sides is safe are one verdict told by a race of the two runs'
    # timing: the unique backstop's loser meets the first run's marker and rolls back, or comes after it and
    # finds the company held (measured on the embedded servers alone: rolled back 2/3 in one run, 0/3 in the
    # next two). A safety that differs is never allowed here.
    allowed += [row for row in differing if only_safe(row[-2]) and only_safe(row[-1])]
    # A cell whose fault never took the lock away on one side (exercised false in every trial) gives no verdict to
    # match: portalocker's contender pings the holder's subscription, waits its 1 s and kills the silent one, and
    # on the DBA's TLS Redis, with the machine busy, once did not finish within the quick profile's 2 s of
    # patience, so the cut struck the holder's connection but the lock held, not exercised (measured in CI).
    # --compare counts no flip for it either; a safety that differs between exercised trials still fails.
    one_sided = (passed_unexercised(embedded) & exercised(dba)) | (passed_unexercised(dba) & exercised(embedded))
    allowed += [row for row in differing if tuple(part.strip(" |") for part in row[:3]) in one_sided]
    # A lock lost on both sides, where one side's holder wrote nothing the newer holder's commit came before: on a
    # busy machine the contender's rebuild can end after the holder's resumed write (measured in CI: pause/session
    # read 'lost' on the embedded servers and 'stale write accepted' on the DBA's). The lock's answer matches;
    # the safety of an untested trial decides nothing, and --compare counts no flip for it.
    undecided = (lost_deciding_nothing(embedded) | lost_deciding_nothing(dba)) & lost_on_both(embedded, dba)
    allowed += [row for row in differing if tuple(part.strip(" |") for part in row[:3]) in undecided]
    assert [row for row in differing if row not in allowed] == [], compared.stdout


def test_the_run_records_the_dbas_guards_and_the_servers_limits(two_runs):
    _, dba, _ = two_runs
    meta = json.loads((dba / "meta.json").read_text())
    scoped = " ".join(meta["pg_settings"]["set_per_database_or_role"])
    assert all(f"{name}={value}" in scoped for name, value in DATABASE_GUARDS.items()), scoped
    [capacity] = meta["capacity"]
    assert capacity["server"]["max_connections"] == MAX_CONNECTIONS and capacity["server"]["reserved"] == 3
    peaks = {name: wave["peak_sessions_on_server"] for name, wave in capacity["waves"].items()}
    assert max(peaks.values()) <= MAX_CONNECTIONS - 3, peaks


def test_no_password_is_kept_anywhere_in_the_run_or_its_report(two_runs, dba_servers):
    _, dba, result = two_runs
    secrets = (dba_servers.pg_password, dba_servers.redis_password)
    assert (dba / "REPORT.md").is_file()
    for path in dba.rglob("*"):
        if path.is_file():
            content = path.read_text(errors="replace")
            assert not any(secret in content for secret in secrets), path.name
    assert not any(secret in result.stdout + result.stderr for secret in secrets)
