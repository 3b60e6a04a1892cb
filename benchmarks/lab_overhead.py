"""Is the lab what is slow? Time 'one transaction for all companies' through the lab and bare psycopg2.

Both rebuild the same companies with the same statements on the same embedded
PostgreSQL, alternating A B A B; the figure is the ratio of medians within this
one run (target: at most 1.1). With --rss it also runs
`lab run --scenario perf --profile full` and prints its peak RSS (target: < 1 GiB).

    python benchmarks/lab_overhead.py [--companies 2000] [--repeats 5] [--rss]
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--companies", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--rss", action="store_true", help="also measure peak RSS of the full perf scenario")
    args = parser.parse_args()

    with start_services(["postgres"]) as services:
        monitor, writes = pg.monitor_engine(services), pg.writes_engine(services)
        ensure_schema(monitor)
        table = CompanyTable(table_name("bench_overhead"))
        table.create(monitor)
        companies = list(range(1, args.companies + 1))
        table.fill(writes, companies, ROWS)
        lab_backend = NoLock(BackendContext(services, monitor, writes, table), "bench")
        url = services.pg_url
        dsn = {"host": url.host, "port": url.port, "user": url.username, "dbname": url.database}
        times = {"lab": [], "bare": []}
        for i in range(args.repeats):
            for name in ("lab", "bare"):  # A B A B: drift on a shared machine hits both
                start = time.monotonic()
                if name == "lab":
                    result = lab_backend.rebuild_batch(companies, ROWS, f"lab{i}")
                    assert result.outcome == "committed", result.error
                else:
                    bare(dsn, table.name, companies, f"bare{i}")
                times[name].append(time.monotonic() - start)
        drop_schema(monitor)
        monitor.dispose()
        writes.dispose()

    lab_median, bare_median = statistics.median(times["lab"]), statistics.median(times["bare"])
    print(f"one transaction for all, {args.companies} companies x {ROWS} rows, {args.repeats} repeats each")
    for name in ("lab", "bare"):
        values = times[name]
        print(f"  {name:<5} median {statistics.median(values):.3f} s  (min {min(values):.3f}, max {max(values):.3f})")
    print(f"  lab / bare = {lab_median / bare_median:.3f}   (target <= 1.1)")

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
