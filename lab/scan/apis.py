"""The database clients as the scanner models them: how each makes a connection, in which transaction mode, and what
each of its calls does to that connection (a statement, a commit, autocommit switched on, a block that commits at its
end). The drivers themselves are never read: their behaviour here is their documented contract.

- psycopg2: connect() opens transactions by itself (autocommit off) until `conn.autocommit = True`,
  `set_session(autocommit=True)` or `set_isolation_level(ISOLATION_LEVEL_AUTOCOMMIT)`; `with conn:` commits at its end.
- psycopg 3: connect(autocommit=False) by default, likewise; `with conn:` commits and closes; `conn.transaction()`.
- asyncpg: no transaction unless the code opens one (`conn.transaction()`).
- SQLAlchemy: `engine.connect()` and `Session` autobegin unless `isolation_level="AUTOCOMMIT"` is set on the engine
  (create_engine or engine.execution_options) or on the connection (`conn.execution_options`); `engine.begin()` and
  `conn.begin()` are blocks that commit at their end.
- Django: its connection is in autocommit mode unless inside `transaction.atomic()` or after `set_autocommit(False)`.
"""

from __future__ import annotations

import ast
from typing import Callable

from lab.scan import events
from lab.scan.findings import Driver, TxMode
from lab.scan.machine import Machine, Paths
from lab.scan.sql import options_turn_guard_off
from lab.scan.state import State, fresh
from lab.scan.values import (Answer, Awaitable, Block, Const, Conn, Cursor, Dict, Engine, Factory, Member, Model,
                             Param, Rows, SqlText, Unknown, Value, text_templates)

PACKAGES = frozenset({"psycopg2", "psycopg", "psycopg_pool", "asyncpg", "sqlalchemy", "django"})
STATEMENTS = frozenset({"execute", "exec_driver_sql", "scalar", "scalars", "fetch", "fetchrow", "fetchval",
                        "executemany"})
FETCHES = frozenset({"fetchone", "fetchall", "fetchmany", "scalar", "scalar_one", "scalar_one_or_none", "one",
                     "one_or_none", "first", "all", "scalars", "mappings", "fetchval", "fetchrow", "tuples"})
QUIET_METHODS = frozenset({"dispose", "ensure_connection", "inc_thread_sharing", "dec_thread_sharing",
                           "get_backend_pid", "get_isolation_level", "info", "set_client_encoding",
                           "get_parameter_status",
                           "get_dsn_parameters", "close_if_unusable_or_obsolete"})
AUTOCOMMIT = "AUTOCOMMIT"
DATABASE_OBJECTS = (Conn, Cursor, Engine, Block, Rows, Factory)  # what a Member's call goes to _method for


def modelled(name: str) -> bool:
    return name.split(".")[0] in PACKAGES


def _root_last(model: Model) -> tuple[str, str]:
    return model.name.split(".")[0], model.name.rsplit(".", 1)[-1]


def _const(value: Value | None) -> object:
    return value.value if isinstance(value, Const) else Unknown


def _dialect(url: Value | None) -> str | None:
    """The DB-API driver a SQLAlchemy URL names: psycopg2 for plain postgresql://."""
    templates = text_templates(url) if url is not None else None
    if not templates:
        return None
    found = set()
    for template in templates:
        first = template[0] if template else None
        if first is None or "://" not in first:
            return None
        scheme = first.split("://", 1)[0]
        found.add(scheme.split("+", 1)[1] if "+" in scheme else ("psycopg2" if scheme.startswith("postgres") else
                                                                 scheme))
    return found.pop() if len(found) == 1 else None


def _guard_off(kwargs: dict[str, Value]) -> bool:
    """connect_args={"options": "-c idle_in_transaction_session_timeout=0"} or options= given to connect()."""
    candidates = [kwargs.get("options")]
    args = kwargs.get("connect_args")
    if isinstance(args, Dict):
        candidates += [v for k, v in args.items if isinstance(k, Const) and k.value == "options"]
    return any(isinstance(c, Const) and isinstance(c.value, str) and options_turn_guard_off(c.value)
               for c in candidates)


