"""Python's builtins and standard library as the scanner sees them: modelled where they carry a value the analysis
needs (str(), tuple(), typing.cast, functools.lru_cache, contextlib.contextmanager, asyncio.run, urllib's urlsplit),
opaque otherwise. The standard library is never read; a call into it is not the code moving on, except the few that
wait (time.sleep, subprocess, threads), which lab/scan/events.py treats like any call the scanner cannot follow.

Also the small operations on values that do not depend on where they happen: a value as text, an item of a
sequence, a comparison, an operator.
"""

from __future__ import annotations

import ast
import builtins
import operator
import string
from dataclasses import replace
import re
import sys

from lab.scan.machine import Machine, Paths
from lab.scan.state import State
from lab.scan.values import (Answer, Awaitable, Const, Dict, Func, Future, Loaded, Marked, Marker, Member, Model,
                             Param, Seq, SqlText, Super, Text, Union, Unknown, Value, answers_in, concat, options,
                             text_templates, truth, union)

STDLIB = frozenset(sys.stdlib_module_names) | {"builtins"}
# urllib.parse's named tuples, by the function that makes them: a URL's scheme is what picks a plugin.
URL_FIELDS = {"urlsplit": ("scheme", "netloc", "path", "query", "fragment"),
              "urlparse": ("scheme", "netloc", "path", "params", "query", "fragment")}
NAMED_TUPLES = {"urllib.parse.SplitResult": URL_FIELDS["urlsplit"], "urllib.parse.ParseResult": URL_FIELDS["urlparse"]}
# Calls that wait, sleep or hand work elsewhere: the code has moved on while they run.
WAITS = ("time.sleep", "asyncio.sleep", "subprocess.", "os.system", "threading.Thread", "socket.")
# Methods of plain data (dicts, strings, lists, results): calling one on a value the scanner does not know is a look-up,
# not the code moving on.
DATA_METHODS = frozenset({"values", "items", "keys", "get", "append", "extend", "add", "update", "pop", "copy",
                          "split", "join", "strip", "format", "encode", "decode", "startswith", "endswith", "lower",
                          "upper", "replace", "setdefault", "index", "count", "sort", "hexdigest", "digest",
                          "isoformat", "total_seconds", "group", "groups", "match", "search", "fullmatch", "render",
                          "render_as_string", "set", "difference", "union", "intersection", "discard", "remove",
                          "insert", "clear", "rstrip", "lstrip", "partition", "rpartition", "casefold", "fetchone",
                          "fetchall", "scalar", "one", "first", "all"})
# Method names that only log or print: a call to them is not the code moving on.
QUIET = frozenset({"debug", "info", "warning", "warn", "error", "exception", "critical", "log", "print"})
PURE_BUILTINS = frozenset({"len", "str", "int", "float", "bool", "tuple", "list", "dict", "set", "frozenset",
                           "isinstance", "issubclass", "hasattr", "getattr", "setattr", "repr", "format", "type", "id",
                           "sorted", "min", "max", "sum", "abs", "round", "range", "enumerate", "zip", "iter",
                           "next", "any", "all", "callable", "print", "object", "super", "hash", "divmod", "map",
                           "filter", "reversed", "bytes", "vars", "chr", "ord", "hex", "slice", "open"})
SWALLOWING_NAMES = frozenset({"Exception", "BaseException"})
# Exception classes a release's failure raises (a driver's, a library's wrapper of it): a handler of one of these
# catches a release on a dead session.
DB_ERRORS = frozenset({"Error", "DatabaseError", "OperationalError", "InterfaceError", "SQLAlchemyError", "DBAPIError",
                       "PostgresError", "ConnectionError", "ConnectionDoesNotExistError", "InterfaceError",
                       "ToozError", "ToozConnectionError", "OSError"})


def is_stdlib_name(name: str) -> bool:
    return name.split(".")[0] in STDLIB


def modelled(name: str) -> bool:
    return is_stdlib_name(name)


def builtin(name: str) -> Value:
    if hasattr(builtins, name):
        return Model(f"builtins.{name}")
    return Unknown(f"the name `{name}` is not defined where the scanner looks")


def harmless_base(name: str) -> bool:
    """A base class from the standard library (object, ABC, Exception, Enum...): it adds no database behaviour."""
    return is_stdlib_name(name)


