"""The `lab` command: run, report, list, services up.

Bad input ends with one line on stderr and exit 2; Ctrl-C and SIGTERM stop every
server the lab started and keep every finished trial.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from pathlib import Path

from rich.console import Console
from rich.table import Table

import backends
import scenarios
from lab import preflight
from lab.checkers.outcomes import outcome_rows
from lab.errors import LabError
from lab.servers.postgres import drivers
from lab.servers.services import ExternalAddresses

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


def _add_server_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--pg-dsn", help="use this PostgreSQL instead of the embedded one (env LAB_PG_DSN)")
    parser.add_argument("--redis-url", help="use this Redis instead of the embedded one (env LAB_REDIS_URL)")
    parser.add_argument("--etcd-endpoint", help="use this etcd (host:port) instead of the embedded one "
                                                "(env LAB_ETCD_ENDPOINT)")
    parser.add_argument("--redlock-urls", help="comma-separated Redis URLs, the Redlock masters "
                                               "(env LAB_REDLOCK_URLS; default: three embedded)")
    parser.add_argument("--zk-hosts", help="use this ZooKeeper (host:port[,host:port...]) instead of the embedded "
                                           "one (env LAB_ZK_HOSTS)")
    parser.add_argument("--mariadb-url", help="use this MariaDB (mysql://user:password@host:port/) instead of the "
                                              "embedded one (env LAB_MARIADB_URL)")
    parser.add_argument("--pg-pooler-dsn", help="your PostgreSQL pooler (PgBouncer ...) in front of --pg-dsn's "
                                                "database: the pooler scenario runs every lock through it "
                                                "(env LAB_PG_POOLER_DSN)")


def build_parser() -> argparse.ArgumentParser:
    """The command line: one subcommand each, added by its own function below."""
    parser = argparse.ArgumentParser(prog="lab", description="Which lock keeps two rebuilds apart when "
                                                             "things go wrong? Measured on real servers.")
    sub = parser.add_subparsers(dest="command", required=True)
    for add in (_add_run, _add_report, _add_replay, _add_export, _add_doctor, _add_scan, _add_list, _add_check_backend,
                _add_services):
        add(sub)
    return parser


def _add_run(sub) -> None:
    """`lab run`: scenarios against backends, trials saved."""
    run = sub.add_parser("run", help="run scenarios against backends and save the trials")
    run.add_argument("--backend", default="all", help="all, or comma-separated names (see 'lab list')")
    run.add_argument("--backend-module", action="append", default=[], metavar="MODULE:CLASS",
                     help="add a backend from your own module (repeatable); the current folder is importable")
    run.add_argument("--scenario", default=None,
                     help="all, or comma-separated names; default: the core set marked * in 'lab list'")
    run.add_argument("--profile", default="default", choices=["quick", "default", "full"])
    run.add_argument("--driver", default=None,
                     help="how a session lock's PostgreSQL connection is made: all, or comma-separated drivers "
                          "(see 'lab list'); default psycopg2")
    run.add_argument("--results", default="results", type=Path, help="folder that holds one folder per run")
    run.add_argument("--resume", metavar="RUN", help="finish an interrupted run: only its missing trials")
    run.add_argument("--settle", action="store_true",
                     help="after the planned trials, add trials where the answer depends on them: every cell that "
                          "decides a need until its first failure or 20 exercised trials (bound <= 14 %%), every cell "
                          "that flipped against --previous until 20 trials state its rate; within --settle-minutes")
    run.add_argument("--settle-minutes", type=float, default=None, metavar="N",
                     help="the added trials' time budget (implies --settle; default 30); with --resume, N more "
                          "minutes for a run that settled before")
    run.add_argument("--previous", action="append", default=None, metavar="RUN",
                     help="an earlier reference whose marks --settle compares with (repeatable; default the "
                          "committed reference REPORT.md names; none: compare with none)")
    run.add_argument("--fault-command", action="append", default=[], metavar="FAULT=CMD",
                     help="perform FAULT (restart, failover, pause, partition, heal) on servers the lab did not "
                          "start by running your shell command CMD (repeatable); e.g. restart='systemctl restart "
                          "postgresql', failover='redis-cli -p 26379 SENTINEL failover mymaster'")
    _add_server_flags(run)


def _add_report(sub) -> None:
    """`lab report`: REPORT.md (or a comparison, or the answer for a stack) from saved runs."""
    report = sub.add_parser("report", help="write REPORT.md from a saved run (contacts no server)")
    report.add_argument("run", nargs="*", help="run ids or folders (default: the latest under --results); "
                                              "with several, a later run's trial replaces an earlier one's")
    report.add_argument("--results", default="results", type=Path)
    report.add_argument("--output", default=None, type=Path,
                        help="default: REPORT.md in the (last) run's folder; with --compare: stdout")
    report.add_argument("--html", action="store_true",
                        help="also write report.html beside REPORT.md: the report and its appendices on one "
                             "self-contained page, each matrix cell opening its trials")
    report.add_argument("--previous", default=None, metavar="RUN",
                        help="the previous reference run: a cell whose safety verdict flipped against it is shown as "
                             "unstable (↯), and the first lines list them")
    report.add_argument("--compare", nargs=2, metavar=("RUN_A", "RUN_B"),
                        help="a table of the outcomes that differ between two runs")
    report.add_argument("--stack", type=Path, metavar="FILE",
                        help="print the answer for the stack FILE describes (lab doctor --stack writes one) from the "
                             "runs named, or by default from the committed reference REPORT.md names; exit 1 when the "
                             "lock in use fails a fault the stack is exposed to")
    report.add_argument("--json", action="store_true", help="with --stack: one JSON document, for pipelines")


def _add_replay(sub) -> None:
    """`lab replay`: a recorded kill-point schedule run again."""
    replay = sub.add_parser("replay", help="re-run a recorded kill-point schedule and print its history")
    replay.add_argument("run", help="run id or folder")
    replay.add_argument("trial", help="trial id (killpoints/<backend>/search/0) or just the backend's name")
    replay.add_argument("--results", default="results", type=Path)
    replay.add_argument("--png", type=Path, metavar="FILE",
                        help="also draw the replayed history as a timeline picture (one lane per run)")
    replay.add_argument("--tries", type=int, default=3,
                        help="runs race after the fault, so try the schedule up to this many times (default 3)")
    _add_server_flags(replay)


def _add_export(sub) -> None:
    """`lab export`: a saved run's histories for other tools."""
    export = sub.add_parser("export", help="write a saved run's trial histories for other tools (contacts no server)")
    export.add_argument("run", help="run id or folder")
    export.add_argument("output", type=Path, help="folder to write one file per trial into")
    export.add_argument("--format", choices=["jepsen"], default="jepsen",
                        help="jepsen: EDN operations, {:process 0, :type :invoke, :f :acquire, ...}")
    export.add_argument("--results", default="results", type=Path)


