"""What each lock costs: acquire + release, handoff and throughput, beside its server's floor in the same trial.

One trial per backend, run alone (parallel 1) so other trials do not disturb its figures. Floor and
backend samples alternate, one each per iteration, so a noisy neighbour slows both alike. Round trips
are counted, never assumed: the lock's connection goes through a loopback proxy that counts each
request the client sends, and Redis also says how many commands it ran (INFO commandstats).

A backend that declares the library call it wraps (Backend.bare_call) is also timed against it, one
bare acquire + release beside each of its own in the same iterations, and the bare call's round trips
are counted through the same proxy: the goal is that the lab adds no round trip of its own
(BARE_GOAL), and a verdict on it is given only where the spread of the paired ratios allows one.
"""

from __future__ import annotations

import socket
import statistics
import threading
import time
from typing import cast


from backends import load as load_backend
from backends.base import Backend, NoRunLock
from lab.checkers.outcomes import NotRun
from lab.measures.kinds import Measured
from lab.declarations.pacing import Lane, Pacing
from lab.servers.clients import is_sentinel_url, redis_client
from lab.servers.floors import PROBES, probe_for
from lab.servers.proxy import BlackholeProxy
from lab.declarations.where import Service
from lab.workload.table import SCHEMA
from scenarios._latency_handoffs import measure_handoffs
from scenarios._latency_samples import stats
from scenarios._latency_throughput import measure_throughput
from scenarios._latency_uncontended import measure_uncontended
from scenarios.base import Scenario, Skip, TrialEnv

WORKERS = (1, 2, 8)  # throughput: k workers on one key, and k workers on k keys
COUNTED = 10  # acquire/release pairs sent through the counting proxy
WAITS = "a thread of the same process polling the backend's own acquire() in a tight loop, no sleep"
# What a waiting process would otherwise sleep on is not the lab's: the handoff is the lock's own.

_COMMIT_TABLE = f"{SCHEMA}.latency_commits"

# The goal: a backend's median acquire + release at most this many times its bare library call's.
BARE_GOAL = 1.2
# The paired samples are cut into this many consecutive blocks, each giving one ratio of medians: the
# spread a verdict must clear, as repetitions are for the cost table (a block of 6 at the quick profile).
BARE_BLOCKS = 5

# The precision rule each repeated figure stops by (lab/measures/precision.py) is its step's own: BLOCKS in
# scenarios/_latency_uncontended.py, HANDOFF_BLOCKS in _latency_handoffs.py, SLICES in _latency_throughput.py.