# ----- values as text, items, operators -----------------------------------------------------------------------------

def as_text(value: Value) -> Value:
    """The value formatted into a string (f-string, str()): its text when known, a hole otherwise."""
    out: list[Value] = []
    for option in options(value):
        if isinstance(option, Const):
            out.append(Const(option.value if isinstance(option.value, str) else str(option.value)))
        elif isinstance(option, (Text, SqlText)):
            out.append(option if isinstance(option, Text) else option.text)
        else:
            out.append(Text(frozenset({(None,)})))
    return union(out)


def spread(value: Value) -> Value:
    """*value in a call or display."""
    return Seq("spread", value.items) if isinstance(value, Seq) else Seq("spread", (Unknown("unpacked items"),))


def flatten_args(values: list[Value]) -> list[Value]:
    out: list[Value] = []
    for value in values:
        if isinstance(value, Seq) and value.kind == "spread":
            out.extend(value.items)
        else:
            out.append(value)
    return out


def spread_kwargs(value: Value) -> dict[str, Value]:
    if isinstance(value, Dict):
        return {str(k.value): v for k, v in value.items if isinstance(k, Const)}
    return {}


def item_of(iterable: Value) -> Value:
    """One item of what a for loop runs over."""
    found: list[Value] = []
    for option in options(iterable):
        if isinstance(option, Seq):
            found += list(option.items) or [Unknown("an item of an empty sequence")]
        elif isinstance(option, Dict):
            found += [k for k, _ in option.items] or [Unknown("a key")]
        elif isinstance(option, Answer):
            found.append(option)
        else:
            found.append(Unknown("an item of a value the scanner does not know"))
    return union(found) if found else Unknown("an item")


def item(obj: Value, index: Value) -> Value:
    """obj[index] for values that are not database objects."""
    found: list[Value] = []
    for option in options(obj):
        if isinstance(option, Answer):
            found.append(option)
        elif isinstance(option, Seq) and isinstance(index, Const) and isinstance(index.value, int) \
                and -len(option.items) <= index.value < len(option.items):
            found.append(option.items[index.value])
        elif isinstance(option, Dict) and isinstance(index, Const):
            hits = [v for k, v in option.items if isinstance(k, Const) and k.value == index.value]
            found.append(hits[-1] if hits else Unknown(f"key {index.value!r} not in the dict"))
        elif isinstance(option, Dict):
            found.append(union([v for _, v in option.items]) if option.items else Unknown("a dict's value"))
        else:
            found.append(Unknown("an item of a value the scanner does not know"))
    return union(found) if found else Unknown("an item")


def with_truth(value: Value, truthy: bool) -> Value:
    """The value, known on this path to be truthy (or falsy)."""
    if isinstance(value, Unknown):
        return Unknown(value.why, truthy)
    if isinstance(value, Param):
        return Param(value.owner, value.path, truthy)
    if isinstance(value, Text) and truth(value) is None:
        return Unknown(f"a string, {'non-empty' if truthy else 'empty'} here", truthy)
    if isinstance(value, Union):
        return union([with_truth(o, truthy) for o in value.options if truth(o) in (None, truthy)] or [value])
    return value


def unary(op: ast.unaryop, value: Value) -> Value:
    carried = answers_in(value)
    if carried:
        return Answer(carried)
    if isinstance(op, ast.Not):
        t = truth(value)
        return Const(not t) if t is not None else Unknown("the negation of an undecided value")
    if isinstance(value, Const) and isinstance(value.value, (int, float)) and not isinstance(value.value, bool):
        return Const(-value.value if isinstance(op, ast.USub) else value.value)
    return Unknown("an operator's result")


_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
           ast.Mod: operator.mod, ast.BitOr: operator.or_, ast.BitAnd: operator.and_}


