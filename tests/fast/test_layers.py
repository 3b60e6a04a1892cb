"""Imports run one way: each layer imports only the layers below it (docs/architecture.md, "Who may import whom").

Every import statement counts, a function's own included, so a lazy import cannot hide an upward one.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("lab", "backends", "scenarios")

# Bottom first. A module belongs to the first layer whose prefix names it (longest prefix wins). The base is what
# every part reads: the errors, the declarations a backend, a fault and a scenario make (lab/declarations), and a
# stack as its owner describes it with the faults that can happen to it (lab/stack). The doctor (lab/doctor) asks
# the servers at an address and prints the decision's answer: a top-level command.
LAYERS = {
    "base": ("lab", "lab.errors", "lab.declarations", "lab.stack"),
    "records": ("lab.records",),
    "servers": ("lab.servers",),
    "faults": ("lab.faults",),
    "checkers": ("lab.checkers",),
    "measures": ("lab.measures",),
    "workload": ("lab.workload",),
    "preflight": ("lab.preflight",),
    "holder": ("lab.holder",),
    "backends": ("backends",),
    "scenarios": ("scenarios",),
    "decision": ("lab.decision",),
    "report": ("lab.report",),
    "scan": ("lab.scan",),
    "top": ("lab.cli", "lab.runner", "lab.replay", "lab.doctor", "lab.contract", "lab.reference",
            "lab.records.export"),
}
# Which layers each may import. The checkers are pure functions of what a trial recorded: the lab's base and
# nothing else. The measures' shapes and rules read the checkers' vocabulary; the workload and the holder reach
# servers, never a fault, a backend or the report. The preflight reads servers (and the lab's schema's name from the
# workload), never a backend or a scenario. The report reads results, the checkers' vocabulary and the
# measures, never a server, a holder, a backend or a scenario: a saved run renders from its folder alone. The decision
# sits below the report: the report draws it, and it never reads a report module. lab scan reads source only, and the
# committed reference through the report.
ALLOWED = {
    "base": {"base"},
    # A run's folder and what it records of the host: written by the runner, read by the report.
    "records": {"base", "records"},
    "servers": {"base", "servers"},
    "faults": {"base", "servers", "faults"},
    "checkers": {"base", "checkers"},
    "measures": {"base", "checkers", "measures"},
    "workload": {"base", "servers", "checkers", "workload"},
    "preflight": {"base", "servers", "workload", "preflight"},
    "holder": {"base", "servers", "checkers", "workload", "holder"},
    "backends": {"base", "servers", "checkers", "workload", "holder", "backends"},
    "scenarios": {"base", "servers", "faults", "checkers", "measures", "workload", "holder", "backends", "scenarios"},
    # The decision reads cells and declarations and writes plain data: the checkers' vocabulary, the measures' kinds.
    "decision": {"base", "checkers", "measures", "decision"},
    "report": {"base", "records", "checkers", "measures", "decision", "report"},
    # lab scan reads source, never runs it: the base and its own package, and the report only for the reference's
    # cells (lab/scan/evidence.py); never a server, a backend or a scenario.
    "scan": {"base", "records", "checkers", "measures", "decision", "report", "scan"},
    "top": set(LAYERS),
}


def layer_of(module: str) -> str | None:
    best, found = -1, None
    for layer, prefixes in LAYERS.items():
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, found = len(prefix), layer
    return found


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(tree: ast.AST, module: str, is_package: bool) -> list[str]:
    """Every module an import statement in the tree names (relative imports resolved)."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            out.append(target)
            out += [f"{target}.{alias.name}" for alias in node.names]  # `from lab import pg` names lab.pg
    return out


def violations(root: Path) -> list[str]:
    found = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            module = module_name(path, root)
            own = layer_of(module)
            if own is None:
                continue
            tree = ast.parse(path.read_text(), str(path))
            for target in imported(tree, module, path.name == "__init__.py"):
                if target.split(".")[0] not in PACKAGES:
                    continue
                theirs = layer_of(target)
                if theirs is not None and theirs not in ALLOWED[own]:
                    found.append(f"{module} ({own}) imports {target} ({theirs})")
    return sorted(set(found))


