"""Fixtures: real nsqbox servers on 127.0.0.1, port 0."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
import trio

from nsqbox.nsqd.domain.options import NSQDOptions
from nsqbox.nsqd.server import NSQDAddresses, serve_nsqd

# an async fixture that only autouse would bring in is a collection error (see the module)
from tests.fixture_guard import pytest_collection_modifyitems as pytest_collection_modifyitems


def make_options(**overrides: object) -> NSQDOptions:
    """Options for a throwaway server: loopback, port 0 (HTTPS too: it listens once given a
    certificate, and nsqd's default port would be shared by every test and worker).
    """
    opts = NSQDOptions(
        tcp_address="127.0.0.1:0",
        http_address="127.0.0.1:0",
        https_address="127.0.0.1:0",
        node_id=1,
    )
    for key, value in overrides.items():
        setattr(opts, key, value)
    return opts


StartNSQD = Callable[..., Awaitable[NSQDAddresses]]


@pytest.fixture
async def start_nsqd(nursery: trio.Nursery, tmp_path: object) -> StartNSQD:
    """Start nsqd servers in the test's nursery; ``await start_nsqd(msg_timeout=1.0)``."""

    async def start(**overrides: object) -> NSQDAddresses:
        overrides.setdefault("data_path", str(tmp_path))
        addrs: NSQDAddresses = await nursery.start(serve_nsqd, make_options(**overrides))
        return addrs

    return start


@pytest.fixture
async def nsqd(start_nsqd: StartNSQD) -> NSQDAddresses:
    """One nsqd with default options."""
    return await start_nsqd()
