"""What a statement, a commit or a close does to a connection's facts, and when the code shows one of the post's bugs.

Bug 1 is judged where the code moves on (a call the scanner cannot follow: the job's work, a wait) and where the
function the scan started from returns: a session lock held on a connection whose transaction is open then, and not
in an explicit transaction block the same code ends, sits idle in that transaction, and
idle_in_transaction_session_timeout ends it with its session. If the statement that opened the transaction came after a
commit, it is the post's case D. Bug 2 is judged at the release: a try around it whose handler swallows the failure,
and, when the function the scan started from returns, an answer of pg_advisory_unlock nobody read.
"""

from __future__ import annotations

import ast
from dataclasses import replace

from lab.declarations.post_role import PostRole
from lab.scan import sql
from lab.scan.findings import Bug, Connection, Driver, LockKind, Result, Site, Status, TxMode
from lab.scan.machine import Machine
from lab.scan.state import ConnFact, LockRef, State, closed_fact, fresh
from lab.scan.stdlib import catches_release_failure, swallows
from lab.scan.values import Answer, Conn, Unknown, Value, answers_in, text_templates

SESSION_WHY = ("idle_in_transaction_session_timeout ends the session after that idle time, and its session lock with "
               "it, while the job goes on writing")
FINE_AUTOCOMMIT = ("taken on a connection in autocommit mode: no transaction stays open between statements, so "
                   "idle_in_transaction_session_timeout never applies (the lock still ends with its session for any "
                   "other reason: idle_session_timeout, a restart, a killed session)")
FINE_TRANSACTION = "a transaction-level lock: it ends with its transaction, so it cannot outlive the writes it guards"
GUARD_OFF = ("the lock's session sets idle_in_transaction_session_timeout to 0, so that timeout cannot end it; but its "
             "transaction stays open (the post's first why-not: it exempts the session from a guard its owner set on "
             "purpose)")
FINE_ROW = "a row lock: it ends with its transaction, so it cannot outlive the writes it guards"
FIX_REOPENED = ("run nothing more on the lock's connection after the commit (check the lock by reading pg_locks for "
                "its pid from another connection), or make the lock's connection autocommit so no later statement "
                "opens a transaction on it")
FIX_FALSE = ("read pg_advisory_unlock's answer and raise when it is false: false means the lock was already gone, so "
             "the run was not protected to its end")
FIX_SWALLOWED = ("let the release's exception out, or raise a 'lock lost' error from it: a release that fails on an "
                 "ended session means the lock was gone before the run finished")
ROBUST = "or, robust: take pg_advisory_xact_lock as the first statement of each write transaction (the post's method 4)"


def autocommit_fix(conn: Connection) -> str:
    """The smallest change that puts this connection in autocommit mode, for its driver."""
    how = {
        Driver.PSYCOPG2: "set `conn.autocommit = True` right after psycopg2.connect()",
        Driver.PSYCOPG: "connect with `psycopg.connect(..., autocommit=True)`",
        Driver.SQLALCHEMY: "take it on `engine.connect().execution_options(isolation_level=\"AUTOCOMMIT\")`",
        Driver.SQLALCHEMY_ASYNC: "take it on `await conn.execution_options(isolation_level=\"AUTOCOMMIT\")`",
        Driver.DJANGO: "take it outside transaction.atomic() (and without set_autocommit(False)), in Django's "
                       "autocommit mode",
        Driver.ASYNCPG: "take it outside `conn.transaction()`",
        Driver.UNKNOWN: "put that connection in autocommit mode",
    }[conn.driver]
    where = f" where it is made ({conn.made_at})" if conn.made_at is not None else ""
    return f"the lock on a connection of its own in autocommit mode (the post's method 3): {how}{where}; {ROBUST}"


def describe(conn: Conn, fact: ConnFact) -> Connection:
    return Connection(conn.driver, conn.made_at, fact.mode, fact.why, fact.blocks > 0, conn.dialect)


def facts_of(state: State, conn: Conn) -> frozenset[ConnFact]:
    found = state.facts(conn.key)
    if found is not None:
        return found
    if conn.driver is Driver.DJANGO:
        return fresh(TxMode.AUTOCOMMIT, "Django's connection, in autocommit mode (Django's default)")
    return fresh(TxMode.UNKNOWN, "a connection whose making the scanner did not see")


def statement(interp: Machine, conn: Conn, text: Value, state: State, node: ast.AST) -> tuple[Value, State]:
    """One SQL statement on a connection: its locks, releases, transaction control, and the transaction it opens."""
    templates = text_templates(text)
    said = sql.SqlFacts(complete=False)
    if templates:
        found = [sql.facts(t) for t in templates]
        said = found[0]
        for more in found[1:]:
            said = said.merged(more)
    chain = interp.chain(node)
    here = chain[0]  # the line in the scanned code that runs it
    facts = facts_of(state, conn)
    out: set[ConnFact] = set()
    answer: Value = Unknown("the rows a statement returned")
    for fact in facts:
        fact = _opens(fact, said, here)
        for name, kind in said.locks:
            fact = _lock(interp, conn, fact, name, kind, chain)
        if said.unlocks or said.unlock_all:
            fact = replace(fact, lock=None, reopened=False)
        if said.guard_off:
            fact = replace(fact, guard_off=True)
        for control in said.control:
            if control is not sql.Control.BEGIN:
                fact = _ended(interp, conn, fact, chain, control.value)
        out.add(fact)
    state = state.set_facts(conn.key, frozenset(out))
    if said.unlocks:
        key = (chain, conn.key)
        heard = all(f.notices for f in facts)
        if not heard:
            state = state.with_pending(state.pending | {key})
        answer = Answer(frozenset({key}))
        _check_swallowed(interp, conn, chain, said.unlocks[0])
    return answer, state