def _add_doctor(sub) -> None:
    """`lab doctor`: a stack's servers read for the hidden-expiry traps, and the answer for it."""
    doctor = sub.add_parser("doctor", help="check a PostgreSQL (or a MariaDB) for the hidden-expiry traps and "
                                           "describe the stack, read-only; --advise answers which lock is safe on it")
    doctor.add_argument("--dsn", help="postgresql://user:password@host:port/dbname, or a MariaDB's mysql://...")
    doctor.add_argument("--mariadb-dsn", help="mysql://user:password@host:port/ (a MariaDB: its idle guards, "
                                              "GET_LOCK holders and waiter timeouts)")
    doctor.add_argument("--redis-url", help="redis://[:password@]host:port, or redis+sentinel://... for Sentinel")
    doctor.add_argument("--redlock-urls", help="comma-separated redis:// URLs of independent Redlock masters")
    doctor.add_argument("--etcd", metavar="HOST:PORT", help="an etcd endpoint")
    doctor.add_argument("--zk-hosts", metavar="HOST:PORT[,...]", help="ZooKeeper servers")
    doctor.add_argument("--patroni-url", help="Patroni's REST API, http://[user:password@]host:port")
    doctor.add_argument("--lock", metavar="BACKEND", help="the lock in use, as 'lab list' names it ('none': no lock)")
    doctor.add_argument("--driver", help="the client's driver (psycopg2, psycopg, asyncpg, ...)")
    doctor.add_argument("--autocommit", choices=["yes", "no"], help="whether the lock's connection is AUTOCOMMIT")
    doctor.add_argument("--stack", type=Path, metavar="FILE", help="write the stack description (JSON) to FILE")
    doctor.add_argument("--advise", action="store_true",
                        help="print the answer for this stack from the committed reference (or --run); the exit "
                             "status is then 1 when the lock in use fails a fault the stack is exposed to")
    doctor.add_argument("--run", action="append", default=[], metavar="RUN",
                        help="with --advise: answer from this run instead (repeatable: merged in order)")
    doctor.add_argument("--results", default="results", type=Path, help="where --run finds runs")
    doctor.add_argument("--json", action="store_true", help="print one JSON document, for CI pipelines")
    doctor.add_argument("--hung-after", type=float, default=3600, metavar="SECONDS",
                        help="warn when a session holding an advisory lock is older than this")


