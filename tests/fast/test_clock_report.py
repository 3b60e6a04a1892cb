"""The clock sections of the report (lab/report/clocks.py) and the clock pieces they read, on planted records:
a margin is computed from the steps, never from a summary; a contradiction is flagged, not smoothed over."""

from __future__ import annotations

import struct
import sys
import time
from pathlib import Path

import pytest

from lab.checkers import ops
from lab.checkers.judge import judge
from lab.checkers.ops import F, Op, Type
from lab.checkers.verdict import Kind, Valid, Verdict
from lab.measures.margin import Margin
from lab.report.clocks import holder_finding, section_holder_clock, section_kleppmann, section_margins
from lab.report.history_chart import clock_series, history_chart
from lab.report.sections import RunView
from lab.servers import fake_clock

FINAL_WHOLE = {1: {"rows": 250, "runs": ["holder"]}}


def lease_history(contender_in: bool, clock_offset: float = 2.0) -> list[Op]:
    """A lease-fault history: the holder granted, the fault moves a clock, the contender asks, the holder writes."""
    history = [Op("holder", Type.INVOKE, F.ACQUIRE, 0.0), Op("holder", Type.OK, F.ACQUIRE, 0.01, {"scope": "run"}),
               Op("fault", Type.OK, F.FAULT, 0.02, {"name": "clock"}),
               Op("fault", Type.OK, F.CLOCK, 0.03, {"clock": "master0", "offset_s": 0.0}),
               Op("fault", Type.OK, F.CLOCK, 0.04, {"clock": "master0", "offset_s": clock_offset}),
               Op("contender", Type.INVOKE, F.ACQUIRE, 0.05)]
    if contender_in:
        history += [Op("contender", Type.OK, F.ACQUIRE, 0.06, {"scope": "run"}),
                    Op("contender", Type.INVOKE, F.WRITE, 0.07, {"company": 1}),
                    Op("contender", Type.INVOKE, F.COMMIT, 0.08, {"company": 1}),
                    Op("contender", Type.OK, F.WRITE, 0.09, {"company": 1})]
    else:
        history.append(Op("contender", Type.FAIL, F.ACQUIRE, 0.06))
    history += [Op("fault", Type.OK, F.HEAL, 0.10, {"name": "clock"}),
                Op("fault", Type.OK, F.CLOCK, 0.11, {"clock": "master0", "offset_s": 0.0}),
                Op("holder", Type.INVOKE, F.WRITE, 0.12, {"company": 1}),
                Op("holder", Type.INVOKE, F.COMMIT, 0.13, {"company": 1}),
                Op("holder", Type.OK, F.WRITE, 0.14, {"company": 1}),
                Op("holder", Type.INVOKE, F.RELEASE, 0.15), Op("holder", Type.OK, F.RELEASE, 0.16)]
    return history


def judged_record(id_: str, scenario: str, backend: str, variant: str, history: list[Op], **measures) -> dict:
    verdict = judge(history, FINAL_WHOLE, 250, True, lease_ttl=1.0)
    from lab.checkers.words import verdict_text

    return {"id": id_, "scenario": scenario, "backend": backend, "variant": variant, "index": 0, "status": "ok",
            "verdict": verdict_text(verdict), "judgement": verdict.to_json(), "history": ops.to_json(history),
            "safety": verdict.safety.value, "schema": 2, "measures": {"ttl_s": 1.0, **measures},
            "capabilities": ["exclusion", "lease_expiry"]}


def test_the_clock_histories_judge_as_the_checkers_say():
    assert judge(lease_history(True), FINAL_WHOLE, 250).kind is Kind.STALE_WRITE_ACCEPTED
    assert judge(lease_history(False), FINAL_WHOLE, 250).kind is Kind.HELD


# --- margins ------------------------------------------------------------------------------------------------

