"""An in-process box (lookupd, two nsqds, admin) on 127.0.0.1, port 0, for the admin tests."""

from __future__ import annotations

import os
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from nsqbox.admin.control import ControlledNode, NodeControlError
from nsqbox.admin.options import AdminOptions
from nsqbox.admin.server import AdminAddresses, serve_admin
from nsqbox.net.addresses import format_address
from nsqbox.nsqd.domain.options import NSQDOptions
from nsqbox.nsqd.lookup import lookup_service
from nsqbox.nsqd.server import NSQDAddresses, serve_nsqd
from nsqbox.run.box import BoxAddresses, BoxOptions, serve_box
from nsqbox.wire.lookupd import MAGIC_V1, encode_identify, encode_register
from tests.helpers import stop_process

TIMEOUT = 10
NSQD_BIN = Path(os.environ.get("NSQ_BIN", "/work/shared/nsq/bin")) / "nsqd"


class Box:
    """A running in-process box and an HTTP client for it."""

    def __init__(self, addresses: BoxAddresses, client: httpx.AsyncClient) -> None:
        self.addresses = addresses
        self.client = client

    @property
    def lookupd_http(self) -> str:
        return format_address(self.addresses.lookupd.http)

    @property
    def admin(self) -> str:
        return f"http://{format_address(self.addresses.admin.http)}"

    def nsqd_http(self, index: int) -> str:
        http = self.addresses.nsqds[index].http
        assert http is not None
        return format_address(http)

    async def synced(self) -> None:
        """Wait until every nsqd's registrations reached the lookupd.

        A session whose 1 s IO timeout ran out on a busy machine is dialled again at the next
        PING tick (15 s, as nsqd does) when nothing new is queued: the bound allows one.
        """
        for node in self.addresses.nsqds:
            service = lookup_service(node.nsqd)
            assert service is not None
            with trio.fail_after(TIMEOUT + service.ping_interval):
                await service.wait_synced()

    async def publish(self, index: int, topic: str, *bodies: bytes) -> None:
        """Publish on node ``index`` over HTTP and wait for lookupd to know."""
        url = f"http://{self.nsqd_http(index)}/mpub"
        response = await self.client.post(url, params={"topic": topic}, content=b"\n".join(bodies))
        assert response.status_code == 200, response.text
        await self.synced()

    async def create_channel(self, index: int, topic: str, channel: str) -> None:
        """Create ``topic`` and its ``channel`` on node ``index``."""
        await self.nsqd_post(index, "/topic/create", topic=topic)
        await self.nsqd_post(index, "/channel/create", topic=topic, channel=channel)

    async def nsqd_post(self, index: int, path: str, **params: str) -> None:
        response = await self.client.post(f"http://{self.nsqd_http(index)}{path}", params=params)
        assert response.status_code == 200, response.text
        await self.synced()

    async def stats(self, index: int) -> dict[str, dict[str, object]]:
        """``{topic: topic row with channels keyed by name}`` from node ``index``'s /stats."""
        url = f"http://{self.nsqd_http(index)}/stats"
        doc = (await self.client.get(url, params={"format": "json"})).json()
        out = {}
        for topic in doc["topics"] or []:
            topic["channels"] = {c["channel_name"]: c for c in topic["channels"]}
            out[topic["topic_name"]] = topic
        return out

    async def lookupd(self, path: str, **params: str) -> object:
        url = f"http://{self.lookupd_http}{path}"
        return (await self.client.get(url, params=params)).json()


async def running_box(nursery: trio.Nursery, options: BoxOptions) -> AsyncIterator[Box]:
    """The box of ``options`` on ephemeral ports, once its nodes are registered."""
    options.use_ephemeral_ports()
    addresses: BoxAddresses = await nursery.start(serve_box, options)
    async with httpx.AsyncClient(timeout=TIMEOUT, trust_env=False) as client:
        running = Box(addresses, client)
        await running.synced()
        yield running


@pytest.fixture
async def box(nursery: trio.Nursery, tmp_path: Path) -> AsyncIterator[Box]:
    options = BoxOptions(nsqd=NSQDOptions(data_path=str(tmp_path), node_id=0), nsqd_count=2)
    async for running in running_box(nursery, options):
        yield running


