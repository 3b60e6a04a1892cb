"""Spare holder processes: handed out started, replaced as they go, grown when trials find none, all killed at close.

Real processes (a Python that waits on its stdin, as a holder waits for its spec), no holder logic."""

import subprocess
import sys

from lab.harness import holder_spares
from lab.harness.holder_spares import SparePool


def waiting_process() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.readline()"], stdin=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True)


def test_a_pool_hands_out_a_started_process_and_replaces_it():
    pool = SparePool(waiting_process, most=3)
    handed = []
    try:
        handed.append(pool.take())  # none ready: started now, and two spares behind it
        assert (pool.started_cold, pool.taken, len(pool._spares)) == (1, 0, 2)
        handed.append(pool.take())  # a spare, and its replacement
        assert (pool.started_cold, pool.taken, len(pool._spares)) == (1, 1, 2)
        assert all(p.poll() is None for p in handed)
    finally:
        spares = list(pool._spares)
        pool.close()
        for proc in handed:
            proc.kill()
            proc.wait(5)
    assert all(p.poll() is not None for p in spares)  # close killed and reaped every waiting spare


def test_a_spare_that_died_is_not_handed_out():
    pool = SparePool(waiting_process, most=2)
    first = pool.take()
    try:
        for spare in pool._spares:
            spare.kill()
            spare.wait(5)
        handed = pool.take()
        assert handed.poll() is None and pool.started_cold == 2
        handed.kill()
        handed.wait(5)
    finally:
        first.kill()
        first.wait(5)
        pool.close()


def test_without_an_open_pool_a_holder_starts_for_its_trial():
    holder_spares.close_pool()
    assert holder_spares.take() is None
