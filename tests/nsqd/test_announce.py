"""A publish that creates a topic answers once nsqlookupd knows the topic, as nsqd's does.

Real nsqd's GetTopic blocks on lookupd before a new topic's first publish is
answered, so a ``/lookup`` right after ``/pub`` finds the producer. Client
harnesses rely on that. Checked with one and two lookupds, over HTTP and TCP,
in process and with ``nsqbox nsqd`` started cold as a subprocess (the first
publish may come before its lookup loop has connected).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from functools import partial
from pathlib import Path

import httpx
import pytest
import trio

from nsqbox.wire import commands
from tests.conftest import StartNSQD
from tests.helpers import TIMEOUT, RawConn
from tests.lookupd.lookupd_helpers import RunningLookupd, open_lookupd

TOPICS = 100  # per transport: 200 new topics per run


@asynccontextmanager
async def lookupds(count: int) -> AsyncIterator[list[RunningLookupd]]:
    async with AsyncExitStack() as stack:
        yield [await stack.enter_async_context(open_lookupd()) for _ in range(count)]


def tcp_addresses(running: list[RunningLookupd]) -> list[str]:
    return ["{}:{}".format(*lookupd.addresses.tcp) for lookupd in running]


async def assert_found(running: list[RunningLookupd], topic: str, tcp_port: int) -> None:
    for lookupd in running:
        response = await lookupd.http.get("/lookup", params={"topic": topic})
        assert response.status_code == 200, (topic, response.text)
        assert [p["tcp_port"] for p in response.json()["producers"]] == [tcp_port]


async def publish_and_look_up(
    running: list[RunningLookupd], tcp: tuple[str, int], http: tuple[str, int], prefix: str
) -> None:
    """New topics over HTTP then over TCP, each followed at once by /lookup on every lookupd."""
    with trio.fail_after(TIMEOUT * 6):
        async with httpx.AsyncClient(base_url="http://{}:{}".format(*http)) as client:
            for i in range(TOPICS):
                topic = f"{prefix}.http.{i}"
                response = await client.post("/pub", params={"topic": topic}, content=b"x")
                assert response.text == "OK"
                await assert_found(running, topic, tcp[1])
        conn = await RawConn.open(tcp)
        for i in range(TOPICS):
            topic = f"{prefix}.tcp.{i}"
            await conn.send(commands.pub(topic, b"x"))
            assert await conn.response() == b"OK"
            await assert_found(running, topic, tcp[1])
        await conn.aclose()


@pytest.mark.parametrize("count", [1, 2])
async def test_in_process(start_nsqd: StartNSQD, count: int) -> None:
    async with lookupds(count) as running:
        nsqd = await start_nsqd(lookupd_tcp_addresses=tcp_addresses(running))
        assert nsqd.http is not None
        await publish_and_look_up(running, nsqd.tcp, nsqd.http, "in")


@pytest.mark.parametrize("count", [1, 2])
async def test_subprocess_started_cold(tmp_path: Path, count: int) -> None:
    async with lookupds(count) as running:
        flags = [f"--lookupd-tcp-address={a}" for a in tcp_addresses(running)]
        argv = [
            sys.executable,
            "-m",
            "nsqbox",
            "nsqd",
            "--tcp-address=127.0.0.1:0",
            "--http-address=127.0.0.1:0",
            f"--data-path={tmp_path}",
            "--ready-json",
            *flags,
        ]
        async with trio.open_nursery() as nursery:
            proc: trio.Process = await nursery.start(
                partial(
                    trio.run_process,
                    argv,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,
                    check=False,
                )
            )
            try:
                assert proc.stdout is not None
                ready = b""
                with trio.fail_after(TIMEOUT * 3):
                    while not ready.endswith(b"\n"):
                        chunk = await proc.stdout.receive_some()
                        assert chunk, "nsqd exited at start"
                        ready += chunk
                # the moment the harness sees the server ready: publish at once
                found = httpx.Response(200, content=ready).json()
                tcp_host, tcp_port = found["nsqd_tcp_address"].rsplit(":", 1)
                http_host, http_port = found["nsqd_http_address"].rsplit(":", 1)
                await publish_and_look_up(
                    running, (tcp_host, int(tcp_port)), (http_host, int(http_port)), "cold"
                )
            finally:
                proc.terminate()
                with trio.fail_after(TIMEOUT * 3):
                    assert await proc.wait() == 0