def _add_list(sub) -> None:
    """`lab list`: every backend and scenario."""
    listing = sub.add_parser("list", help="every backend and scenario, one line each")
    listing.add_argument("--markdown", action="store_true",
                         help="print the reference page instead (docs/reference.md): every declared backend, scenario, "
                              "fault column, capability and driver, the same on every machine")


def _add_scan(sub) -> None:
    """`lab scan`: the post's two bugs found in Python source, each tied to the lab's measured cell."""
    scan = sub.add_parser("scan", help="find the post's two bugs in Python source (session advisory locks left idle in "
                                       "a transaction, releases that swallow their failure); exit 1 on a finding")
    scan.add_argument("paths", nargs="*", metavar="PATH", help="Python files or folders to read (never run)")
    shown = scan.add_mutually_exclusive_group()
    shown.add_argument("--json", action="store_true", help="print the results as JSON")
    shown.add_argument("--sarif", action="store_true", help="print SARIF 2.1.0, for code-scanning tools")
    scan.add_argument("--no-evidence", action="store_true",
                      help="do not read the committed reference for each finding's measured cell (faster)")


def _add_check_backend(sub) -> None:
    """`lab check-backend`: a backend's promises checked on embedded servers."""
    check = sub.add_parser("check-backend", help="check a backend's promises on embedded servers (or yours, by flag "
                                                 "or environment), one line each")
    check.add_argument("name", help="a registered backend, or the name of one given with --backend-module")
    check.add_argument("--backend-module", action="append", default=[], metavar="MODULE:CLASS",
                       help="add a backend from your own module (repeatable); the current folder is importable")
    _add_server_flags(check)


def _add_services(sub) -> None:
    """`lab services up`: the embedded servers kept until Ctrl-C."""
    services = sub.add_parser("services", help="start the embedded servers and keep them until Ctrl-C")
    services.add_argument("action", choices=["up"])

