"""A name -> "module:Class" table with lazy imports, shared by backends and scenarios."""

from __future__ import annotations

import importlib

from lab.errors import LabError


def import_entry(entry: str) -> type:
    """The class an entry "module:Class" names, imported now."""
    module_name, _, class_name = entry.partition(":")
    return getattr(importlib.import_module(module_name), class_name)


class Registry:
    """Registered names in a fixed order; classes are imported only when used."""

    def __init__(self, kind: str, entries: dict[str, str]):
        self.kind = kind
        self.entries = dict(entries)

    def names(self) -> list[str]:
        return list(self.entries)

    def _choices(self) -> str:
        return f"choose from: all, {', '.join(self.names())}"

    def load(self, name: str) -> type:
        """The class registered under name."""
        try:
            entry = self.entries[name]
        except KeyError:
            raise LabError(f"unknown {self.kind} {name!r}; {self._choices()}") from None
        return import_entry(entry)

    def resolve(self, spec: str) -> list[str]:
        """'all' or a comma-separated list of names -> registered names, in registry order."""
        wanted = [part.strip() for part in spec.split(",") if part.strip()]
        if not wanted:
            raise LabError(f"no {self.kind} given; {self._choices()}")
        if "all" in wanted:
            return self.names()
        unknown = [name for name in wanted if name not in self.entries]
        if unknown:
            raise LabError(f"unknown {self.kind} {', '.join(map(repr, unknown))}; {self._choices()}")
        return [name for name in self.names() if name in wanted]