def new_conn(interp: Machine, state: State, driver: Driver, node: ast.AST, mode: TxMode, why: str,
             dialect: str | None = None, guard_off: bool = False) -> tuple[Conn, State]:
    site = interp.site(node)
    conn = Conn((site, driver), driver, site, interp.library_here(), dialect)
    facts = fresh(mode, why)
    if guard_off:
        from dataclasses import replace

        facts = frozenset(replace(f, guard_off=True) for f in facts)
    return conn, state.set_facts(conn.key, facts)


def django_conn(alias: Value) -> Conn:
    return Conn(("django", alias), Driver.DJANGO, None)


def _django_state(state: State, conn: Conn) -> State:
    if state.facts(conn.key) is None:
        return state.set_facts(conn.key, fresh(TxMode.AUTOCOMMIT, "Django's connection, in autocommit mode (Django's "
                                                                  "default)"))
    return state


# ----- calls of module-level names ----------------------------------------------------------------------------------

def call(interp: Machine, callee: Value, args: list[Value], kwargs: dict[str, Value], state: State,
         node: ast.AST) -> Paths | None:
    untraced = _untraced(interp, callee, args, state, node)
    if untraced is not None:
        return untraced
    if isinstance(callee, Member) and isinstance(callee.receiver, DATABASE_OBJECTS):
        return _method(interp, callee, args, kwargs, state, node)
    if not isinstance(callee, Model):
        return None
    root, last = _root_last(callee)
    if root not in PACKAGES:
        return None
    site = interp.site(node)
    if root == "psycopg2" and last == "connect":
        conn, s = new_conn(interp, state, Driver.PSYCOPG2, node, TxMode.AUTOBEGIN,
                           f"psycopg2.connect() at {site}: autocommit off (psycopg2's default), and nothing here "
                           f"turns it on", guard_off=_guard_off(kwargs))
        return [(conn, s)]
    if root == "psycopg2" and last in ("SimpleConnectionPool", "ThreadedConnectionPool"):
        return [(Factory(Driver.PSYCOPG2), state)]
    if root in ("psycopg", "psycopg_pool") and last == "connect" or (root == "psycopg" and last == "Connection"):
        return _psycopg_connect(interp, callee, kwargs, state, node)
    if root == "psycopg_pool" and last in ("ConnectionPool", "AsyncConnectionPool"):
        return [(Factory(Driver.PSYCOPG), state)]
    if root == "asyncpg" and last == "connect":
        conn, s = new_conn(interp, state, Driver.ASYNCPG, node, TxMode.AUTOCOMMIT,
                           f"asyncpg.connect() at {site}: asyncpg opens no transaction unless the code does")
        return [(Awaitable(conn), s)]
    if root == "sqlalchemy" and last in ("create_engine", "create_async_engine"):
        return [(_engine(interp, last == "create_async_engine", args, kwargs, node), state)]
    if root == "sqlalchemy" and last == "text":
        return [(SqlText(args[0] if args else Unknown("a statement")), state)]
    if root == "sqlalchemy" and last in ("make_url",):
        return [(args[0] if args else Unknown("a URL"), state)]
    if root == "sqlalchemy" and last in ("Session", "AsyncSession"):
        return _session(interp, args[0] if args else kwargs.get("bind"), last == "AsyncSession", state, node)
    if root == "sqlalchemy" and last in ("sessionmaker", "async_sessionmaker"):
        bind = args[0] if args else kwargs.get("bind")
        return [(Factory(Driver.SQLALCHEMY, bind), state)]
    if root == "django" and last == "atomic":
        alias = kwargs.get("using", args[0] if args and not isinstance(args[0], Model) else Const("default"))
        conn = django_conn(alias if alias is not None else Const("default"))
        return [(Block(conn, "transaction.atomic()"), _django_state(state, conn))]
    return [(Unknown(f"what {callee.name}() returns"), state)]


