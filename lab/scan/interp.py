"""An abstract interpreter over Python's AST: it runs the scanned code on values it can know (lab/scan/values.py),
following calls into the functions and classes the code reaches, so a lock statement is seen together with the
connection it runs on and wherever that connection was made and configured.

Every undecided test forks the path; paths are joined again when there are too many. Loops run their body once
(enough to see a statement follow another), exceptions go to the handlers of the try around them, and a call the
scanner cannot follow returns Unknown and counts as the code moving on (lab/scan/events.py judges a lock left in an
open transaction there). Database drivers and the standard library are never read: lab/scan/apis.py and
lab/scan/stdlib.py model what they do.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from lab.scan import apis, events, plugins, stdlib
from lab.scan.findings import Site
from lab.scan.machine import Frame, Paths, TryContext
from lab.scan.record import Recorder
from lab.scan.sources import Sources, distribution_of, resolve_relative
from lab.scan.state import State, join
from lab.scan.values import (Answer, Awaitable, Bound, Class, Const, Dict, Func, Generator, Instance, Marked, Marker,
                             Model, Module, Param, Seq, Super, Union, Unknown, Value, answers_in, concat, options, truth,
                             union)

MAX_PATHS = 12  # paths through one block before they are joined
MERGE_ABOVE = 4  # more paths than this: those that agree on every connection's facts are joined first
MAX_DEPTH = 14  # calls followed below the entry
STEP_BUDGET = 120_000  # statements and expressions evaluated for one entry before the rest is left unknown


class BudgetSpent(Exception):
    """The entry took more steps than the scanner spends on one: what remains is unknown."""


@dataclass
class Flow:
    normal: list[State]
    returned: Paths = field(default_factory=list)
    broke: list[State] = field(default_factory=list)
    continued: list[State] = field(default_factory=list)

    def add(self, other: Flow) -> Flow:
        """This flow with another's paths beside its own (two branches, two handlers)."""
        self.normal += other.normal
        self.returned += other.returned
        self.broke += other.broke
        self.continued += other.continued
        return self


def _db_key(state: State) -> tuple:
    """What a path knows that findings depend on: every connection's facts, and the unread unlock answers."""
    return frozenset(state.conns.items()), state.pending


def cap(states: list[State]) -> list[State]:
    """Paths kept apart while few; past MERGE_ABOVE, those that agree on the connections' facts are joined (their
    values become unions), and past MAX_PATHS all of them."""
    if len(states) <= MERGE_ABOVE:
        return states
    groups: dict[tuple, list[State]] = {}
    for state in states:
        groups.setdefault(_db_key(state), []).append(state)
    merged = [join(group) for group in groups.values()]
    return merged if len(merged) <= MAX_PATHS else [join(merged)]


def cap_paths(paths: Paths) -> Paths:
    if len(paths) <= MERGE_ABOVE:
        return paths
    groups: dict[tuple, list[tuple[Value, State]]] = {}
    for value, state in paths:
        groups.setdefault(_db_key(state), []).append((value, state))
    merged = [(union([v for v, _ in group]), join([s for _, s in group])) for group in groups.values()]
    if len(merged) <= MAX_PATHS:
        return merged
    return [(union([v for v, _ in merged]), join([s for _, s in merged]))]


