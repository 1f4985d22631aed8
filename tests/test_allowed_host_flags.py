"""``--allowed-host`` and ``--auth-http-address`` on every command, and how the box passes
them to its lookupd and admin service."""

from __future__ import annotations

from nsqbox import cli
from nsqbox.admin.options import parse_admin_args
from nsqbox.lookupd.config import parse_lookupd_args
from nsqbox.nsqd.config import parse_nsqd_args
from nsqbox.run.box import BoxOptions
from nsqbox.run.up import resolve_up_options, up_flag_set


def test_nsqd_takes_allowed_host_repeatedly() -> None:
    options = parse_nsqd_args(["--allowed-host=a.test", "--allowed-host", "b.test"]).options
    assert options.allowed_hosts == ["a.test", "b.test"]


def test_lookupd_and_admin_take_allowed_host_and_auth() -> None:
    argv = ["--allowed-host=a.test", "--auth-http-address=127.0.0.1:4181"]
    lookupd = parse_lookupd_args(argv).options
    assert (lookupd.allowed_hosts, lookupd.auth_http_addresses) == (["a.test"], ["127.0.0.1:4181"])
    admin = parse_admin_args([*argv, "--lookupd-http-address=127.0.0.1:4161"]).options
    assert (admin.allowed_hosts, admin.auth_http_addresses) == (["a.test"], ["127.0.0.1:4181"])


def test_the_box_passes_its_hosts_auth_and_broadcast_address_on() -> None:
    defaults = BoxOptions()
    flags = up_flag_set(defaults)
    argv = [
        "--allowed-host=a.test",
        "--auth-http-address=127.0.0.1:4181",
        "--broadcast-address=box.lan",
    ]
    command = cli.parse_nsqd_command(argv, flags, defaults.nsqd)
    assert not isinstance(command, int)
    options, _ = resolve_up_options(flags, command.options)
    assert options.node_options(1, []).allowed_hosts == ["a.test"]
    for service in (options.lookupd_options(), options.admin_options("127.0.0.1:4161")):
        assert service.allowed_hosts == ["a.test"]
        assert service.auth_http_addresses == ["127.0.0.1:4181"]
        assert service.box_broadcast_address == "box.lan"


def test_a_plain_box_has_no_allowlist_and_no_auth() -> None:
    options = BoxOptions()
    for service in (options.lookupd_options(), options.admin_options("127.0.0.1:4161")):
        assert service.allowed_hosts == []
        assert service.auth_http_addresses == []