def _psycopg_connect(interp: Machine, callee: Model, kwargs: dict[str, Value], state: State,
                     node: ast.AST) -> Paths:
    site = interp.site(node)
    given = kwargs.get("autocommit")
    is_async = "Async" in callee.name
    if given is None or (isinstance(given, Const) and not given.value):
        mode, why = TxMode.AUTOBEGIN, (f"psycopg's connect() at {site}: autocommit=False (psycopg's default"
                                       f"{'' if given is None else ', given'})")
    elif isinstance(given, Const):
        mode, why = TxMode.AUTOCOMMIT, f"psycopg's connect(autocommit=True) at {site}"
    else:
        mode, why = TxMode.UNKNOWN, f"psycopg's connect(autocommit=...) at {site}: the value is decided at run time"
    conn, s = new_conn(interp, state, Driver.PSYCOPG, node, mode, why, guard_off=_guard_off(kwargs))
    return [(Awaitable(conn) if is_async else conn, s)]


def _engine(interp: Machine, is_async: bool, args: list[Value], kwargs: dict[str, Value], node: ast.AST) \
        -> Engine:
    site = interp.site(node)
    level = kwargs.get("isolation_level")
    options_given = kwargs.get("execution_options")
    if level is None and isinstance(options_given, Dict):
        level = next((v for k, v in options_given.items if isinstance(k, Const) and k.value == "isolation_level"), None)
    if level is None:
        autocommit: bool | None = False
        why = f"its engine (create_engine at {site}) sets no isolation_level"
    elif isinstance(level, Const):
        autocommit = level.value == AUTOCOMMIT
        why = f"its engine (create_engine at {site}) sets isolation_level={level.value!r}"
    else:
        autocommit = None
        why = f"its engine (create_engine at {site}) takes isolation_level from a value decided at run time"
    url = args[0] if args else kwargs.get("url")
    driver = Driver.SQLALCHEMY_ASYNC if is_async else Driver.SQLALCHEMY
    return Engine(site, driver, autocommit, why, _dialect(url), _guard_off(kwargs))


def _engine_conn(interp: Machine, engine: Value, state: State, node: ast.AST, how: str) -> tuple[Conn, State]:
    site = interp.site(node)
    if isinstance(engine, Engine):
        if engine.autocommit is True:
            mode, why = TxMode.AUTOCOMMIT, f"{how} at {site}; {engine.why}"
        elif engine.autocommit is False:
            mode, why = TxMode.AUTOBEGIN, (f"{how} at {site}: SQLAlchemy's autobegin, and nothing sets AUTOCOMMIT on "
                                           f"this connection ({engine.why})")
        else:
            mode, why = TxMode.UNKNOWN, f"{how} at {site}; {engine.why}"
        return new_conn(interp, state, engine.driver, node, mode, why, engine.dialect, engine.guard_off)
    reason = engine.why if isinstance(engine, Unknown) else (
        f"`{engine.path}` is a parameter of {engine.owner}" if isinstance(engine, Param) else "an engine")
    return new_conn(interp, state, Driver.SQLALCHEMY, node, TxMode.UNKNOWN,
                    f"{how} at {site} on an engine the scanner cannot trace ({reason})")


def _session(interp: Machine, bind: Value | None, is_async: bool, state: State, node: ast.AST) -> Paths:
    if bind is None:
        conn, s = new_conn(interp, state, Driver.SQLALCHEMY_ASYNC if is_async else Driver.SQLALCHEMY, node,
                           TxMode.UNKNOWN, "a Session with no bind here: its engine is chosen elsewhere")
        return [(conn, s)]
    conn, s = _engine_conn(interp, bind, state, node, "Session(...)")
    return [(conn, s)]


