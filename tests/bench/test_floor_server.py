"""bench/floor_server.py (the I/O floor) speaks enough protocol V2 and HTTP for the benches,
and bench/side_by_side.py puts it in its table."""

from __future__ import annotations

import os
import re
import select
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from nsqbox.wire import commands
from tests.helpers import TIMEOUT, RawConn

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}

Addresses = tuple[tuple[str, int], str]


@pytest.fixture
def floor() -> Iterator[Addresses]:
    """The floor server on free ports: its TCP address and its HTTP base URL."""
    proc = subprocess.Popen(
        [sys.executable, str(BENCH / "floor_server.py"), "--tcp-address=127.0.0.1:0",
         "--http-address=127.0.0.1:0", "--mem-queue-size=100", "--data-path=/nonexistent"],
        stdout=subprocess.PIPE,
        bufsize=0,  # unbuffered: select() sees each line still to read
        env=ENV,
    )  # fmt: skip
    try:
        ports = {}
        assert proc.stdout is not None
        while len(ports) < 2:
            readable, _, _ = select.select([proc.stdout], [], [], TIMEOUT)
            assert readable, "the floor server did not start"
            line = proc.stdout.readline().decode()
            match = re.fullmatch(r"(TCP|HTTP): listening on 127\.0\.0\.1:(\d+)\n", line)
            assert match, line
            ports[match[1]] = int(match[2])
        yield ("127.0.0.1", ports["TCP"]), f"http://127.0.0.1:{ports['HTTP']}"
    finally:
        proc.kill()
        proc.wait(TIMEOUT)
        if proc.stdout is not None:
            proc.stdout.close()


async def test_pub_is_answered_ok_and_delivered_within_rdy_until_fin(floor: Addresses) -> None:
    tcp, _ = floor
    producer = await RawConn.open(tcp)
    await producer.pub("floor", b"one")  # before any channel: the topic holds it
    consumer = await RawConn.open(tcp)
    await consumer.send(commands.identify({"client_id": "floor-test"}))
    assert await consumer.response() == b"OK"
    await consumer.sub("floor", "ch", rdy=1)
    first = await consumer.message()
    assert (first.body, first.attempts, len(first.id)) == (b"one", 1, 16)
    await producer.mpub("floor", [b"two", b"three"])
    # RDY 1 and one in flight: "two" stays queued, so this PUB's OK is the next frame
    await consumer.send(commands.nop() + commands.pub("elsewhere", b"x"))
    assert await consumer.response() == b"OK"
    await consumer.send(commands.fin(first.id))
    second = await consumer.message()
    assert second.body == b"two"
    assert second.id != first.id
    await consumer.send(commands.rdy(5) + commands.fin(second.id))
    assert (await consumer.message()).body == b"three"
    await producer.aclose()
    await consumer.aclose()


async def test_an_unknown_command_closes_the_connection(floor: Addresses) -> None:
    tcp, _ = floor
    conn = await RawConn.open(tcp)
    await conn.send(b"TOUCH 0123456789abcdef\n")
    assert await conn.error() == b"E_INVALID"
    await conn.expect_closed()
    await conn.aclose()
    again = await RawConn.open(tcp)  # the server goes on
    await again.pub("floor", b"after")
    await again.aclose()


async def test_http_pub_and_mpub_on_one_keep_alive_connection(floor: Addresses) -> None:
    tcp, http = floor
    async with httpx.AsyncClient(base_url=http, trust_env=False) as client:
        assert (await client.get("/ping")).text == "OK"
        created = await client.post("/channel/create", params={"topic": "web", "channel": "ch"})
        assert created.status_code == 200
        pub = await client.post("/pub", params={"topic": "web"}, content=b"a")
        assert (pub.status_code, pub.text) == (200, "OK")
        assert pub.headers["X-Nsq-Content-Type"] == "nsq; version=1.0"
        mpub = await client.post("/mpub", params={"topic": "web"}, content=b"b\n\nc\n")
        assert (mpub.status_code, mpub.text) == (200, "OK")
        assert (await client.get("/nowhere")).status_code == 404
    consumer = await RawConn.open(tcp)
    await consumer.sub("web", "ch", rdy=10)
    assert [(await consumer.message()).body for _ in range(3)] == [b"a", b"b", b"c"]
    await consumer.aclose()


def test_side_by_side_shows_the_floor_column() -> None:
    out = subprocess.run(
        [sys.executable, str(BENCH / "side_by_side.py"), "--quick", "--rounds", "1",
         "--only", "pub", "--no-ceiling"],
        capture_output=True, text=True, env=ENV, timeout=300, check=True,
    ).stdout  # fmt: skip
    assert "| workload | nsqbox | trio floor | trio floor / nsqbox |" in out
    row = re.search(r"\| PUB one at a time, 200 B \(msgs/s\) \| [\d,]+ \| ([\d,]+) \| ", out)
    assert row, out
    assert int(row[1].replace(",", "")) > 0
