"""Helpers for nsqlookupd tests: a real server on 127.0.0.1 port 0 and a raw V1 client."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import trio

from nsqbox.lookupd.options import LookupdOptions
from nsqbox.lookupd.server import LookupdAddresses, serve_lookupd
from nsqbox.wire.lookupd import (
    MAGIC_V1,
    NEED_DATA,
    ResponseReader,
    encode_identify,
)

IO_TIMEOUT = 5.0


@dataclass
class RunningLookupd:
    """A lookupd under test: its addresses and an HTTP client pointed at it."""

    addresses: LookupdAddresses
    http: httpx.AsyncClient

    async def get(self, path: str, **params: str) -> Any:
        """GET ``path``; the JSON body of a 200, else an AssertionError."""
        response = await self.http.get(path, params=params)
        assert response.status_code == 200, response.text
        return response.json()


@asynccontextmanager
async def open_lookupd(**overrides: Any) -> AsyncIterator[RunningLookupd]:
    """Run a lookupd on ephemeral ports for the duration of the block."""
    options = LookupdOptions(tcp_address="127.0.0.1:0", http_address="127.0.0.1:0")
    for name, value in overrides.items():
        setattr(options, name, value)
    async with trio.open_nursery() as nursery:
        addresses: LookupdAddresses = await nursery.start(serve_lookupd, options)
        host, port = addresses.http
        async with httpx.AsyncClient(base_url=f"http://{host}:{port}", timeout=IO_TIMEOUT) as http:
            yield RunningLookupd(addresses, http)
        nursery.cancel_scope.cancel()


class V1Client:
    """A raw lookupd V1 connection, as an nsqd would hold it."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.reader = ResponseReader()

    async def send(self, data: bytes) -> None:
        with trio.fail_after(IO_TIMEOUT):
            await self.stream.send_all(data)

    async def response(self) -> bytes:
        """The next reply's data."""
        with trio.fail_after(IO_TIMEOUT):
            while (reply := self.reader.next_response()) is NEED_DATA:
                chunk = await self.stream.receive_some()
                assert chunk, "connection closed before a reply"
                self.reader.receive_data(chunk)
        assert isinstance(reply, bytes)
        return reply

    async def command(self, data: bytes) -> bytes:
        await self.send(data)
        return await self.response()

    async def identify(self, *, http_port: int = 4151, address: str = "10.0.0.1") -> bytes:
        ident = encode_identify(
            broadcast_address=address,
            hostname="host",
            tcp_port=4150,
            http_port=http_port,
            version="1.3.0",
        )
        return await self.command(ident)

    async def read_to_eof(self) -> bytes:
        """Everything the server sends until it closes the connection."""
        data = b""
        with trio.fail_after(IO_TIMEOUT):
            while chunk := await self.stream.receive_some():
                data += chunk
        return data

    async def aclose(self) -> None:
        await self.stream.aclose()


@asynccontextmanager
async def open_v1(lookupd: RunningLookupd, *, magic: bytes = MAGIC_V1) -> AsyncIterator[V1Client]:
    """A connection to ``lookupd`` that has sent ``magic``."""
    with trio.fail_after(IO_TIMEOUT):
        stream = await trio.open_tcp_stream(*lookupd.addresses.tcp)
    client = V1Client(stream)
    async with stream:
        if magic:
            await client.send(magic)
        yield client


async def settle() -> None:
    """Let the server react to what the kernel already delivered (e.g. a closed socket)."""
    await trio.testing.wait_all_tasks_blocked()