UNTRACED = frozenset({"connect", "begin", "cursor", "commit", "rollback"}) | STATEMENTS


def _receiver(callee: Value) -> tuple[tuple, str, str] | None:
    """For a method called on something the scanner cannot trace (a parameter, an unknown value): the identity the
    connection it stands for gets, why nothing more is known, and the method's name."""
    if isinstance(callee, Param) and "." in callee.path:
        path, name = callee.path.rsplit(".", 1)
        return ("param", callee.owner, path), (f"`{path}` is a parameter of {callee.owner}: how it was made and "
                                               f"configured is up to its callers"), name
    if isinstance(callee, Member) and isinstance(callee.receiver, Unknown):
        why = callee.receiver.why
        return ("unknown", why), f"the connection is {why}", callee.name
    return None


def _untraced(interp: Machine, callee: Value, args: list[Value], state: State, node: ast.AST) -> Paths | None:
    """A database call on a connection (or engine) the code was handed or that the scanner could not trace: a
    statement that takes or releases a lock, a block, a commit, a cursor, a new connection. Each is what the same call
    on a traced connection is, with the transaction mode unknown; any other call there is opaque."""
    from lab.scan import sql

    found = _receiver(callee)
    if found is None or found[2] not in UNTRACED:
        return None
    key, why, name = found
    if name == "connect":
        conn, state = new_conn(interp, state, Driver.UNKNOWN, node, TxMode.UNKNOWN,
                               f"connect() at {interp.site(node)} on an engine the scanner cannot trace ({why})")
        return [(conn, state)]
    conn = Conn(key, Driver.UNKNOWN, None)
    if name in ("commit", "rollback"):
        return [(Const(None), events.commit(interp, conn, state, node, f"{name}()") if state.facts(key) else state)]
    state = events.param_facts(state, conn, why)
    if name == "begin":
        return [(Block(conn, "begin()", None), state)]
    if name == "cursor":
        return [(Cursor(conn, interp.site(node)), state)]
    templates = text_templates(args[0]) if args else None
    if not templates or not any(sql.facts(t).touches_locks for t in templates):
        return None
    answer, state = events.statement(interp, conn, args[0], state, node)
    return [(Rows(answer), state)]


# ----- methods of database objects ----------------------------------------------------------------------------------

def _method(interp: Machine, callee: Member, args: list[Value], kwargs: dict[str, Value], state: State,
            node: ast.AST) -> Paths:
    receiver, name = callee.receiver, callee.name
    if isinstance(receiver, Rows):
        return [(receiver.answer if name in FETCHES else Unknown("rows"), state)]
    if isinstance(receiver, Factory) and receiver.driver is Driver.SQLALCHEMY:  # a sessionmaker: a Session
        return _session(interp, receiver.bind, False, state, node)
    if isinstance(receiver, Factory) and receiver.driver is Driver.PSYCOPG2:
        if name == "getconn":
            conn, s = new_conn(interp, state, Driver.PSYCOPG2, node, TxMode.AUTOBEGIN,
                               f"a psycopg2 pool's getconn() at {interp.site(node)}: autocommit off (psycopg2's "
                               f"default)")
            return [(conn, s)]
        return [(Unknown("a pool's answer"), state)]
    if isinstance(receiver, Factory):  # psycopg's pool
        if name in ("connection", "getconn"):
            conn, s = new_conn(interp, state, Driver.PSYCOPG, node, TxMode.AUTOBEGIN,
                               f"a psycopg pool's connection at {interp.site(node)}: autocommit off (psycopg's "
                               f"default)")
            return [(Block(conn, "pool.connection()", conn) if name == "connection" else conn, s)]
        return [(Unknown("a pool's answer"), state)]
    if isinstance(receiver, Engine):
        return _engine_method(interp, receiver, name, kwargs, state, node)
    if isinstance(receiver, Cursor):
        return _cursor_method(interp, receiver, name, args, state, node)
    if isinstance(receiver, Block):
        if name in ("commit", "rollback"):
            return [(Const(None), events.commit(interp, receiver.conn, state, node, f"{name}()"))]
        return [(Unknown("a transaction's answer"), state)]
    if isinstance(receiver, Conn):
        return _conn_method(interp, receiver, name, args, kwargs, state, node)
    return [(Unknown(f"what {name}() returns"), state)]


