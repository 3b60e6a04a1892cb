"""Plugin loaders, followed through the installed packages' entry points instead of run.

A lock library may pick its implementation at run time from an entry point named by a URL's scheme (tooz's
get_coordinator goes through stevedore's DriverManager). The AST alone stops there; the installed distributions'
metadata says which class each name loads, so the scanner follows the one the code names, or each of them when the
name is only known at run time.
"""

from __future__ import annotations

import ast
from importlib import metadata

from lab.scan.machine import Machine, Paths
from lab.scan.state import State
from lab.scan.values import Const, Dict, Loaded, Model, Seq, Unknown, Value, options, union

MAX_PLUGINS = 24
CLIENT_MODULES = frozenset({"psycopg2", "psycopg", "asyncpg", "sqlalchemy", "django", "pg8000"})


LOADERS = frozenset({"stevedore"})  # modelled here, never read


def modelled(name: str) -> bool:
    return name.split(".")[0] in LOADERS


def entry_points(group: str) -> dict[str, str]:
    """name -> "module:attribute" for an entry-point group, from the installed distributions' metadata."""
    return {ep.name: ep.value for ep in metadata.entry_points(group=group)}


def call(interp: Machine, callee: Value, args: list[Value], kwargs: dict[str, Value], state: State,
         node: ast.AST) -> Paths | None:
    if not isinstance(callee, Model):
        return None
    if callee.name.startswith("stevedore.") and callee.name.endswith("DriverManager"):
        return _driver_manager(interp, kwargs, args, state, node)
    return None


def _driver_manager(interp: Machine, kwargs: dict[str, Value], args: list[Value], state: State,
                    node: ast.AST) -> Paths:
    namespace = kwargs.get("namespace", args[0] if args else None)
    name = kwargs.get("name", args[1] if len(args) > 1 else None)
    if not isinstance(namespace, Const) or not isinstance(namespace.value, str):
        return [(Unknown("a plugin from an entry-point group named at run time"), state)]
    table = entry_points(namespace.value)
    given = options(name) if name is not None else ()
    wanted = [str(o.value) for o in given if isinstance(o, Const)]
    known = bool(wanted) and len(wanted) == len(given)
    named = {n: t for n, t in sorted(table.items()) if n in wanted} if known else dict(sorted(table.items()))
    # Only a plugin whose module imports a PostgreSQL client can take a PostgreSQL lock: the others are not followed.
    picked = {n: t for n, t in named.items() if _imports_client(interp, t.partition(":")[0])}
    chosen = list(picked.values())[:MAX_PLUGINS]
    if picked and not known:
        interp.rec.assumed.append(
            f"the {namespace.value} plugin is {' or '.join(picked)} (its name is decided at run time; the other "
            f"{len(table) - len(picked)} import no PostgreSQL client)")
    invoke = kwargs.get("invoke_on_load")
    invoke_args = kwargs.get("invoke_args")
    passed = list(invoke_args.items) if isinstance(invoke_args, Seq) else []
    invoke_kwds = kwargs.get("invoke_kwds")
    passed_kw = {str(k.value): v for k, v in invoke_kwds.items if isinstance(k, Const)} \
        if isinstance(invoke_kwds, Dict) else {}
    paths: Paths = []
    for target in dict.fromkeys(chosen):
        module_name, _, attr = target.partition(":")
        module = interp.module(module_name)
        loaded = interp.import_name(module, module_name, attr) if attr else module
        if isinstance(invoke, Const) and invoke.value:
            paths += interp.call_value(loaded, passed, dict(passed_kw), state, node)
        else:
            paths.append((loaded, state))
    if not paths:
        return [(Unknown(f"a `{namespace.value}` plugin that imports no PostgreSQL client (not followed)"), state)]
    return [(Loaded(union([v for v, _ in paths])), s) for _, s in paths]


def _imports_client(interp: Machine, module: str) -> bool:
    """Whether a plugin's module imports a PostgreSQL client, SQLAlchemy or Django (read from its import statements)."""
    known = interp.sources.facts.get(("imports_client", module))
    if known is None:
        known = interp.sources.facts[("imports_client", module)] = _reads_imports(interp, module)
    return bool(known)


def _reads_imports(interp: Machine, module: str) -> bool:
    path = interp.sources.find(module)
    if path is None:
        return False
    tree = interp.sources.parse(path, module).tree
    if tree is None:
        return False
    for node in ast.walk(tree):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
            [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
        if any(n.split(".")[0] in CLIENT_MODULES for n in names):
            return True
    return False
