"""What a SQL statement does to locks and transactions, read from its tokens.

The scanner finds SQL as Python string values (constants, f-strings, module constants, text() objects), some parts of
which are only known at run time. This module lexes what is known (quotes, comments and dollar-quoting respected, an
unknown part kept as a hole) and reports what matters to the post's two bugs: which advisory-lock functions the
statement calls, whether it is a row lock, whether it begins or ends a transaction, and whether it turns
idle_in_transaction_session_timeout off for its session. A lexer, not a pattern over the text: a function name inside
a string literal or a comment is not a call.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from lab.scan.findings import LockKind

# PostgreSQL's advisory-lock functions, by what they take.
SESSION_LOCKS = frozenset({"pg_advisory_lock", "pg_try_advisory_lock", "pg_advisory_lock_shared",
                           "pg_try_advisory_lock_shared"})
TRANSACTION_LOCKS = frozenset({"pg_advisory_xact_lock", "pg_try_advisory_xact_lock", "pg_advisory_xact_lock_shared",
                               "pg_try_advisory_xact_lock_shared"})
UNLOCKS = frozenset({"pg_advisory_unlock", "pg_advisory_unlock_shared"})
UNLOCK_ALL = "pg_advisory_unlock_all"
MARIADB_LOCKS = frozenset({"get_lock"})
GUARD = "idle_in_transaction_session_timeout"


class Control(Enum):
    """A statement that begins or ends a transaction by itself."""

    BEGIN = "begin"
    COMMIT = "commit"
    ROLLBACK = "rollback"


@dataclass(frozen=True)
class Token:
    kind: str  # "ident", "string", "number", "punct", "hole"
    text: str  # an identifier lowercased; a string literal's content


HOLE = Token("hole", "")


@dataclass(frozen=True)
class SqlFacts:
    """What one statement (or several, separated by ';') does, as far as its known text shows."""

    locks: tuple[tuple[str, LockKind], ...] = ()  # (function or clause, kind) in the order written
    unlocks: tuple[str, ...] = ()
    unlock_all: bool = False
    control: tuple[Control, ...] = ()
    guard_off: bool = False  # sets idle_in_transaction_session_timeout to 0 for the session
    complete: bool = True  # no part of the text is unknown

    @property
    def session_locks(self) -> tuple[str, ...]:
        return tuple(name for name, kind in self.locks if kind is LockKind.SESSION)

    def merged(self, other: SqlFacts) -> SqlFacts:
        """What either of two possible statements does (a string the code builds one way or another)."""
        return SqlFacts(_unique(self.locks + other.locks), _unique(self.unlocks + other.unlocks),
                        self.unlock_all or other.unlock_all, _unique(self.control + other.control),
                        self.guard_off and other.guard_off, self.complete and other.complete)

    @property
    def touches_locks(self) -> bool:
        return bool(self.locks or self.unlocks or self.unlock_all)


def _unique(items: tuple) -> tuple:
    return tuple(dict.fromkeys(items))


def tokens(parts: tuple[str | None, ...]) -> list[Token]:
    """The tokens of a statement given as known text and holes (None), a hole kept as one HOLE token."""
    out: list[Token] = []
    for part in parts:
        if part is None:
            out.append(HOLE)
        else:
            out.extend(_lex(part))
    return out


def _lex(text: str) -> list[Token]:
    out: list[Token] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif text.startswith("--", i):
            end = text.find("\n", i)
            i = n if end < 0 else end + 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
        elif c == "'":
            j, chars = i + 1, []
            while j < n:
                if text[j] == "'" and text.startswith("''", j):
                    chars.append("'")
                    j += 2
                elif text[j] == "'":
                    break
                else:
                    chars.append(text[j])
                    j += 1
            out.append(Token("string", "".join(chars)))
            i = j + 1
        elif c == '"':
            end = text.find('"', i + 1)
            end = n if end < 0 else end
            out.append(Token("ident", text[i + 1:end]))
            i = end + 1
        elif c == "$" and (tag_end := _dollar_tag(text, i)) > 0:
            tag = text[i:tag_end]
            end = text.find(tag, tag_end)
            end = n if end < 0 else end
            out.append(Token("string", text[tag_end:end]))
            i = end + len(tag)
        elif c.isalpha() or c == "_":
            j = i + 1
            while j < n and (text[j].isalnum() or text[j] in "_$"):
                j += 1
            out.append(Token("ident", text[i:j].lower()))
            i = j
        elif c.isdigit():
            j = i + 1
            while j < n and (text[j].isalnum() or text[j] == "."):
                j += 1
            out.append(Token("number", text[i:j].lower()))
            i = j
        else:
            out.append(Token("punct", c))
            i += 1
    return out


def _dollar_tag(text: str, start: int) -> int:
    """The end of a dollar-quote's opening tag ($$ or $name$) at start, or -1 (a $1 placeholder is none)."""
    j = start + 1
    while j < len(text) and (text[j].isalnum() or text[j] == "_"):
        j += 1
    if j < len(text) and text[j] == "$" and not text[start + 1:j].isdigit():
        return j + 1
    return -1


