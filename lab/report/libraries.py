"""Which library a row of the library table is, in which language, at which version: from meta.json alone.

The library table groups its rows by the library's project and language, each with the version the run
had installed, so two rows of one library (python-redis-lock with and without auto_renewal) sit together
and a Node.js library is not mistaken for a Python one of the same name. A run records `libraries`
(the project), `languages` and `library_versions` per backend. Runs recorded before `languages` was kept
declared Python adapters only (`library` was a PyPI name), and their versions are in `versions`.
"""

from __future__ import annotations

from dataclasses import dataclass

from lab.report.common import declaration

PYTHON = "Python"
NOT_RECORDED = "version not recorded"


@dataclass(frozen=True)
class Library:
    """A row's library: its project, the language of its client, and the version the run had."""

    project: str
    language: str
    version: str | None

    def label(self) -> str:
        """'redlock 4.2.0 (Node.js)': what the library column of the row says."""
        return f"{self.project} {self.version or NOT_RECORDED} ({self.language})"

    def order(self) -> tuple:
        """Python's libraries first (the lab's own language), then each other language's; by project within."""
        return (self.language != PYTHON, self.language.lower(), self.project.lower())


def languages_recorded(meta: dict) -> bool:
    """Whether the run recorded its libraries' languages: the library table then groups and labels its rows."""
    return bool(meta.get("languages"))


def library_of(meta: dict, backend: str) -> Library | None:
    """The library a backend's row drives, as the run recorded it; None for the lab's own strategies."""
    project = declaration(meta, "libraries", backend)
    if not project:
        return None
    language = declaration(meta, "languages", backend) or PYTHON
    version = declaration(meta, "library_versions", backend)
    if version is None and language == PYTHON:
        version = (meta.get("versions") or {}).get(project)  # where runs before library_versions kept it
    return Library(project, language, version)
