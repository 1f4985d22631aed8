"""The connection's ticker: the write and read timeouts, over trio's lockstep streams.

A lockstep stream's ``send_all`` returns only once the peer has received every
byte, so a peer that never reads holds the server's writer in its send: what a
full socket does. Times are virtual (``autojump_clock``), so they are exact.
"""

from __future__ import annotations

import logging

import pytest
import trio
import trio.testing

from nsqbox.nsqd.tcp.connection import Connection
from nsqbox.wire.errors import NSQError
from nsqbox.wire.frames import FrameType, encode_frame
from nsqbox.wire.parser import Body, Command, MPUBBody


class _Session:
    """Commands do nothing; counts what the connection tells it."""

    def __init__(self) -> None:
        self.commands: list[bytes] = []
        self.ended = False

    def __repr__(self) -> str:
        return "test-session"

    def on_command(self, cmd: Command) -> bytes | None:
        self.commands.append(cmd.name)
        return None

    def on_body(self, body: Body | MPUBBody) -> bytes | None:
        raise AssertionError("no command asks for a body")

    def on_fins(self, ids: list[bytes]) -> list[NSQError]:
        self.commands.extend(b"FIN" for _ in ids)
        return []

    def on_pub(self, params: list[bytes], data: bytes) -> bytes | None:
        raise AssertionError("no PUB is sent")

    def after_turn(self) -> None:
        pass

    def drained(self) -> None:
        pass

    def reader_ended(self) -> None:
        self.ended = True

    def disconnected(self) -> None:
        pass


def _connection(stream: trio.abc.Stream, session: _Session) -> Connection:
    # heartbeats every second: the write timeout is 1 s, the read timeout 2 s
    return Connection(
        stream, session, clock=trio.current_time, client_timeout=2.0, max_output_buffer_size=0
    )


async def test_peer_that_stops_reading_is_dropped_one_interval_into_the_send(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    client, server = trio.testing.lockstep_stream_pair()
    session = _Session()
    conn = _connection(server, session)
    start = trio.current_time()
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(conn.serve, b"")
            # the first heartbeat (at 1 s) is never read: the writer is stuck in its send;
            # a NOP at 1.5 s keeps the read timeout (2 s after the last read) out of the way
            await trio.sleep(1.5)
            await client.send_all(b"NOP\n")
    assert session.commands == [b"NOP"]
    assert session.ended
    assert trio.current_time() - start == pytest.approx(2.0, abs=0.05)
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == [
        "[test-session] write timeout, closing"
    ]


async def test_peer_that_reads_but_sends_nothing_gets_heartbeats_then_a_read_timeout(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="nsqbox.nsqd")
    client, server = trio.testing.lockstep_stream_pair()
    session = _Session()
    conn = _connection(server, session)
    start = trio.current_time()
    received = bytearray()

    async def read_all() -> None:
        while data := await client.receive_some():
            received.extend(data)

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(read_all)
            await conn.serve(b"")
    heartbeat = encode_frame(FrameType.RESPONSE, b"_heartbeat_")
    assert bytes(received) == heartbeat * 2  # at 1 s and 2 s, the second flushed on the way out
    assert trio.current_time() - start == pytest.approx(2.0, abs=0.05)
    assert "PROTOCOL(V2): [test-session] read timeout, closing" in caplog.messages
