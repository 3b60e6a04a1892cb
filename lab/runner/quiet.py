"""While a run lasts, what lock libraries say goes to its libraries.log, never to the console.

The lab breaks connections on purpose, so libraries log warnings, renewal threads die and
finalizers (sherlock's `__del__`) raise at garbage collection. All three are evidence, kept
with the run; the console gets one line at the end counting them and naming the file.
"""

from __future__ import annotations

import logging
import sys
import threading
import traceback
from pathlib import Path

LOGGER = "lab.libraries"


class _Counter(logging.FileHandler):
    """A file handler that counts what it wrote."""

    def __init__(self, path: Path):
        super().__init__(path, encoding="utf-8")
        self.count = 0
        self.setLevel(logging.WARNING)
        self.setFormatter(logging.Formatter("%(asctime)s %(threadName)s %(name)s %(levelname)s %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        super().emit(record)
        self.count += 1


class LibraryNoise:
    """Context manager: library logging, dying threads and finalizer errors go to path, counted."""

    def __init__(self, path: Path):
        self.path = path
        self._handler = _Counter(path)
        self._saved = (threading.excepthook, sys.unraisablehook)

    @property
    def count(self) -> int:
        return self._handler.count

    def __enter__(self) -> LibraryNoise:
        logging.getLogger().addHandler(self._handler)
        log = logging.getLogger(LOGGER)

        def thread_died(args) -> None:
            if args.exc_type is SystemExit:
                return
            name = args.thread.name if args.thread else "?"
            log.warning("background thread %s stopped:\n%s", name,
                        "".join(traceback.format_exception(args.exc_type, args.exc_value, args.exc_traceback)))

        def finalizer_raised(args) -> None:
            where = f" in {args.object!r}" if args.object is not None else ""
            log.warning("%s%s:\n%s", args.err_msg or "exception ignored", where,
                        "".join(traceback.format_exception(args.exc_type, args.exc_value, args.exc_traceback)))

        threading.excepthook, sys.unraisablehook = thread_died, finalizer_raised
        return self

    def __exit__(self, *exc) -> None:
        threading.excepthook, sys.unraisablehook = self._saved
        logging.getLogger().removeHandler(self._handler)
        self._handler.close()

    def summary(self) -> str | None:
        """The one console line, or None when the libraries said nothing."""
        if not self.count:
            return None
        return f"{self.count} messages from lock libraries (warnings, stopped threads, finalizer errors) in {self.path}"