def _engine_method(interp: Machine, engine: Engine, name: str, kwargs: dict[str, Value], state: State,
                   node: ast.AST) -> Paths:
    from dataclasses import replace

    if name == "connect":
        conn, s = _engine_conn(interp, engine, state, node, "engine.connect()")
        return [(conn, s)]
    if name == "begin":
        conn, s = _engine_conn(interp, engine, state, node, "engine.begin()")
        return [(Block(conn, "engine.begin()", conn), s)]
    if name == "execution_options":
        level = kwargs.get("isolation_level")
        if level is None:
            return [(engine, state)]
        site = interp.site(node)
        if isinstance(level, Const):
            return [(replace(engine, autocommit=level.value == AUTOCOMMIT,
                             why=f"engine.execution_options(isolation_level={level.value!r}) at {site}"), state)]
        return [(replace(engine, autocommit=None, why=f"engine.execution_options(isolation_level=...) at {site}: "
                                                      f"decided at run time"), state)]
    if name == "raw_connection":
        conn, s = new_conn(interp, state, Driver.PSYCOPG2 if engine.dialect in (None, "psycopg2") else Driver.PSYCOPG,
                           node, TxMode.AUTOBEGIN, f"engine.raw_connection() at {interp.site(node)}: the DB-API "
                                                   f"connection, autocommit off (its driver's default)")
        return [(conn, s)]
    return [(Unknown(f"what engine.{name}() returns"), state)]


def _cursor_method(interp: Machine, cursor: Cursor, name: str, args: list[Value], state: State,
                   node: ast.AST) -> Paths:
    if name in ("execute", "executemany", "callproc"):
        answer, s = events.statement(interp, cursor.conn, args[0] if args else Unknown("a statement"), state, node)
        s = s.set_attr(cursor, "__answer__", answer)
        return [(cursor if cursor.conn.driver is Driver.PSYCOPG else Const(None), s)]
    if name in FETCHES:
        stored = state.attr(cursor, "__answer__")
        return [(stored if isinstance(stored, Answer) else Unknown("rows"), state)]
    return [(Unknown(f"what cursor.{name}() returns"), state)]


