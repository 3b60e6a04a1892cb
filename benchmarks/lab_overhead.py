"""Is the lab what is slow? Time 'one transaction for all companies' through the lab and bare psycopg2.

Both rebuild the same companies with the same statements on the same embedded PostgreSQL, each
on a fresh, vacuumed table of its own, in ABBA order (lab bare, bare lab, ...), so neither always
goes second and neither meets the other's dead rows. The figure is the median of the ratios paired
within each repetition, with their spread (target: at most 1.1). --reverse starts with bare: the
ratio should move by less than its spread. With --rss it also runs
`lab run --scenario perf --profile full` and prints its peak RSS (target: < 1 GiB).

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
from lab.harness.workload import CompanyTable, drop_schema, ensure_schema, table_name
from lab.servers import pg
from lab.servers.services import start_services

ROWS = 220


def bare(dsn: dict, table: str, companies: list[int], run_id: str) -> None:
    """The same statements the lab sends, from a plain psycopg2 connection."""
    conn = psycopg2.connect(**dsn)
    try:
        with conn, conn.cursor() as cur:
            for company in companies:
                cur.execute(f"delete from {table} where company_id = %s", (company,))
                cur.execute(f"insert into {table} (company_id, run_id, n) "
                            f"select %s, %s, g from generate_series(1, %s) g", (company, run_id, ROWS))
    finally:
        conn.close()


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
    parser.add_argument("--repeats", type=int, default=6)
    parser.add_argument("--reverse", action="store_true", help="begin with bare instead of lab (BAAB...)")
    parser.add_argument("--rss", action="store_true", help="also measure peak RSS of the full perf scenario")
    args = parser.parse_args()

    with start_services(["postgres"]) as services:
        monitor, writes = pg.monitor_engine(services), pg.writes_engine(services)
        ensure_schema(monitor)
        companies = list(range(1, args.companies + 1))
        url = services.pg_url
        dsn = {"host": url.host, "port": url.port, "user": url.username, "password": url.password,
               "dbname": url.database}
        times = {"lab": [], "bare": []}
        first = ("bare", "lab") if args.reverse else ("lab", "bare")
        for i in range(args.repeats):
            for name in first if i % 2 == 0 else tuple(reversed(first)):  # ABBA: neither always goes second
                table = fresh_table(monitor, writes, f"bench_{name}_{i}", companies)
                start = time.monotonic()
                if name == "lab":
                    backend = NoLock(BackendContext(services, monitor, writes, table), "bench")
                    result = backend.rebuild_batch(companies, ROWS, f"lab{i}")
                    assert result.outcome == "committed", result.error
                else:
                    bare(dsn, table.name, companies, f"bare{i}")
                times[name].append(time.monotonic() - start)
                with monitor.connect() as conn:
                    conn.execute(text(f"drop table {table.name}"))
        drop_schema(monitor)
        monitor.dispose()
        writes.dispose()

    ratios = [lab / bare_s for lab, bare_s in zip(times["lab"], times["bare"])]
    print(f"one transaction for all, {args.companies} companies x {ROWS} rows, {args.repeats} repeats each, "
          f"order {'BAAB' if args.reverse else 'ABBA'}, a fresh vacuumed table per measurement")
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
