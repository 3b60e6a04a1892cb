"""`lab doctor` as a command: it reads the servers at the addresses given (PostgreSQL, MariaDB, the lock services),
prints their checks and the stack they describe, and, with --advise, the decision's answer for that stack.

The doctor's room holds its whole walk: the command line hands it the parsed arguments and gets its exit status.
Exit 0 when nothing fails, 1 when a check fails (with --advise: when the lock in use fails a fault the stack is
exposed to), 2 (a LabError) when a server cannot be reached or the input is wrong.
"""

from __future__ import annotations

import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

import backends
from lab.errors import LabError


def print_advice(stack, runs: list[str], results: Path, as_json: bool, extra: dict | None = None) -> int:
    """The answer for a stack from the runs named (or the committed reference); 1 when the lock in use fails a fault
    the stack is exposed to."""
    import json

    import scenarios
    from lab.records.results import RunFolder
    from lab.report import declared, run_view
    from lab.report.advice import advise, reference_folders
    from lab.report.advice_text import render

    declared.install(scenarios.fault_columns())  # for runs recorded before meta.json kept them
    declared.install_roles(backends.post_roles())
    declared.install_measured(scenarios.measured())
    folders = [RunFolder.open(results, run) for run in runs] or reference_folders()
    advice = advise(run_view(folders), stack)
    if as_json:
        print(json.dumps({**(extra or {}), "advice": advice.to_json()}, indent=2, ensure_ascii=False))
    else:
        sys.stdout.write(render(advice))
    return 1 if advice.lock_fails else 0


def print_checks(server: str, checks: list) -> None:
    """The doctor's checks of one server as a table (a line each: name, status, meaning, evidence), then where the
    SQL behind them is."""
    table = Table(title=f"lab doctor: {server}, read-only")
    for column in ("check", "status", "what it means", "evidence"):
        table.add_column(column)
    for check in checks:
        table.add_row(check.name, check.status.upper(), check.summary, "\n".join(check.evidence))
    Console(width=None if sys.stdout.isatty() else 160).print(table)
    print("lab doctor --json shows the SQL each check ran.")


def doctor(args) -> int:
    """Exit 0 when nothing fails, 1 when a check fails (with --advise: when the lock in use fails a fault the stack is
    exposed to), 2 when a server cannot be reached or the input is wrong."""
    import json

    from lab.doctor import mariadb as doctor_mariadb
    from lab.doctor.postgres import as_json, worst
    from lab.doctor.survey import NO_LOCK, Pointed, survey

    if args.mariadb_dsn is not None or (args.dsn is not None and doctor_mariadb.is_mariadb_dsn(args.dsn)):
        if args.advise or args.stack is not None:
            raise LabError("--advise and --stack describe a PostgreSQL, Redis, etcd or ZooKeeper stack; a MariaDB is "
                           "checked for its guards only")
        return _doctor_mariadb(args)

    if args.lock is not None and args.lock != NO_LOCK and args.lock not in {*backends.BUILTIN, *backends.ADAPTERS,
                                                                            *backends.names()}:
        raise LabError(f"--lock {args.lock}: no such backend ('lab list' names them; 'none' for no lock)")
    pointed = Pointed(dsn=args.dsn, redis_url=args.redis_url,
                      redlock_urls=tuple(u for u in (args.redlock_urls or "").split(",") if u),
                      etcd=args.etcd, zk_hosts=args.zk_hosts, patroni_url=args.patroni_url, lock=args.lock,
                      driver=args.driver, autocommit=None if args.autocommit is None else args.autocommit == "yes",
                      hung_after_s=args.hung_after)
    found = survey(pointed)
    stack, examined = found.stack, found.examined
    if args.stack is not None:
        try:
            stack.save(args.stack)
        except OSError as exc:
            raise LabError(f"cannot write the stack description to {args.stack}: {exc.strerror}") from None
    # What the doctor is talking to comes first: a primary, a standby, a pooler and its mode (lab/preflight).
    talking_to = {"postgres": examined.finding.to_json()} if examined else {}
    if examined and not args.json:
        print(f"talking to: {examined.finding.line()}")
    described = {"talking_to": talking_to, "stack": stack.to_json(), "not_described": found.not_described}
    if args.advise:
        return print_advice(stack, args.run, args.results, args.json, described)
    checks = examined.checks if examined else []
    if args.json:
        doctor = as_json(args.dsn, examined.version, checks) if examined else {"status": worst(checks), "checks": []}
        print(json.dumps({"talking_to": talking_to, **doctor, **described}, indent=2, ensure_ascii=False))
    else:
        if examined:
            print_checks(f"PostgreSQL {examined.version}", checks)
        print("The stack, as read" + (f" (written to {args.stack})" if args.stack else "") + ":")
        for name, value in stack.facts():
            print(f"  {name} = {value}")
        for part in found.not_described:
            print(f"  not described: {part}")
        print("lab doctor --advise answers which lock is safe on it, from the committed reference.")
    return 1 if worst(checks) == "fail" else 0


def _doctor_mariadb(args) -> int:
    """lab doctor on a MariaDB: its idle guards, GET_LOCK holders and waiter timeouts, read-only (the stack
    description and its advice cover PostgreSQL, Redis, etcd and ZooKeeper stacks)."""
    import json

    from lab.doctor import mariadb as doctor_mariadb
    from lab.doctor import postgres as doctor

    dsn = args.mariadb_dsn or args.dsn
    version, checks = doctor_mariadb.run_doctor(dsn, args.hung_after)
    if args.json:
        print(json.dumps(doctor_mariadb.as_json(dsn, version, checks), indent=2))
    else:
        print_checks(f"MariaDB {version}", checks)
    return 1 if doctor.worst(checks) == "fail" else 0