def _conn_method(interp: Machine, conn: Conn, name: str, args: list[Value], kwargs: dict[str, Value],
                 state: State, node: ast.AST) -> Paths:
    site = interp.site(node)
    wrap: Callable[[Value], Value] = (Awaitable if conn.driver in (Driver.ASYNCPG, Driver.SQLALCHEMY_ASYNC)
                                      else (lambda v: v))
    if conn.driver is Driver.DJANGO:
        state = _django_state(state, conn)
    if name in STATEMENTS:
        answer, s = events.statement(interp, conn, args[0] if args else Unknown("a statement"), state, node)
        if conn.driver is Driver.PSYCOPG and name == "execute":
            cursor = Cursor(conn, site)
            return [(cursor, s.set_attr(cursor, "__answer__", answer))]
        if conn.driver is Driver.ASYNCPG:
            return [(wrap(answer if name in ("fetchval", "fetchrow", "fetch") else Unknown("a status")), s)]
        return [(wrap(Rows(answer)), s)]
    if name == "cursor":
        return [(Cursor(conn, site), state)]
    if name in ("commit", "rollback"):
        return [(wrap(Const(None)), events.commit(interp, conn, state, node, f"{name}()"))]
    if name in ("close", "terminate", "invalidate", "detach"):
        if conn.driver in (Driver.SQLALCHEMY, Driver.SQLALCHEMY_ASYNC) and name == "close":
            return [(wrap(Const(None)), events.commit(interp, conn, state, node,
                                                      "close(), which rolls back and hands it to the pool"))]
        return [(wrap(Const(None)), events.close(conn, state))]
    if name == "begin" or name == "transaction":
        return [(Block(conn, f"{name}()", None), state)]
    if name == "execution_options":
        level = kwargs.get("isolation_level")
        if level is not None:
            state = _set_level(conn, level, state, f"execution_options(isolation_level=...) at {site}")
        return [(wrap(conn), state)]
    if name == "set_session":
        given = kwargs.get("autocommit")
        if given is not None:
            state = _set_autocommit(conn, given, state, f"set_session(autocommit=...) at {site}")
        return [(Const(None), state)]
    if name in ("set_autocommit",):
        given = args[0] if args else kwargs.get("autocommit", Unknown("a value"))
        what = "set_autocommit(False), what transaction.atomic() does," if isinstance(given, Const) and \
            not given.value and conn.driver is Driver.DJANGO else "set_autocommit(...)"
        return [(wrap(Const(None)), _set_autocommit(conn, given, state, f"{what} at {site}"))]
    if name == "set_isolation_level":
        level = args[0] if args else Unknown("a level")
        turned_on = (isinstance(level, Const) and level.value == 0) or (
            isinstance(level, Model) and level.name.endswith("ISOLATION_LEVEL_AUTOCOMMIT"))
        if turned_on:
            return [(Const(None), events.set_mode(conn, state, TxMode.AUTOCOMMIT,
                                                  f"set_isolation_level(ISOLATION_LEVEL_AUTOCOMMIT) at {site}"))]
        mode = TxMode.AUTOBEGIN if isinstance(level, (Const, Model)) else TxMode.UNKNOWN
        return [(Const(None), events.set_mode(conn, state, mode, f"set_isolation_level(...) at {site}"))]
    if name in ("add_notice_handler", "add_log_listener"):
        return [(Const(None), events.hear_notices(conn, state))]
    if name == "start":
        return [(Awaitable(conn), state)]
    if name == "connection":
        return [(conn, state)]
    if name in QUIET_METHODS or name.startswith(("get_", "remove_")):
        return [(Unknown(f"what {name}() returns"), state)]
    return [(wrap(Unknown(f"what {name}() returns")), state)]


def _set_level(conn: Conn, level: Value, state: State, why: str) -> State:
    if isinstance(level, Const):
        mode = TxMode.AUTOCOMMIT if level.value == AUTOCOMMIT else TxMode.AUTOBEGIN
        return events.set_mode(conn, state, mode, why.replace("...", repr(level.value)))
    return events.set_mode(conn, state, TxMode.UNKNOWN, f"{why}: decided at run time")


def _set_autocommit(conn: Conn, given: Value, state: State, why: str) -> State:
    if isinstance(given, Const):
        mode = TxMode.AUTOCOMMIT if given.value else TxMode.AUTOBEGIN
        return events.set_mode(conn, state, mode, why.replace("...", repr(given.value)))
    return events.set_mode(conn, state, TxMode.UNKNOWN, f"{why}: the value is decided at run time")


# ----- attributes, assignments, subscripts, with-blocks -------------------------------------------------------------

