"""Each part of the Sentinel service's own view: ROLE and INFO on a server's real port, what each Sentinel names as
the primary, and the waits for the replica and the Sentinels to settle."""

from __future__ import annotations

import time

from lab.errors import ServiceError
from lab.servers.redis.server import EmbeddedRedis
from lab.servers.sentinel.parts import SentinelParts
from lab.servers.sentinel.process import READY_WITHIN, SENTINELS, text_of


class SentinelViews(SentinelParts):
    """What the servers and the Sentinels say, read on each one itself."""

    def primary(self) -> EmbeddedRedis | None:
        """The server that answers ROLE as a master on its own port, when exactly one does."""
        masters = [s for s in self.servers if (self.try_role(s) or {}).get("role") == "master"]
        return masters[0] if len(masters) == 1 else None

    def role(self, server: EmbeddedRedis) -> dict:
        """ROLE and run_id, read on the server itself: {"role": master|slave, "run_id", "master_port"?}."""
        client = self.client(server)
        try:
            reply = client.execute_command("ROLE")
            run_id = text_of(client.info("server")["run_id"])
        finally:
            client.close()
        role = text_of(reply[0])
        out: dict = {"role": role, "run_id": run_id}
        if role == "slave":
            out["master_port"] = int(reply[2])
            out["link"] = text_of(reply[3])
        else:
            out["replicas"] = len(reply[2])
        return out

    def try_role(self, server: EmbeddedRedis) -> dict | None:
        """role(), or None while the server does not answer (stopped, or busy reloading)."""
        try:
            return self.role(server)
        except Exception:  # any failure to answer is "not answering" to a caller that polls
            return None

    def master_addrs(self) -> dict[str, tuple[str, int] | None]:
        """What each Sentinel answers to get-master-addr-by-name (None: it did not answer)."""
        out: dict[str, tuple[str, int] | None] = {}
        for sentinel in self.sentinels:
            try:
                out[sentinel.name] = sentinel.master_addr()
            except Exception:  # a Sentinel that does not answer names no primary
                out[sentinel.name] = None
        return out

    def wait_settled(self, within: float = READY_WITHIN) -> None:
        """Until every Sentinel names the first primary, sees it up, and knows the replica and the other
        Sentinels (they find each other through the primary's hello channel every 2 s)."""
        deadline, last = time.monotonic() + within, {}  # type: tuple[float, dict]
        while time.monotonic() < deadline:
            try:
                states = [s.master_state() for s in self.sentinels]
            except Exception as exc:  # a Sentinel still starting
                last = {"error": str(exc)}
                time.sleep(0.1)
                continue
            last = {s.name: {k: st.get(k) for k in ("flags", "num-slaves", "num-other-sentinels", "port")}
                    for s, st in zip(self.sentinels, states)}
            if all(st.get("flags") == "master" and st.get("num-slaves") == "1"
                   and st.get("num-other-sentinels") == str(SENTINELS - 1)
                   and st.get("port") == str(self.address(self.first)[1])
                   for st in states):
                return
            time.sleep(0.1)  # Sentinels announce each other every 2 s; nothing to wait on but their state
        raise ServiceError(f"the Sentinels did not settle on the primary within {within:.0f} s: {last}")

    def info_replication(self, server: EmbeddedRedis) -> dict:
        client = self.client(server)
        try:
            info = client.info("replication")
        finally:
            client.close()
        keep = ("role", "connected_slaves", "master_repl_offset", "min_slaves_good_slaves", "master_link_status",
                "master_port")
        return {k: info[k] for k in keep if k in info}
