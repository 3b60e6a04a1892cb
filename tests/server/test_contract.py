"""One contract, every registered backend: acquire, held and release tell the truth on real servers."""

import os

import pytest

import backends
from backends.base import BackendContext
from lab.errors import LockLost
from lab.servers.services import OS_PACKAGES
from tests import os_packages
from tests.server.helpers import seeded_table

pytestmark = pytest.mark.server


@pytest.fixture
def make(services, engines, store_engines, request):
    cls = backends.load(request.node.callspec.params["name"])
    if cls.lock_service in services.unavailable:  # a server from an OS package (ZooKeeper, MariaDB)
        os_packages.require(OS_PACKAGES[cls.lock_service])
    monitor, writes = engines if cls.writes_to == "postgres" else store_engines(cls.writes_to)
    table = seeded_table((monitor, writes), f"contract_{request.node.name}")
    made = []

    def build(name, key):
        backend = backends.load(name)(BackendContext(services, monitor, writes, table, {}, {"ttl_s": 2.0}), key)
        made.append(backend)
        return backend

    yield build, table, writes
    for backend in made:
        backend.close()


@pytest.mark.parametrize("name", backends.names())
def test_backend_contract(services, make, name):
    build, table, writes = make
    cls = backends.load(name)
    cannot = cls.cannot_run(services)  # a holder program whose runtime or packages are missing: its install line
    if cannot is not None:
        if os.environ.get(os_packages.REQUIRED):
            pytest.fail(f"{name} does not run: {cannot}, and {os_packages.REQUIRED} is set")
        pytest.skip(f"{name} does not run: {cannot}")
    first, second = build(name, f"contract:{name}"), build(name, f"contract:{name}")
    assert first.acquire() is True
    result = first.rebuild(1, 250, "first")
    assert result.outcome == "committed" and result.deleted == 250
    if cls.holds_across_writes():
        assert first.held() is True  # as the lock's server sees it
        assert second.acquire() is False  # the run-level right excludes a second run
        first.release()
        assert first.held() is False
        with pytest.raises(LockLost):
            first.release()  # a second release cannot claim success
        assert second.acquire() is True
        second.release()
    else:
        assert first.held() is False  # nothing is held between writes
        first.release()
    with writes.connect() as conn:
        assert table.count(conn, 1) == 250 and table.runs_in(conn, 1) == ["first"]
