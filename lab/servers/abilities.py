"""What a server the lab started can be made to do, as Protocols: a fault declares the one it needs.

A fault checks `isinstance(server, Protocol)` against what it declares instead of probing attributes,
so what strikes which server is written once, beside the servers that satisfy it.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class Pausable(Protocol):
    """Its processes can be stopped and continued: the lab knows every pid of the server."""

    @property
    def pids(self) -> list[int]: ...


@runtime_checkable
class Restartable(Protocol):
    """It can be stopped and started again in place (same address, same data), and the lab knows its pids,
    so a restart is confirmed by new ones."""

    @property
    def pids(self) -> list[int]: ...

    def restart(self) -> None: ...


@runtime_checkable
class FailsOver(Protocol):
    """A PostgreSQL primary with a standby: the primary crashes and the standby is promoted."""

    def fail_over(self) -> None: ...


@runtime_checkable
class PromotesReplica(Protocol):
    """A Redis primary with a replica that can be promoted by hand."""

    def promote(self) -> str: ...


@runtime_checkable
class ManagedBySentinel(Protocol):
    """A Redis primary and replica under Sentinels: the primary can be paused or cut from the Sentinels and
    the replica, and a failover can be forced."""

    def isolate_primary(self) -> None: ...

    def force_failover(self) -> str: ...


@runtime_checkable
class RedlockMasters(Protocol):
    """Independent Redis masters, each of which can be restarted alone."""

    masters: list


@runtime_checkable
class PartitionsMembers(Protocol):
    """A consensus cluster whose members can be cut off from each other, killed and started again."""

    def isolate(self, member) -> None: ...


@runtime_checkable
class ManagedByPatroni(Protocol):
    """A PostgreSQL cluster whose primary Patroni chooses: its agents can be stopped, cut from the DCS, asked
    to switch over, and report their own view of the cluster."""

    def leader(self, via=None): ...

    def switchover(self, leader, candidate) -> tuple[int, dict]: ...