def _opens(fact: ConnFact, said: sql.SqlFacts, here: Site) -> ConnFact:
    """A statement on a connection that begins a transaction by itself (autobegin), or says BEGIN."""
    begins = sql.Control.BEGIN in said.control
    if fact.closed or fact.open is not None:
        return fact
    if begins or fact.mode in (TxMode.AUTOBEGIN, TxMode.UNKNOWN):  # unknown: it may be autobegin, so followed so
        return replace(fact, open=here, reopened=fact.lock is not None)
    return fact


def _lock(interp: Machine, conn: Conn, fact: ConnFact, name: str, kind: LockKind,
          chain: tuple[Site, ...]) -> ConnFact:
    connection = describe(conn, fact)
    library = interp.library_here()
    base = Result(Status.FINE, chain[0], name, kind, "", via=chain[1:], connection=connection, library=library)
    if kind is LockKind.TRANSACTION:
        interp.record(replace(base, why=FINE_TRANSACTION + _autocommit_note(fact), method=PostRole.METHOD_4))
        return fact
    if kind is LockKind.ROW:
        interp.record(replace(base, why=FINE_ROW + _autocommit_note(fact)))
        return fact
    if kind is LockKind.MARIADB_NAMED:
        interp.record(replace(base, status=Status.NOT_JUDGED,
                               why="MariaDB's GET_LOCK: a named lock of its session, outside this scanner's judgement "
                                   "(on MariaDB a session is in a transaction only once it reads an InnoDB table; the "
                                   "lab measures that case: cases/read_then_idle_in_transaction)"))
        return fact
    held = LockRef(chain, name, connection, library)
    if fact.mode is TxMode.AUTOCOMMIT and fact.open is None:
        interp.record(replace(base, why=FINE_AUTOCOMMIT, method=PostRole.METHOD_3))
    elif fact.guard_off:
        interp.record(replace(base, method=PostRole.GUARD_OFF, why=GUARD_OFF))
    return replace(fact, lock=held) if fact.lock is None else fact


def _autocommit_note(fact: ConnFact) -> str:
    if fact.mode is TxMode.AUTOCOMMIT and fact.open is None and fact.blocks == 0:
        return ("; but this connection is in autocommit mode, so its transaction is the statement itself and the lock "
                "ends with it at once")
    return ""


def _ended(interp: Machine, conn: Conn, fact: ConnFact, chain: tuple[Site, ...], how: str) -> ConnFact:
    """A commit or rollback: the transaction ends; a session lock survives it, now on an idle session."""
    if fact.lock is not None and fact.open is not None and not fact.reopened and not fact.guard_off:
        held = fact.lock
        interp.record(Result(Status.FINE, held.chain[0], held.call, LockKind.SESSION,
                              f"its transaction ends at {how} ({chain[0]}): the session is idle, "
                              f"not idle in transaction, until its next statement (the post's method 2)",
                              via=held.chain[1:], connection=held.connection, library=held.library,
                              method=PostRole.METHOD_2))
    return replace(fact, open=None, reopened=False)


def commit(interp: Machine, conn: Conn, state: State, node: ast.AST, how: str = "commit()") -> State:
    chain = interp.chain(node)
    return state.set_facts(conn.key, frozenset(_ended(interp, conn, f, chain, how) for f in facts_of(state, conn)))


def close(conn: Conn, state: State) -> State:
    return state.set_facts(conn.key, frozenset(closed_fact(f) for f in facts_of(state, conn)))


def set_mode(conn: Conn, state: State, mode: TxMode, why: str) -> State:
    """The connection's mode changed (autocommit on or off): an open transaction is committed by turning it on."""
    def change(fact: ConnFact) -> ConnFact:
        if mode is TxMode.AUTOCOMMIT:
            return replace(fact, mode=mode, why=why, open=None, reopened=False)
        return replace(fact, mode=mode, why=why)

    return state.set_facts(conn.key, frozenset(change(f) for f in facts_of(state, conn)))


def block(conn: Conn, state: State, delta: int, node_site: Site) -> State:
    """An explicit transaction block opens (+1: its transaction begins now) or closes (-1)."""
    def change(fact: ConnFact) -> ConnFact:
        if delta > 0:
            return replace(fact, blocks=fact.blocks + 1, open=fact.open or node_site,
                           reopened=fact.reopened or (fact.open is None and fact.lock is not None))
        return replace(fact, blocks=max(0, fact.blocks - 1))

    return state.set_facts(conn.key, frozenset(change(f) for f in facts_of(state, conn)))