def _statements(toks: list[Token]) -> list[list[Token]]:
    out: list[list[Token]] = [[]]
    for tok in toks:
        if tok.kind == "punct" and tok.text == ";":
            out.append([])
        else:
            out[-1].append(tok)
    return [s for s in out if s]


def _is_zero(tok: Token) -> bool:
    """A setting's value that means off: 0, '0', '0ms', '0s', '0min'."""
    value = tok.text.strip().lower()
    digits = value.rstrip("minsh")
    return tok.kind in ("number", "string") and digits != "" and set(digits) <= {"0"}


def _control(stmt: list[Token]) -> Control | None:
    words = [t.text for t in stmt[:3] if t.kind == "ident"]
    if not words:
        return None
    if words[0] == "begin" or words[:2] == ["start", "transaction"]:
        return Control.BEGIN
    if words[0] in ("commit", "end"):
        return Control.COMMIT
    if words[0] in ("rollback", "abort") and "to" not in words:
        return Control.ROLLBACK
    return None


def _sets_guard_off(stmt: list[Token]) -> bool:
    """SET [SESSION | LOCAL] idle_in_transaction_session_timeout {= | TO} 0."""
    words = [t for t in stmt if t.kind != "punct" or t.text != "="]
    if not words or words[0].text != "set" or words[0].kind != "ident":
        return False
    rest = words[1:]
    if rest and rest[0].text in ("session", "local"):
        rest = rest[1:]
    if len(rest) >= 2 and rest[0].text == GUARD:
        value = rest[2] if rest[1].text == "to" and len(rest) > 2 else rest[1]
        return _is_zero(value)
    return False


def _calls(stmt: list[Token]) -> list[tuple[int, str]]:
    """(index, name) of every identifier followed by an opening parenthesis."""
    return [(i, t.text) for i, t in enumerate(stmt[:-1])
            if t.kind == "ident" and stmt[i + 1].kind == "punct" and stmt[i + 1].text == "("]


def _row_lock(stmt: list[Token]) -> str | None:
    words = [t.text if t.kind == "ident" else "" for t in stmt]
    for i, word in enumerate(words):
        if word != "for":
            continue
        for clause in (("update",), ("no", "key", "update"), ("share",), ("key", "share")):
            if tuple(words[i + 1:i + 1 + len(clause)]) == clause:
                return "FOR " + " ".join(clause).upper()
    return None


def _set_config_guard_off(stmt: list[Token], at: int) -> bool:
    """set_config('idle_in_transaction_session_timeout', '0', ...) at index `at`."""
    args = stmt[at + 2:at + 6]
    return (len(args) >= 3 and args[0].kind == "string" and args[0].text.lower() == GUARD
            and args[1].text == "," and _is_zero(args[2]))


def facts(parts: tuple[str | None, ...]) -> SqlFacts:
    """What the statement given as known text and holes does to locks and transactions."""
    toks = tokens(parts)
    locks: list[tuple[str, LockKind]] = []
    unlocks: list[str] = []
    control: list[Control] = []
    unlock_all = guard_off = False
    for stmt in _statements(toks):
        found = _control(stmt)
        if found is not None:
            control.append(found)
        guard_off = guard_off or _sets_guard_off(stmt)
        for at, name in _calls(stmt):
            if name in SESSION_LOCKS:
                locks.append((name, LockKind.SESSION))
            elif name in TRANSACTION_LOCKS:
                locks.append((name, LockKind.TRANSACTION))
            elif name in MARIADB_LOCKS:
                locks.append(("GET_LOCK", LockKind.MARIADB_NAMED))
            elif name in UNLOCKS:
                unlocks.append(name)
            elif name == UNLOCK_ALL:
                unlock_all = True
            elif name == "set_config" and _set_config_guard_off(stmt, at):
                guard_off = True
        clause = _row_lock(stmt)
        if clause:
            locks.append((clause, LockKind.ROW))
    return SqlFacts(tuple(locks), tuple(unlocks), unlock_all, tuple(control), guard_off, HOLE not in toks)


def options_turn_guard_off(options: str) -> bool:
    """Whether libpq's `options` startup string (`-c name=value ...`) sets the idle-in-transaction guard to 0."""
    words = options.replace("-c ", "-c").split()
    for word in words:
        setting = word[2:] if word.startswith("-c") else word
        name, _, value = setting.partition("=")
        if name.strip().lower() == GUARD and _is_zero(Token("string", value)):
            return True
    return False
