"""Shared test helpers: a raw protocol V2 connection over a real socket, waits, and a real
nsqd to compare with."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from nsqbox.testing.waiting import poll
from nsqbox.wire import commands
from nsqbox.wire.frames import MAGIC_V2, FrameReader, FrameType
from nsqbox.wire.message import DecodedMessage, decode_message

TIMEOUT = 10
#: Where the real NSQ binaries are.
NSQ_BIN = Path(os.environ.get("NSQ_BIN", "/work/shared/nsq/bin"))


class RawConn:
    """A bare protocol V2 client for byte-exact tests."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.reader = FrameReader()
        #: Seconds any single read may take (virtual seconds under an autojump clock).
        self.timeout: float = TIMEOUT

    @classmethod
    async def open(cls, address: tuple[str, int], *, magic: bytes = MAGIC_V2) -> RawConn:
        stream = await trio.open_tcp_stream(*address)
        conn = cls(stream)
        if magic:
            await stream.send_all(magic)
        return conn

    async def send(self, data: bytes) -> None:
        await self.stream.send_all(data)

    async def read_frame(self, *, skip_heartbeats: bool = True) -> tuple[int, bytes]:
        """The next frame (heartbeats skipped unless asked for)."""
        with trio.fail_after(self.timeout):
            while True:
                frame = self.reader.next_frame()
                if frame is not None:
                    if skip_heartbeats and frame == (FrameType.RESPONSE, b"_heartbeat_"):
                        continue
                    return frame
                data = await self.stream.receive_some(65536)
                if not data:
                    raise EOFError("connection closed")
                self.reader.receive_data(data)

    async def expect_closed(self) -> None:
        """The server hangs up (after any frames already read)."""
        with trio.fail_after(self.timeout):
            while True:
                try:
                    data = await self.stream.receive_some(65536)
                except trio.BrokenResourceError:
                    return
                if not data:
                    return
                self.reader.receive_data(data)

    async def response(self) -> bytes:
        frame_type, data = await self.read_frame()
        assert frame_type == FrameType.RESPONSE, (frame_type, data)
        return data

    async def error(self) -> bytes:
        frame_type, data = await self.read_frame()
        assert frame_type == FrameType.ERROR, (frame_type, data)
        return data

    async def message(self) -> DecodedMessage:
        frame_type, data = await self.read_frame()
        assert frame_type == FrameType.MESSAGE, (frame_type, data)
        return decode_message(data)

    async def identify(self, **fields: Any) -> Any:
        fields.setdefault("feature_negotiation", True)
        await self.send(commands.identify(fields))
        data = await self.response()
        return json.loads(data) if fields["feature_negotiation"] else data

    async def sub(self, topic: str, channel: str, rdy: int | None = None) -> None:
        await self.send(commands.sub(topic, channel))
        assert await self.response() == b"OK"
        if rdy is not None:
            await self.send(commands.rdy(rdy))

    async def pub(self, topic: str, body: bytes) -> None:
        await self.send(commands.pub(topic, body))
        assert await self.response() == b"OK"

    async def mpub(self, topic: str, bodies: list[bytes]) -> None:
        await self.send(commands.mpub(topic, bodies))
        assert await self.response() == b"OK"

    async def aclose(self) -> None:
        await self.stream.aclose()


async def publish(address: tuple[str, int], topic: str, *bodies: bytes) -> None:
    """Publish on a connection of its own (PUB for one body, MPUB for several)."""
    conn = await RawConn.open(address)
    if len(bodies) == 1:
        await conn.pub(topic, bodies[0])
    else:
        await conn.mpub(topic, list(bodies))
    await conn.aclose()


async def stop_process(process: trio.Process, within: float = TIMEOUT) -> None:
    """SIGTERM ``process`` and wait up to ``within`` seconds for it, then SIGKILL it."""
    process.terminate()
    with trio.move_on_after(within):
        await process.wait()
    if process.returncode is None:
        process.kill()
        await process.wait()


async def wait_until(predicate: Callable[[], object], within: float = TIMEOUT) -> None:
    """Poll ``predicate`` until it is true; TooSlowError after ``within`` seconds."""
    with trio.fail_after(within):
        for _ in iter(int, 1):
            if predicate():
                return
            await trio.sleep(0.005)


async def eventually(
    check: Callable[[], Awaitable[object]], within: float = TIMEOUT, every: float = 0.005
) -> None:
    """Await ``check()`` until it is true (an HTTP query, say); TooSlowError after ``within``.

    ``every`` spaces the checks out (for a server that should not be asked 200 times a second).
    """
    with trio.fail_after(within):
        for _ in iter(int, 1):
            if await check():
                return
            await trio.sleep(every)


def refusal_line(stderr: str) -> str:
    """The one line that says why a start was refused.

    Every other line must be an INFO line: nsqd logs its version and ID before it
    reads its data path, as real nsqd does.
    """
    lines = stderr.splitlines()
    refusals = [line for line in lines if " INFO: " not in line]
    assert len(refusals) == 1, stderr
    return refusals[0]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def real_nsqd(data_path: Path) -> Iterator[tuple[str, str]]:
    """A real nsqd (``NSQ_BIN``) on 127.0.0.1 with its defaults until the block ends: its TCP
    and HTTP addresses. The test is skipped when there is no nsqd binary to run."""
    binary = NSQ_BIN / "nsqd"
    if not os.access(binary, os.X_OK):
        pytest.skip(f"no real nsqd to run at {binary} (set NSQ_BIN)")
    tcp, web = f"127.0.0.1:{_free_port()}", f"127.0.0.1:{_free_port()}"
    process = subprocess.Popen(
        [str(binary), f"--tcp-address={tcp}", f"--http-address={web}",
         f"--data-path={data_path}", "--log-level=warn"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip

    def answers() -> tuple[bool, None]:
        try:
            ok = httpx.get(f"http://{web}/ping", timeout=1, trust_env=False).status_code == 200
        except httpx.HTTPError:
            ok = False
        return ok, None

    try:
        poll(answers, TIMEOUT, lambda _: "real nsqd did not start")
        yield tcp, web
    finally:
        process.terminate()
        process.wait(TIMEOUT)
