"""What a PostgreSQL failover did around its promotion, measured the same way for a scripted and a managed one.

Every trial of a failover scenario, scripted (pg_promote) or managed (Patroni), records one `promotion`
dict with the same keys, so the report can put them side by side: how long until a new primary answered
as one, and what the old primary did meanwhile. A probe client connected straight to the old primary
(not through the multi-host URL) writes a row of its own every PROBE_EVERY_S from the moment the fault
strikes until the old primary refuses (an error, a broken connection, a demotion) or the trial ends; a
watcher asks every node `pg_is_in_recovery()` at the same pace. At the end the rows the old primary
acknowledged are looked for on the primary that survived.
"""

from __future__ import annotations

import threading
import time
from typing import TypedDict

import psycopg2
from sqlalchemy.engine import URL

PROBE_EVERY_S = 0.1
CONNECT_TIMEOUT_S = 1
PROBE_TABLE = "locklab.promotion_probe"
# The watcher's question to a node ends within this, answered or not: a node that accepted the connection and then
# went silent (restarting, rewinding) must not stop it asking the others, which is how it sees a promotion.
WATCH_QUESTION_MS = 2000


class PromotionMeasures(TypedDict):
    """The measures every managed-failover trial and its scripted control record under `promotion`."""

    manager: str  # "patroni 4.1.5", "scripted"
    promote_s: float | None  # fault -> a node other than the old primary answered as primary; None: none did
    old_primary_accepted: int  # probe writes the old primary acknowledged after the fault struck
    old_primary_accepting_s: float | None  # fault -> the last of those acknowledgements; None: there were none
    old_primary_writes_survived: int | None  # how many of them the surviving primary has; None: it could not be read


def connect(url: URL, **kwargs):
    """A psycopg2 connection to one node (autocommit): what the probe and the watcher use, no pool in between."""
    conn = psycopg2.connect(host=url.host, port=url.port, user=url.username, password=url.password,
                            dbname=url.database or "postgres", connect_timeout=CONNECT_TIMEOUT_S,
                            application_name="locklab-promotion", **kwargs)
    conn.autocommit = True
    return conn


def create_probe_table(primary: URL) -> None:
    """The probe's table, made on the primary before the fault (so the standby has it too), and emptied: on the
    user's own servers it outlives the trial that made it, and the probe numbers its rows from 1 each trial."""
    conn = connect(primary)
    try:
        with conn.cursor() as cur:
            cur.execute(f"create table if not exists {PROBE_TABLE} (n int primary key, written_at float not null)")
            cur.execute(f"truncate {PROBE_TABLE}")
    finally:
        conn.close()