def test_imports_run_one_way():
    assert violations(ROOT) == []


def test_every_module_has_a_layer():
    homeless = [module_name(p, ROOT) for package in PACKAGES for p in (ROOT / package).rglob("*.py")
                if layer_of(module_name(p, ROOT)) is None]
    assert homeless == []


def test_a_planted_upward_import_is_caught(tmp_path):
    for package in PACKAGES:
        (tmp_path / package).mkdir()
    (tmp_path / "lab" / "servers").mkdir()
    (tmp_path / "lab" / "report").mkdir()
    (tmp_path / "lab" / "servers" / "proxy.py").write_text("def f():\n    import backends.redis_lock\n")
    (tmp_path / "lab" / "report" / "matrix.py").write_text("from scenarios import REGISTRY\nfrom lab import pg\n")
    (tmp_path / "backends" / "x.py").write_text("from lab.servers import pg\nfrom lab.workload.table import no_point\n")
    assert violations(tmp_path) == [
        "lab.report.matrix (report) imports scenarios (scenarios)",
        "lab.report.matrix (report) imports scenarios.REGISTRY (scenarios)",
        "lab.servers.proxy (servers) imports backends.redis_lock (backends)",
    ]


def test_planted_imports_across_the_rooms_are_caught(tmp_path):
    """The rooms keep apart: a checker reaches no holder, runner or report; a holder no
    report; the measures no workload; the report no holder or workload."""
    for folder in ("checkers", "holder", "measures", "report"):
        (tmp_path / "lab" / folder).mkdir(parents=True)
    for package in ("backends", "scenarios"):
        (tmp_path / package).mkdir()
    (tmp_path / "lab" / "checkers" / "judge.py").write_text(
        "from lab.holder import process\nfrom lab.runner import plan\nfrom lab.report import matrix\n"
        "from lab.checkers.ops import Op\n")
    (tmp_path / "lab" / "holder" / "process.py").write_text(
        "def main():\n    from lab.report.told import told_rows\n    from lab.workload.table import CompanyTable\n")
    (tmp_path / "lab" / "measures" / "margin.py").write_text(
        "from lab.workload.job import run_job\nfrom lab.checkers.verdict import Kind\n")
    (tmp_path / "lab" / "report" / "told.py").write_text(
        "from lab.holder.forks import fork\nfrom lab.measures import shapes\nfrom lab.checkers import told\n")
    assert violations(tmp_path) == [
        "lab.checkers.judge (checkers) imports lab.holder (holder)",
        "lab.checkers.judge (checkers) imports lab.holder.process (holder)",
        "lab.checkers.judge (checkers) imports lab.report (report)",
        "lab.checkers.judge (checkers) imports lab.report.matrix (report)",
        "lab.checkers.judge (checkers) imports lab.runner (top)",
        "lab.checkers.judge (checkers) imports lab.runner.plan (top)",
        "lab.holder.process (holder) imports lab.report.told (report)",
        "lab.holder.process (holder) imports lab.report.told.told_rows (report)",
        "lab.measures.margin (measures) imports lab.workload.job (workload)",
        "lab.measures.margin (measures) imports lab.workload.job.run_job (workload)",
        "lab.report.told (report) imports lab.holder.forks (holder)",
        "lab.report.told (report) imports lab.holder.forks.fork (holder)",
    ]


