"""A reader with nothing to read polls its socket a moment before it sleeps
(``connection.SPIN_FOR``): what a peer sends meanwhile is read and answered as any other
bytes, and a reader whose polls find nothing backs off."""

from __future__ import annotations

import socket

import trio

from nsqbox.nsqd.tcp.client_state import ClientState
from nsqbox.nsqd.tcp.connection import SPIN_BACKOFF_MAX
from nsqbox.wire import commands
from nsqbox.wire.frames import OK, FrameType, encode_frame
from tests.conftest import StartNSQD
from tests.helpers import RawConn

OK_FRAME = encode_frame(FrameType.RESPONSE, OK)


def _ping_pong(address: tuple[str, int], count: int) -> bytes:
    """PUB, wait for its answer, PUB again: from a thread, so it can send while we poll."""
    with socket.create_connection(address, timeout=10) as sock:
        sock.sendall(b"  V2")
        answers = b""
        for i in range(count):
            sock.sendall(commands.pub("t", b"%d" % i))
            while len(answers) < (i + 1) * len(OK_FRAME):
                data = sock.recv(4096)
                if not data:
                    return answers
                answers += data
        return answers


async def test_a_peer_in_another_thread_is_answered_as_ever(start_nsqd: StartNSQD) -> None:
    nsqd = await start_nsqd()
    count = 300
    answers = await trio.to_thread.run_sync(_ping_pong, nsqd.tcp, count)
    assert answers == OK_FRAME * count
    consumer = await RawConn.open(nsqd.tcp)
    await consumer.sub("t", "c", rdy=count)
    assert [(await consumer.message()).body for _ in range(count)] == [
        b"%d" % i for i in range(count)
    ]
    await consumer.aclose()


async def test_a_reader_whose_polls_find_nothing_backs_off(start_nsqd: StartNSQD) -> None:
    nsqd = await start_nsqd()
    conn = await RawConn.open(nsqd.tcp)
    for i in range(50):  # a peer in this very loop: it cannot send while the reader polls
        await conn.pub("t", b"%d" % i)
    (client,) = (c for c in nsqd.nsqd.clients.values() if isinstance(c, ClientState))
    reader = client.conn
    # every poll found nothing: the reader polls once per 2, 4, 8... waits, not each time
    assert 1 <= reader._spin_misses <= SPIN_BACKOFF_MAX
    assert 0 <= reader._spin_skip < 1 << reader._spin_misses
    await conn.aclose()
    assert nsqd.nsqd.topics["t"].message_count == 50