def binop(op: ast.operator, left: Value, right: Value) -> Value:
    carried = answers_in(left) | answers_in(right)
    if carried:
        return Answer(carried)
    if isinstance(op, ast.Add) and (text_templates(left) is not None and not isinstance(left, Unknown)) \
            and text_templates(right) is not None:
        return concat([left, right])
    if isinstance(op, ast.Mod) and not isinstance(left, Unknown) and text_templates(left) is not None:
        if isinstance(left, Const) and isinstance(right, Const):
            try:
                return Const(left.value % right.value)
            except (TypeError, ValueError, KeyError):
                pass
        return left  # "... %s" % args: the statement's words stay what they were
    if isinstance(left, Const) and isinstance(right, Const) and type(op) in _BINOPS:
        try:
            return Const(_BINOPS[type(op)](left.value, right.value))
        except (TypeError, ValueError, ZeroDivisionError, OverflowError):
            pass
    if isinstance(left, Seq) and isinstance(right, Seq) and isinstance(op, ast.Add):
        return Seq(left.kind, left.items + right.items)
    return Unknown("an operator's result")


def compare(ops: list[ast.cmpop], values: list[Value]) -> Value:
    carried = frozenset().union(*(answers_in(v) for v in values))
    if carried:
        return Answer(carried)
    result: bool | None = True
    for op, left, right in zip(ops, values, values[1:]):
        step = _compare_one(op, left, right)
        if step is False:
            return Const(False)
        if step is None:
            result = None
    return Const(result) if result is not None else Unknown("a comparison the code does not decide")


def _compare_one(op: ast.cmpop, left: Value, right: Value) -> bool | None:
    if isinstance(op, (ast.Is, ast.IsNot)) and isinstance(right, Const) and right.value is None:
        is_none = _is_none(left)
        if is_none is None:
            return None
        return is_none if isinstance(op, ast.Is) else not is_none
    if isinstance(left, Const) and isinstance(right, Const):
        table = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
                 ast.Gt: operator.gt, ast.GtE: operator.ge, ast.Is: operator.is_, ast.IsNot: operator.is_not}
        if type(op) in table:
            try:
                return bool(table[type(op)](left.value, right.value))
            except TypeError:
                return None
    if isinstance(op, (ast.In, ast.NotIn)) and isinstance(left, Const) and isinstance(right, Seq) \
            and all(isinstance(i, Const) for i in right.items):
        found = any(isinstance(i, Const) and i.value == left.value for i in right.items)
        return found if isinstance(op, ast.In) else not found
    return None


def _is_none(value: Value) -> bool | None:
    found = set()
    for option in options(value):
        if isinstance(option, Const):
            found.add(option.value is None)
        elif isinstance(option, (Unknown, Param, Answer, Model)):
            return None
        else:
            found.add(False)
    return found.pop() if len(found) == 1 else None


def awaited(value: Value) -> Value:
    return union([o.inner if isinstance(o, Awaitable) else o for o in options(value)])


def entered(manager: Value) -> Value:
    """What `with manager as x` binds for a manager the scanner does not model: the manager itself (most return
    self from __enter__), unknown for anything it cannot know."""
    return manager if not isinstance(manager, (Const, Seq, Dict)) else Unknown("what a context manager gives")


def attribute(obj: Value, name: str) -> Value:
    """obj.name for values the interpreter does not own (a module's name, an unknown value, a constant)."""
    if isinstance(obj, Seq) and obj.kind in URL_FIELDS and name in URL_FIELDS[obj.kind]:
        return obj.items[URL_FIELDS[obj.kind].index(name)]
    if isinstance(obj, Model):
        return Model(f"{obj.name}.{name}", obj.unread)
    if isinstance(obj, Loaded) and name in ("driver", "plugin"):
        return obj.driver
    return Member(obj, name)


PLAIN_DATA = (Const, Text, Seq, Dict, SqlText)


def describe(callee: Value) -> str:
    if isinstance(callee, Model):
        return f"{callee.name}()"
    if isinstance(callee, Member):
        receiver = callee.receiver
        return f"{receiver.path}.{callee.name}()" if isinstance(receiver, Param) else f"{callee.name}()"
    if isinstance(callee, Param):
        return f"{callee.path}()"
    if isinstance(callee, Unknown):
        return f"a call the scanner cannot follow ({callee.why})"
    return "a call"


def moves_on(callee: Value) -> bool:
    """Whether an opaque call is the code moving on (work, waiting) rather than a quick look-up or a log line."""
    if isinstance(callee, Member):
        return callee.name not in QUIET and callee.name not in DATA_METHODS \
            and not isinstance(callee.receiver, (*PLAIN_DATA, Answer))
    if isinstance(callee, Model):
        if callee.name.rsplit(".", 1)[-1] in QUIET:
            return False
        return callee.unread or callee.name.startswith(WAITS) or not is_stdlib_name(callee.name)
    if isinstance(callee, Param):
        return callee.path.rsplit(".", 1)[-1] not in QUIET
    return True


