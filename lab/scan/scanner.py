"""`lab scan PATH...` without its output: read the files, run each as an entry, keep the results.

The evidence from the lab's reference is attached by the caller (lab/scan/evidence.py), so this part reads source
only and runs nothing it reads.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path

from lab.scan.entries import run_file
from lab.scan.findings import ScanReport, Site
from lab.scan.interp import Interpreter
from lab.scan.record import Recorder
from lab.scan.sources import Sources, package_root, python_files

RECURSION = 20_000  # the interpreter recurses once per AST level and call followed
STACK = 512 * 1024 * 1024  # the thread it runs in gets a stack to match


def scan(paths: list[str]) -> ScanReport:
    """Every Python file under the paths, scanned; LabError (one line) for a path that does not exist. Runs in a
    thread of its own with a large stack: following calls deep into a library recurses deeply."""
    files = python_files(paths)
    done: list[ScanReport] = []
    failed: list[BaseException] = []

    def run() -> None:
        try:
            done.append(_scan(files))
        except BaseException as exc:  # handed to the caller's thread, raised there
            failed.append(exc)

    previous = threading.stack_size(STACK)
    try:
        worker = threading.Thread(target=run, name="lab-scan")
        worker.start()
    finally:
        threading.stack_size(previous)
    worker.join()
    if failed:
        raise failed[0]
    return done[0]


def _scan(files: list[Path]) -> ScanReport:
    roots = [package_root(f)[0] for f in files]
    sources = Sources(roots)
    sources.scanned = {str(f) for f in files}
    recorder = Recorder()
    interp = Interpreter(sources, recorder)
    unreached = 0
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, RECURSION))
    try:
        for path in files:
            parsed = sources.parse(path, package_root(path)[1])
            if parsed.tree is None:
                recorder.warn(Site(str(path), 0), parsed.error or "cannot be read")
                continue
            if not sources.reaches_postgres(parsed):
                unreached += 1
                continue
            run_file(interp, parsed)
    finally:
        sys.setrecursionlimit(limit)
    return ScanReport(tuple(recorder.resolve()), tuple(recorder.warnings), len(files), unreached=unreached)

