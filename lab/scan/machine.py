"""What the models (apis, stdlib, plugins) and the judges (events) need of the interpreter: the Machine it is to
them, and the types its members hand out. They import this, never lab/scan/interp.py, so they sit below it.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from lab.scan.findings import Result, Site
from lab.scan.record import Recorder
from lab.scan.sources import Sources
from lab.scan.state import State
from lab.scan.values import Class, Module, Value

Paths = list[tuple[Value, State]]


@dataclass
class Frame:
    qualname: str
    module: Module
    owner: Class | None = None
    receiver: Value | None = None
    raised: list[State] = field(default_factory=list)
    on_yield: Callable[[Value, State], list[State]] | None = None
    active: tuple[int, ...] = ()  # node ids of the functions on the call stack (recursion stops here)


@dataclass(frozen=True)
class TryContext:
    """A try statement around the code now running: its handlers, for a release's swallowed exception."""

    site: Site
    handlers: tuple[ast.ExceptHandler, ...]
    path: str
    suppress: bool = False  # contextlib.suppress(...): catches and swallows by definition


class Machine(Protocol):
    """The interpreter's members the models and the judges use (lab/scan/interp.py's Interpreter has them all)."""

    sources: Sources
    rec: Recorder
    tries: list[TryContext]
    quiet: int

    @property
    def frame(self) -> Frame: ...

    def site(self, node: ast.AST) -> Site: ...

    def chain(self, node: ast.AST) -> tuple[Site, ...]: ...

    def library_here(self) -> str | None: ...

    def record(self, result: Result) -> None: ...

    def module(self, name: str) -> Value: ...

    def import_name(self, source: Value, base: str, name: str) -> Value: ...

    def get_attribute(self, obj: Value, name: str, state: State, node: ast.AST) -> Paths: ...

    def call_value(self, callee: Value, args: list[Value], kwargs: dict[str, Value], state: State,
                   node: ast.AST) -> Paths: ...
