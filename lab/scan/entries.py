"""Where the interpreter starts in each scanned file: the module's own body, each function, and each class.

A class is run as its objects live: __init__ first, then every method from the state __init__ left, then every method
again from the states all of them left (a lock taken in acquire() and a statement run in touch() meet on the same
connection that way, whatever order the caller uses). The parameters of an entry are Params: nothing is known of
them, but each is one object, so a connection the code is handed is still one connection.
"""

from __future__ import annotations

import ast

from lab.scan import events
from lab.scan.findings import Site
from lab.scan.interp import BudgetSpent, Interpreter
from lab.scan.machine import Frame
from lab.scan.sources import Parsed
from lab.scan.state import State, join
from lab.scan.values import Bound, Class, Func, Instance, Module, Param, Value

INTERNAL = "the scanner failed inside its own code"
ROUNDS = 2  # a class's methods run from __init__'s state, then from every method's


def run_file(interp: Interpreter, parsed: Parsed) -> None:
    assert parsed.tree is not None
    module = Module(parsed.module, parsed.path)
    _guarded(interp, parsed.module, lambda: _module_body(interp, module, parsed.tree))
    names = interp.globals_of(module)
    for node in parsed.tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            func = names.get(node.name)
            if isinstance(func, Func) and func.node is node:
                _guarded(interp, f"{parsed.module}.{node.name}", lambda f=func: _function(interp, f))
        elif isinstance(node, ast.ClassDef):
            cls = names.get(node.name)
            if isinstance(cls, Class) and cls.node is node:
                _guarded(interp, f"{parsed.module}.{cls.qualname}", lambda c=cls: run_class(interp, c))


def _guarded(interp: Interpreter, owner: str, run) -> None:
    interp.rec.owner = owner
    interp.rec.assumed = []
    interp.steps = 0
    interp.frames, interp.sites, interp.tries = [], [], []
    try:
        run()
    except BudgetSpent:
        interp.rec.warn(None, f"{owner}: too much code to follow within the scanner's budget; what it did not reach "
                              f"is not reported")
    except RecursionError:
        interp.rec.warn(None, f"{owner}: nested too deep for the scanner; what it did not reach is not reported")
    except Exception as exc:  # a scanner bug: said in one line, the rest of the scan goes on
        interp.rec.warn(None, f"{owner}: {INTERNAL} ({type(exc).__name__}: {exc}); what it did not reach is not "
                              f"reported")
    finally:
        interp.frames, interp.sites, interp.tries = [], [], []


def _module_body(interp: Interpreter, module: Module, tree: ast.Module) -> None:
    interp.frames = [Frame(module.name, module)]
    flow = interp.exec_block(tree.body, [State()])
    events.entry_done(interp, flow.normal, "the module's code ends")


def _params(func: Func, receiver: Value | None) -> list[Value]:
    spec = func.node.args
    names = [a.arg for a in (*spec.posonlyargs, *spec.args)]
    values: list[Value] = [Param(func.qualname, n) for n in names]
    if receiver is not None and values:
        values[0] = receiver
    return values


def _function(interp: Interpreter, func: Func, receiver: Value | None = None, state: State | None = None) \
        -> list[State]:
    """Run one function from the top with Params for its arguments; the states it returns in. Each run has the
    step budget to itself (a class's methods are runs of their own)."""
    interp.steps = 0
    interp.frames = [Frame(func.module.name, func.module)]
    spec = func.node.args
    kwargs: dict[str, Value] = {a.arg: Param(func.qualname, a.arg) for a in spec.kwonlyargs}
    paths = interp.invoke(func, _params(func, receiver), kwargs, state or State(), None)
    ends = [s for _, s in paths]
    events.entry_done(interp, ends, f"{func.qualname.rsplit('.', 1)[-1]}() returns")
    return ends


def run_class(interp: Interpreter, cls: Class) -> None:
    site_node = cls.node
    methods = _methods(interp, cls)
    if any(m.abstract for m in methods):
        return  # it cannot be made as it is: its concrete subclasses are run instead
    instance = Instance(cls, Site(cls.module.path, site_node.lineno, site_node.col_offset))
    init = interp.class_attr(cls, "__init__")
    start = [State()]
    if init is not None and isinstance(init[0], Func):
        start = _function(interp, init[0], instance) or start
    entry = join(start)
    for _ in range(ROUNDS):
        ends: list[State] = []
        for func in methods:
            receiver: Value | None = cls if func.kind == "classmethod" else (
                None if func.kind == "staticmethod" else instance)
            ends += _function(interp, func, receiver, entry)
        entry = join(start + ends) if ends else entry


def _methods(interp: Interpreter, cls: Class) -> list[Func]:
    """Every method the class has (its own and inherited), the most derived definition of each name."""
    order, _ = interp.mro(cls)
    seen: dict[str, Func] = {}
    for current in order:
        for name, value in interp.class_namespace(current).items():
            if name in seen or name in ("__init__", "__del__"):  # a finalizer is no step the code takes
                continue
            func = value.func if isinstance(value, Bound) else value
            if isinstance(func, Func) and not isinstance(func.node, ast.Lambda):
                seen[name] = func
    return list(seen.values())

