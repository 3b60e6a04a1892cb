"""Imports run one way: each layer imports only the layers below it (docs/architecture.md, "Who may import whom").

Every import statement counts, a function's own included, so a lazy import cannot hide an upward one.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("lab", "backends", "scenarios")

# Bottom first. A module belongs to the first layer whose prefix names it (longest prefix wins).
LAYERS = {
    "base": ("lab", "lab.errors", "lab.registry", "lab.results"),
    "servers": ("lab.servers",),
    "faults": ("lab.faults",),
    "harness": ("lab.harness",),
    "backends": ("backends",),
    "scenarios": ("scenarios",),
    "report": ("lab.report",),
    "top": ("lab.cli", "lab.runner", "lab.replay", "lab.export", "lab.doctor", "lab.doctor_mariadb", "lab.provenance",
            "lab.contract", "lab.waves", "lab.quiet", "lab.progress", "lab.reference", "lab.survey"),
}
# Which layers each may import. The report reads results and the harness's vocabulary, never a
# server, a backend or a scenario: a saved run renders from its folder alone.
ALLOWED = {
    "base": {"base"},
    "servers": {"base", "servers"},
    "faults": {"base", "servers", "faults"},
    "harness": {"base", "servers", "faults", "harness"},
    "backends": {"base", "servers", "harness", "backends"},
    "scenarios": {"base", "servers", "faults", "harness", "backends", "scenarios"},
    "report": {"base", "harness", "report"},
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
    (tmp_path / "backends" / "x.py").write_text("from lab.servers import pg\nfrom lab.harness.workload import no_point\n")
    assert violations(tmp_path) == [
        "lab.report.matrix (report) imports scenarios (scenarios)",
        "lab.report.matrix (report) imports scenarios.REGISTRY (scenarios)",
        "lab.servers.proxy (servers) imports backends.redis_lock (backends)",
    ]
