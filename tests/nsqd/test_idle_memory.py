"""An idle connection holds no read buffer (issue 38): plain TCP reads land in one scratch
buffer per event loop, and a connection's parser lets go of what it has consumed. Each
connection kept a 256 KiB buffer before; ``bench/idle_connections.py`` measures the RSS."""

from __future__ import annotations

import tracemalloc

from nsqbox.wire.parser import NEED_DATA, Command, CommandParser
from tests.conftest import StartNSQD
from tests.helpers import RawConn

#: Connections opened while Python's allocations are traced.
COUNT = 40
#: What each may add, at most: its objects and tasks, not a read buffer.
PER_CONNECTION = 64 * 1024


async def test_idle_connections_hold_no_read_buffer(start_nsqd: StartNSQD) -> None:
    nsqd = await start_nsqd()
    warm = await RawConn.open(nsqd.tcp)  # what the first client costs once is not counted
    await warm.identify()
    await warm.pub("t", b"x" * 1000)
    conns = [warm]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(COUNT):
            conn = await RawConn.open(nsqd.tcp)
            conns.append(conn)
            await conn.identify()
            await conn.pub("t", b"x" * 1000)  # answered: the server has read and executed it
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
        for conn in conns:
            await conn.aclose()
    assert grown < COUNT * PER_CONNECTION, grown // COUNT


def test_a_parser_lets_go_of_what_it_consumed() -> None:
    parser = CommandParser()
    line = b"NOP " + b"x" * 16_000 + b"\n"
    tracemalloc.start()
    try:
        parser.receive_data(line * 12)  # 192 KB
        held = tracemalloc.get_traced_memory()[0]
        count = 0
        while (event := parser.next_event()) is not NEED_DATA:
            assert isinstance(event, Command)
            assert event.name == b"NOP"
            count += 1
        released = held - tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert count == 12
    assert released >= 12 * 16_000, released  # not kept until the next read
    parser.receive_data(b"NO")  # a partial line is kept
    assert parser.next_event() is NEED_DATA
    assert parser.buffered == 2
