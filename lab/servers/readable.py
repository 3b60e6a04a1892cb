"""Whether a file or socket has something to read within a timeout, for any descriptor number.

select.select() refuses descriptors above 1023 ("filedescriptor out of range"), and a full run's process holds
more than that at its busiest (a slow_network trial of a full run failed so); poll() has no such limit.
"""

from __future__ import annotations

import select


def readable(source, within_s: float) -> bool:
    """True once `source` (a file object, socket or descriptor) has data or end of file, False after within_s."""
    poller = select.poll()
    poller.register(source, select.POLLIN | select.POLLPRI)
    return bool(poller.poll(max(0.0, within_s) * 1000))
