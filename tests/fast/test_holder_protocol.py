"""The holder protocol's parsing and its child process (lab/holder/protocol.py), without a server.

A child that writes a bad line, answers what nobody asked, exits or stays silent gives one clear error
naming it, at once or at the request's timeout: never a hang, never a traceback from the reader. The
children here are small Python programs speaking (or breaking) the protocol, as a program in any
language would."""

from __future__ import annotations

import logging
import shutil
import sys
import textwrap
import time
from pathlib import Path

import pytest

from lab.holder.protocol import (
    Answer,
    HolderProgram,
    LibraryError,
    Outcome,
    ProtocolError,
    Remark,
    Said,
    parse_line,
)


def test_answers_and_remarks_parse_into_their_types():
    assert parse_line('{"id": 3, "type": "ok", "value": {"token": 7}}') == Answer(3, Outcome.OK, {"token": 7})
    assert parse_line('{"id": 4, "type": "fail"}') == Answer(4, Outcome.FAIL)
    assert parse_line('{"id": 5, "type": "info", "error": {"type": "Error", "message": "Connection terminated\\nat x"}}'
                      ) == Answer(5, Outcome.INFO, None, Said("Error", "Connection terminated"))
    assert parse_line('{"id": 6, "type": "fail", "error": "plain words"}').error == Said("Error", "plain words")
    assert parse_line('{"said": "Connection is closed.", "source": "ioredis"}') == Remark("ioredis",
                                                                                      "Connection is closed.")


@pytest.mark.parametrize("line, words", [
    ("hello", "not JSON"),
    ("[1, 2]", "not a JSON object"),
    ('{"type": "ok"}', "without an integer id"),
    ('{"id": true, "type": "ok"}', "without an integer id"),
    ('{"id": "1", "type": "ok"}', "without an integer id"),
    ('{"id": 1, "type": "done"}', "not ok, fail or info"),
    ('{"id": 1, "type": "fail", "error": 42}', "neither text nor"),
])
def test_a_line_outside_the_protocol_is_one_clear_error(line, words):
    with pytest.raises(ProtocolError, match=words) as raised:
        parse_line(line)
    assert line[:20] in str(raised.value)  # the error quotes the line


def test_a_long_bad_line_is_quoted_short():
    with pytest.raises(ProtocolError) as raised:
        parse_line("x" * 10_000)
    assert len(str(raised.value)) < 250


def test_a_library_error_is_named_after_the_librarys_own_type():
    from lab.workload.contract import describe_error

    error = LibraryError.of(Said("LockError", "Cannot extend lock"))
    assert isinstance(error, LibraryError) and type(error).__name__ == "LockError"
    assert describe_error(error) == "LockError: Cannot extend lock"
    assert type(LibraryError.of(Said("not an identifier!", "x"))).__name__ == "Error"


def program(tmp_path: Path, body: str) -> HolderProgram:
    """A child program from Python source that reads requests as `requests()` and writes with `say(obj)`."""
    script = tmp_path / "child.py"
    script.write_text(textwrap.dedent("""\
        import json, sys, time
        def requests():
            for line in sys.stdin:
                yield json.loads(line)
        def say(obj):
            sys.stdout.write((obj if isinstance(obj, str) else json.dumps(obj)) + "\\n")
            sys.stdout.flush()
        """) + textwrap.dedent(body))
    return HolderProgram([sys.executable, str(script)], tmp_path, "the test's holder program", "test program")


def test_answers_come_back_to_their_requests_whatever_their_order(tmp_path):
    child = program(tmp_path, """
        pending = []
        for r in requests():
            pending.append(r)
            if len(pending) == 2:  # answer the second first
                for q in reversed(pending):
                    say({"id": q["id"], "type": "ok", "value": q["op"]})
                pending = []
        """)
    try:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(2) as pool:
            first = pool.submit(child.request, "held", 10)
            time.sleep(0.2)
            second = pool.submit(child.request, "renew", 10)
            assert (first.result().value, second.result().value) == ("held", "renew")
    finally:
        child.close()


@pytest.mark.parametrize("body, words", [
    ("""
        for r in requests():
            say("this is not the protocol")
        """, "broke the holder protocol with a line that is not JSON: 'this is not the protocol'"),
    ("""
        for r in requests():
            say({"id": r["id"] + 100, "type": "ok"})
        """, "an answer to id 101, which nobody asked"),
    ("""
        for r in requests():
            sys.stderr.write("Error: Cannot find module 'redlock'\\n")
            sys.exit(3)
        """, "exited with code 3: Error: Cannot find module 'redlock'"),
])
def test_a_child_that_breaks_the_protocol_or_ends_fails_its_request_at_once(tmp_path, body, words):
    child = program(tmp_path, body)
    start = time.monotonic()
    try:
        with pytest.raises(ProtocolError, match=words.replace("(", r"\(").replace(")", r"\)")):
            child.request("start", timeout=30)
        assert time.monotonic() - start < 10  # at once, not at the request's timeout
        with pytest.raises(ProtocolError, match="holder program"):  # and every request after it
            child.request("acquire", timeout=30)
    finally:
        child.close()
    assert child.proc.poll() is not None  # a broken program is ended, never left running