class Interpreter:
    """Runs entries (a module's body, a function, a class's methods) and records what it sees in a Recorder."""

    def __init__(self, sources: Sources, recorder: Recorder):
        self.sources = sources
        self.rec = recorder
        self._globals: dict[str, dict[str, Value]] = {}
        self._class_ns: dict[int, dict[str, Value]] = {}
        self._defaults: dict[int, list[Value]] = {}
        self._calls_in: dict[int, bool] = {}  # id(test node) -> whether it holds a call (see assign_test)
        self.frames: list[Frame] = []
        self.sites: list[Site] = []  # the call sites from the entry down to the current call
        self.tries: list[TryContext] = []
        self.steps = 0
        self.quiet = 0  # >0 while evaluating a module's or class's globals: nothing is recorded then
        self.owner = ""  # the entry now running, for results' owners

    # ----- where we are ----------------------------------------------------------------------------------------

    @property
    def frame(self) -> Frame:
        return self.frames[-1]

    def site(self, node: ast.AST) -> Site:
        return Site(self.frame.module.path, getattr(node, "lineno", 0), getattr(node, "col_offset", 0))

    def chain(self, node: ast.AST) -> tuple[Site, ...]:
        """The sites from the deepest line in the scanned files down to this node (the calls above it, from the
        entry, are where it was reached from: the result's owners say which entries)."""
        full = (*self.sites, self.site(node))
        scanned = self.sources.scanned
        deepest = max((i for i, site in enumerate(full) if site.path in scanned), default=0)
        return full[deepest:]

    def library_here(self) -> str | None:
        return distribution_of(self.frame.module.path)

    def record(self, result) -> None:
        """Keep a result, unless the interpreter is only reading a module's or a class's names."""
        if not self.quiet:
            self.rec.add(result)

    def tick(self) -> None:
        self.steps += 1
        if self.steps > STEP_BUDGET:
            raise BudgetSpent()

    # ----- modules ---------------------------------------------------------------------------------------------

    def module(self, name: str) -> Value:
        """A module by dotted name: its source if the scanner can read it, else a Model (stdlib, drivers, or not
        found, which stays Unknown when used)."""
        if apis.modelled(name) or stdlib.modelled(name) or plugins.modelled(name):
            return Model(name)
        path = self.sources.find(name)
        if path is None:
            return Model(name) if stdlib.is_stdlib_name(name) else Unknown(
                f"module `{name}` is not found under the scanned folders or on this interpreter's path")
        if not self.sources.followed(path, self.frame.module.path if self.frames else ""):
            return Model(name, unread=True)  # a library that asks for no PostgreSQL client: its calls stay opaque
        return Module(name, str(path))

    def globals_of(self, module: Module) -> dict[str, Value]:
        if module.name in self._globals:
            return self._globals[module.name]
        names: dict[str, Value] = {}
        self._globals[module.name] = names  # an import cycle reads what is bound so far
        parsed = self.sources.parse(Path(module.path), module.name)
        if parsed.tree is None:
            return names
        saved = (self.frames, self.sites, self.tries, self.steps)
        self.frames, self.sites, self.tries = [Frame(module.name, module)], [], []
        self.quiet += 1
        try:
            flow = self.exec_block(parsed.tree.body, [State()])
            ends = flow.normal or [State()]
            names.update(join(ends).locals)
        except (BudgetSpent, RecursionError):
            pass
        finally:
            self.quiet -= 1
            self.frames, self.sites, self.tries, steps = saved
            self.steps = steps
        return names

    def lookup_global(self, name: str) -> Value:
        found = self.globals_of(self.frame.module).get(name)
        if found is not None:
            return found
        return stdlib.builtin(name)

    # ----- classes ---------------------------------------------------------------------------------------------

    def class_namespace(self, cls: Class) -> dict[str, Value]:
        if cls.node_id in self._class_ns:
            return self._class_ns[cls.node_id]
        ns: dict[str, Value] = {}
        self._class_ns[cls.node_id] = ns
        self.frames.append(Frame(cls.qualname, cls.module, owner=cls))
        self.quiet += 1
        try:
            flow = self.exec_block(cls.node.body, [State()])
            if flow.normal:
                ns.update(join(flow.normal).locals)
        except (BudgetSpent, RecursionError):
            pass
        finally:
            self.quiet -= 1
            self.frames.pop()
        return ns

    def bases(self, cls: Class) -> list[Value]:
        self.frames.append(Frame(cls.qualname, cls.module, owner=cls))
        try:
            out = []
            for base in cls.node.bases:
                paths = self.eval(base, State())
                out.append(union([v for v, _ in paths]) if paths else Unknown("a base class"))
            return out
        finally:
            self.frames.pop()

    def mro(self, cls: Class) -> tuple[list[Class], bool]:
        """The classes to look an attribute up in, and whether some base is not read (a library's or unknown)."""
        order: list[Class] = []
        opaque = False
        stack: list[Class] = [cls]
        seen: set[int] = set()
        while stack:
            current = stack.pop(0)
            if current.node_id in seen:
                continue
            seen.add(current.node_id)
            order.append(current)
            for base in self.bases(current):
                if isinstance(base, Class):
                    stack.append(base)
                elif not (isinstance(base, Model) and stdlib.harmless_base(base.name)):
                    opaque = True
        return order, opaque

    def class_attr(self, cls: Class, name: str, after: Class | None = None) -> tuple[Value, Class] | None:
        order, _ = self.mro(cls)
        if after is not None:
            ids = [c.node_id for c in order]
            order = order[ids.index(after.node_id) + 1:] if after.node_id in ids else []
        for current in order:
            ns = self.class_namespace(current)
            if name in ns:
                return ns[name], current
        return None

    # ----- statements ------------------------------------------------------------------------------------------

    def exec_block(self, body: list[ast.stmt], states: list[State]) -> Flow:
        flow = Flow(normal=list(states))
        for stmt in body:
            if not flow.normal:
                break
            step = self.exec_stmt(stmt, flow.normal)
            flow.normal = cap(step.normal)
            flow.returned += step.returned
            flow.broke += step.broke
            flow.continued += step.continued
        flow.returned = cap_paths(flow.returned)
        return flow

    def exec_stmt(self, stmt: ast.stmt, states: list[State]) -> Flow:
        self.tick()
        method = getattr(self, f"stmt_{type(stmt).__name__}", None)
        if method is None:
            return Flow(normal=states)
        out = Flow(normal=[])
        for state in states:
            out.add(method(stmt, state))
        return out

    def stmt_Expr(self, stmt: ast.Expr, state: State) -> Flow:
        return Flow([s for _, s in self.eval(stmt.value, state)])

    def stmt_Pass(self, stmt: ast.stmt, state: State) -> Flow:
        return Flow([state])

    def stmt_Break(self, stmt: ast.stmt, state: State) -> Flow:
        return Flow([], broke=[state])

    def stmt_Continue(self, stmt: ast.stmt, state: State) -> Flow:
        return Flow([], continued=[state])

    def stmt_Return(self, stmt: ast.Return, state: State) -> Flow:
        if stmt.value is None:
            return Flow([], returned=[(Const(None), state)])
        return Flow([], returned=self.eval(stmt.value, state))

    def stmt_Raise(self, stmt: ast.Raise, state: State) -> Flow:
        ends = [s for _, s in self.eval(stmt.exc, state)] if stmt.exc is not None else [state]
        self.frame.raised.extend(ends)
        return Flow([])

    def stmt_Assign(self, stmt: ast.Assign, state: State) -> Flow:
        if len(stmt.targets) == 1 and isinstance(stmt.targets[0], (ast.Name, ast.Attribute)) \
                and isinstance(stmt.value, (ast.Compare, ast.BoolOp, ast.UnaryOp)):
            forked = self.assign_test(stmt.targets[0], stmt.value, state)
            if forked is not None:
                return Flow(forked)
        out: list[State] = []
        for value, s in self.eval(stmt.value, state):
            ends = [s]
            for target in stmt.targets:
                ends = [e for current in ends for e in self.assign(target, value, current)]
            out += ends
        return Flow(out)

    def assign_test(self, target: ast.expr, test: ast.expr, state: State) -> list[State] | None:
        """`fresh = self._session is None`: a test the path does not decide forks here, each path keeping the
        outcome as a constant and the tested name refined, so a later `if fresh:` goes the same way."""
        calls = self._calls_in.get(id(test))
        if calls is None:
            calls = self._calls_in[id(test)] = any(isinstance(n, (ast.Call, ast.Await)) for n in ast.walk(test))
        if calls:
            return None  # evaluated once, where it stands: a call in it must not run twice
        values = self.eval(test, state)
        if any(truth(v) is not None or answers_in(v) for v, _ in values):
            return None
        out: list[State] = []
        for taken, s in self.branch(test, state):
            out += self.assign(target, Const(taken), s)
        return out

    def stmt_AnnAssign(self, stmt: ast.AnnAssign, state: State) -> Flow:
        if stmt.value is None:
            return Flow([state])
        return Flow([e for v, s in self.eval(stmt.value, state) for e in self.assign(stmt.target, v, s)])

    def stmt_AugAssign(self, stmt: ast.AugAssign, state: State) -> Flow:
        out: list[State] = []
        for left, s in self.eval(stmt.target, state):
            for right, s2 in self.eval(stmt.value, s):
                out += self.assign(stmt.target, stdlib.binop(stmt.op, left, right), s2)
        return Flow(out)

    def stmt_Delete(self, stmt: ast.Delete, state: State) -> Flow:
        return Flow([state])

    def stmt_Global(self, stmt: ast.stmt, state: State) -> Flow:
        return Flow([state])

    stmt_Nonlocal = stmt_Global

    def stmt_Assert(self, stmt: ast.Assert, state: State) -> Flow:
        out = []
        for value, s in self.eval(stmt.test, state):
            s = events.read_answers(s, value)
            if truth(value) is not False:
                out.append(s)
        return Flow(out)

    def stmt_Import(self, stmt: ast.Import, state: State) -> Flow:
        for alias in stmt.names:
            if alias.asname:
                state = state.set_local(alias.asname, self.module(alias.name))
            else:
                top = alias.name.split(".")[0]
                state = state.set_local(top, self.module(top))
        return Flow([state])

    def stmt_ImportFrom(self, stmt: ast.ImportFrom, state: State) -> Flow:
        here = self.frame.module
        is_package = here.path.endswith("__init__.py")
        base = resolve_relative(here.name, is_package, stmt.level, stmt.module) if stmt.level else (stmt.module or "")
        source = self.module(base)
        for alias in stmt.names:
            if alias.name == "*":
                if isinstance(source, Module):
                    for name, value in self.globals_of(source).items():
                        if not name.startswith("_"):
                            state = state.set_local(name, value)
                continue
            value = self.import_name(source, base, alias.name)
            state = state.set_local(alias.asname or alias.name, value)
        return Flow([state])

    def import_name(self, source: Value, base: str, name: str) -> Value:
        if isinstance(source, Module):
            found = self.globals_of(source).get(name)
            if found is not None:
                return found
            sub = self.module(f"{base}.{name}")
            return sub if not isinstance(sub, Unknown) else Unknown(f"`{name}` from `{base}` is not found there")
        if isinstance(source, Model):
            return Model(f"{source.name}.{name}", source.unread)
        return Unknown(f"`{name}` is imported from `{base}`, which is not found under the scanned folders or on "
                       f"this interpreter's path")

    def stmt_FunctionDef(self, stmt: ast.FunctionDef | ast.AsyncFunctionDef, state: State) -> Flow:
        func: Value = self.make_function(stmt, state)
        for decorator in reversed(stmt.decorator_list):
            for deco, s in self.eval(decorator, state)[:1]:
                state = s
                func = stdlib.decorate(self, deco, func)
        return Flow([state.set_local(stmt.name, func)])

    stmt_AsyncFunctionDef = stmt_FunctionDef

    def make_function(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda, state: State) -> Func:
        frame = self.frame
        in_class = frame.owner is not None and any(node is n for n in frame.owner.node.body)
        closure = () if in_class or len(self.frames) == 1 else tuple(state.locals.items())
        name = getattr(node, "name", "<lambda>")
        return Func(node, frame.module, f"{frame.qualname}.{name}", owner=frame.owner if in_class else None,
                    closure=closure, node_id=id(node))

    def stmt_ClassDef(self, stmt: ast.ClassDef, state: State) -> Flow:
        qual = stmt.name if len(self.frames) == 1 else f"{self.frame.qualname}.{stmt.name}"
        return Flow([state.set_local(stmt.name, Class(stmt, self.frame.module, qual, node_id=id(stmt)))])

    def stmt_If(self, stmt: ast.If, state: State) -> Flow:
        out = Flow([])
        for taken, s in self.branch(stmt.test, state):
            out.add(self.exec_block(stmt.body if taken else stmt.orelse, [s]))
        return out

    def stmt_While(self, stmt: ast.While, state: State) -> Flow:
        out = Flow([])
        for taken, s in self.branch(stmt.test, state):
            if not taken:
                out.normal += self.exec_block(stmt.orelse, [s]).normal
                continue
            step = self.exec_block(stmt.body, [s])
            out.returned += step.returned
            out.normal += step.broke + step.normal + step.continued
        return out

    def stmt_For(self, stmt: ast.For | ast.AsyncFor, state: State) -> Flow:
        out = Flow([])
        for iterable, s in self.eval(stmt.iter, state):
            item = stdlib.item_of(iterable)
            before = s
            for bound in self.assign(stmt.target, item, s):
                step = self.exec_block(stmt.body, [bound])
                out.returned += step.returned
                out.normal += step.broke
                out.normal += self.exec_block(stmt.orelse, step.normal + step.continued).normal
            out.normal += self.exec_block(stmt.orelse, [before]).normal
        return out

    stmt_AsyncFor = stmt_For

    def stmt_Match(self, stmt: ast.Match, state: State) -> Flow:
        out = Flow([state])  # no case matched
        for case in stmt.cases:
            out.add(self.exec_block(case.body, [state]))
        return out

    def stmt_Try(self, stmt: ast.Try, state: State) -> Flow:
        frame = self.frame
        outer_raised = frame.raised
        frame.raised = []
        self.tries.append(TryContext(self.site(stmt), tuple(stmt.handlers), frame.module.path))
        try:
            body = self.exec_block(stmt.body, [state])
        finally:
            self.tries.pop()
        raised, frame.raised = frame.raised, outer_raised
        out = Flow([])
        caught = raised + [state] if stmt.handlers else []
        for handler in stmt.handlers:
            entering = [s.set_local(handler.name, Unknown("the exception caught")) if handler.name else s
                        for s in cap(caught)]
            out.add(self.exec_block(handler.body, entering))
        if not any(stdlib.catches_everything(self, h) for h in stmt.handlers):
            frame.raised.extend(raised)
        orelse = self.exec_block(stmt.orelse, body.normal)
        out.normal += orelse.normal
        out.returned += body.returned + orelse.returned
        out.broke += body.broke + orelse.broke
        out.continued += body.continued + orelse.continued
        if stmt.finalbody:
            return self.run_finally(stmt.finalbody, out, raised if not stmt.handlers else [])
        return out

    stmt_TryStar = stmt_Try

    def run_finally(self, final: list[ast.stmt], out: Flow, raised: list[State]) -> Flow:
        done = Flow([])
        done.normal = self.exec_block(final, out.normal).normal
        for value, s in out.returned:
            done.returned += [(value, e) for e in self.exec_block(final, [s]).normal]
        done.broke = self.exec_block(final, out.broke).normal if out.broke else []
        done.continued = self.exec_block(final, out.continued).normal if out.continued else []
        if raised:
            ends = self.exec_block(final, cap(raised)).normal
            self.frame.raised = [s for s in self.frame.raised if s not in raised] + ends
        return done

    def stmt_With(self, stmt: ast.With | ast.AsyncWith, state: State) -> Flow:
        return self.with_items(list(stmt.items), stmt.body, state, stmt)

    stmt_AsyncWith = stmt_With

    def with_items(self, items: list[ast.withitem], body: list[ast.stmt], state: State, node: ast.AST) -> Flow:
        """Enter the first item, run the rest (and then the body) inside it, leave it."""
        if not items:
            return self.exec_block(body, [state])
        item, rest = items[0], items[1:]
        out = Flow([])
        for manager, s in self.eval(item.context_expr, state):
            for option in options(manager):
                out.add(self.enter(option, item, rest, body, s, node))
        return out

    def enter(self, manager: Value, item: ast.withitem, rest: list[ast.withitem], body: list[ast.stmt],
              state: State, node: ast.AST) -> Flow:
        def inside(given: Value, s: State) -> Flow:
            bound = self.assign(item.optional_vars, given, s) if item.optional_vars is not None else [s]
            return Flow([]) if not bound else self._merge([self.with_items(rest, body, b, node) for b in bound])

        if isinstance(manager, Generator):
            return self.enter_generator(manager, inside, state)
        if isinstance(manager, Marked) and manager.marker is Marker.SUPPRESS:
            self.tries.append(TryContext(self.site(node), (), self.frame.module.path, suppress=True))
            try:
                flow = inside(Const(None), state)
            finally:
                self.tries.pop()
            return flow
        entered = apis.enter(self, manager, state, node)
        if entered is not None:
            given, s, leave = entered
            flow = inside(given, s)
            return self._leave(flow, leave)
        if isinstance(manager, Instance):
            return self.enter_instance(manager, inside, state, node)
        return inside(stdlib.entered(manager), state)

    def _leave(self, flow: Flow, leave: Callable[[State], State]) -> Flow:
        return Flow([leave(s) for s in flow.normal], [(v, leave(s)) for v, s in flow.returned],
                    [leave(s) for s in flow.broke], [leave(s) for s in flow.continued])

    @staticmethod
    def _merge(flows: list[Flow]) -> Flow:
        out = Flow([])
        for f in flows:
            out.add(f)
        return out

    def enter_instance(self, manager: Instance, inside: Callable[[Value, State], Flow], state: State,
                       node: ast.AST) -> Flow:
        entered = self.class_attr(manager.cls, "__enter__") or self.class_attr(manager.cls, "__aenter__")
        paths: Paths = [(manager, state)]
        if entered is not None and isinstance(entered[0], Func):
            paths = self.call_value(Bound(entered[0], manager), [], {}, state, node)
        out = self._merge([inside(stdlib.awaited(v), s) for v, s in paths])
        leaving = self.class_attr(manager.cls, "__exit__") or self.class_attr(manager.cls, "__aexit__")
        if leaving is None or not isinstance(leaving[0], Func):
            return out
        exit_method = Bound(leaving[0], manager)
        none = Const(None)

        def leave(s: State) -> list[State]:
            return [e for _, e in self.call_value(exit_method, [none, none, none], {}, s, node)] or [s]

        return Flow([e for s in out.normal for e in leave(s)],
                    [(v, e) for v, s in out.returned for e in leave(s)],
                    [e for s in out.broke for e in leave(s)], [e for s in out.continued for e in leave(s)])

    def enter_generator(self, gen: Generator, inside: Callable[[Value, State], Flow], state: State) -> Flow:
        """Run a @contextmanager function; at its yield, run the with-block's body in the caller, then go on."""
        caller_locals = state.locals
        collected = Flow([])

        def at_yield(value: Value, s: State) -> list[State]:
            inner_locals = s.locals
            saved = self.frames.pop()
            try:
                flow = inside(stdlib.awaited(value), s.with_locals(caller_locals))
            finally:
                self.frames.append(saved)
            collected.returned += [(v, e.with_locals(inner_locals)) for v, e in flow.returned]
            collected.broke += [e.with_locals(inner_locals) for e in flow.broke]
            collected.continued += [e.with_locals(inner_locals) for e in flow.continued]
            return [e.with_locals(inner_locals) for e in flow.normal]

        paths = self.invoke(gen.func, list(gen.args), dict(gen.kwargs), state, None, on_yield=at_yield)
        out = Flow([s.with_locals(caller_locals) for _, s in paths])
        out.returned = [(v, s.with_locals(caller_locals)) for v, s in collected.returned]
        out.broke = [s.with_locals(caller_locals) for s in collected.broke]
        out.continued = [s.with_locals(caller_locals) for s in collected.continued]
        return out

    # ----- assignment ------------------------------------------------------------------------------------------

    def assign(self, target: ast.expr, value: Value, state: State) -> list[State]:
        if isinstance(target, ast.Name):
            return [state.set_local(target.id, value)]
        if isinstance(target, (ast.Tuple, ast.List)):
            return self.unpack(target, value, state)
        if isinstance(target, ast.Attribute):
            out = []
            for obj, s in self.eval(target.value, state):
                for option in options(obj):
                    out.append(self.set_attribute(option, target.attr, value, s, target))
            return out
        if isinstance(target, ast.Subscript):
            return [s for _, s in self.eval(target.value, state)]
        if isinstance(target, ast.Starred):
            return self.assign(target.value, Unknown("the rest of an unpacked value"), state)
        return [state]

    def unpack(self, target: ast.Tuple | ast.List, value: Value, state: State) -> list[State]:
        elts = target.elts
        items: list[Value]
        if isinstance(value, Seq) and len(value.items) == len(elts) and not any(isinstance(e, ast.Starred)
                                                                                 for e in elts):
            items = list(value.items)
        else:
            carried = answers_in(value)
            piece: Value = Answer(carried) if carried else Unknown("an item of a value the scanner does not know")
            items = [piece] * len(elts)
        ends = [state]
        for elt, item in zip(elts, items):
            ends = [e for s in ends for e in self.assign(elt, item, s)]
        return ends

    def set_attribute(self, obj: Value, name: str, value: Value, state: State, node: ast.AST) -> State:
        changed = apis.set_attribute(self, obj, name, value, state, node)
        if changed is not None:
            return changed
        if isinstance(obj, (Instance, Class)):
            return state.set_attr(obj, name, value)
        if answers_in(value):  # stored where the scanner cannot follow it: read elsewhere, perhaps
            return events.read_answers(state, value)
        return state

    # ----- expressions -----------------------------------------------------------------------------------------

    def eval(self, node: ast.expr, state: State) -> Paths:
        self.tick()
        method = getattr(self, f"expr_{type(node).__name__}", None)
        if method is None:
            return [(Unknown(f"a {type(node).__name__} expression"), state)]
        return cap_paths(method(node, state))

    def eval_all(self, nodes: list[ast.expr], state: State) -> list[tuple[list[Value], State]]:
        """Each path through evaluating the nodes in order, with their values."""
        paths: list[tuple[list[Value], State]] = [([], state)]
        for node in nodes:
            if isinstance(node, ast.Starred):
                step = [(vals + [stdlib.spread(v)], s2) for vals, s in paths for v, s2 in self.eval(node.value, s)]
            else:
                step = [(vals + [v], s2) for vals, s in paths for v, s2 in self.eval(node, s)]
            paths = step if len(step) <= MAX_PATHS else [([union(list(c)) for c in zip(*[v for v, _ in step])],
                                                         join([s for _, s in step]))]
        return paths

    def expr_Constant(self, node: ast.Constant, state: State) -> Paths:
        return [(Const(node.value), state)]

    def expr_JoinedStr(self, node: ast.JoinedStr, state: State) -> Paths:
        out: Paths = []
        for values, s in self.eval_all([v.value if isinstance(v, ast.FormattedValue) else v for v in node.values],
                                       state):
            out.append((concat([stdlib.as_text(v) for v in values]), s))
        return out

    def expr_FormattedValue(self, node: ast.FormattedValue, state: State) -> Paths:
        return [(stdlib.as_text(v), s) for v, s in self.eval(node.value, state)]

    def expr_Name(self, node: ast.Name, state: State) -> Paths:
        if node.id in state.locals:
            return [(state.locals[node.id], state)]
        return [(self.lookup_global(node.id), state)]

    def expr_Attribute(self, node: ast.Attribute, state: State) -> Paths:
        out: Paths = []
        for obj, s in self.eval(node.value, state):
            out += self.get_attribute(obj, node.attr, s, node)
        return out

    def get_attribute(self, obj: Value, name: str, state: State, node: ast.AST) -> Paths:
        if isinstance(obj, Union):
            paths: Paths = []
            for option in obj.options:
                if not (isinstance(option, Const) and option.value is None):
                    paths += self.get_attribute(option, name, state, node)
            return [(union([v for v, _ in paths]), join([s for _, s in paths]))] if len(paths) > 1 else paths
        if isinstance(obj, Const) and obj.value is None:
            self.frame.raised.append(state)  # None has no such attribute: this path raises AttributeError
            return []
        modelled = apis.attribute(self, obj, name, state, node)
        if modelled is not None:
            return modelled
        if isinstance(obj, Instance):
            stored = state.attr(obj, name)
            if stored is not None:
                return [(stored, state)]
            return self.class_member(obj.cls, name, obj, state, node)
        if isinstance(obj, Class):
            return self.class_member(obj, name, None, state, node)
        if isinstance(obj, Super):
            cls = obj.receiver.cls if isinstance(obj.receiver, Instance) else (
                obj.receiver if isinstance(obj.receiver, Class) else None)
            if cls is None:
                return [(Unknown("super() of an object the scanner does not know"), state)]
            found = self.class_attr(cls, name, after=obj.owner)
            if found is None:
                return [(Model(f"builtins.object.{name}"), state)]
            return [(self.bind(found[0], obj.receiver), state)]
        if isinstance(obj, Module):
            value = self.globals_of(obj).get(name)
            if value is None:
                value = self.module(f"{obj.name}.{name}")
            return [(value, state)]
        if isinstance(obj, Param):
            return [(Param(obj.owner, f"{obj.path}.{name}"), state)]
        return [(stdlib.attribute(obj, name), state)]

    def class_member(self, cls: Class, name: str, instance: Instance | None, state: State, node: ast.AST) -> Paths:
        found = self.class_attr(cls, name)
        if found is None:
            _, opaque = self.mro(cls)
            why = (f"`{name}` comes from a base class of {cls.qualname} the scanner does not read" if opaque
                   else f"{cls.qualname} has no attribute `{name}` the scanner sees")
            return [(Unknown(why), state)]
        value, _ = found
        if isinstance(value, Func) and value.kind == "property" and instance is not None:
            return self.call_value(Bound(value, instance), [], {}, state, node)
        if instance is None:
            return [(Bound(value, cls) if isinstance(value, Func) and value.kind == "classmethod" else value, state)]
        return [(self.bind(value, instance), state)]

    def bind(self, value: Value, receiver: Value) -> Value:
        if isinstance(value, Func):
            if value.kind == "staticmethod":
                return value
            if value.kind == "classmethod":
                return Bound(value, receiver.cls if isinstance(receiver, Instance) else receiver)
            return Bound(value, receiver)
        return value

    def expr_Call(self, node: ast.Call, state: State) -> Paths:
        out: Paths = []
        for callee, s in self.eval(node.func, state):
            for values, s2 in self.eval_all(list(node.args), s):
                args = stdlib.flatten_args(values)
                for kwargs, s3 in self.eval_keywords(node.keywords, s2):
                    out += self.call_value(callee, args, kwargs, s3, node)
        return out

    def eval_keywords(self, keywords: list[ast.keyword], state: State) -> list[tuple[dict[str, Value], State]]:
        paths: list[tuple[dict[str, Value], State]] = [({}, state)]
        for kw in keywords:
            step = []
            for kwargs, s in paths:
                for value, s2 in self.eval(kw.value, s):
                    if kw.arg is None:
                        step.append(({**kwargs, **stdlib.spread_kwargs(value)}, s2))
                    else:
                        step.append(({**kwargs, kw.arg: value}, s2))
            paths = step[:MAX_PATHS]
        return paths

    def call_value(self, callee: Value, args: list[Value], kwargs: dict[str, Value], state: State,
                   node: ast.AST) -> Paths:
        """Call any value: follow a function, make an instance, run a model, or record an opaque call."""
        if isinstance(callee, Union):
            out: Paths = []
            for option in callee.options:
                out += self.call_value(option, args, kwargs, state, node)
            return out
        if isinstance(callee, Func):
            if callee.kind == "contextmanager":
                return [(Generator(callee, tuple(args), tuple(kwargs.items())), state)]
            return self.invoke(callee, args, kwargs, state, node)
        if isinstance(callee, Bound):
            if callee.func.kind == "contextmanager":
                return [(Generator(callee.func, (callee.receiver, *args), tuple(kwargs.items())), state)]
            return self.invoke(callee.func, [callee.receiver, *args], kwargs, state, node)
        if isinstance(callee, Class):
            return self.instantiate(callee, args, kwargs, state, node)
        modelled = apis.call(self, callee, args, kwargs, state, node)
        if modelled is not None:
            return modelled
        modelled = plugins.call(self, callee, args, kwargs, state, node)
        if modelled is not None:
            return modelled
        modelled = stdlib.call(self, callee, args, kwargs, state, node)
        if modelled is not None:
            return modelled
        return self.opaque(callee, args, kwargs, state, node)

    def opaque(self, callee: Value, args: list[Value], kwargs: dict[str, Value], state: State,
               node: ast.AST) -> Paths:
        """A call the scanner cannot follow: what it is handed escapes, and the code moves on."""
        for value in [*args, *kwargs.values()]:
            if answers_in(value):
                state = events.read_answers(state, value)
        if stdlib.moves_on(callee):
            state = events.moved_on(self, state, node, stdlib.describe(callee))
        return [(Unknown(f"what {stdlib.describe(callee)} returns"), state)]

    def instantiate(self, cls: Class, args: list[Value], kwargs: dict[str, Value], state: State,
                    node: ast.AST) -> Paths:
        instance = Instance(cls, self.site(node))
        init = self.class_attr(cls, "__init__")
        if init is None or not isinstance(init[0], Func):
            for base in self.bases(cls):  # a subclass of one of urllib's named tuples: its fields by position
                if isinstance(base, Model) and base.name in stdlib.NAMED_TUPLES:
                    for field_name, value in zip(stdlib.NAMED_TUPLES[base.name], args):
                        state = state.set_attr(instance, field_name, value)
            return [(instance, state)]
        paths = self.invoke(init[0], [instance, *args], kwargs, state, node)
        return [(instance, s) for _, s in paths] or [(instance, state)]

    def invoke(self, func: Func, args: list[Value], kwargs: dict[str, Value], state: State, node: ast.AST | None,
               on_yield: Callable[[Value, State], list[State]] | None = None) -> Paths:
        caller = self.frame
        if len(self.frames) > MAX_DEPTH or func.node_id in caller.active:
            return self.opaque(Unknown(f"{func.qualname} (too deep to follow)"), args, kwargs, state, node) \
                if node is not None else [(Unknown("a call too deep to follow"), state)]
        locals_ = dict(func.closure)
        receiver = self.bind_params(func, args, kwargs, locals_)
        frame = Frame(func.qualname, func.module, owner=func.owner, receiver=receiver, on_yield=on_yield,
                      active=(*caller.active, func.node_id))
        caller_locals = state.locals
        self.frames.append(frame)
        if node is not None:
            self.sites.append(Site(caller.module.path, getattr(node, "lineno", 0), getattr(node, "col_offset", 0)))
        try:
            if isinstance(func.node, ast.Lambda):
                results = self.eval(func.node.body, state.with_locals(locals_))
            else:
                flow = self.exec_block(func.node.body, [state.with_locals(locals_)])
                results = [(Const(None), s) for s in flow.normal] + flow.returned
        finally:
            self.frames.pop()
            if node is not None:
                self.sites.pop()
        caller.raised.extend(s.with_locals(caller_locals) for s in frame.raised)
        if func.is_async and on_yield is None:
            return [(Awaitable(v), s.with_locals(caller_locals)) for v, s in cap_paths(results)]
        return [(v, s.with_locals(caller_locals)) for v, s in cap_paths(results)]

    def bind_params(self, func: Func, args: list[Value], kwargs: dict[str, Value], locals_: dict[str, Value]) \
            -> Value | None:
        spec = func.node.args
        positional = [*spec.posonlyargs, *spec.args]
        defaults = self.defaults(func)
        first_default = len(positional) - len(spec.defaults)
        for i, param in enumerate(positional):
            if i < len(args):
                locals_[param.arg] = args[i]
            elif param.arg in kwargs:
                locals_[param.arg] = kwargs.pop(param.arg)
            elif i >= first_default:
                locals_[param.arg] = defaults[i - first_default]
            else:
                locals_[param.arg] = Unknown(f"parameter `{param.arg}` of {func.qualname}, not given")
        if spec.vararg is not None:
            locals_[spec.vararg.arg] = Seq("tuple", tuple(args[len(positional):]))
        kw_defaults = defaults[len(spec.defaults):]
        for param, default in zip(spec.kwonlyargs, kw_defaults):
            if param.arg in kwargs:
                locals_[param.arg] = kwargs.pop(param.arg)
            else:
                locals_[param.arg] = default
        if spec.kwarg is not None:
            locals_[spec.kwarg.arg] = Dict(tuple((Const(k), v) for k, v in kwargs.items()))
        return locals_.get(positional[0].arg) if positional else None

    def defaults(self, func: Func) -> list[Value]:
        """A function's default values (positional, then keyword-only: Unknown for one without a default)."""
        if func.node_id not in self._defaults:
            spec = func.node.args
            frame = Frame(func.qualname, func.module)
            self.frames.append(frame)
            self.quiet += 1
            try:
                values = [self.eval(d, State())[0][0] for d in spec.defaults]
                values += [self.eval(d, State())[0][0] if d is not None else Unknown("a keyword-only parameter")
                           for d in spec.kw_defaults]
            except (BudgetSpent, RecursionError, IndexError):
                values = [Unknown("a default value")] * (len(spec.defaults) + len(spec.kw_defaults))
            finally:
                self.quiet -= 1
                self.frames.pop()
            self._defaults[func.node_id] = values
        return self._defaults[func.node_id]

    def expr_Lambda(self, node: ast.Lambda, state: State) -> Paths:
        return [(self.make_function(node, state), state)]

    def expr_Await(self, node: ast.Await, state: State) -> Paths:
        return [(stdlib.awaited(v), s) for v, s in self.eval(node.value, state)]

    def expr_Yield(self, node: ast.Yield | ast.YieldFrom, state: State) -> Paths:
        paths = self.eval(node.value, state) if node.value is not None else [(Const(None), state)]
        hook = self.frame.on_yield
        if hook is None:
            return [(Unknown("a value sent into a generator"), s) for _, s in paths]
        out: Paths = []
        for value, s in paths:
            out += [(Const(None), e) for e in hook(value, s)]
        return out

    expr_YieldFrom = expr_Yield

    def expr_NamedExpr(self, node: ast.NamedExpr, state: State) -> Paths:
        return [(v, e) for v, s in self.eval(node.value, state) for e in self.assign(node.target, v, s)]

    def expr_Tuple(self, node: ast.Tuple | ast.List | ast.Set, state: State) -> Paths:
        kind = {ast.Tuple: "tuple", ast.List: "list", ast.Set: "set"}[type(node)]
        return [(Seq(kind, tuple(stdlib.flatten_args(values))), s) for values, s in self.eval_all(list(node.elts),
                                                                                                     state)]

    expr_List = expr_Tuple
    expr_Set = expr_Tuple

    def expr_Dict(self, node: ast.Dict, state: State) -> Paths:
        out: Paths = []
        for keys, s in self.eval_all([k if k is not None else ast.Constant(None) for k in node.keys], state):
            for values, s2 in self.eval_all(list(node.values), s):
                items: list[tuple[Value, Value]] = []
                complete = True
                for key_node, key, value in zip(node.keys, keys, values):
                    if key_node is None:
                        spread = stdlib.spread_kwargs(value)
                        if isinstance(value, Dict):
                            items += list(value.items)
                            complete = complete and value.complete
                        else:
                            items += [(Const(k), v) for k, v in spread.items()]
                            complete = False
                    else:
                        items.append((key, value))
                out.append((Dict(tuple(items), complete), s2))
        return out

    def expr_ListComp(self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp,
                      state: State) -> Paths:
        """A comprehension runs its parts once (what it reads and calls counts); its value is not followed."""
        outer = state.locals
        states = [state]
        for gen in node.generators:
            step: list[State] = []
            for s in states:
                for iterable, s2 in self.eval(gen.iter, s):
                    for bound in self.assign(gen.target, stdlib.item_of(iterable), s2):
                        ends = [bound]
                        for condition in gen.ifs:
                            ends = [e for _, e in self.eval(condition, bound)]
                        step += ends
            states = cap(step)
        parts = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
        out: Paths = []
        for s in states:
            for values, s2 in self.eval_all(parts, s):
                carried = frozenset().union(*(answers_in(v) for v in values))
                out.append((Answer(carried) if carried else Unknown("a comprehension"), s2.with_locals(outer)))
        return out

    expr_SetComp = expr_ListComp
    expr_DictComp = expr_ListComp
    expr_GeneratorExp = expr_ListComp

    def expr_Slice(self, node: ast.Slice, state: State) -> Paths:
        return [(Unknown("a slice"), state)]

    def expr_Starred(self, node: ast.Starred, state: State) -> Paths:
        return self.eval(node.value, state)

    def expr_IfExp(self, node: ast.IfExp, state: State) -> Paths:
        out: Paths = []
        for taken, s in self.branch(node.test, state):
            out += self.eval(node.body if taken else node.orelse, s)
        return out

    def expr_BoolOp(self, node: ast.BoolOp, state: State) -> Paths:
        """Short-circuit: `a and b` is a when a is falsy, else b (each path decides; an undecided one forks)."""
        is_and = isinstance(node.op, ast.And)
        paths: Paths = []
        pending: list[State] = [state]
        for i, operand in enumerate(node.values):
            last = i == len(node.values) - 1
            next_pending: list[State] = []
            for s in pending:
                for value, s2 in self.eval(operand, s):
                    if last:
                        paths.append((value, s2))
                        continue
                    t = truth(value)
                    stops = (t is False) if is_and else (t is True)
                    goes_on = (t is True) if is_and else (t is False)
                    if t is None:  # both ways: the operand's name refined on each
                        paths.append((stdlib.with_truth(value, not is_and), self.refine(operand, not is_and, s2)))
                        next_pending.append(self.refine(operand, is_and, s2))
                    elif stops:
                        paths.append((value, s2))
                    elif goes_on:
                        next_pending.append(s2)
            pending = next_pending
        return paths

    def expr_UnaryOp(self, node: ast.UnaryOp, state: State) -> Paths:
        return [(stdlib.unary(node.op, values[0]), s) for values, s in self.eval_all([node.operand], state)]

    def expr_BinOp(self, node: ast.BinOp, state: State) -> Paths:
        return [(stdlib.binop(node.op, *values), s) for values, s in self.eval_all([node.left, node.right], state)]

    def expr_Compare(self, node: ast.Compare, state: State) -> Paths:
        return [(stdlib.compare(node.ops, values), s) for values, s in self.eval_all([node.left, *node.comparators],
                                                                                       state)]

    def expr_Subscript(self, node: ast.Subscript, state: State) -> Paths:
        out: Paths = []
        for obj, s in self.eval(node.value, state):
            for index, s2 in self.eval(node.slice, s):
                modelled = apis.subscript(self, obj, index, s2, node)
                if modelled is not None:
                    out += modelled
                    continue
                out += self.subscript_forked(obj, index, node.slice, s2)
        return out

    def subscript_forked(self, obj: Value, index: Value, index_node: ast.expr, state: State) -> Paths:
        """obj[index]; a dict indexed by a name the path does not know forks into one path per key, the name
        refined to that key on each (so `{...}[driver](...)` follows each driver with its own name)."""
        if isinstance(obj, Dict) and obj.complete and not isinstance(index, Const) and isinstance(index_node, ast.Name):
            out: Paths = []
            for key, value in obj.items:
                if isinstance(key, Const):
                    out.append((value, state.set_local(index_node.id, key)))
            return out or [(Unknown("a key not in the dict"), state)]
        return [(stdlib.item(obj, index), state)]

    # ----- tests -------------------------------------------------------------------------------------------------

    def branch(self, test: ast.expr, state: State) -> list[tuple[bool, State]]:
        """The ways a test can go on this path: (taken, state refined by the test's outcome)."""
        out: list[tuple[bool, State]] = []
        for value, s in self.eval(test, state):
            s = events.read_answers(s, value)
            t = truth(value)
            if t is not False:
                out.append((True, self.refine(test, True, s)))
            if t is not True:
                out.append((False, self.refine(test, False, s)))
        return out

    def refine(self, test: ast.expr, outcome: bool, state: State) -> State:
        """What a test's outcome says about the name or attribute it tested."""
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            return self.refine(test.operand, not outcome, state)
        if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) and outcome:
            for value in test.values:
                state = self.refine(value, True, state)
            return state
        if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or) and not outcome:
            for value in test.values:
                state = self.refine(value, False, state)
            return state
        if isinstance(test, ast.Compare) and len(test.ops) == 1:
            op, right = test.ops[0], test.comparators[0]
            if isinstance(right, ast.Constant) and right.value is None and isinstance(op, (ast.Is, ast.IsNot)):
                is_none = outcome if isinstance(op, ast.Is) else not outcome
                return self.narrow(test.left, state, keep_none=is_none)
            if isinstance(op, (ast.Eq, ast.Is)) and isinstance(right, ast.Constant) and outcome:
                return self.replace_target(test.left, Const(right.value), state)
            if isinstance(op, ast.In) and outcome and isinstance(right, (ast.Tuple, ast.List, ast.Set)) \
                    and all(isinstance(e, ast.Constant) for e in right.elts):
                current = self.peek(test.left, state)
                if current is not None and not isinstance(current, Const):
                    return self.replace_target(test.left, union([Const(e.value) for e in right.elts
                                                                 if isinstance(e, ast.Constant)]), state)
            return state
        if isinstance(test, (ast.Name, ast.Attribute)):
            current = self.peek(test, state)
            if current is None:
                return state
            kept = [o for o in options(current) if truth(o) in (None, outcome)]
            if not kept:
                return state
            refined = union([stdlib.with_truth(o, outcome) if truth(o) is None and not isinstance(o, Answer)
                             else o for o in kept])
            return self.replace_target(test, refined, state)
        return state

    def narrow(self, target: ast.expr, state: State, keep_none: bool) -> State:
        current = self.peek(target, state)
        if current is None:
            return state
        kept = [o for o in options(current)
                if (isinstance(o, Const) and o.value is None) == keep_none or isinstance(o, (Unknown, Param))]
        if keep_none:
            return self.replace_target(target, Const(None), state)
        kept = [o for o in kept if not (isinstance(o, Const) and o.value is None)]
        if not kept:
            return state
        return self.replace_target(target, union(kept), state)

    def peek(self, target: ast.expr, state: State) -> Value | None:
        """A name's or `obj.attr`'s value on this path without evaluating anything else."""
        if isinstance(target, ast.Name):
            return state.locals.get(target.id)
        if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
            obj = state.locals.get(target.value.id)
            if isinstance(obj, (Instance, Class)):
                return state.attr(obj, target.attr)
        return None

    def replace_target(self, target: ast.expr, value: Value, state: State) -> State:
        if isinstance(target, ast.Name) and target.id in state.locals:
            return state.set_local(target.id, value)
        if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
            obj = state.locals.get(target.value.id)
            if isinstance(obj, (Instance, Class)) and state.attr(obj, target.attr) is not None:
                return state.set_attr(obj, target.attr, value)
        return state

