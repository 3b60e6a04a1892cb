"""Capabilities are one enum: every member says what it promises, and a backend that declares one has
what the scenarios that select on it will call (a declaration never names an attribute it lacks)."""

import inspect

import backends
from lab.declarations.capabilities import Capability

# What a scenario reaches for on a backend that declares the capability.
NEEDS = {
    Capability.BATCH_REBUILD: ("rebuild_batch",),
    Capability.QUEUE: ("rebuild_next",),
    Capability.PARENT_ROW_LOCK: ("row_lock_strength", "parent_table"),
    Capability.UNIQUE_MARKER: ("marker_table",),
    Capability.NATURAL_KEY: ("natural_key",),
}


def test_every_capability_says_what_it_promises():
    for member in Capability:
        assert member.__doc__ and member.__doc__ != Capability.__doc__, member
        assert member == member.value  # meta.json keeps the plain value, and older runs still read


def test_every_backend_declares_only_members_and_has_what_they_promise():
    for name in backends.names():
        cls = backends.load(name)
        assert all(isinstance(c, Capability) for c in cls.capabilities), name
        for capability in cls.capabilities:
            for attribute in NEEDS.get(capability, ()):
                assert getattr(cls, attribute, None) is not None, f"{name} declares {capability} without {attribute}"


def test_a_backend_with_the_attributes_declares_the_capability():
    """The other way round: an attribute a scenario would select on is never there undeclared."""
    for name in backends.names():
        cls = backends.load(name)
        for capability, attributes in NEEDS.items():
            if all(getattr(cls, a, None) is not None for a in attributes) and not inspect.isabstract(cls):
                assert capability in cls.capabilities, f"{name} has {', '.join(attributes)} but does not declare {capability}"
