"""A Redis behind Sentinel as one address (redis+sentinel://): parsed, redacted, refused in one line when malformed,
and handed to each library in its own Sentinel form."""

import subprocess
import sys

import pytest

from lab.errors import LabError
from lab.servers.clients import is_sentinel_url, parse_sentinel_url, redact, redact_text, server_url

URL = "redis+sentinel://:s3cret@127.0.0.1:26379,10.0.0.2:26380/mymaster/2?sentinel_password=t0ps3cret"


def test_every_part_is_read():
    address = parse_sentinel_url(URL)
    assert address.sentinels == (("127.0.0.1", 26379), ("10.0.0.2", 26380))
    assert (address.service, address.db, address.username) == ("mymaster", 2, None)
    assert (address.password, address.sentinel_password) == ("s3cret", "t0ps3cret")
    bare = parse_sentinel_url("redis+sentinel://h:1/svc")
    assert (bare.db, bare.password, bare.sentinel_password) == (0, None, None)
    user = parse_sentinel_url("redis+sentinel://app:pw@h:1/svc")
    assert (user.username, user.password) == ("app", "pw")
    assert is_sentinel_url(URL) and not is_sentinel_url("redis://:pw@h:1/0") and not is_sentinel_url(None)


def test_one_server_of_the_service_gets_its_credentials():
    assert server_url(parse_sentinel_url(URL), "10.0.0.9", 6380) == "redis://:s3cret@10.0.0.9:6380/2"
    assert server_url(parse_sentinel_url("redis+sentinel://h:1/svc"), "h", 2) == "redis://h:2/0"


def test_both_passwords_are_redacted():
    for shown in (redact(URL), redact_text(URL), redact_text(f"--redis-url={URL}")):
        assert "s3cret" not in shown and "t0ps3cret" not in shown and "mymaster" in shown


@pytest.mark.parametrize("url", ["redis+sentinel://:pw@nohostport/svc", "redis+sentinel://:pw@h:1",
                                 "redis+sentinel://:pw@h:1/svc/db/extra", "redis+sentinel://:pw@h:x/svc"])
def test_a_malformed_address_is_refused_without_its_password(url):
    with pytest.raises(LabError) as caught:
        parse_sentinel_url(url)
    assert "pw@" not in str(caught.value) and "redis+sentinel://" in str(caught.value)


def test_a_malformed_address_on_the_command_line_is_one_line_and_exit_2(tmp_path):
    result = subprocess.run([sys.executable, "-m", "lab.cli", "run", "--backend", "redis", "--results",
                             str(tmp_path / "r"), "--redis-url", "redis+sentinel://:hunter2@nohostport/svc"],
                            capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1
    assert "host:port" in result.stderr and "hunter2" not in result.stderr
    assert not (tmp_path / "r").exists()


def test_tooz_gets_its_own_sentinel_form():
    pytest.importorskip("tooz", reason="tooz not installed (pip install -e '.[libraries]')")
    from backends.adapters.tooz_redis import ToozRedisLock

    url = ToozRedisLock._sentinel_url(parse_sentinel_url(URL), 2)
    assert url.startswith("redis://:s3cret@127.0.0.1:26379?sentinel=mymaster&db=2&lock_timeout=2&timeout=2")
    assert "sentinel_fallback=10.0.0.2%3A26380" in url and url.endswith("sentinel_password=t0ps3cret")
