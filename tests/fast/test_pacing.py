"""A scenario's pacing is one declared value: the hooks it names and the hooks a scenario defines agree, or the
class is refused when it is defined; and every scenario's declaration is a Pacing of typed members."""

import pytest

import scenarios
from lab.declarations.pacing import Exclusive, Floor, Lane, Pacing, Repeats
from lab.runner import pacing
from scenarios.base import Scenario, TrialSpec


class Declared(Scenario):
    name = "declared"
    summary = "planted pacing"
    params = {"default": {"ttl_s": 2.0, "hold_s": 0.5, "trials": 3, "parallel": 4}}

    def run_trial(self, env):
        raise AssertionError("never run")


def test_every_scenario_declares_its_pacing_as_one_typed_value():
    for name in scenarios.names():
        declared = scenarios.load(name).pacing
        assert isinstance(declared, Pacing), name
        assert isinstance(declared.lane, Lane) and isinstance(declared.floor, Floor), name
        assert isinstance(declared.exclusive, Exclusive) and isinstance(declared.repeats, Repeats), name


def test_a_hook_defined_but_not_declared_is_refused():
    with pytest.raises(TypeError, match="exclusive"):
        type("Undeclared", (Declared,), {"exclusive": lambda self, spec, services: True})
    with pytest.raises(TypeError, match="own_floor"):
        type("Undeclared", (Declared,), {"own_floor": lambda self, profile: 1.0})
    with pytest.raises(TypeError, match="still_needed"):
        type("Undeclared", (Declared,), {"still_needed": lambda self, profile, spec, done: False})


def test_a_hook_declared_but_not_defined_is_refused():
    with pytest.raises(TypeError, match="exclusive"):
        type("Undefined", (Declared,), {"pacing": Pacing(exclusive=Exclusive.PER_TRIAL)})
    with pytest.raises(TypeError, match="own_floor"):
        type("Undefined", (Declared,), {"pacing": Pacing(floor=Floor.OWN)})


def test_the_runner_reads_each_declared_member():
    spec = TrialSpec("declared", "none", "default", 0)
    assert pacing.trial_floor(Declared(), "default") == 2.5
    assert not pacing.exclusive(Declared(), spec, None) and not pacing.reads_finished(Declared())

    class Own(Declared):
        pacing = Pacing(floor=Floor.OWN, exclusive=Exclusive.PER_TRIAL, repeats=Repeats.UNTIL_PRECISE)

        def own_floor(self, profile):
            return 7.0

        def exclusive(self, spec, services):
            return spec.index == 0

        def still_needed(self, profile, spec, done):
            return not done

    assert pacing.trial_floor(Own(), "default") == 7.0
    assert pacing.exclusive(Own(), spec, None)
    assert not pacing.exclusive(Own(), TrialSpec("declared", "none", "default", 1), None)
    assert pacing.reads_finished(Own()) and pacing.needed(Own(), "default", spec, []) and not pacing.needed(
        Own(), "default", spec, [{}])
    assert pacing.trial_floor(type("Seen", (Declared,), {"pacing": Pacing(floor=Floor.NONE)})(), "default") == 0.0