def catches_everything(interp: Machine, handler: ast.ExceptHandler) -> bool:
    return handler.type is None or _handler_names(handler) & SWALLOWING_NAMES != set()


def _handler_names(handler: ast.ExceptHandler) -> set[str]:
    if handler.type is None:
        return set()
    nodes = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    names = set()
    for node in nodes:
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
    return names


def catches_release_failure(handler: ast.ExceptHandler) -> bool:
    """A handler that catches the exception a release on a dead session raises."""
    names = _handler_names(handler)
    return handler.type is None or bool(names & (SWALLOWING_NAMES | DB_ERRORS))


def swallows(handler: ast.ExceptHandler) -> bool:
    """A handler that provably lets the failure go: it neither raises, nor returns a value other than True/None, nor
    records anything, and calls nothing but a log line or print (a log line is what the post's job wrote before
    claiming a clean release). A handler that calls anything else might raise from there: not judged."""
    for node in _walk_no_defs(handler.body):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else (func.id if isinstance(func, ast.Name) else "")
            if name not in QUIET:
                return False
        if isinstance(node, ast.Raise):
            return False
        if isinstance(node, ast.Return) and node.value is not None and not (
                isinstance(node.value, ast.Constant) and node.value.value in (True, None)):
            return False
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            return False
    return True


def _walk_no_defs(body: list[ast.stmt]):
    stack: list[ast.AST] = list(body)
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        stack.extend(ast.iter_child_nodes(node))


# ----- decorators -----------------------------------------------------------------------------------------------------

def decorate(interp: Machine, decorator: Value, func: Value) -> Value:
    """A function after one decorator: the ones that change how it is called are modelled; any other is assumed to
    call the function it wraps (functools.wraps, a retry, a cache)."""
    if not isinstance(func, Func):
        return func
    name = decorator.name if isinstance(decorator, Model) else ""
    last = name.rsplit(".", 1)[-1]
    if last in ("contextmanager", "asynccontextmanager"):
        return replace(func, kind="contextmanager")
    if last in ("abstractmethod", "abstractproperty"):
        return replace(func, abstract=True)
    if last in ("staticmethod", "classmethod", "property", "cached_property"):
        kind = "property" if last == "cached_property" else last
        return replace(func, kind=kind)
    if isinstance(decorator, Member) and decorator.name in ("setter", "deleter") \
            and isinstance(decorator.receiver, Func):
        return decorator.receiver  # the property keeps its getter
    return func


# ----- calls --------------------------------------------------------------------------------------------------------

def option_default(interp: Machine, callee: Value, args: list[Value], node: ast.AST) -> Value | None:
    """`options.get("driver", "psycopg2")` on a mapping the code was handed: its default, and the assumption noted.

    The scanner judges the code as it runs when nobody overrides the option; the result says it assumed so."""
    if len(args) != 2 or not isinstance(args[0], Const):
        return None
    if isinstance(callee, Param) and callee.path.endswith(".get"):
        mapping = callee.path[: -len(".get")]
    elif isinstance(callee, Model) and callee.name in ("os.environ.get", "os.getenv"):
        mapping = "os.environ"
    else:
        return None
    shown = args[1].value if isinstance(args[1], Const) else "its default"
    interp.rec.assumed.append(f"{mapping}[{args[0].value!r}] not set, so {shown!r} ({interp.site(node)})")
    return args[1]