class PromotionProbe:
    """The probe writer and the role watcher of one trial; start() right before the fault, stop() once it healed."""

    def __init__(self, manager: str, old_primary: str, nodes: dict[str, URL]):
        self.manager = manager
        self.old_primary = old_primary
        self.nodes = nodes
        self.t_fault: float | None = None
        self.acknowledged: list[tuple[int, float]] = []  # (n, seconds after the fault)
        self.refused: str | None = None
        self.primary_since: dict[str, float] = {}  # node -> first time after the fault it answered as primary
        self.watch_rounds = 0  # how many times the watcher asked every node
        self.watch_errors: dict[str, str] = {}  # node -> the last error asking it
        self._stop = threading.Event()
        self._conn = connect(nodes[old_primary])  # opened before the fault, as a client already connected is
        self._threads: list[threading.Thread] = []

    def start(self, t_fault: float) -> None:
        self.t_fault = t_fault
        for target, name in ((self._write, "promotion-probe"), (self._watch, "promotion-watch")):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)

    def _since(self) -> float:
        assert self.t_fault is not None
        return round(time.monotonic() - self.t_fault, 3)

    def _write(self) -> None:
        """One row a PROBE_EVERY_S until the old primary refuses one. A commit left waiting (on a synchronous
        standby that is gone) is never cancelled: a cancelled wait commits locally, which would be our doing."""
        n = 0
        try:
            with self._conn.cursor() as cur:
                while not self._stop.is_set():
                    n += 1
                    cur.execute(f"insert into {PROBE_TABLE} (n, written_at) values (%s, %s)", (n, time.time()))
                    if self._stop.is_set():
                        break  # acknowledged after the trial ended: not counted
                    self.acknowledged.append((n, self._since()))
                    self._stop.wait(PROBE_EVERY_S)
        except psycopg2.Error as exc:
            self.refused = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
        finally:
            try:
                self._conn.close()
            except psycopg2.Error:
                pass

    def _watch(self) -> None:
        """Each node's answer to pg_is_in_recovery(), on a fresh session each time (a node may restart); a question
        is bounded (WATCH_QUESTION_MS), and whatever one node does, the watcher goes on asking every node. Once
        stopped it asks every node one last time, as an observer takes a last look: a promotion that came between
        its last round and the stop is seen then, at that time (every figure here is when a role was first seen)."""
        while True:
            stopping = self._stop.is_set()
            self.watch_rounds += 1
            for name, url in self.nodes.items():
                try:
                    in_recovery = _in_recovery(url)
                except Exception as exc:  # a node between roles, or gone: asked again next round
                    self.watch_errors[name] = f"{type(exc).__name__}: {str(exc).strip()[:160]}"
                    continue
                if in_recovery is False:
                    self.primary_since.setdefault(name, self._since())
            if stopping:
                return
            self._stop.wait(PROBE_EVERY_S)

    def stop(self) -> None:
        self._stop.set()
        if not self._threads:  # never started (the trial ended before its fault): the writer would have closed it
            try:
                self._conn.close()
            except psycopg2.Error:
                pass
        for thread in self._threads:
            # the watcher's last round asks each node within WATCH_QUESTION_MS; a probe commit still waiting stays
            # behind, as a daemon, until the cluster stops
            thread.join(timeout=3 + len(self.nodes) * WATCH_QUESTION_MS / 1000)

    def promoted_at(self) -> float | None:
        """When a node other than the old primary first answered as primary."""
        others = [at for name, at in self.primary_since.items() if name != self.old_primary]
        return min(others) if others else None

    def measures(self, survivor: URL | None) -> PromotionMeasures:
        """The promotion measures; survivor is the primary at the end, where the acknowledged probe rows are looked for."""
        acknowledged = list(self.acknowledged)
        survived = None
        if not acknowledged:
            survived = 0
        elif survivor is not None:
            try:
                conn = connect(survivor)
                try:
                    with conn.cursor() as cur:
                        cur.execute(f"select count(*) from {PROBE_TABLE} where n = any(%s)", ([n for n, _ in acknowledged],))
                        row = cur.fetchone()
                        survived = None if row is None else int(row[0])
                finally:
                    conn.close()
            except psycopg2.Error:
                survived = None
        return {"manager": self.manager, "promote_s": self.promoted_at(),
                "old_primary_accepted": len(acknowledged),
                "old_primary_accepting_s": acknowledged[-1][1] if acknowledged else None,
                "old_primary_writes_survived": survived}

    def details(self) -> dict:
        """Beside the contract's measures: how the probe ended, and when each node was first seen as primary."""
        return {"probe_refused": self.refused, "primary_since": dict(self.primary_since),
                "watch_rounds": self.watch_rounds, "watch_errors": dict(self.watch_errors)}


def _in_recovery(url: URL) -> bool | None:
    """One node's pg_is_in_recovery() on a session of its own, within WATCH_QUESTION_MS."""
    conn = connect(url, options=f"-c statement_timeout={WATCH_QUESTION_MS}", keepalives=1, keepalives_idle=1,
                   keepalives_interval=1, keepalives_count=2)
    try:
        with conn.cursor() as cur:
            cur.execute("select pg_is_in_recovery()")
            row = cur.fetchone()
    finally:
        conn.close()
    return None if row is None else bool(row[0])
