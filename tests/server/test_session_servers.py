"""The check the session runs after every test names a server of its own that exited, and nothing else."""

import shutil

import pytest

from lab.servers.redis.server import EmbeddedRedis, EmbeddedRedlockMasters
from tests.server.helpers import shared_tmp
from tests.session_servers import exited

pytestmark = pytest.mark.server


def test_a_server_that_exited_is_named_with_its_code_and_log(tmp_path):
    root = shared_tmp(tmp_path)
    redis, masters = EmbeddedRedis(root), EmbeddedRedlockMasters(root, count=2)
    try:
        redis.start()
        masters.start()
        embedded = {"redis": redis, "redlock": masters}
        assert exited(embedded) == []
        masters.masters[1].proc.kill()  # one Redlock master dies, as a server whose data was removed would
        masters.masters[1].proc.wait(5)
        dead = exited(embedded)
        assert len(dead) == 1 and dead[0].startswith(f"redlock (pid {masters.masters[1].proc.pid}) exited with code -9")
    finally:
        redis.stop()
        masters.stop()
        shutil.rmtree(root, ignore_errors=True)