def call(interp: Machine, callee: Value, args: list[Value], kwargs: dict[str, Value], state: State,
         node: ast.AST) -> Paths | None:
    """A call of a builtin or a standard-library name, or of a method of a plain value; None when not modelled."""
    default = option_default(interp, callee, args, node)
    if default is not None:
        return [(default, state)]
    if isinstance(callee, Marked) and callee.marker is Marker.PASS_THROUGH:
        return [(args[0] if args else Unknown("a decorated value"), state)]
    if isinstance(callee, Member):
        return _member(interp, callee, args, kwargs, state, node)
    if not isinstance(callee, Model):
        return None
    name = callee.name
    if name.startswith("builtins."):
        return _builtin(interp, name.split(".", 1)[1], args, kwargs, state, node)
    last = name.rsplit(".", 1)[-1]
    if name == "typing.cast" and len(args) == 2:
        return [(args[1], state)]
    if last in ("lru_cache", "cache", "wraps", "retry", "total_ordering") or name in ("functools.cache",):
        if args and isinstance(args[0], Func) and last != "wraps":
            return [(args[0], state)]
        return [(Marked(Marker.PASS_THROUGH), state)]
    if last in ("contextmanager", "asynccontextmanager") and args:
        return [(decorate(interp, callee, args[0]), state)]
    if name == "contextlib.suppress":
        return [(Marked(Marker.SUPPRESS), state)]
    if name in ("contextlib.nullcontext", "contextlib.closing"):
        return [(args[0] if args else Const(None), state)]
    if name == "asyncio.run":
        return [(awaited(args[0]) if args else Unknown("a coroutine's result"), state)]
    if name == "asyncio.run_coroutine_threadsafe" and args:
        return [(Future(awaited(args[0])), state)]
    if name in ("asyncio.ensure_future", "asyncio.create_task", "asyncio.wait_for", "asyncio.shield") and args:
        return [(Awaitable(awaited(args[0])), state)]
    if name in ("urllib.parse.urlsplit", "urllib.parse.urlparse") and args:
        fields = URL_FIELDS[last]
        return [(Seq(last, (scheme_of(args[0]),) + tuple(Unknown(f"a URL's {f}") for f in fields[1:])), state)]
    if name in ("re.sub", "re.subn") and len(args) >= 3:
        pattern, repl, text = args[0], args[1], args[2]
        if isinstance(pattern, Const) and isinstance(repl, Const) and isinstance(text, Const) \
                and all(isinstance(v.value, str) for v in (pattern, repl, text)):
            try:
                return [(Const(re.sub(str(pattern.value), str(repl.value), str(text.value))), state)]
            except re.error:
                pass
        return [(text, state)]  # a rewrite of placeholders keeps the statement's words
    return None


def _member(interp: Machine, callee: Member, args: list[Value], kwargs: dict[str, Value], state: State,
            node: ast.AST) -> Paths | None:
    """A method of a value the interpreter does not own: of a string, sequence or dict, of an unlock's answer, of a
    future; an event loop running a coroutine."""
    receiver = callee.receiver
    if isinstance(receiver, PLAIN_DATA):
        return [(_value_method(receiver, callee.name, args, kwargs, interp, node), state)]
    if isinstance(receiver, Answer):
        return [(receiver, state)]
    if isinstance(receiver, Future) and callee.name == "result":
        return [(receiver.result, state)]
    if callee.name == "run_until_complete":
        return [(awaited(args[0]) if args else Unknown("a coroutine's result"), state)]
    return None


def scheme_of(url: Value) -> Value:
    """The scheme of a URL value: known when its text starts with `scheme://`."""
    templates = text_templates(url)
    if not templates:
        return Unknown("the scheme of a URL the code builds at run time")
    found = set()
    for template in templates:
        first = template[0] if template else None
        if first is None or "://" not in first:
            return Unknown("the scheme of a URL the code builds at run time")
        found.add(first.split("://", 1)[0])
    return union([Const(s) for s in sorted(found)])