def scenario_names_in_report(root: Path, names: set[str]) -> list[str]:
    """Where report code uses a scenario's name as a value: compared with (== or !=), passed to a call, or listed.
    A name that is only a measures key (r["kill"], "events" in entry) is the record's vocabulary, not a scenario."""
    found = []
    for path in sorted((root / "lab" / "report").rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            values: list[ast.expr] = []
            if isinstance(node, ast.Compare) and any(isinstance(op, (ast.Eq, ast.NotEq)) for op in node.ops):
                values = [node.left, *node.comparators]
            elif isinstance(node, ast.Call):
                values = [*node.args, *(k.value for k in node.keywords)]
            elif isinstance(node, (ast.List, ast.Tuple, ast.Set)):
                values = list(node.elts)
            for value in values:
                if isinstance(value, ast.Constant) and value.value in names:
                    found.append(f"{path.relative_to(root)}:{value.lineno} names {value.value!r}")
    return found


def test_report_code_never_names_a_scenario():
    """A section selects its trials by what their scenario measured (lab/measures/kinds.py, recorded in meta.json),
    never by the scenario's name."""
    import scenarios

    assert scenario_names_in_report(ROOT, set(scenarios.names())) == []


def test_a_planted_scenario_name_in_report_code_is_caught(tmp_path):
    (tmp_path / "lab" / "report").mkdir(parents=True)
    (tmp_path / "lab" / "report" / "costs.py").write_text(
        'ok = ok_trials(frame, "perf")\nrows = frame[frame.scenario == "latency"]\nseen = r["kill"]\n'
        'wanted = frame.scenario.isin(["cases", "other"])\n')
    assert scenario_names_in_report(tmp_path, {"perf", "latency", "kill", "cases"}) == [
        "lab/report/costs.py:1 names 'perf'", "lab/report/costs.py:2 names 'latency'",
        "lab/report/costs.py:4 names 'cases'"]


# lab/servers: one package per service, beside the pieces every service shares (processes, proxies, clients,
# namespaces). A service's package reaches the shared pieces and only the services it stands on: Patroni runs
# PostgreSQL with etcd as its store, PgBouncer pools a PostgreSQL, Sentinel watches Redis.
SERVICES = ("postgres", "redis", "sentinel", "etcd", "zookeeper", "pgbouncer", "patroni", "mariadb")
STANDS_ON = {"patroni": {"postgres", "etcd"}, "pgbouncer": {"postgres"}, "sentinel": {"redis"}}


def service_crossings(root: Path) -> list[str]:
    """Imports from one service's package into another's that STANDS_ON does not declare."""
    found = []
    for service in SERVICES:
        for path in sorted((root / "lab" / "servers" / service).rglob("*.py")):
            module = module_name(path, root)
            for target in imported(ast.parse(path.read_text()), module, path.name == "__init__.py"):
                parts = target.split(".")
                if parts[:2] == ["lab", "servers"] and len(parts) > 2 and parts[2] in SERVICES \
                        and parts[2] != service and parts[2] not in STANDS_ON.get(service, set()):
                    found.append(f"{module} imports {target}")
    return sorted(set(found))


def test_every_service_has_a_package_of_its_own():
    assert [s for s in SERVICES if not (ROOT / "lab" / "servers" / s / "__init__.py").is_file()] == []
    assert service_crossings(ROOT) == []


def test_a_planted_crossing_between_services_is_caught(tmp_path):
    for service in ("sentinel", "patroni", "zookeeper"):
        (tmp_path / "lab" / "servers" / service).mkdir(parents=True)
    (tmp_path / "lab" / "servers" / "sentinel" / "cluster.py").write_text(
        "from lab.servers.etcd.cluster import PeerProxy\nfrom lab.servers.redis.server import EmbeddedRedis\n")
    (tmp_path / "lab" / "servers" / "patroni" / "cluster.py").write_text(
        "from lab.servers.etcd.server import EmbeddedEtcd\nfrom lab.servers.proxy import BlackholeProxy\n")
    (tmp_path / "lab" / "servers" / "zookeeper" / "ensemble.py").write_text(
        "def f():\n    from lab.servers import mariadb\n")
    assert service_crossings(tmp_path) == [
        "lab.servers.sentinel.cluster imports lab.servers.etcd.cluster",
        "lab.servers.sentinel.cluster imports lab.servers.etcd.cluster.PeerProxy",
        "lab.servers.zookeeper.ensemble imports lab.servers.mariadb"]


def backend_names_in_quotes(root: Path, names: set[str]) -> list[str]:
    """Where scenarios/ or lab/report/ write a built-in backend's name in quotes: a column, a service or a branch
    chosen by a name a plugin cannot have. Docstrings are prose. The one exception is the report's printed word
    "none" (the no-lock control's name too) where it is the text a value falls back to: `x or "none"`, or a branch
    of a conditional expression."""
    found = []
    for folder in (root / "scenarios", root / "lab" / "report"):
        for path in sorted(folder.rglob("*.py")):
            tree = ast.parse(path.read_text())
            prose, fallbacks = set(), set()
            for node in ast.walk(tree):
                body = getattr(node, "body", None)
                if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                        and isinstance(body[0].value, ast.Constant):
                    prose.add(id(body[0].value))
                if folder.name == "report" and isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):
                    fallbacks.update(id(v) for v in node.values)
                if folder.name == "report" and isinstance(node, ast.IfExp):
                    fallbacks.update((id(node.body), id(node.orelse)))
            for node in ast.walk(tree):
                if isinstance(node, ast.Constant) and node.value in names and id(node) not in prose \
                        and not (node.value == "none" and id(node) in fallbacks):
                    found.append(f"{path.relative_to(root)}:{node.lineno} names {node.value!r}")
    return found