def _step(strength: float, broke: bool, renew_failed: bool = False) -> dict:
    """One step of a search; renew_failed: nobody else got in, but the holder's renewal failed (its lease was gone)."""
    history = lease_history(broke)
    if renew_failed:
        history = sorted([*history, Op("holder", Type.FAIL, F.RENEW, 0.095)], key=lambda o: o.time)
    verdict = judge(history, FINAL_WHOLE, 250)
    return {"strength": strength, "outcome": "broke" if broke else "survived", "judgement": verdict.to_json(),
            "history": ops.to_json(history), "evidence": {}, "ttl_s": 1.0}


def margin_record(backend: str, steps: list[dict], claimed: dict, variant: str = "server_jump",
                  high: float = 1.5) -> dict:
    return {"id": f"margin/{backend}/{variant}/0", "scenario": "margin", "backend": backend, "variant": variant,
            "index": 0, "status": "ok", "verdict": "planted", "schema": 2,
            "measures": {"steps": steps, "margin": claimed, "unit": f"TTLs of {variant}", "ttl_s": 1.0,
                         "plan": {"low": 0.0, "high": high, "budget": 10, "resolution": 0.05, "confirm": 2}}}


def _row(text: str, backend: str) -> list[str]:
    line = next(line for line in text.splitlines() if line.startswith(f"| {backend} |"))
    return [cell.strip() for cell in line[1:-1].split(" | ")]


def test_the_margin_table_computes_each_bound_from_the_steps_with_its_trials():
    steps = [_step(1.5, True), _step(0.0, False), _step(0.75, False), _step(1.125, True), _step(0.9375, False),
             _step(1.125, True), _step(0.9375, False)]
    text = section_margins(RunView.of([margin_record("redis", steps, {})]))
    assert _row(text, "redis") == ["redis", "server_jump", "0.9375 (2 trials)", "1.125 (2 trials: stale write accepted)",
                                   "7", "0.04", ""]  # the contender asked 0.04 s after the grant in the planted history
    assert "- `server_jump`: strength in TTLs of server_jump; range searched 0 to 1.5." in text
    assert "at most 10 trials" in text


def test_the_range_text_equals_the_searched_range():
    """The fast clock searched 0 to 4 where the jump searched 0 to 1.5: each fault states its own, as recorded."""
    steps = [_step(1.5, True), _step(0.0, False)]
    text = section_margins(RunView.of([margin_record("redis", steps, {}),
                                       margin_record("redis", steps, {}, "server_fast", high=4.0)]))
    jump = next(line for line in text.splitlines() if line.startswith("- `server_jump`"))
    fast = next(line for line in text.splitlines() if line.startswith("- `server_fast`"))
    assert jump.endswith("range searched 0 to 1.5.") and fast.endswith("range searched 0 to 4.")
    assert "range 0 to 1.5" not in text  # no one range stated for every fault


def test_a_margin_trial_whose_renew_failed_is_not_survived():
    """Nobody else got in at 0.75, but the holder's renewal failed there: its lease was lost, not taken. The step is
    no survived bound (0 is), and the note says what it was."""
    steps = [_step(1.5, True), _step(0.0, False), _step(0.75, False, renew_failed=True)]
    text = section_margins(RunView.of([margin_record("redis", steps, {})]))
    row = _row(text, "redis")
    assert row[2] == "0 (1 trial)" and "lease lost, not taken at 0.75" in row[6]
    assert "1 trial lost its lease with nobody else taking it (*lease lost, not taken*)" in text


def test_a_breaking_point_on_one_broken_trial_says_1_of_2():
    steps = [_step(1.5, True), _step(0.0, False), _step(0.75, False), _step(1.125, True), _step(1.125, False)]
    text = section_margins(RunView.of([margin_record("redis", steps, {})]))
    assert _row(text, "redis")[3] == "1.125 (2 trials: stale write accepted; 1 of 2)"
    assert "1 of 1 breaking points rest on fewer broken trials than the 2 a breaking point needs." in text