def test_a_silent_child_times_out_and_its_late_answer_is_dropped(tmp_path):
    child = program(tmp_path, """
        for r in requests():
            if r["op"] == "held":
                time.sleep(1.0)
            say({"id": r["id"], "type": "ok", "value": r["op"]})
        """)
    try:
        with pytest.raises(ProtocolError, match="did not answer 'held' within 0.3 s"):
            child.request("held", timeout=0.3)
        assert child.request("token", timeout=10).value == "token"  # the late answer to held was not taken for it
    finally:
        child.close()


def test_remarks_and_stderr_are_the_librarys_log_lines(tmp_path, caplog):
    child = program(tmp_path, """
        for r in requests():
            say({"said": "Connection is closed.", "source": "ioredis 'error' event"})
            sys.stderr.write("[ioredis] Unhandled error event\\n")
            sys.stderr.flush()
            say({"id": r["id"], "type": "ok"})
        """)
    with caplog.at_level(logging.WARNING, logger="test program"):
        try:
            assert child.request("acquire", timeout=10).outcome is Outcome.OK
            deadline = time.monotonic() + 5
            while len(caplog.records) < 2 and time.monotonic() < deadline:
                time.sleep(0.05)
        finally:
            child.close()
    said = sorted(r.getMessage() for r in caplog.records if r.name == "test program")
    assert said == ["ioredis 'error' event: Connection is closed.", "stderr: [ioredis] Unhandled error event"]


def test_a_command_that_cannot_start_is_one_line(tmp_path):
    with pytest.raises(ProtocolError, match="could not start"):
        HolderProgram([str(tmp_path / "no-such-program")], tmp_path, "the test's holder program", "test program")


def test_close_ends_a_program_that_ignores_the_end_of_its_stdin(tmp_path):
    child = program(tmp_path, """
        import signal
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        for r in requests():
            pass
        time.sleep(60)
        """)
    start = time.monotonic()
    child.close(grace=0.5)
    assert child.proc.poll() is not None and time.monotonic() - start < 10


def test_a_declaration_of_a_shape_no_program_can_hold_fails_its_load():
    from backends.external import ExternalLock

    with pytest.raises(TypeError, match="cannot declare in_transaction"):
        type("InWrite", (ExternalLock,), {"name": "in_write", "summary": "", "capabilities": {"in_transaction"}})


def test_a_missing_runtime_or_missing_packages_is_the_does_not_run_line(monkeypatch, tmp_path):
    from backends.node._holder import MISSING_NODE, NodeHolder
    from backends.node.node_redlock import NodeRedlock
    from tests import os_packages

    assert MISSING_NODE == os_packages.not_installed("nodejs")
    monkeypatch.setattr(shutil, "which", lambda name, *args, **kwargs: None)
    assert NodeRedlock.missing() == MISSING_NODE
    monkeypatch.undo()
    if shutil.which("node") is None:
        pytest.skip(MISSING_NODE)
    hidden = type("Hidden", (NodeHolder,), {"name": "hidden", "summary": "", "library": "redlock",
                                            "folder": tmp_path / "backends" / "node" / "redlock"})
    monkeypatch.setattr("backends.node._holder.ROOT", tmp_path)
    assert hidden.missing() == ("redlock not installed in backends/node/redlock "
                                "(npm ci --prefix backends/node/redlock)")


def test_the_docs_show_the_node_redlock_declaration_as_it_is():
    """docs/write-a-backend.md, "A holder in another language", shows the declaration as committed."""
    import re

    root = Path(__file__).resolve().parents[2]
    page = (root / "docs" / "write-a-backend.md").read_text()
    block = re.search(r"```python\n# backends/node/node_redlock.py\n(.*?)```", page, re.S)
    source = (root / "backends" / "node" / "node_redlock.py").read_text()
    assert block is not None and source.endswith("\n\n" + block.group(1))


def test_what_a_program_says_is_kept_without_its_passwords():
    """A library may print its own address (ioredis' errors name the URL): the lab keeps the line password-free."""
    from lab.holder.protocol import _first_line

    kept = _first_line("Error: connect ECONNREFUSED redis://:hunter2@127.0.0.1:6379/0\n    at stack")
    assert "hunter2" not in kept and kept.startswith("Error: connect ECONNREFUSED redis://:***@127.0.0.1")