def test_scenarios_and_report_name_no_backend_in_quotes():
    """A scenario names a service by lab.declarations.where.Service, a pool mode by lab.stack.description.PoolMode, a write that did not
    happen by NO_WRITE: never by a string that is also a backend's name."""
    import backends

    assert backend_names_in_quotes(ROOT, set(backends.names())) == []


def test_a_planted_backend_name_in_quotes_is_caught(tmp_path):
    (tmp_path / "scenarios").mkdir()
    (tmp_path / "lab" / "report").mkdir(parents=True)
    (tmp_path / "scenarios" / "x.py").write_text(
        '"""Runs redis."""\nstrikes = ("redis",)\nword = outcome or "none"\n')
    (tmp_path / "lab" / "report" / "y.py").write_text(
        'if backend == "etcd":\n    pass\nshown = ", ".join(names) or "none"\nlock = "none" if x is None else x\n')
    assert backend_names_in_quotes(tmp_path, {"redis", "etcd", "none"}) == [
        "scenarios/x.py:2 names 'redis'", "scenarios/x.py:3 names 'none'", "lab/report/y.py:1 names 'etcd'"]


def test_planted_crossings_out_of_the_second_floors_rooms_are_caught(tmp_path):
    """The rooms of issue 58 keep to their floor: a run's records read no report, a stack description no doctor, the
    decision no report; the report may read the records, and the doctor anything."""
    for folder in ("records", "stack", "decision", "report", "doctor"):
        (tmp_path / "lab" / folder).mkdir(parents=True)
    for package in ("backends", "scenarios"):
        (tmp_path / package).mkdir()
    (tmp_path / "lab" / "records" / "results.py").write_text("from lab.report import run_view\n")
    (tmp_path / "lab" / "stack" / "exposure.py").write_text("import lab.doctor.postgres\n")
    (tmp_path / "lab" / "decision" / "answer.py").write_text("from lab.report.decide import grid_of\n")
    (tmp_path / "lab" / "report" / "meta.py").write_text("from lab.records.results import RunFolder\n")
    (tmp_path / "lab" / "doctor" / "advise.py").write_text("from lab.report.advice import advise\n")
    assert violations(tmp_path) == [
        "lab.decision.answer (decision) imports lab.report.decide (report)",
        "lab.decision.answer (decision) imports lab.report.decide.grid_of (report)",
        "lab.records.results (records) imports lab.report (report)",
        "lab.records.results (records) imports lab.report.run_view (report)",
        "lab.stack.exposure (base) imports lab.doctor.postgres (top)",
    ]
