"""A box (lookupd, one nsqd, admin) on 127.0.0.1, port 0, and an HTTP client for it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import trio

from nsqbox.net.addresses import format_address
from nsqbox.nsqd.domain.options import NSQDOptions
from nsqbox.run.box import BoxAddresses, BoxOptions, serve_box

GUARD = 30


@dataclass
class Box:
    """A running box's addresses as URLs, and a client."""

    addresses: BoxAddresses
    client: httpx.AsyncClient

    @property
    def nsqd(self) -> str:
        http = self.addresses.nsqds[0].http
        assert http is not None
        return f"http://{format_address(http)}"

    @property
    def lookupd(self) -> str:
        return f"http://{format_address(self.addresses.lookupd.http)}"

    @property
    def admin(self) -> str:
        return f"http://{format_address(self.addresses.admin.http)}"


@pytest.fixture
async def box(nursery: trio.Nursery, tmp_path: Path) -> AsyncIterator[Box]:
    options = BoxOptions(nsqd=NSQDOptions(data_path=str(tmp_path), node_id=0, mem_queue_size=2))
    options.use_ephemeral_ports()
    with trio.fail_after(GUARD):
        addresses: BoxAddresses = await nursery.start(serve_box, options)
    async with httpx.AsyncClient(timeout=GUARD, trust_env=False) as client:
        yield Box(addresses, client)