class Latency(Scenario):
    name = "latency"
    measured = Measured.LATENCY
    pacing = Pacing(lane=Lane.ALONE)  # microsecond figures: nothing else may run beside it
    summary = "what each lock costs: acquire+release, handoff and throughput against its server's floor"
    params = {
        "quick": {"iterations": 30, "handoffs": 15, "window_s": 0.3, "trials": 1, "parallel": 1},
        "default": {"iterations": 200, "handoffs": 100, "window_s": 1.0, "trials": 1, "parallel": 1},
    }

    def applies_to(self, backend_cls: type[Backend]) -> str | None:
        if issubclass(backend_cls, NoRunLock):
            return "takes no run-level lock to time: its lock lives inside the write (the cost table measures it)"
        if backend_cls.lock_service not in PROBES:  # the lock is reachable; the lab has no floor to time it against
            return NotRun(f"no floor probe declares its lock service {backend_cls.lock_service} (lab/servers/<service>/floor.py)")
        return None

    def trial_seconds(self, profile: str) -> float:
        p = self.profile_params(profile)
        return 2.0 + p["iterations"] * 0.02 + p["handoffs"] * 0.02 + 5 * p["window_s"]

    def measured_seconds(self, measures: dict) -> float:
        """Its timed samples: acquire + release pairs, handoffs and the throughput slices."""
        return float(measures.get("measured_s", 0.0))

    def pg_sessions(self, backend_cls: type[Backend], profile: str) -> int:
        """Eight throughput workers of two sessions each at most (lease_row's pool), the floor's and the proxy's."""
        return 2 * max(WORKERS) + 4 if backend_cls.lock_service == "postgres" else 2

    def parallelism(self, profile: str) -> int:
        return 1  # alone, always: these are the figures other trials would disturb

    def run_trial(self, env: TrialEnv) -> dict:
        service = _service_of(env)
        if service == Service.REDIS and is_sentinel_url(env.services.redis_url):
            raise Skip("its round trips are counted by a proxy in the lock client's path, and a client behind "
                       "Sentinel connects wherever the Sentinels say")
        floors = probe_for(service)(env.services, env.key("floor"), _COMMIT_TABLE)
        try:
            cold, cycles, floor_samples, bare, cycle_precision = measure_uncontended(env, floors)
            handoffs, tries, failed, not_kept_out, handoff_precision = measure_handoffs(env)
            throughput = [measure_throughput(env, k, keys) for k, keys in _throughput_configs()]
            round_trips = self._round_trips(env, service)
        finally:
            floors.close()
        acquire_release = stats([a + r for a, r in cycles])
        floor = {name: stats(values) for name, values in floor_samples.items()}
        main = floor[probe_for(service).main]
        bare_round_trips = round_trips.pop("bare", None)
        return {"lock_service": service, "iterations": len(cycles), "cold_acquire_s": round(cold, 6),
                "acquire_release": acquire_release, "acquire": stats([a for a, _ in cycles]),
                "release": stats([r for _, r in cycles]), "floors": floor, "floor": probe_for(service).main,
                "ratio": round(acquire_release["p50"] / main["p50"], 2) if main.get("p50") else None,
                "handoff": stats(handoffs), "handoff_tries": stats(tries), "handoffs_failed": failed,
                "waiter_not_kept_out": not_kept_out,
                "waits": WAITS, "throughput": throughput, "round_trips": round_trips,
                "bare": _versus_bare(cycles, bare, bare_round_trips),
                "precision": {"acquire_release": cycle_precision, "handoff": handoff_precision},
                "measured_s": round(sum(a + r for a, r in cycles) + sum(handoffs)
                                    + sum(t["seconds"] for t in throughput), 3)}

    @staticmethod
    def _round_trips(env: TrialEnv, service: str) -> dict:
        """Requests the client sent per acquire and per release, through a counting proxy (median of COUNTED);
        for Redis also the commands the server ran, from INFO commandstats. The same for the bare library
        call, under "bare", when the backend declares one: counted after the backend's instance is closed,
        so one's background traffic (a heartbeat, a keep-alive) is not counted as the other's."""
        proxies = [_CountingProxy(host, port).start() for host, port in env.services.addresses(service)]
        routed = env.services.routed(service, [p.port for p in proxies])
        backend = env.backend(key=env.key("counted"), routed=routed)
        # One connection asks before and after, so its own handshake is not counted as the lock's.
        counter = redis_client(env.services.redis()) if service == Service.REDIS else None
        bare = None
        try:
            try:
                out = _count_pairs(proxies, counter, backend.acquire, backend.release)
            finally:
                backend.close()
            bare = backend.bare_call(env.key("counted-bare"))  # opened to the same proxies (routed)
            if bare is not None:
                out["bare"] = _count_pairs(proxies, counter, bare.acquire, bare.release)
        finally:
            if bare is not None:
                bare.close()
            for proxy in proxies:
                proxy.stop()
            if counter is not None:
                counter.close()
        return out

    def verdict(self, measures: dict) -> str:
        failed, let_in = measures["handoffs_failed"], measures["waiter_not_kept_out"]
        notes = [f"{failed} handoffs timed out"] * bool(failed) + [f"{let_in} waiters got in while held"] * bool(let_in)
        return "; ".join([f"measured: {_figures(measures)}", *notes])


def _figures(m: dict) -> str:
    """The trial's headline, as the run's end table prints it: acquire + release, and its two ratios."""
    text = f"{m['acquire_release']['p50'] * 1e6:.0f} us, {m['ratio']:.2f}x {m['floor']}"
    bare = m.get("bare")
    if bare:
        goal = {True: "meets", False: "misses", None: "within noise of"}[bare.get("meets_goal")]
        text += f", {bare['ratio_to_bare']:.2f}x bare ({goal} {bare['goal']:g})"
    return text


def _throughput_configs() -> list[tuple[int, int]]:
    """(workers, keys): every k on one key, and k > 1 on k keys (one worker on one key is the same trial)."""
    return [(k, 1) for k in WORKERS] + [(k, k) for k in WORKERS if k > 1]


def refusal_backoff(refusals: int) -> float:
    """Seconds to let pass before asking again after the n-th refused uncontended acquire: 0.05 s, doubling, at most
    1 s, so COUNTED refusals span 6.5 s, longer than the TTL a left-behind key lives for (latency passes no ttl_s:
    its leases get backends/_lease.py's DEFAULT_TTL_S, 2 s)."""
    return min(0.05 * 2 ** (refusals - 1), 1.0)