def test_a_planted_contradiction_is_flagged_and_never_read_from_the_scenarios_own_summary():
    """A step survived at 1.125 above a broken 0.9375, and the record's own summary claims a clean 1.125: the table
    says the lease is not monotone there, and its bounds are the steps' (survived 0.75, broke 0.9375)."""
    steps = [_step(1.5, True), _step(0.0, False), _step(0.75, False), _step(1.125, False), _step(0.9375, True)]
    lying = Margin(1.125, 1.5, 1, 1, 5).to_json()
    row = _row(section_margins(RunView.of([margin_record("redis", steps, lying)])), "redis")
    assert row[2] == "0.75 (1 trial)" and row[3].startswith("0.9375 (1 trial")
    assert "⚑ not monotone: survived at 1.125 above the smallest broken strength" in row[6]


def test_a_backend_the_search_could_not_reach_says_why():
    skipped = {"id": "margin/etcd/server_jump/0", "scenario": "margin", "backend": "etcd", "variant": "server_jump",
               "index": 0, "status": "skipped", "reason": "etcd's server is a static binary"}
    row = _row(section_margins(RunView.of([margin_record("redis", [_step(1.5, False)], {}), skipped])), "etcd")
    assert row[2:6] == ["-", "-", "-", "-"] and row[6] == "n/a: etcd's server is a static binary"


# --- which clock ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("control, wall_back, finding", [
    ((0, 3), (0, 3), "kept its lease with its wall clock stepped back"),
    ((0, 3), (3, 3), "renews by the wall clock"),
    ((3, 3), (3, 3), "its lease lapsed in the control too"),
    ((1, 3), (3, 3), "inconclusive: the control itself lost 1 of 3"),
    ((0, 3), (1, 3), "mixed: lost 1 of 3"),
    ((0, 0), (0, 3), "not measured"),
])
def test_which_clock_a_holder_keeps_by_is_said_only_when_every_trial_agrees(control, wall_back, finding):
    assert holder_finding(control, wall_back).startswith(finding)


def test_the_holder_clock_table_reads_the_control_against_the_jump():
    records = [judged_record("holder_clock/planted/control/0", "holder_clock", "planted", "control", lease_history(False)),
               judged_record("holder_clock/planted/wall_back/0", "holder_clock", "planted", "wall_back",
                             lease_history(True)),
               {"id": "holder_clock/planted/all_back/0", "scenario": "holder_clock", "backend": "planted",
                "variant": "all_back", "index": 0, "status": "skipped", "runs_here": False,
                "reason": "does not run: this libfaketime cannot fake a Python process's monotonic clock"}]
    text = section_holder_clock(RunView.of(records))
    assert "renews by the wall clock" in _row(text, "planted")[-1]
    assert "*wall and monotonic clocks back*: does not run here: this libfaketime cannot fake" in text


# --- Kleppmann's case ----------------------------------------------------------------------------------------

def test_kleppmanns_case_shows_both_majorities_its_history_and_its_timeline():
    evidence = {"masters": 5, "granted_by": [0, 1, 2], "struck_master": 0, "granted_by_after": [1, 2],
                "offset_after_s": 2.0}
    case = judged_record("server_clock/redlock/kleppmann/0", "server_clock", "redlock", "kleppmann",
                         lease_history(True), evidence=evidence)
    control = judged_record("server_clock/redlock/kleppmann_control/0", "server_clock", "redlock", "kleppmann_control",
                            lease_history(False, 0.0), evidence={**evidence, "granted_by_after": [0, 1, 2]})
    view = RunView.of([case, control])
    text = section_kleppmann(view)
    assert _row(text, "redlock") == ["redlock", "stale write accepted 1/1", "held 1/1"]
    assert "a majority of 5 that can only be masters [0, 3, 4]" in text
    assert "| 0.040 | fault | ok | clock | clock=master0, offset_s=2.0 |" in text
    assert "timelines/server_clock-redlock-kleppmann.png" in view.charts


def test_no_clock_trials_no_clock_sections():
    view = RunView.of([margin_record("redis", [_step(1.5, False)], {})])
    assert section_kleppmann(view) is None and section_holder_clock(view) is None


# --- the pieces -----------------------------------------------------------------------------------------------

