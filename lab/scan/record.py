"""Where the interpreter puts what it concludes: results kept once each, the entries that reached them merged, and
the scan's warnings.

A lock is often reached from several entries (each method of each class that inherits it) and on several paths; the
same conclusion about the same statement on the same connection is kept once, with every entry that reached it.
When one lock on one connection is both fine on some path and a finding on another, the finding is what the code
allows, so the rest of that lock's results are dropped (resolve()).
"""

from __future__ import annotations

from dataclasses import replace

from lab.scan.findings import Result, Site, Status, Warning_

# Which status speaks for a lock on one connection when paths disagree: the worst the code allows.
PRECEDENCE = (Status.FINDING, Status.UNKNOWN, Status.FINE, Status.NOT_JUDGED)


class Recorder:
    def __init__(self) -> None:
        self._results: dict[tuple, Result] = {}
        self.warnings: list[Warning_] = []
        self.owner = ""
        self.assumed: list[str] = []  # what the entry now running took as given (an option's default)

    def add(self, result: Result) -> None:
        if self.assumed and not result.assumed:
            result = replace(result, assumed=tuple(dict.fromkeys(self.assumed)))
        key = result.key()
        owners = (self.owner,) if self.owner else ()
        if key in self._results:
            self._results[key] = self._results[key].with_owners(owners)
        else:
            self._results[key] = result.with_owners(owners)

    def warn(self, site: Site | None, message: str) -> None:
        warning = Warning_(site, message)
        if warning not in self.warnings:
            self.warnings.append(warning)

    def resolve(self) -> list[Result]:
        """The results to show: for each lock statement on each connection, the findings if there are any, else
        what the other paths concluded, unknown before fine."""
        groups: dict[tuple, list[Result]] = {}
        for result in self._results.values():
            made = result.connection.made_at if result.connection else None
            groups.setdefault((result.site, result.via, result.call, made, result.bug is not None
                               and result.bug.number == 2), []).append(result)
        kept: list[Result] = []
        for members in groups.values():
            best = min(PRECEDENCE.index(r.status) for r in members)
            kept += [r for r in members if PRECEDENCE.index(r.status) == best]
        order = {status: i for i, status in enumerate(PRECEDENCE)}
        return sorted(kept, key=lambda r: (order[r.status], r.site, r.via, r.call, r.bug or ""))

