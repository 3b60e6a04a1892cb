"""Where a trial's own servers keep their files, and the private network namespace a trial runs them in.

Written once for the scenarios that start servers of a trial's own (failovers, restarts, partitions, the slow or
dropped network), so that each refuses a run without the lab's own servers, and sweeps its leftovers, alike.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from lab.checkers.outcomes import DoesNotRun, NotRun
from lab.servers.netns import NamespaceUnavailable, NetNamespace
from lab.servers.owner import mark_owner
from lab.servers.services import Services
from scenarios.base import Skip


def servers_folder(services: Services, prefix: str, refusal: str) -> Path:
    """A folder of the trial's own under the run's temp dir (prefix: its name's start); Skip with refusal where the
    run has no temp dir, its servers all external: a trial never starts, stops or cuts yours (*not run*: the fault
    would reach the lock, the lab will not make it there)."""
    if services.tmp is None:
        raise Skip(refusal if isinstance(refusal, NotRun) else NotRun(refusal))
    return Path(tempfile.mkdtemp(prefix=prefix, dir=services.tmp))


def shared_folder(tmp: Path | None, prefix: str) -> Path:
    """A folder of the trial's own under the run's temp dir (tmp) that servers running as another OS user reach
    (0755): their data lives below it."""
    root = Path(tempfile.mkdtemp(prefix=prefix, dir=tmp))
    root.chmod(0o755)
    return root


def swept_folder(services: Services, name: str) -> Path:
    """A folder of the trial's own: under the run's temp dir, or (every server external) a temp dir of its own
    that the next lab's sweep removes if this process is killed before its cleanup."""
    if services.tmp is not None:
        return Path(tempfile.mkdtemp(prefix=f"{name}-", dir=services.tmp))
    root = Path(tempfile.mkdtemp(prefix=f"locklab-{name}-"))
    mark_owner(root)
    return root


def private_namespace() -> NetNamespace:
    """A network namespace of the trial's own; Skip (does not run here) where the machine gives none."""
    try:
        return NetNamespace()
    except NamespaceUnavailable as exc:
        raise Skip(DoesNotRun(str(exc))) from None
