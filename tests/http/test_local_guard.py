"""The Host allowlist and the same-origin rule, as pure decisions (no server)."""

from __future__ import annotations

import socket

import pytest

from nsqbox.http.local_guard import LocalGuard, host_name, local_guard


@pytest.mark.parametrize(
    ("host", "name"),
    [
        ("127.0.0.1:4171", "127.0.0.1"),
        ("[::1]:4171", "[::1]"),
        ("LocalHost", "localhost"),
        ("box.example.:80", "box.example"),
    ],
)
def test_host_name_drops_the_port(host: str, name: str) -> None:
    assert host_name(host) == name


@pytest.mark.parametrize(
    "host",
    [None, "127.0.0.1:4151", "[::1]:4151", "10.1.2.3", "localhost:4171", "app.localhost"],
)
def test_ip_literals_and_localhost_are_allowed(host: str | None) -> None:
    assert LocalGuard().host_allowed(host)


@pytest.mark.parametrize(
    "host", ["evil.example", "evil.example:4171", "", "localhost.evil.example"]
)
def test_a_rebound_name_is_refused(host: str) -> None:
    assert not LocalGuard().host_allowed(host)
    assert LocalGuard().refusal(host, None) == "HOST_NOT_ALLOWED"


def test_the_hostname_broadcast_address_and_allowed_hosts_are_allowed() -> None:
    guard = local_guard(["nsqd.internal"], broadcast_address="box.lan")
    assert guard.host_allowed(f"{socket.gethostname()}:4151")
    assert guard.host_allowed("box.lan:4151")
    assert guard.host_allowed("NSQD.internal")
    assert not guard.host_allowed("other.lan")
    assert guard.guard_nsq_routes
    assert not local_guard().guard_nsq_routes


@pytest.mark.parametrize(
    ("origin", "host", "allowed"),
    [
        (None, "127.0.0.1:4171", True),
        ("http://127.0.0.1:4171", "127.0.0.1:4171", True),
        ("http://localhost:4172", "localhost:4172", True),
        ("http://evil.example", "127.0.0.1:4171", False),
        ("http://127.0.0.1:9999", "127.0.0.1:4171", False),
        ("null", "127.0.0.1:4171", False),
        ("http://evil.example:4171", "evil.example:4171", False),
        ("http://a@127.0.0.1:4171", "127.0.0.1:4171", False),
        ("http://127.0.0.1:4171", None, False),
    ],
)
def test_only_the_servers_own_origin_is_allowed(
    origin: str | None, host: str | None, allowed: bool
) -> None:
    guard = LocalGuard()
    assert guard.origin_allowed(origin, host) is allowed
