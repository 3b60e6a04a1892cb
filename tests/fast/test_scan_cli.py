"""`lab scan` on the command line: exit 1 on a finding, 0 otherwise, 2 with one line on bad input; --json and SARIF."""

from __future__ import annotations

import json
import textwrap

import pytest

from lab.cli import main

FOUND = textwrap.dedent("""
    import psycopg2

    def run(dsn, work):
        conn = psycopg2.connect(dsn)
        conn.cursor().execute("select pg_advisory_lock(1)")
        work()
""")
FINE = FOUND.replace("conn = psycopg2.connect(dsn)\n", "conn = psycopg2.connect(dsn)\n    conn.autocommit = True\n")


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_exit_1_on_a_finding_and_0_on_fine_code(tmp_path, capsys):
    (tmp_path / "found.py").write_text(FOUND)
    (tmp_path / "fine.py").write_text(FINE)
    code, out, _ = run(["scan", "--no-evidence", str(tmp_path / "found.py")], capsys)
    assert code == 1 and "FINDING  bug 1 (case A)" in out and "lab scan: 1 finding (bug 1)" in out
    code, out, _ = run(["scan", "--no-evidence", str(tmp_path / "fine.py")], capsys)
    assert code == 0 and "0 findings" in out and "fine.py:7  pg_advisory_lock" in out


@pytest.mark.parametrize("argv, said", [(["scan", "/no/such/folder"], "no such file or folder: /no/such/folder"),
                                        (["scan"], "name at least one Python file or folder")])
def test_bad_input_is_one_line_and_exit_2(argv, said, capsys):
    code, out, err = run(argv, capsys)
    assert code == 2 and out == "" and err.count("\n") == 1 and said in err


def test_a_file_that_does_not_parse_is_a_warning_not_an_error(tmp_path, capsys):
    (tmp_path / "broken.py").write_text("def f(:\n")
    code, out, _ = run(["scan", "--no-evidence", str(tmp_path)], capsys)
    assert code == 0 and "warning:" in out and "broken.py" in out


def test_json_carries_the_typed_results(tmp_path, capsys):
    (tmp_path / "found.py").write_text(FOUND)
    code, out, _ = run(["scan", "--no-evidence", "--json", str(tmp_path)], capsys)
    payload = json.loads(out)
    assert code == 1 and payload["files"] == 1
    [result] = payload["results"]
    assert (result["status"], result["bug"], result["site"]["line"], result["connection"]["mode"]) == (
        "finding", "left_open", 6, "autobegin")


def test_sarif_is_2_1_0_with_each_finding_at_its_line(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "found.py").write_text(FOUND)
    code, out, _ = run(["scan", "--no-evidence", "--sarif", "found.py"], capsys)
    log = json.loads(out)
    assert code == 1 and log["version"] == "2.1.0" and len(log["runs"]) == 1
    sarif_run = log["runs"][0]
    rules = [rule["id"] for rule in sarif_run["tool"]["driver"]["rules"]]
    [result] = sarif_run["results"]
    assert result["ruleId"] == "left_open" and rules[result["ruleIndex"]] == "left_open"
    assert result["level"] == "error" and result["message"]["text"]
    location = result["locations"][0]["physicalLocation"]
    assert location["artifactLocation"] == {"uri": "found.py", "uriBaseId": "%SRCROOT%"}
    assert location["region"]["startLine"] == 6
    assert sarif_run["originalUriBaseIds"]["%SRCROOT%"]["uri"].endswith("/")