async def register_ghost(
    lookupd_tcp: tuple[str, int], http_port: int, topic: str
) -> trio.SocketStream:
    """Register a node that does not exist (nothing listens on ``http_port``) with lookupd.

    The registration lasts while the returned stream stays open.
    """
    stream = await trio.open_tcp_stream(*lookupd_tcp)
    identify = encode_identify(
        broadcast_address="127.0.0.1",
        hostname="ghost",
        tcp_port=http_port,
        http_port=http_port,
        version="1.3.0",
    )
    await stream.send_all(MAGIC_V1 + identify + encode_register(topic))
    with trio.fail_after(TIMEOUT):
        received = b""
        while received.count(b"OK") < 1 or len(received) < 8:
            received += await stream.receive_some(4096)
    return stream


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@asynccontextmanager
async def real_nsqd(box: Box, data: Path) -> AsyncIterator[str]:
    """A real NSQ nsqd registered with the box's lookupd; its HTTP address once it listens.

    Skips the test when the binary is absent (``NSQ_BIN`` names its directory).
    """
    if not os.access(NSQD_BIN, os.X_OK):
        pytest.skip(f"no real nsqd to run at {NSQD_BIN} (set NSQ_BIN)")
    http_port, tcp_port = _free_port(), _free_port()
    os.mkdir(data)
    process = await trio.lowlevel.open_process(
        [
            str(NSQD_BIN),
            f"--http-address=127.0.0.1:{http_port}",
            f"--tcp-address=127.0.0.1:{tcp_port}",
            "--broadcast-address=127.0.0.1",
            f"--lookupd-tcp-address=127.0.0.1:{box.addresses.lookupd.tcp[1]}",
            f"--data-path={data}",
            "--log-level=warn",
        ]
    )
    try:
        yield f"127.0.0.1:{http_port}"
    finally:
        await stop_process(process)


class NSQDControl:
    """A NodeControl over one nsqd run by the test: stop (cancel) and start on the same ports.

    ``crash`` here is a plain stop: the box's own crash (no flush) is the box's to test.
    """

    def __init__(self, nursery: trio.Nursery, options: NSQDOptions) -> None:
        self.nursery = nursery
        self.options = options
        self.http = ""
        self._scope: trio.CancelScope | None = None
        self._done = trio.Event()

    def nodes(self) -> list[ControlledNode]:
        state = "running" if self._scope is not None else "down"
        return [ControlledNode(0, "nsqd", self.http, state)]

    async def _serve(self, *, task_status: trio.TaskStatus[trio.CancelScope]) -> None:
        done = self._done = trio.Event()
        try:
            with trio.CancelScope() as scope:
                async with trio.open_nursery() as inner:
                    bound: NSQDAddresses = await inner.start(serve_nsqd, self.options)
                    assert bound.http is not None
                    self.options.tcp_address = format_address(bound.tcp)
                    self.options.http_address = format_address(bound.http)
                    self.http = self.options.http_address
                    task_status.started(scope)
        finally:
            done.set()

    async def start(self, index: int) -> None:
        if index != 0:
            raise LookupError(index)
        if self._scope is not None:
            raise NodeControlError("nsqd 0 is running")
        self._scope = await self.nursery.start(self._serve)

    async def crash(self, index: int) -> None:
        if index != 0:
            raise LookupError(index)
        if self._scope is None:
            raise NodeControlError("nsqd 0 is not running")
        self._scope.cancel()
        await self._done.wait()
        self._scope = None

    async def restart(self, index: int) -> None:
        await self.crash(index)
        await self.start(index)


async def start_controlled(
    nursery: trio.Nursery, data: Path, **admin_options: Any
) -> tuple[str, str]:
    """An nsqd under an :class:`NSQDControl` and an admin service given that control, in
    ``nursery``: (the admin service's URL, the nsqd's HTTP address)."""
    options = NSQDOptions(
        tcp_address="127.0.0.1:0",
        http_address="127.0.0.1:0",
        broadcast_address="127.0.0.1",
        data_path=str(data),
        node_id=3,
    )
    control = NSQDControl(nursery, options)
    await control.start(0)
    admin_opts = AdminOptions(
        http_address="127.0.0.1:0", nsqd_http_addresses=[control.http], **admin_options
    )
    admin: AdminAddresses = await nursery.start(partial(serve_admin, admin_opts, control=control))
    return f"http://{format_address(admin.http)}", control.http
