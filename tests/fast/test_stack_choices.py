"""The stack report.html's panel chooses (lab/stack/choices.py) is the stack the advice reads: every trait of
stack_of(services, values) reads back as the panel's script reads it (its value, unknown, or absent where its part
is: TraitInfo.within), the document is a valid stack description, and the page's address gives the choice back.
With hypothesis, over every service set and every choice of values."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from lab.errors import LabError
from lab.stack.exposure import TRAITS, Trait, read_trait
from lab.stack.description import Stack, Unknown
from lab.stack.choices import SERVICES, from_query, stack_of, to_query

UNKNOWN = "unknown"


def as_the_panel_reads(services: set[str], values: dict[Trait, str], trait: Trait) -> str | None:
    """The page's read(): a trait within another (Patroni's settings) is absent unless that one has its value, and
    unknown while that one is; any other trait is its value or unknown."""
    within = trait.info.within
    if within is not None:
        parent = as_the_panel_reads(services, values, within[0])
        if parent == UNKNOWN:
            return UNKNOWN
        if parent != within[1]:
            return None
    return values.get(trait, UNKNOWN)


choices = st.tuples(
    st.sets(st.sampled_from(SERVICES)),
    st.fixed_dictionaries({}, optional={t: st.sampled_from(info.values) for t, info in TRAITS.items()}))


@given(choices)
def test_every_trait_reads_back_as_the_panel_chose_it(choice):
    services, values = choice
    stack = stack_of(services, values)
    assert stack.services() == frozenset(services)
    for trait in Trait:
        if trait.info.service not in services:
            assert read_trait(stack, trait) is None  # the part is not in the stack
            continue
        read = read_trait(stack, trait)
        assert (UNKNOWN if isinstance(read, Unknown) else read) == as_the_panel_reads(services, values, trait), trait
    assert Stack.from_json(stack.to_json()) == stack  # a stack file `lab report --stack` reads


@given(choices)
def test_the_address_gives_the_choice_back(choice):
    services, values = choice
    query = to_query(services, values)
    assert from_query(query) == (tuple(s for s in SERVICES if s in services), values)
    assert from_query(query.removeprefix("?")) == from_query(query)


def test_an_address_without_a_stack_is_every_stack_and_a_wrong_one_is_one_line():
    assert from_query("") is None and from_query("?x=1") is None
    assert from_query("?stack=") == ((), {})
    for query, words in (("?stack=postgres,mysql", "no service 'mysql'"), ("?stack=postgres&postgres.colour=red",
                          "no trait 'postgres.colour'"), ("?stack=postgres&postgres.pooler=maybe",
                          "postgres.pooler: 'maybe' is not one of none, session, transaction")):
        with pytest.raises(LabError, match=words) as caught:
            from_query(query)
        assert "\n" not in str(caught.value)


def test_patronis_settings_are_declared_within_patroni_as_the_readers_read_them():
    """A stack without an HA manager reads Patroni's settings as absent; one whose HA manager is unknown, unknown."""
    within = {t for t, info in TRAITS.items() if info.within is not None}
    assert within == {Trait.SYNCHRONOUS_MODE, Trait.FAILSAFE_MODE, Trait.WATCHDOG}
    on = {t: "on" for t in within}
    assert all(read_trait(stack_of(["postgres"], {Trait.HA_MANAGER: "none", **on}), t) is None for t in within)
    assert all(isinstance(read_trait(stack_of(["postgres"], on), t), Unknown) for t in within)
    assert all(read_trait(stack_of(["postgres"], {Trait.HA_MANAGER: "patroni", **on}), t) == "on" for t in within)
