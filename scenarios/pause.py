"""The holder's whole process stopped (SIGSTOP) for longer than the TTL, then resumed (SIGCONT).

Kleppmann's garbage-collection pause: every thread stops, keep-alives included,
so a lease lapses while its holder still believes it holds it.
"""

from lab.declarations.columns import Column, FaultFamily
from scenarios._lease_faults import HolderSideFault


class Pause(HolderSideFault):
    name = "pause"
    summary = "holder process SIGSTOPped past the TTL at its fault point, then SIGCONTed; a contender tries meanwhile"
    title = "holder paused past the TTL"
    columns = (
        Column("sigstop", "holder paused past the TTL", 7,
               "the holder's whole process SIGSTOPped for longer than the TTL, then SIGCONTed; confirmed by its "
               "process state T (stopped)",
               family=FaultFamily.PAUSES, happens_when=()),
    )
