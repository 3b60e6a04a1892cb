"""Registries resolve names or fail with one line; DSNs are parsed and never shown with a password."""

import pytest

import backends
import scenarios
from backends.base import CAPABILITIES
from lab.errors import LabError
from lab.servers.clients import parse_pg_dsn, redact, redact_text


def test_all_means_every_backend_in_registry_order():
    assert backends.resolve("all") == backends.names()
    assert backends.resolve("xact,session") == ["session", "xact"]


def test_unknown_backend_names_the_valid_ones():
    with pytest.raises(LabError, match="unknown backend 'nope'; choose from: all, none, session"):
        backends.resolve("session,nope")


def test_unknown_scenario_names_the_valid_ones():
    with pytest.raises(LabError, match="unknown scenario 'nope'; choose from: all, cases"):
        scenarios.resolve("nope")


def test_every_backend_loads_and_declares_known_capabilities():
    for name in backends.names():
        cls = backends.load(name)
        assert cls.name == name and cls.summary
        assert cls.capabilities <= set(CAPABILITIES), name


def test_every_scenario_has_a_default_profile():
    for name in scenarios.names():
        scenario = scenarios.load(name)
        assert scenario.name == name and scenario.summary
        for profile in ("quick", "default", "full"):
            assert scenario.profile_params(profile)["trials"] >= 1


def test_dsn_gets_the_psycopg2_driver_and_hides_its_password():
    url = parse_pg_dsn("postgresql://app:s3cret@db.example:5433/prod")
    assert url.drivername == "postgresql+psycopg2"
    assert "s3cret" not in redact(url) and "***" in redact(url)


def test_unparseable_dsn_is_refused_without_echoing_it():
    with pytest.raises(LabError) as err:
        parse_pg_dsn("not a url :s3cret@")
    assert "s3cret" not in str(err.value) and "\n" not in str(err.value)


def test_other_databases_are_refused():
    with pytest.raises(LabError, match="must be a postgresql:// URL, not mysql://"):
        parse_pg_dsn("mysql://u:p@h/db")


def test_redaction_blanks_passwords_with_or_without_a_user():
    assert redact_text("redis://:hunter2@h:6379/0") == "redis://:***@h:6379/0"
    assert redact_text("postgresql://u:pw@h/db") == "postgresql://u:***@h/db"
    assert redact("redis://:hunter2@h:6379/0") == "redis://:***@h:6379/0"


def test_no_scenario_flag_means_the_core_set_and_all_means_everything():
    """The core set is what the scenarios declare (default_run), never a list of names kept beside them."""
    assert scenarios.resolve(None) == ["cases", "calibrate", "overlap", "kill", "rules", "pause", "cut", "timing",
                                       "lookalikes"]
    assert all(scenarios.load(n).default_run == (n in scenarios.resolve(None)) for n in scenarios.names())
    assert scenarios.resolve("all") == scenarios.names()


def test_a_zookeeper_connect_string_is_read_and_routed_with_its_chroot():
    from lab.servers.services import Services
    from lab.servers.zookeeper.server import parse_hosts

    assert parse_hosts("a:2181,b:2182/app") == [("a", 2181), ("b", 2182)]
    assert parse_hosts("[::1]:2181,c") == [("::1", 2181), ("c", 2181)]
    given = Services(zk_hosts="a:2181,b:2182/app")
    assert given.addresses("zookeeper") == [("a", 2181), ("b", 2182)]
    assert given.routed("zookeeper", [7001, 7002]).zk_hosts == "127.0.0.1:7001,127.0.0.1:7002/app"
    with pytest.raises(LabError, match="'a:b' is not host:port"):
        parse_hosts("a:b")


def test_the_posts_methods_are_declared_once_each_and_a_subclass_is_not_one():
    """Experiments that reproduce the post pick their backend by its declared method (lookalikes: method 1); a
    plugin built on the session lock's class is a method of its own, so it never lands in that column by descent."""
    import backends
    from backends.session import SessionLock

    from lab.declarations.post_role import PostRole

    declared = {}
    for name in backends.names():
        if (role := backends.load(name).post_role) is not None:
            declared.setdefault(role, []).append(name)
    assert all(len(names) == 1 for names in declared.values()), declared
    assert {role.method: names[0] for role, names in declared.items() if role.method} == {
        1: "session", 2: "session_commit", 3: "session_autocommit", 4: "xact"}

    class MySessionLock(SessionLock):
        name = "my_session_lock"

    assert MySessionLock.post_role is None
    assert scenarios.load("lookalikes").applies_to(MySessionLock) is not None
    assert scenarios.load("lookalikes").applies_to(SessionLock) is None
