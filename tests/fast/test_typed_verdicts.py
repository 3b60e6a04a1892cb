"""Typed verdicts: no code judges a verdict, a company state or a skip reason by its words, not even for an
older run (a record without the typed field reads as unknown). A planted line proves the scan can fail.
"""

from __future__ import annotations

import re
from pathlib import Path

import scenarios
from scenarios.base import Scenario

ROOT = Path(__file__).resolve().parents[2]
# What the before-stop hook looks for: a verdict, company state or skip reason judged by its first words.
PREFIX = re.compile(r'verdict[^#]*\.startswith|\.startswith\(\(?"(lost|intact|held|merged|stale|does not run|within)'
                    r'|reason[^#]*\.startswith\(\(?"does not run')


def prefix_matches(root: Path) -> list[str]:
    found = []
    for folder in ("lab", "backends", "scenarios"):
        for path in sorted((root / folder).rglob("*.py")):
            for number, line in enumerate(path.read_text().splitlines(), start=1):
                if PREFIX.search(line) and not line.lstrip().startswith("#"):
                    found.append(f"{path.relative_to(root)}:{number}: {line.strip()}")
    return found


def test_nothing_judges_a_verdict_by_its_words():
    assert prefix_matches(ROOT) == []


def test_the_scan_catches_a_planted_prefix_match(tmp_path):
    (tmp_path / "scenarios").mkdir()
    (tmp_path / "scenarios" / "planted.py").write_text('safe = record["verdict"].startswith("lost")\n')
    (tmp_path / "lab").mkdir()
    (tmp_path / "lab" / "planted.py").write_text('n = sum(s.startswith("intact") for s in states)\n')
    assert len(prefix_matches(tmp_path)) == 2


def test_a_judged_scenario_words_nothing_itself():
    """A scenario judged by the checkers leaves its words to lab/checkers/words.py: it overrides no verdict()."""
    judged = []
    for name in scenarios.names():
        cls = type(scenarios.load(name))
        if cls.judge is not Scenario.judge:
            judged.append(name)
            assert cls.verdict is Scenario.verdict and cls.safety is Scenario.safety, name
    assert {"cases", "calibrate", "overlap", "kill", "pause", "cut", "restart", "timing", "pooler",
            "killpoints", "failover", "redis_failover", "redlock_restart", "etcd_partition", "netdrop"} <= set(judged)