def hear_notices(conn: Conn, state: State) -> State:
    """A notice handler is on: PostgreSQL's WARNING for a false pg_advisory_unlock reaches the code."""
    return state.set_facts(conn.key, frozenset(replace(f, notices=True) for f in facts_of(state, conn)))


def notices_read(conn: Conn, state: State) -> State:
    """The code read the connection's notices: the answers of its releases are heard that way."""
    return state.with_pending(frozenset(p for p in state.pending if p[1] != conn.key))


def read_answers(state: State, value: Value) -> State:
    """The code read (tested, returned, stored away) these unlock answers."""
    keys = answers_in(value)
    if not keys:
        return state
    return state.with_pending(frozenset(p for p in state.pending if p not in keys))


def moved_on(interp: Machine, state: State, node: ast.AST | None, what: str) -> State:
    """The code moves on (a call it cannot follow, or the entry returns): a lock held in an open transaction now
    sits idle in it."""
    if interp.quiet:
        return state
    where = interp.chain(node)[-1] if node is not None else None
    for key, facts in state.conns.items():
        for fact in facts:
            if fact.lock is None or fact.open is None or fact.closed or fact.guard_off or fact.blocks > 0:
                continue
            _record_open(interp, fact, where, what)
    return state


def _record_open(interp: Machine, fact: ConnFact, where: Site | None, what: str) -> None:
    held = fact.lock
    assert held is not None and fact.open is not None
    then = f"then {what}" + (f" at {where}" if where is not None else "")
    if fact.mode is TxMode.UNKNOWN:
        interp.record(Result(Status.UNKNOWN, held.chain[0], held.call, LockKind.SESSION,
                             f"a session lock whose transaction is still open ({then}) if its connection opens one by "
                             f"itself, which the code does not show: {fact.why}", via=held.chain[1:],
                             connection=held.connection, fix=autocommit_fix(held.connection), library=held.library))
        return
    if fact.reopened:
        bug, related, method = Bug.REOPENED, fact.open, PostRole.METHOD_2
        why = (f"the lock's transaction was ended, then the statement at {fact.open} opened a new one on the lock's "
               f"connection and left it open ({then}): {SESSION_WHY}")
        fix = FIX_REOPENED
    else:
        bug, related, method = Bug.LEFT_OPEN, None, PostRole.METHOD_1
        why = f"the lock's own statement opened a transaction that is still open ({then}): {SESSION_WHY}"
        fix = autocommit_fix(held.connection)
        if held.library:
            fix = f"the connection is made inside {held.library}; {fix}"
    interp.record(Result(Status.FINDING, held.chain[0], held.call, LockKind.SESSION, why, bug=bug,
                          via=held.chain[1:], connection=held.connection, related=related, fix=fix,
                          library=held.library, method=method))


def entry_done(interp: Machine, states: list[State], what: str) -> None:
    """The function the scan started from returns on these paths."""
    for state in states:
        moved_on(interp, state, None, what)
        for chain, _ in state.pending:
            interp.record(Result(Status.FINDING, chain[0], "pg_advisory_unlock", LockKind.UNLOCK,
                                  "the release's answer is never read: pg_advisory_unlock returns false when this "
                                  "session no longer held the lock, and that false goes unseen, so a lost lock "
                                  "passes as a clean release", bug=Bug.RELEASE_FALSE_IGNORED, via=chain[1:],
                                  fix=FIX_FALSE, library=_library_of(chain)))


def _library_of(chain: tuple[Site, ...]) -> str | None:
    from lab.scan.sources import distribution_of

    return distribution_of(chain[-1].path)


def _check_swallowed(interp: Machine, conn: Conn, chain: tuple[Site, ...], call: str) -> None:
    """The innermost try around the release that catches its failure: does it swallow it?"""
    if interp.quiet:
        return
    for context in reversed(interp.tries):
        if context.suppress:
            _record_swallowed(interp, chain, call, context.site, "contextlib.suppress() around it")
            return
        for handler in context.handlers:
            if catches_release_failure(handler):
                if swallows(handler):
                    site = Site(context.path, handler.lineno, handler.col_offset)
                    _record_swallowed(interp, chain, call, site, "its except clause neither raises nor reports it")
                return


def _record_swallowed(interp: Machine, chain: tuple[Site, ...], call: str, handler: Site, how: str) -> None:
    interp.record(Result(Status.FINDING, chain[0], call, LockKind.UNLOCK,
                          f"a release whose failure is swallowed ({how}, at {handler}): on a session the server "
                          f"already ended, the release raises, and the code carries on as if it released cleanly",
                          bug=Bug.RELEASE_ERROR_SWALLOWED, via=chain[1:], related=handler, fix=FIX_SWALLOWED,
                          library=_library_of(chain)))



def param_facts(state: State, conn: Conn, why: str) -> State:
    if state.facts(conn.key) is None:
        return state.set_facts(conn.key, fresh(TxMode.UNKNOWN, why))
    return state

