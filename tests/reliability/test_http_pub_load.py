"""Load over HTTP: 1,000 keep-alive clients publish on ``/pub`` at once to one nsqd (in its
own process); every request gets ``200 OK`` and every message reaches a consumer.

Issue #16, item 7: at 1,000 connections, requests used to wait seconds to be
accepted (and some timed out). Nothing here is timed: the generous ``fail_after``
only turns a hang into a failure."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import httpx
import trio

from nsqbox.wire import commands
from tests.helpers import RawConn
from tests.reliability import figures
from tests.reliability.process import NSQDProcess
from tests.reliability.test_load import memory_backed_dir, raise_fd_limit

CLIENTS = 1000
REQUESTS = 3  # per client, one after the other on its keep-alive connection
TOPIC = "http_load"
TIMEOUT = 120.0


def body(client: int, request: int) -> bytes:
    return b"%04d-%d:" % (client, request) + b"x" * 64


class HTTPClient:
    """One keep-alive HTTP/1.1 connection that reads whole answers (Content-Length framed)."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.buf = b""

    async def post(self, target: str, data: bytes) -> tuple[bytes, bytes]:
        """(status line, body) of the answer to ``POST target``."""
        head = f"POST {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {len(data)}\r\n\r\n"
        await self.stream.send_all(head.encode() + data)
        while b"\r\n\r\n" not in self.buf:
            await self._read()
        end = self.buf.index(b"\r\n\r\n")
        lines = self.buf[:end].split(b"\r\n")
        length = next(
            int(v)
            for k, _, v in (x.partition(b":") for x in lines[1:])
            if k.lower() == b"content-length"
        )
        while len(self.buf) < end + 4 + length:
            await self._read()
        answer = self.buf[end + 4 : end + 4 + length]
        self.buf = self.buf[end + 4 + length :]
        return lines[0], answer

    async def _read(self) -> None:
        data = await self.stream.receive_some(65536)
        assert data, "the server closed a keep-alive connection"
        self.buf += data


async def test_a_thousand_http_publishers(tmp_path: Path) -> None:
    raise_fd_limit(2 * CLIENTS)
    with (
        memory_backed_dir(tmp_path) as data,
        NSQDProcess(data / "nsqd", f"--mem-queue-size={CLIENTS * REQUESTS}") as nsqd,
        trio.fail_after(TIMEOUT),
    ):
        async with httpx.AsyncClient(base_url=nsqd.http_url, timeout=TIMEOUT) as http:
            await run_load(nsqd, http)


async def run_load(nsqd: NSQDProcess, http: httpx.AsyncClient) -> None:
    # The consumer's channel exists before the first message, so it gets them all.
    assert (await http.post(f"/topic/create?topic={TOPIC}")).status_code == 200
    assert (await http.post(f"/channel/create?topic={TOPIC}&channel=c")).status_code == 200
    statuses: Counter[bytes] = Counter()
    answers: Counter[bytes] = Counter()
    connected = 0
    all_connected = trio.Event()
    clients: list[HTTPClient] = []

    async def publisher(n: int) -> None:
        nonlocal connected
        stream = await trio.open_tcp_stream(*nsqd.http)
        async with stream:
            client = HTTPClient(stream)
            clients.append(client)
            connected += 1
            if connected == CLIENTS:
                all_connected.set()
            # Everyone publishes at once, each connection still open from here on.
            await all_connected.wait()
            for r in range(REQUESTS):
                status, answer = await client.post(f"/pub?topic={TOPIC}", body(n, r))
                statuses[status] += 1
                answers[answer] += 1

    async with trio.open_nursery() as nursery:
        for n in range(CLIENTS):
            nursery.start_soon(publisher, n)
    sent = CLIENTS * REQUESTS
    assert statuses == {b"HTTP/1.1 200 OK": sent}
    assert answers == {b"OK": sent}

    consumer = await RawConn.open(nsqd.tcp)
    consumer.timeout = TIMEOUT
    received: Counter[bytes] = Counter()
    try:
        await consumer.sub(TOPIC, "c", rdy=500)
        while sum(received.values()) < sent:
            msg = await consumer.message()
            received[msg.body] += 1
            await consumer.send(commands.fin(msg.id))
    finally:
        await consumer.aclose()
    assert received == Counter(body(n, r) for n in range(CLIENTS) for r in range(REQUESTS))
    figures.record("http load: keep-alive /pub clients at once", len(clients))
    figures.record("http load: messages published over HTTP / consumed", f"{sent} / {sent}")
