"""Is the lab what is slow? Time 'one transaction for all companies' through the lab and bare psycopg2.

Both rebuild the same companies with the same statements on the same embedded PostgreSQL, each on a
fresh, vacuumed table of its own, interleaved company by company: bare psycopg2's transaction is driven
from the lab's point hook, so for each company one sends its delete + insert and then the other, and both
commit at the end. A pause of the host (this machine's steal comes in bursts of a second) then falls on
both alike instead of on whichever ran during it: run one after the other, the same pair's ratio ranged
0.45-2.8 here. Per repetition, lab time is the lab call's wall time less the time spent inside the hook
on bare's work (so the hook's own calls count as the lab's). Which goes first alternates per repetition
(ABBA); --reverse starts with bare. The figure is the median of the paired ratios (target: at most 1.1),
repeated until they lie within +-5% of it, at least --repeats and at most 4 x --repeats times
(lab/measures/precision.py's rule). With --rss it also runs `lab run --scenario perf --profile full` and
prints its peak RSS (target: < 1 GiB).

    python benchmarks/lab_overhead.py [--companies 2000] [--repeats 6] [--reverse] [--rss]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import psycopg2
from sqlalchemy import text

from backends.base import BackendContext
from backends.none import NoLock
from lab.measures.precision import Rule, describe, repeat
from lab.servers.postgres import sql as pg
from lab.servers.services import start_services
from lab.workload.table import CompanyTable, drop_schema, ensure_schema, table_name

ROWS = 220
TOLERANCE = 0.05


class BareBeside:
    """Bare psycopg2's rebuild of the same companies on its own table, one company per call from the lab's hook.

    `first` says whose company goes first: bare's at the lab's "before_delete" point, or after the lab's
    insert ("before_commit"). Bare commits right after its last company. `spent` is the wall time of
    bare's own work, measured inside the hook.
    """

    def __init__(self, dsn: dict, table: str, companies: list[int], run_id: str, first: str):
        self.conn = psycopg2.connect(**dsn)
        self.cursor = self.conn.cursor()
        self.table, self.run_id = table, run_id
        self.left = list(reversed(companies))
        self.at = "before_delete" if first == "bare" else "before_commit"
        self.spent = 0.0

    def __call__(self, name: str, conn) -> None:
        if name != self.at or not self.left:
            return
        start = time.monotonic()
        company = self.left.pop()
        self.cursor.execute(f"delete from {self.table} where company_id = %s", (company,))
        self.cursor.execute(f"insert into {self.table} (company_id, run_id, n) "
                            f"select %s, %s, g from generate_series(1, %s) g", (company, self.run_id, ROWS))
        if not self.left:
            self.conn.commit()
        self.spent += time.monotonic() - start

    def close(self) -> None:
        if self.left:
            raise RuntimeError(f"bare psycopg2 was left {len(self.left)} companies: the lab's hook was not called")
        self.conn.close()


def fresh_table(monitor, writes, label: str, companies: list[int]) -> CompanyTable:
    """A new company table, filled, vacuumed and analyzed: every measurement starts from the same state."""
    table = CompanyTable(table_name(label))
    table.create(monitor)
    table.fill(writes, companies, ROWS)
    with monitor.connect() as conn:
        conn.execute(text(f"vacuum analyze {table.name}"))
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--companies", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=6, help="at least this many repetitions (at most 4x)")
    parser.add_argument("--reverse", action="store_true", help="begin with bare instead of lab (BAAB...)")
    parser.add_argument("--rss", action="store_true", help="also measure peak RSS of the full perf scenario")
    args = parser.parse_args()
    rule = Rule(tolerance=TOLERANCE, floor=args.repeats, cap=4 * args.repeats)

    with start_services(["postgres"]) as services:
        monitor, writes = pg.monitor_engine(services), pg.writes_engine(services)
        ensure_schema(monitor)
        companies = list(range(1, args.companies + 1))
        url = services.pg_url
        dsn = {"host": url.host, "port": url.port, "user": url.username, "password": url.password,
               "dbname": url.database}
        times: dict[str, list[float]] = {"lab": [], "bare": []}
        starts = ("bare", "lab") if args.reverse else ("lab", "bare")

        def once(i: int) -> list[float]:
            first = starts[i % 2]  # ABBA: neither always goes first
            lab_table = fresh_table(monitor, writes, f"bench_lab_{i}", companies)
            bare_table = fresh_table(monitor, writes, f"bench_bare_{i}", companies)
            with monitor.connect() as conn:
                conn.execute(text("checkpoint"))  # the fills' dirty pages are not written during the timing
            beside = BareBeside(dsn, bare_table.name, companies, f"bare{i}", first)
            backend = NoLock(BackendContext(services, monitor, writes, lab_table), "bench")
            start = time.monotonic()
            result = backend.rebuild_batch(companies, ROWS, f"lab{i}", point=beside)
            total = time.monotonic() - start
            assert result.outcome == "committed", result.error  # before close(), whose complaint would hide it
            beside.close()
            times["lab"].append(total - beside.spent)
            times["bare"].append(beside.spent)
            with monitor.connect() as conn:
                for table in (lab_table, bare_table):
                    conn.execute(text(f"drop table {table.name}"))
            return [times["lab"][-1] / times["bare"][-1]]

        done, outcome = repeat(rule, once)
        drop_schema(monitor)
        monitor.dispose()
        writes.dispose()

    ratios = [r for (r,) in done]
    print(f"one transaction for all, {args.companies} companies x {ROWS} rows, interleaved company by company, "
          f"order {'BAAB' if args.reverse else 'ABBA'}, a fresh vacuumed table per measurement")
    print(f"  {describe(outcome)}; {rule.describe()}")
    for name in ("lab", "bare"):
        values = times[name]
        print(f"  {name:<5} median {statistics.median(values):.3f} s  (min {min(values):.3f}, max {max(values):.3f})")
    print(f"  lab / bare, paired per repetition: median {statistics.median(ratios):.3f} "
          f"(min {min(ratios):.3f}, max {max(ratios):.3f})   (target <= 1.1)")

    if args.rss:
        with tempfile.TemporaryDirectory() as results:
            start = time.monotonic()
            subprocess.run([sys.executable, "-m", "lab.cli", "run", "--backend", "none,xact", "--scenario", "perf",
                            "--profile", "full", "--results", results], check=True)
            peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        print(f"lab run --scenario perf --profile full: {time.monotonic() - start:.0f} s, "
              f"peak RSS {peak_kib / 1024:.0f} MiB (target < 1024 MiB)")


if __name__ == "__main__":
    main()
