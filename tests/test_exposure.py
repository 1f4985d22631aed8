"""The warning for a listener other machines can reach (:mod:`nsqbox.net.exposure`)."""

from __future__ import annotations

import logging

import pytest

from nsqbox.net.exposure import exposure_warning, interface_addresses, is_exposed
from nsqbox.net.listeners import open_listeners


@pytest.mark.parametrize("host", ["127.0.0.1", "127.3.2.1", "::1", "localhost"])
def test_loopback_is_not_exposed(host: str) -> None:
    assert not is_exposed(host)
    assert exposure_warning("nsqd HTTP", host, 4151) is None


def test_a_specific_address_is_named_with_its_port() -> None:
    warning = exposure_warning("admin HTTP", "192.0.2.7", 4171)
    assert warning is not None
    assert warning.startswith("admin HTTP listens on 192.0.2.7:4171: other machines can reach")


def test_a_wildcard_names_every_interface_address() -> None:
    warning = exposure_warning("nsqd TCP", "0.0.0.0", 4150)
    assert warning is not None
    assert "0.0.0.0:4150, every interface" in warning
    for address in interface_addresses():
        assert f"{address}:4150" in warning
    v6 = exposure_warning("nsqd TCP", "::", 4150)
    assert v6 is not None
    assert "[::]:4150, every interface" in v6


def test_interface_addresses_leave_loopback_out() -> None:
    assert not {"127.0.0.1", "::1"} & set(interface_addresses())


async def test_a_loopback_listener_logs_no_warning(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="nsqbox")
    listeners = await open_listeners("127.0.0.1:0", "nsqd", "HTTP")
    for listener in listeners:
        await listener.aclose()
    assert [r for r in caplog.records if "listens on" in r.getMessage()] == []
