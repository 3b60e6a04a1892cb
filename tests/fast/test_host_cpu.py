"""The host's share of the CPU (steal) over an interval, from /proc/stat lines, and where runs show it."""

from lab.records import host_cpu
from lab.report.meta import bound_rows

# user nice system idle iowait irq softirq steal guest guest_nice
BEFORE = "cpu  1000 0 500 8000 100 0 0 400 0 0"
AFTER = "cpu  1300 0 600 8300 100 0 0 700 50 0"  # 1,000 ticks passed, 300 of them stolen (guest is inside user)


def test_the_stolen_share_is_steals_change_over_the_totals():
    share = host_cpu.stolen_share(host_cpu.parse(BEFORE), host_cpu.parse(AFTER))
    assert share == 0.3
    assert host_cpu.describe(share) == "; 30% of the CPU taken by the host"


def test_no_reading_or_no_time_passed_gives_no_share():
    before = host_cpu.parse(BEFORE)
    assert host_cpu.stolen_share(before, before) is None
    assert host_cpu.stolen_share(None, before) is None
    assert host_cpu.parse("cpu0 1 2 3 4 5 6 7 8") is None  # one CPU's line, not the machine's
    assert host_cpu.parse("cpu  1 2 3") is None  # a kernel that counts no steal
    assert host_cpu.describe(None) == ""


def test_a_missing_proc_stat_reads_as_unknown(tmp_path):
    assert host_cpu.read(tmp_path / "stat") is None


def test_this_machines_window_reads_a_share_between_0_and_1():
    if host_cpu.read() is None:  # not Linux: nothing to read, and the run says nothing
        return
    window = host_cpu.Window()
    sum(i * i for i in range(200_000))  # let some ticks pass
    share = window.stolen()
    assert share is None or 0.0 <= share <= 1.0


def test_the_provenance_rows_say_the_share_where_the_run_recorded_it():
    meta = {"bounds": {"rule": "r", "run": {"wall_s": 100.0, "bound_s": 80.0, "cpu_stolen": 0.224},
                       "scenarios": {"pause": {"wall_s": 20.0, "bound_s": 10.0, "lane": "shared",
                                               "trials_finished": 3, "at_once": 3}}}}
    rows = dict(bound_rows(meta))
    assert rows["time: the run"] == "wall 100 s, bound 80 s (1.25x); 22% of the CPU taken by the host"
    assert rows["time: pause"].endswith("up to 3 at once")  # this scenario's share was not recorded: nothing said