def _builtin(interp: Machine, name: str, args: list[Value], kwargs: dict[str, Value], state: State,
             node: ast.AST) -> Paths | None:
    first = args[0] if args else None
    if name == "super":
        frame = interp.frame
        if frame.owner is not None and frame.receiver is not None:
            return [(Super(frame.owner, frame.receiver), state)]
        return [(Unknown("super() outside a method the scanner follows"), state)]
    if name in ("tuple", "list", "set", "frozenset", "sorted", "reversed"):
        if first is None:
            return [(Seq("tuple", ()), state)]
        carried = answers_in(first)
        if isinstance(first, Seq):
            return [(Seq(first.kind if name == "sorted" else name, first.items), state)]
        return [(Answer(carried) if carried else Unknown(f"{name}() of a value the scanner does not know"), state)]
    if name == "dict":
        base = first if isinstance(first, Dict) else Dict((), complete=first is None)
        return [(Dict(base.items + tuple((Const(k), v) for k, v in kwargs.items()), base.complete), state)]
    if name == "bool":
        if first is None:
            return [(Const(False), state)]
        carried = answers_in(first)
        t = truth(first)
        return [(Answer(carried) if carried else (Const(t) if t is not None else Unknown("bool() undecided")), state)]
    if name in ("str", "repr", "format"):
        return [(as_text(first) if first is not None else Const(""), state)]
    if name in ("int", "float"):
        if isinstance(first, Const):
            try:
                return [(Const(int(first.value) if name == "int" else float(first.value)), state)]
            except (TypeError, ValueError):
                pass
        carried = answers_in(first) if first is not None else frozenset()
        return [(Answer(carried) if carried else Unknown(f"{name}() of a value the scanner does not know"), state)]
    if name == "len":
        if isinstance(first, Seq) and first.kind != "spread":
            return [(Const(len(first.items)), state)]
        return [(Unknown("a length", None), state)]
    if name == "getattr" and len(args) >= 2 and isinstance(args[1], Const) and isinstance(args[1].value, str):
        paths = interp.get_attribute(args[0], args[1].value, state, node)
        if len(args) == 3:
            return [(args[2] if isinstance(v, Unknown) else v, s) for v, s in paths]
        return paths
    if name in ("isinstance", "hasattr", "callable", "issubclass", "any", "all"):
        return [(Unknown(f"what {name}() says"), state)]
    if name == "print":
        return [(Const(None), state)]
    if name == "next" and first is not None:
        return [(item_of(first), state)]
    if name == "iter" and first is not None:
        return [(first, state)]
    if name in PURE_BUILTINS or name[:1].isupper():
        return [(Unknown(f"what {name}() returns"), state)]
    return None


def _value_method(receiver: Value | None, method: str, args: list[Value], kwargs: dict[str, Value],
                  interp: Machine, node: ast.AST) -> Value:
    """A method of a string, sequence or dict value."""
    if receiver is None:
        return Unknown("a method's result")
    if isinstance(receiver, Dict) and method in ("get", "pop", "setdefault"):
        key = args[0] if args else None
        default = args[1] if len(args) > 1 else Const(None)
        if isinstance(key, Const):
            hits = [v for k, v in receiver.items if isinstance(k, Const) and k.value == key.value]
            if hits:
                return hits[-1]
            return default if receiver.complete else union([default, Unknown(f"the value of {key.value!r}")])
        return Unknown("a dict's value")
    if isinstance(receiver, (Const, Text, SqlText)):
        text = receiver.text if isinstance(receiver, SqlText) else receiver
        if isinstance(text, Const) and isinstance(text.value, (str, bytes)) and method in (
                "strip", "lower", "upper", "rstrip", "lstrip", "encode", "decode", "casefold", "title"):
            try:
                return Const(getattr(text.value, method)(*[a.value for a in args if isinstance(a, Const)]))
            except (TypeError, ValueError, LookupError, AttributeError):
                return text
        if method in ("format", "format_map", "replace", "strip", "lower", "upper", "rstrip", "lstrip", "encode",
                      "decode", "join", "casefold", "title"):
            if method == "join":
                return Text(frozenset({(None,)}))
            if method == "format" and isinstance(text, Const) and isinstance(text.value, str):
                return _formatted(text.value, args, kwargs)
            return text  # the statement's words survive a rewrite of its placeholders
        if method in ("startswith", "endswith") and isinstance(text, Const) and args and isinstance(args[0], Const):
            try:
                return Const(getattr(text.value, method)(args[0].value))
            except (TypeError, AttributeError):
                pass
    return Unknown(f"what .{method}() returns")


def _formatted(template: str, args: list[Value], kwargs: dict[str, Value]) -> Value:
    """str.format: the literal text kept, each field the argument's text when known, else a hole."""
    parts: list[Value] = []
    position = 0
    for literal, field, _spec, _conv in string.Formatter().parse(template):
        parts.append(Const(literal))
        if field is None:
            continue
        if field == "":
            value = args[position] if position < len(args) else Unknown("a format argument")
            position += 1
        elif field.isdigit():
            value = args[int(field)] if int(field) < len(args) else Unknown("a format argument")
        else:
            value = kwargs.get(field, Unknown("a format argument"))
        parts.append(as_text(value))
    return concat(parts)