def quiet_background_noise() -> None:
    """No traceback walls from where the lab breaks things on purpose.

    The lab kills sessions and servers; SQLAlchemy's pool then logs, with a traceback, that
    it could not reset a dead connection. Those records are expected and go nowhere. A thread
    that dies unexpectedly is reported in one line (its trial records the error itself).
    """
    pool_log = logging.getLogger("sqlalchemy.pool")
    pool_log.addHandler(logging.NullHandler())
    pool_log.propagate = False

    def one_line(hook_args) -> None:
        if hook_args.exc_type is SystemExit:
            return
        first = (str(hook_args.exc_value).strip().splitlines() or [""])[0]
        name = hook_args.thread.name if hook_args.thread else "?"
        print(f"lab: background thread {name} stopped: {hook_args.exc_type.__name__}: {first}", file=sys.stderr)

    threading.excepthook = one_line


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    quiet_background_noise()
    # SIGTERM takes the same path as Ctrl-C: servers stopped, finished trials kept. SIGINT is set
    # explicitly too: a background job of a non-interactive shell inherits it ignored.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return {"run": cmd_run, "report": cmd_report, "list": cmd_list, "services": cmd_services,
                "replay": cmd_replay, "doctor": cmd_doctor, "check-backend": cmd_check_backend,
                "export": cmd_export, "scan": cmd_scan}[
            args.command](args, argv)
    except LabError as exc:
        print(f"lab: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # `lab list | head`: the reader left, which is not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def cmd_scan(args, argv) -> int:
    """Exit 1 when a finding is reported, 0 otherwise, 2 for a path that does not exist (a file that does not parse
    is a warning in the output, not an error)."""
    from lab.scan import evidence, render
    from lab.scan.findings import Warning_
    from lab.scan.scanner import scan

    if not args.paths:
        raise LabError("scan: name at least one Python file or folder, e.g. lab scan src/")
    report = scan(args.paths)
    if not args.no_evidence:
        try:
            report = evidence.attach(report, evidence.load())
        except LabError as exc:  # no committed reference here (an installed wheel): the findings stand without it
            from dataclasses import replace

            report = replace(report, warnings=(*report.warnings, Warning_(None, f"no reference evidence: {exc}")))
    if args.json:
        print(render.as_json(report))
    elif args.sarif:
        print(render.sarif(report))
    else:
        sys.stdout.write(render.text(report))
    return 1 if report.findings else 0


def cmd_check_backend(args, argv) -> int:
    external = ExternalAddresses.from_flags_and_env(args)
    gate = preflight.Gate()
    gate.ahead(external)  # as lab run: before the backends' libraries load
    from lab.contract import check_backend

    for spec in args.backend_module:
        backends.add_module(spec)
    return check_backend(args.name, external=external, gate=gate)


def cmd_run(args, argv) -> int:
    external = ExternalAddresses.from_flags_and_env(args)
    # What sits at each address given, before the runner and the backends' libraries load (seconds): one the lab
    # cannot measure through ends the run here, in one line (lab/preflight).
    gate = preflight.Gate()
    if not args.resume:
        gate.ahead(external)
    from lab.runner import Runner, RunRequest

    request = RunRequest(backends=[], scenarios=[], profile=args.profile, results_root=args.results,
                         external=external, argv=argv, resume=args.resume,
                         fault_commands=parse_fault_commands(args.fault_command),
                         settle=settle_ask(args))
    for spec in args.backend_module:
        request.extra_backends.append(spec)
        added = backends.add_module(spec)
        if args.backend == "all" or added in args.backend.split(","):
            continue
        args.backend += f",{added}"
    if not args.resume:
        request.backends = backends.resolve(args.backend)
        request.scenarios = scenarios.resolve(args.scenario)
        request.drivers = drivers.resolve(args.driver)
    runner = Runner(request, gate=gate)
    try:
        folder = runner.execute()
    except KeyboardInterrupt:
        kept = runner.folder
        if kept is None:
            print("lab: interrupted before any trial finished; nothing was kept", file=sys.stderr)
        else:
            print(f"lab: interrupted; {len(kept.trials())} finished trials kept in {kept.path}; "
                  f"finish with: lab run --resume {kept.run_id} --results {args.results}", file=sys.stderr)
        return EXIT_INTERRUPTED
    print_outcomes(folder.trials())
    print(f"results: {folder.path}   next: lab report {folder.run_id}")
    return 0


def settle_ask(args):
    """--settle, --settle-minutes, --previous as the runner's SettleAsk; None when none was given."""
    from lab.runner import SettleAsk

    if not (args.settle or args.settle_minutes is not None or args.previous):
        return None
    if args.previous and not (args.settle or args.settle_minutes is not None or args.resume):
        raise LabError("--previous names the references --settle compares marks with: add --settle")
    if args.settle_minutes is not None and args.settle_minutes <= 0:
        raise LabError(f"--settle-minutes: give a positive number of minutes, not {args.settle_minutes:g}")
    return SettleAsk(args.settle_minutes, None if args.previous is None else tuple(args.previous))


def parse_fault_commands(values: list[str]) -> dict[str, str]:
    """HOOK=CMD pairs (lab/faults/commands.py); LabError for a hook that does not exist or an empty command."""
    from lab.faults.commands import HOOKS

    out = {}
    for value in values:
        fault, sep, command = value.partition("=")
        if fault not in HOOKS:
            raise LabError(f"--fault-command: no fault {fault!r} runs a command; choose from: {', '.join(HOOKS)}")
        if not sep or not command.strip():
            raise LabError(f"--fault-command {fault}: give the command after '=' ({fault}=CMD)")
        out[fault] = command
    return out


def print_outcomes(trials: list[dict]) -> None:
    """What ran, errors first; cells that did not run fold into one line per scenario with their reasons."""
    from collections import Counter

    from lab.checkers.outcomes import latest_per_trial

    latest = latest_per_trial(trials)
    skipped_only = {(t["scenario"], t["backend"], t["variant"]) for t in latest}
    skipped_only -= {(t["scenario"], t["backend"], t["variant"]) for t in latest if t["status"] != "skipped"}
    rows = [row for row in outcome_rows(trials) if (row.scenario, row.backend, row.variant) not in skipped_only]
    rows.sort(key=lambda row: "error" not in row.outcome)  # stable: errors first, the run's order kept
    table = Table(title="outcomes")
    for column in ("scenario", "backend", "variant", "post case", "outcome"):
        table.add_column(column)
    for row in rows:
        table.add_row(row.scenario, row.backend, row.variant, row.case or "", row.outcome)
    # Piped output gets 80 columns from rich by default; the table needs more to stay readable.
    console = Console(width=None if sys.stdout.isatty() else 140)
    console.print(table)
    folded: dict[str, Counter] = {}
    for t in latest:
        if (t["scenario"], t["backend"], t["variant"]) in skipped_only:
            folded.setdefault(t["scenario"], Counter())[t.get("reason") or "skipped"] += 1
    for scenario, reasons in folded.items():
        console.print(f"{scenario}: n/a for {sum(reasons.values())} cells ("
                      + "; ".join(f"{reason}: {n}" for reason, n in reasons.most_common()) + ")", highlight=False)


def cmd_report(args, argv) -> int:
    import scenarios
    from lab.report import declared, write_report
    from lab.report.html import PAGE
    from lab.records.results import RunFolder

    declared.install(scenarios.fault_columns())  # for runs recorded before meta.json kept them
    declared.install_roles(backends.post_roles())
    declared.install_measured(scenarios.measured())

    if args.compare:
        from lab.report.compare import compare

        text = compare(*(RunFolder.open(args.results, run) for run in args.compare))
        if args.output is None:
            print(text, end="")
        else:
            args.output.write_text(text)
            print(f"wrote {args.output}")
        return 0
    if args.stack is not None:
        from lab.stack.description import Stack

        from lab.doctor.command import print_advice

        return print_advice(Stack.load(args.stack), args.run, args.results, args.json)
    folders = [RunFolder.open(args.results, run) for run in args.run] or [RunFolder.latest(args.results)]
    previous = RunFolder.open(args.results, args.previous) if args.previous else None
    path = write_report(folders, args.output or folders[-1].path / "REPORT.md", html=args.html, previous=previous)
    page = f" and {path.parent / PAGE}" if args.html else ""
    print(f"wrote {path}{page} from {', '.join(str(f.path) for f in folders)}")
    return 0


def cmd_export(args, argv) -> int:
    from lab.records.export import export_jepsen
    from lab.records.results import RunFolder

    written = export_jepsen(RunFolder.open(args.results, args.run), args.output)
    print(f"wrote {len(written)} histories (Jepsen EDN) into {args.output}")
    return 0


def cmd_replay(args, argv) -> int:
    from lab.replay import replay

    external = ExternalAddresses.from_flags_and_env(args)
    return replay(args.results, args.run, args.trial, external, tries=max(1, args.tries), png=args.png)


def cmd_doctor(args, argv) -> int:
    """lab doctor: its own room (lab/doctor/command.py)."""
    from lab.doctor.command import doctor

    return doctor(args)


def cmd_list(args, argv) -> int:
    if args.markdown:
        from lab.reference import render

        sys.stdout.write(render())
        return 0
    usable = backends.names()
    width = max(len(name) for name in [*usable, *backends.broken, *scenarios.names()])
    from lab.servers.services import ExternalAddresses, not_installed

    external = ExternalAddresses.from_flags_and_env()
    print("backends (! = a server it needs is not installed here; its cells say does not run):")
    for name in usable:
        cls = backends.load(name)
        absent = [why for service in cls.services if not external.given(service)
                  and (why := not_installed(service)) is not None]
        print(f"{'!' if absent else ' '} {name:<{width}} {cls.summary}" + (f" ({'; '.join(absent)})" if absent else ""))
    for name, reason in sorted(backends.broken.items()):
        print(f"! {name:<{width}} skipped, broken plugin: {reason}")
    print("scenarios (* = run when no --scenario is given):")
    for name in scenarios.names():
        mark = "*" if scenarios.load(name).default_run else " "
        print(f"{mark} {name:<{width}} {scenarios.load(name).summary}")
    print("drivers of a session lock's connection (--driver; ! = not installed: pip install -e '.[drivers]'):")
    for name, (_, what) in drivers.DRIVERS.items():
        absent = drivers.missing(name)
        print(f"{'!' if absent else ' '} {name:<{width}} {what}" + (f" (needs {', '.join(absent)})" if absent else ""))
    return 0


def cmd_services(args, argv) -> int:
    from lab.servers.services import ENV_VARS, SERVICE_NAMES, start_services

    with start_services(SERVICE_NAMES) as services:
        if services.swept:
            print(f"removed the temp dirs of lab runs that were killed: {', '.join(services.swept)}")
        for name, info in services.describe().items():
            print(f"{name:<9} {info['address']}  (version {info['version']})")
        # The passwords are random per start and live only in this process: this is the one place they
        # are shown, to the person who asked, on their terminal; nothing is written to a file.
        print("to point a run or a client at them (the passwords are printed here only):")
        addresses = services.to_addresses()
        values = {"postgres": addresses["pg_dsn"], "redis": addresses["redis_url"],
                  "etcd": addresses["etcd_endpoint"], "redlock": ",".join(addresses["redlock_urls"]),
                  "zookeeper": addresses["zk_hosts"], "mariadb": addresses["mariadb_url"]}
        for name in SERVICE_NAMES:
            if values[name] is not None:
                print(f"  export {ENV_VARS[name]}='{values[name]}'")
        for name, why in services.unavailable.items():
            print(f"{name:<9} not started: {why}")
        print(f"data and logs in {services.tmp}; Ctrl-C stops them", flush=True)
        try:
            signal.pause()
        except KeyboardInterrupt:
            pass
    print("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