def test_a_timeline_draws_each_clock_beside_the_real_one(tmp_path):
    history = lease_history(True)
    assert clock_series(history) == {"master0": [(0.03, 0.0), (0.04, 2.0), (0.11, 0.0)]}
    history_chart(history, "planted", tmp_path / "t.png", ttl=1.0)
    assert (tmp_path / "t.png").stat().st_size > 1000


def _elf(interpreter: bool) -> bytes:
    """A 64-bit little-endian ELF header with two program headers, one of them PT_INTERP when asked."""
    header = bytearray(64)
    header[:6] = b"\x7fELF\x02\x01"
    struct.pack_into("<Q", header, 0x20, 64)  # e_phoff
    struct.pack_into("<HH", header, 0x36, 56, 2)  # e_phentsize, e_phnum
    table = bytearray(112)
    struct.pack_into("<I", table, 0, 1)  # PT_LOAD
    struct.pack_into("<I", table, 56, 3 if interpreter else 4)  # PT_INTERP, or PT_NOTE
    return bytes(header + table)


def test_a_binary_without_a_program_interpreter_is_out_of_a_preloads_reach(tmp_path):
    static, dynamic = tmp_path / "static", tmp_path / "dynamic"
    static.write_bytes(_elf(False))
    dynamic.write_bytes(_elf(True))
    assert not fake_clock.dynamically_linked(static) and fake_clock.dynamically_linked(dynamic)
    assert "static binary" in fake_clock.unreachable(static, "etcd's server")
    assert fake_clock.unreachable(dynamic, "redis's server") is None
    assert fake_clock.dynamically_linked(Path(sys.executable))


def test_a_fake_clock_names_offset_and_rate_and_cancels_the_rates_count_from_the_start(tmp_path):
    clock = fake_clock.FakeClock(tmp_path, "server", tmp_path / "libfaketime.so.1")
    clock.started -= 10.0  # the process began ten seconds ago
    before = time.time()
    clock.set(2.0, 3.0)
    after = time.time()
    offset, rate = clock.path.read_text().split()
    # A rate counts from the process's start: what it adds by now (twice the time since) is taken off the offset.
    assert rate == "x3.000000" and 2.0 - 2 * (after - clock.started) <= float(offset) <= 2.0 - 2 * (before - clock.started)
    clock.reset()
    assert clock.path.read_text() == "+0.000000 x1.000000\n"  # the rate named back to 1: libfaketime never clears it
    env = clock.environment()
    assert env["FAKETIME_DONT_FAKE_MONOTONIC"] == "1" and env["FAKETIME_NO_CACHE"] == "1"
    assert "FAKETIME_DONT_FAKE_MONOTONIC" not in clock.environment(fake_monotonic=True)


def test_an_empty_library_variable_is_a_machine_without_libfaketime(monkeypatch):
    monkeypatch.setenv(fake_clock.LIBRARY_VARIABLE, "")
    assert fake_clock.find_libfaketime() is None
    assert fake_clock.missing_reason() == "libfaketime not installed (apt-get install libfaketime)"


def test_the_verdict_of_a_search_is_its_shown_steps_and_quotes_the_margin():
    from lab.checkers.judge import margin_verdict

    broke, held = judge(lease_history(True), FINAL_WHOLE, 250), judge(lease_history(False), FINAL_WHOLE, 250)
    verdict = margin_verdict([held, broke], 1, Margin(0.5, 1.0, 1, 1, 2).to_json())
    assert verdict.kind is Kind.STALE_WRITE_ACCEPTED and verdict.lock is Valid.FALSE and verdict.exercised
    assert Verdict.from_json(verdict.to_json()).figures["margin"]["broke"] == 1.0


def test_a_backend_with_no_lease_is_named_once_under_the_margin_table():
    no_lease = {"id": "margin/xact/-/0", "scenario": "margin", "backend": "xact", "variant": "-", "index": 0,
                "status": "skipped", "reason": "needs lease_expiry"}
    text = section_margins(RunView.of([margin_record("redis", [_step(1.5, False)], {}), no_lease]))
    assert "| xact |" not in text and "n/a (needs lease_expiry): xact." in text
