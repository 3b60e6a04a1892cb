"""`lab doctor ... --stack FILE --advise --json` in this process, for the stack tests: the stack file it wrote, the
document it printed, and its exit status; and what the reference run declares of a backend."""

from __future__ import annotations

import json
from pathlib import Path

import backends
from lab.declarations.capabilities import Capability
from lab.cli import main


def doctor_advice(capsys, tmp_path: Path, *flags: str) -> tuple[int, dict, dict]:
    """(exit status, the stack file as written, the printed document: stack, not_described, advice)."""
    stack_file = tmp_path / "stack.json"
    status = main(["doctor", *flags, "--stack", str(stack_file), "--advise", "--json"])
    out, err = capsys.readouterr()
    assert not err.strip(), err
    return status, json.loads(stack_file.read_text()), json.loads(out)


def exposed(advice: dict) -> set[tuple[str, str]]:
    return {(e["scenario"], e["variant"]) for e in advice["exposed"]}


def qualifying(advice: dict) -> set[str]:
    return {k["backend"] for need in advice["needs"] for k in need["qualifying"]}


def declares(backend: str, capability: Capability) -> bool:
    return capability in backends.load(backend).capabilities


def no_secret(secret: str, *texts: str) -> None:
    assert secret and all(secret not in text for text in texts), "a password was printed or stored"
