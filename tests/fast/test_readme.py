"""README.md stays a five-minute read that works: at most 200 lines, the two set-up commands in its first 40,
every `lab <verb>` it shows a command that exists, and .ci/run running the same test command it shows."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
MAX_LINES = 200
SETUP_WITHIN = 40
RUN_LAB = ("python3 -m venv .venv && . .venv/bin/activate && pip install -e . && lab run --backend all "
           "&& lab report")
RUN_TESTS = ("python3 -m venv .venv && . .venv/bin/activate && pip install -e '.[test,libraries,drivers,ha]' "
             "&& pytest")


def code_shown(text: str) -> list[str]:
    """What the README shows as code: each line of a fenced block (its # comment cut off), each inline span."""
    blocks = re.findall(r"```[a-z]*\n(.*?)```", text, re.S)
    lines = [line.split(" #", 1)[0] for block in blocks for line in block.splitlines()]
    prose = re.sub(r"```[a-z]*\n.*?```", "", text, flags=re.S)
    return lines + re.findall(r"`([^`\n]+)`", prose)


def verbs_shown(text: str) -> set[str]:
    """Every `lab <verb>` the README shows as code: at the start of a command, or after && | ; $."""
    return {m.group(1) for code in code_shown(text)
            for m in re.finditer(r"(?:^|&&|\||;|\$)\s*lab ([a-z][a-z-]*)", code)}


def test_readme_is_at_most_200_lines():
    count = len(README.read_text().splitlines())
    assert count <= MAX_LINES, f"README.md has {count} lines; move detail to docs/ (at most {MAX_LINES})"


@pytest.mark.parametrize("command", [RUN_LAB, RUN_TESTS], ids=["run the lab", "run the tests"])
def test_the_two_setup_commands_are_in_the_first_40_lines(command):
    head = README.read_text().splitlines()[:SETUP_WITHIN]
    assert command in head, f"README.md's first {SETUP_WITHIN} lines must show, on a line of its own: {command}"


def test_ci_runs_the_readme_test_command():
    """.ci/run runs the README's test command, quieter (-q) and nothing else different."""
    ci = [line.replace(" -q", "") for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert RUN_TESTS in ci, ".ci/run and README.md show different test commands; keep them in step"


def test_every_lab_verb_the_readme_shows_exists(capsys):
    from lab.cli import main

    verbs = verbs_shown(README.read_text())
    assert {"run", "report", "doctor", "check-backend", "list"} <= verbs  # the finder finds what is there
    for verb in sorted(verbs):
        with pytest.raises(SystemExit) as exited:
            main([verb, "--help"])
        assert exited.value.code == 0, f"README.md shows `lab {verb}`, but `lab {verb} --help` exits {exited.value.code}"
    capsys.readouterr()


def test_a_verb_that_does_not_exist_is_caught(capsys):
    """The check itself: a made-up verb shown in a code block fails `--help`."""
    from lab.cli import main

    assert verbs_shown("text\n```sh\nlab frobnicate --now   # no such verb\n```\nand `lab list`") == {"frobnicate",
                                                                                                    "list"}
    with pytest.raises(SystemExit) as exited:
        main(["frobnicate", "--help"])
    assert exited.value.code != 0
    capsys.readouterr()
