"""redis_fenced: the grant and its fencing token are one step, on real Redis and PostgreSQL (issue 13, point 2).

The old backend took redis-py's Lock, then INCRed the fence counter in a second round trip.
A holder paused between the two past the TTL drew its token after the next holder's: a higher
one, so the fence let its stale write through and refused the rightful holder's.
"""

import time

import pytest

from backends._fence import fenced_write
from backends.base import BackendContext
from backends.redis_fenced import RedisFencedLock
from lab.errors import LockLost
from lab.servers.clients import redis_client
from tests.server.helpers import seeded_table

pytestmark = pytest.mark.server

TTL_S = 0.5


def wait_lapsed(client, name: str, within: float = 10.0) -> None:
    """Until Redis itself says the lock key is gone (its TTL ran out); fails after `within`."""
    deadline = time.monotonic() + within
    while client.exists(name):
        assert time.monotonic() < deadline, f"{name} still in Redis after {within}s"
        time.sleep(0.02)


@pytest.fixture
def setup(services, engines, request):
    table = seeded_table(engines, f"redis_fenced_{request.node.name}")
    client = redis_client(services.redis_url)
    key = f"test-{request.node.name}-{time.monotonic_ns()}"
    yield table, client, key
    client.close()


def final_rows(engines, table):
    with engines[1].connect() as conn:
        return table.runs_in(conn, 1), table.count(conn, 1)


def test_the_old_two_step_grant_lets_a_paused_holder_outrank_the_next_one(engines, setup):
    """What the old code did, inline: lock.acquire(), then INCR; the holder pauses between them."""
    table, client, key = setup
    name, fence = f"locklab:{key}", f"locklab:{key}:fence"
    holder = client.lock(name, timeout=TTL_S, blocking=False, thread_local=False)
    contender = client.lock(name, timeout=TTL_S, blocking=False, thread_local=False)

    assert holder.acquire() is True  # step 1: the grant
    wait_lapsed(client, name)  # the fault: the holder is paused here, past the TTL, before its INCR
    assert contender.acquire() is True  # the lock is free: the next holder takes it...
    contender_token = int(client.incr(fence))  # ...and its token, with no pause
    holder_token = int(client.incr(fence))  # step 2: the holder wakes and draws its token now
    assert (contender_token, holder_token) == (1, 2)
    assert contender.owned() is True and holder.owned() is False

    stale = fenced_write(engines[1], table, 1, 250, "holder", lock_key=key, token=holder_token)
    rightful = fenced_write(engines[1], table, 1, 250, "contender", lock_key=key, token=contender_token)

    assert stale.outcome == "committed"  # the lapsed holder's write passes the fence...
    assert rightful.outcome == "rejected" and "FenceRejected" in rightful.error  # ...the rightful one does not
    assert final_rows(engines, table) == (["holder"], 250)


def acquire_pausing_after_grant(backend, pause) -> bool:
    """backend.acquire(), running pause() before any Redis command it sends after the grant.

    A process pause lands between two round trips. The old backend had one inside acquire()
    (SET NX, then INCR): the pause fell there. With grant and token in one script there is
    none, so it lands after acquire() returns, token in hand. The server stays the real one;
    only the holder's own process waits, as a GC pause or a SIGSTOP would make it.
    Returns whether the pause fell inside acquire().
    """
    real, paused = backend.client.execute_command, []

    def execute_command(*args, **options):
        if not paused and backend.lock.local.token is not None:
            paused.append(args[0])
            pause()
        return real(*args, **options)

    backend.client.execute_command = execute_command
    try:
        assert backend.acquire() is True
    finally:
        del backend.client.execute_command  # the client's own method again
    return bool(paused)


def test_the_grant_and_its_token_are_one_step_so_the_paused_holder_is_refused(services, engines, setup):
    table, client, key = setup
    monitor, writes = engines
    ctx = BackendContext(services, monitor, writes, table, {}, {"ttl_s": TTL_S})
    holder, contender = RedisFencedLock(ctx, key), RedisFencedLock(ctx, key)
    name, fence = f"locklab:{key}", f"locklab:{key}:fence"

    def pause():  # the fault: the holder stops past its TTL, and the next holder takes the lock meanwhile
        wait_lapsed(client, name)
        assert contender.acquire() is True

    try:
        if not acquire_pausing_after_grant(holder, pause):  # the old backend paused inside, before INCR
            assert holder.token == 1 and holder.held() is True  # redis-py's owned() works on the script's token
            assert contender.acquire() is False and client.get(fence) == b"1"  # a refusal draws no token
            pause()
        assert holder.held() is False

        assert (holder.token, contender.token) == (1, 2)  # the old two-step gave (2, 1) here
        assert contender.lock.reacquire() is True  # redis-py's own extend works on the script's token
        assert contender.rebuild(1, 250, "contender").outcome == "committed"

        stale = holder.rebuild(1, 250, "holder")  # the holder wakes and writes with its token
        assert stale.outcome == "rejected" and "token 1 is older" in stale.error
        assert final_rows(engines, table) == (["contender"], 250)

        with pytest.raises(LockLost):
            holder.release()  # redis-py's release refuses: the key holds the contender's token
        assert contender.held() is True
        contender.release()
        assert client.exists(name) == 0
    finally:
        holder.close()
        contender.close()
