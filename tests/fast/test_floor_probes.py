"""Each lock service declares its own floor probe (lab/servers/<service>/floor.py), and the latency scenario reads the
declaration: every built-in lock it times has one, and a lock on a service without one is *not run* (the lab cannot
time it against a floor), never an error mid-trial."""

from __future__ import annotations

import backends
from backends.base import NoRunLock
from lab.checkers.outcomes import NotRun
from lab.servers.floors import PROBES, FloorProbe, probe_for
from scenarios.latency import Latency


def test_every_built_in_lock_the_latency_scenario_times_has_its_services_probe():
    timed = [backends.load(name) for name in backends.names() if not issubclass(backends.load(name), NoRunLock)]
    assert timed
    for cls in timed:
        assert Latency().applies_to(cls) is None, cls.name
        probe = probe_for(cls.lock_service)
        assert issubclass(probe, FloorProbe) and probe.service == cls.lock_service


def test_each_probe_is_registered_by_the_service_it_declares_and_names_a_main_call():
    assert all(service == probe.service and probe.main for service, probe in PROBES.items())
    assert len({probe.service for probe in PROBES.values()}) == len(PROBES)


def test_a_lock_on_a_service_without_a_probe_is_not_run_with_the_reason():
    class OnConsul(backends.load("redis")):  # a plugin's lock on a service the lab has no floor for
        lock_service = "consul"

    reason = Latency().applies_to(OnConsul)
    assert isinstance(reason, NotRun) and "consul" in str(reason)
