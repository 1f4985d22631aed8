"""One message that cannot be encoded costs itself only (issue #37, "Bounds").

A clean shutdown writes a channel's memory, in-flight and deferred messages to its disk
queue; a record whose header no longer fits (a timestamp past int64, set here by hand on
the server's own message: no public path makes one since the clock's offset is capped)
is logged and skipped, every other one written and read back after a restart. Attempts
wrap at 65536 as nsqd's uint16 does, so a message delivered that often stays encodable.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import trio

from nsqbox.nsqd.domain.nsqd import ShutdownError
from nsqbox.nsqd.server import serve_nsqd
from nsqbox.wire import commands
from tests.conftest import make_options
from tests.helpers import RawConn

GUARD = 30


async def test_an_unencodable_message_is_skipped_and_the_rest_persisted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    opts: dict[str, object] = {"data_path": str(tmp_path), "mem_queue_size": 10_000}
    bodies = [b"msg-%d" % i for i in range(5)]
    with trio.fail_after(GUARD):
        with pytest.RaisesGroup(ShutdownError) as raised:
            async with trio.open_nursery() as nursery:
                first = await nursery.start(serve_nsqd, make_options(**opts))
                sub = await RawConn.open(first.tcp)
                await sub.sub("t", "c")  # no RDY: everything stays in memory
                pub = await RawConn.open(first.tcp)
                await pub.mpub("t", bodies)
                await pub.aclose()
                await sub.aclose()
                channel = first.nsqd.topics["t"].channels["c"]
                assert len(channel.memory) == 5
                bad = channel.memory[2]
                bad.timestamp = 1 << 63  # one past int64: struct.error when encoded
                caplog.clear()
                with caplog.at_level(logging.ERROR, logger="nsqbox.nsqd"):
                    nursery.cancel_scope.cancel()
    error = raised.value.exceptions[0]
    assert error.failures == ["diskqueue(t:c): 1 unencodable"]
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == [
        f"diskqueue(t:c) skipped 1 message(s) that cannot be encoded at exit - {bad.id!r}"
    ]

    with trio.fail_after(GUARD):
        async with trio.open_nursery() as nursery:
            second = await nursery.start(serve_nsqd, make_options(**opts))
            conn = await RawConn.open(second.tcp)
            await conn.sub("t", "c", rdy=10)
            got = []
            for _ in range(4):
                msg = await conn.message()
                got.append(msg.body)
                await conn.send(commands.fin(msg.id))
            assert got == [b for i, b in enumerate(bodies) if i != 2]
            assert second.nsqd.topics["t"].channels["c"].depth() == 0
            await conn.aclose()
            nursery.cancel_scope.cancel()


async def test_attempts_wrap_at_65536_as_nsqd_uint16_does(tmp_path: Path) -> None:
    with trio.fail_after(GUARD):
        async with trio.open_nursery() as nursery:
            node = await nursery.start(serve_nsqd, make_options(data_path=str(tmp_path)))
            conn = await RawConn.open(node.tcp)
            await conn.sub("t", "c")
            pub = await RawConn.open(node.tcp)
            await pub.mpub("t", [b"one", b"two"])
            await pub.aclose()
            channel = node.nsqd.topics["t"].channels["c"]
            for msg in channel.memory:
                msg.attempts = 0xFFFF  # delivered 65535 times already
            await conn.send(commands.rdy(2))
            got = [await conn.message() for _ in range(2)]
            assert [(m.body, m.attempts) for m in got] == [(b"one", 0), (b"two", 0)]
            await conn.aclose()
            nursery.cancel_scope.cancel()