def _count_pairs(proxies: list, counter, acquire, release, backoff=refusal_backoff) -> dict:
    """Requests relayed per acquire and per release over COUNTED pairs (after one uncounted pair, so
    connecting, handshakes and authentication are not the lock's), and Redis' commands per pair.

    An acquire refused although nothing else holds the key is counted apart (`refused`) and tried again after
    `backoff`, up to COUNTED times: pottery's Redlock returns from acquire and release once a majority of masters
    answered, so a request to the third still in flight can leave a key of an earlier pair behind until its TTL
    (seen once in 2,646 trials). Its requests are not a pair's; the server's command counts still include them."""
    refused = 0

    def granted() -> bool:
        nonlocal refused
        if acquire():
            return True
        refused += 1
        if refused > COUNTED:
            raise RuntimeError(f"an uncontended acquire was refused {refused} times")
        time.sleep(backoff(refused))  # a retry's cadence: a left-behind key lives until the server expires it
        return False

    while not granted():
        pass
    release()
    per_acquire: list[int] = []
    per_release: list[int] = []
    commands_before = _redis_commands(counter)
    while len(per_acquire) < COUNTED:
        before = sum(p.requests for p in proxies)
        if not granted():
            continue
        acquired = sum(p.requests for p in proxies)
        release()
        per_acquire.append(acquired - before)
        per_release.append(sum(p.requests for p in proxies) - acquired)
    commands_after = _redis_commands(counter)
    out = {"acquire": statistics.median(per_acquire), "release": statistics.median(per_release),
           "acquire_max": max(per_acquire), "release_max": max(per_release), "pairs": COUNTED,
           "refused": refused, "how": "client->server writes relayed by a loopback proxy"}
    if commands_before is not None and commands_after is not None:  # both read, with a counter
        # Commands a script runs (redis.call in EVALSHA) count too: what the server really did.
        delta = {name: commands_after[name] - commands_before.get(name, 0) for name in commands_after}
        delta["info"] = delta.get("info", 0) - 1  # our own INFO before the pairs
        out["server_commands_per_pair"] = {name: round(count / COUNTED, 2) for name, count in sorted(delta.items())
                                           if count > 0}
    return out


def _versus_bare(cycles: list[tuple[float, float]], bare: tuple[str, list] | None, round_trips: dict | None):
    """The backend against its bare library call, from the pairs timed side by side; None: none declared.

    ratio_to_bare: the backend's median acquire + release over the bare call's. block_ratios: the same
    ratio within each of BARE_BLOCKS consecutive blocks of iterations, the spread a verdict must clear.
    """
    if bare is None:
        return None
    call, bare_cycles = bare
    own, theirs = [a + r for a, r in cycles], [a + r for a, r in bare_cycles]
    figure = stats(theirs)
    ratio = round(stats(own)["p50"] / figure["p50"], 3)  # from the recorded medians, so a reader can redo it
    size = max(1, len(own) // BARE_BLOCKS)
    blocks = [(own[i:i + size], theirs[i:i + size]) for i in range(0, size * BARE_BLOCKS, size)]
    block_ratios = [round(statistics.median(o) / statistics.median(t), 3) for o, t in blocks if o and t]
    return {"call": call, "acquire_release": figure, "acquire": stats([a for a, _ in bare_cycles]),
            "release": stats([r for _, r in bare_cycles]), "ratio_to_bare": ratio, "block_ratios": block_ratios,
            "goal": BARE_GOAL, "meets_goal": meets_goal(ratio, block_ratios, BARE_GOAL),
            "round_trips": round_trips}


def meets_goal(ratio: float, block_ratios: list[float], goal: float) -> bool | None:
    """True when the ratio and every block's ratio are at or below the goal, False when all are above it,
    None when they straddle it: a verdict only where the spread allows one (as ratio_flag in the report)."""
    if not block_ratios:
        return None
    if ratio <= goal and all(r <= goal for r in block_ratios):
        return True
    if ratio > goal and all(r > goal for r in block_ratios):
        return False
    return None


def _service_of(env: TrialEnv) -> str:
    return load_backend(env.spec.backend).lock_service


class _CountingSocket:
    """A socket whose sendall counts one request before it is sent (so a reply can never be seen first)."""

    def __init__(self, sock: socket.socket, proxy: "_CountingProxy", way: str):
        self._sock, self._proxy, self._way = sock, proxy, way

    def sendall(self, data: bytes) -> None:
        if self._way == "to_server":
            with self._proxy.counting:
                self._proxy.requests += 1
        self._sock.sendall(data)

    def __getattr__(self, name):
        return getattr(self._sock, name)


class _CountingProxy(BlackholeProxy):
    """The fault proxy, also counting the client's writes it relays: each is a request the client waits on."""

    def __init__(self, host: str | None, port: int):
        super().__init__(host, port)
        self.requests = 0
        self.counting = threading.Lock()

    def _pump(self, src, dst, record, way) -> None:
        # A socket in all but sendall, which counts first (every other attribute is the socket's own).
        super()._pump(src, cast(socket.socket, _CountingSocket(dst, self, way)), record, way)


def _redis_commands(client) -> dict | None:
    """Calls per command since the server started (INFO commandstats); None without a client."""
    if client is None:
        return None
    calls: dict[str, int] = {}
    for name, counts in client.info("commandstats").items():
        command = name.removeprefix("cmdstat_").split("|")[0]  # client|setinfo counts as client
        calls[command] = calls.get(command, 0) + int(counts["calls"])
    return calls