def attribute(interp: Machine, obj: Value, name: str, state: State, node: ast.AST) -> Paths | None:
    if isinstance(obj, Model) and obj.name.endswith("django.db.connection"):
        conn = django_conn(Const("default"))
        return attribute(interp, conn, name, _django_state(state, conn), node)
    if isinstance(obj, (Rows, Factory)):
        return [(Member(obj, name), state)]
    if isinstance(obj, Conn):
        if name == "notices":
            return [(Unknown("the connection's notices"), events.notices_read(obj, state))]
        if name == "connection":
            return [(obj, state)]
        if name == "in_atomic_block" and obj.driver is Driver.DJANGO:
            inside = {f.blocks > 0 or f.mode is TxMode.AUTOBEGIN for f in events.facts_of(state, obj)}
            return [(Const(inside.pop()) if len(inside) == 1 else Unknown("whether Django is inside atomic()"), state)]
        if name in ("closed", "invalidated", "in_atomic_block", "autocommit", "info", "pgconn", "alias",
                    "settings_dict", "dialect"):
            return [(Unknown(f"the connection's {name}"), state)]
        return [(Member(obj, name), state)]
    if isinstance(obj, (Engine, Cursor, Block)):
        if isinstance(obj, Cursor) and name == "connection":
            return [(obj.conn, state)]
        if isinstance(obj, Cursor) and name in ("rowcount", "description", "statusmessage", "closed"):
            return [(Unknown(f"the cursor's {name}"), state)]
        if isinstance(obj, Engine) and name in ("url", "dialect", "pool", "name"):
            return [(Unknown(f"the engine's {name}"), state)]
        return [(Member(obj, name), state)]
    return None


def set_attribute(interp: Machine, obj: Value, name: str, value: Value, state: State, node: ast.AST) \
        -> State | None:
    if isinstance(obj, Model) and obj.name.endswith("django.db.connection"):
        obj = django_conn(Const("default"))
    if not isinstance(obj, Conn):
        return None
    if name == "autocommit":
        return _set_autocommit(obj, value, state, f"`.autocommit = ...` at {interp.site(node)}")
    if name == "isolation_level":
        return _set_level(obj, value, state, f"`.isolation_level = ...` at {interp.site(node)}")
    return state


def subscript(interp: Machine, obj: Value, index: Value, state: State, node: ast.AST) -> Paths | None:
    """django.db.connections[alias]: that alias's connection."""
    if isinstance(obj, Model) and obj.name.endswith("django.db.connections"):
        conn = django_conn(index)
        return [(conn, _django_state(state, conn))]
    if isinstance(obj, Rows):
        return [(obj.answer if isinstance(obj.answer, Answer) else Unknown("a row"), state)]
    return None


def enter(interp: Machine, manager: Value, state: State, node: ast.AST) \
        -> tuple[Value, State, Callable[[State], State]] | None:
    """`with manager as x` for a database object: what x is, the state inside, and what leaving does."""
    site = interp.site(node)
    if isinstance(manager, Awaitable) and isinstance(manager.inner, (Conn, Block)):
        manager = manager.inner
    if isinstance(manager, Block):
        conn = manager.conn
        inside = events.block(conn, _django_state(state, conn) if conn.driver is Driver.DJANGO else state, +1, site)

        def leave(s: State) -> State:
            ended = events.commit(interp, conn, s, node, f"the end of {manager.opened_by}'s block")
            return events.block(conn, ended, -1, site)

        given = manager.gives if manager.gives is not None else manager
        return given, inside, leave
    if isinstance(manager, Conn):
        conn = manager
        if conn.driver in (Driver.PSYCOPG2, Driver.PSYCOPG):
            closes = conn.driver is Driver.PSYCOPG

            def leave_conn(s: State) -> State:
                ended = events.commit(interp, conn, s, node, "the end of `with conn:`")
                return events.close(conn, ended) if closes else ended

            return conn, state, leave_conn
        if conn.driver in (Driver.SQLALCHEMY, Driver.SQLALCHEMY_ASYNC):
            return conn, state, lambda s: events.commit(interp, conn, s, node,
                                                        "the end of its with-block, which closes it to the pool")
        return conn, state, lambda s: events.close(conn, s)
    if isinstance(manager, Cursor):
        return manager, state, lambda s: s
    if isinstance(manager, Engine):
        return manager, state, lambda s: s
    return None

