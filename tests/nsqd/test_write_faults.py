"""Latency and stalls (nsqbox.nsqd.domain.write_faults) on a real nsqd, over real sockets.

The clock is trio's autojump clock: the server and the test share it, so a delay of
30 s passes at once and "nothing arrived for 5 s" is exact, never a race with a
loaded machine.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack

import pytest
import trio
import trio.testing

from nsqbox.nsqd.server import NSQDAddresses
from nsqbox.wire import commands
from tests.conftest import StartNSQD
from tests.helpers import RawConn, publish


@pytest.fixture
async def conns() -> AsyncIterator[AsyncExitStack]:
    """Closes every connection a test opens, once the test is over.

    Each test names it: pytest-trio runs only the async fixtures that a test's
    arguments reach, so an autouse async fixture would silently never run.
    """
    async with AsyncExitStack() as stack:
        yield stack


async def _open(conns: AsyncExitStack, nsqd: NSQDAddresses) -> RawConn:
    conn = await RawConn.open(nsqd.tcp)
    conns.push_async_callback(conn.aclose)
    conn.timeout = 600.0  # virtual seconds: longer than any delay here
    return conn


async def _consumer(conns: AsyncExitStack, nsqd: NSQDAddresses, **identify: object) -> RawConn:
    conn = await _open(conns, nsqd)
    await conn.identify(**identify)
    await conn.sub("orders", "work", rdy=10)
    return conn


async def _nothing_for(conn: RawConn, seconds: float) -> None:
    """No frame at all (not even a heartbeat) arrives for ``seconds``."""
    with trio.move_on_after(seconds) as waited:
        frame = await conn.read_frame(skip_heartbeats=False)
        raise AssertionError(f"a frame arrived: {frame}")
    assert waited.cancelled_caught


async def test_latency_delays_every_write_and_ends_after_count(
    nsqd: NSQDAddresses, conns: AsyncExitStack, autojump_clock: trio.testing.MockClock
) -> None:
    conn = await _consumer(conns, nsqd)
    fault = nsqd.nsqd.faults.latency(5.0, topic="orders", count=2)  # consumers only
    sent = trio.current_time()
    await publish(nsqd.tcp, "orders", b"a")
    assert (await conn.message()).body == b"a"
    assert trio.current_time() - sent >= 5.0  # held by the gate, delivered all the same
    await publish(nsqd.tcp, "orders", b"b")
    assert (await conn.message()).body == b"b"
    assert nsqd.nsqd.faults.active() == []  # two writes: the count ran out
    assert not nsqd.nsqd.faults.lift(fault.id)
    sent = trio.current_time()
    await publish(nsqd.tcp, "orders", b"c")
    assert (await conn.message()).body == b"c"
    assert trio.current_time() - sent < 5.0
    # no latency or stall left: no connection has a gate, the writer checks one attribute
    assert {c.conn.gate for c in nsqd.nsqd.clients.values()} == {None}


async def test_latency_with_jitter_stays_within_its_bounds(
    nsqd: NSQDAddresses, conns: AsyncExitStack, autojump_clock: trio.testing.MockClock
) -> None:
    conn = await _consumer(conns, nsqd)
    with pytest.raises(ValueError, match="jitter between 0 and delay"):
        nsqd.nsqd.faults.latency(1.0, jitter=2.0)
    nsqd.nsqd.faults.latency(4.0, jitter=2.0, topic="orders")
    for body in (b"a", b"b", b"c"):
        sent = trio.current_time()
        await publish(nsqd.tcp, "orders", body)
        assert (await conn.message()).body == body
        assert 2.0 <= trio.current_time() - sent <= 6.0 + 1.0


async def test_latency_scoped_to_a_channel_leaves_the_others_alone(
    nsqd: NSQDAddresses, conns: AsyncExitStack, autojump_clock: trio.testing.MockClock
) -> None:
    slow = await _consumer(conns, nsqd)
    fast = await _open(conns, nsqd)
    await fast.sub("orders", "audit", rdy=10)
    nsqd.nsqd.faults.latency(20.0, channel="work")
    sent = trio.current_time()
    await publish(nsqd.tcp, "orders", b"x")
    assert (await fast.message()).body == b"x"
    assert trio.current_time() - sent < 20.0
    assert (await slow.message()).body == b"x"
    assert trio.current_time() - sent >= 20.0


async def test_a_stall_holds_everything_until_lifted(
    nsqd: NSQDAddresses, conns: AsyncExitStack, autojump_clock: trio.testing.MockClock
) -> None:
    conn = await _consumer(conns, nsqd, client_id="victim", heartbeat_interval=10_000)
    other = await _open(conns, nsqd)
    await other.identify(client_id="bystander")
    await other.sub("orders", "audit", rdy=10)
    fault = nsqd.nsqd.faults.stall(client_id="victim")
    await publish(nsqd.tcp, "orders", b"a", b"b")
    assert [(await other.message()).body for _ in range(2)] == [b"a", b"b"]
    await _nothing_for(conn, 15.0)  # neither the messages nor the 10 s heartbeat
    await conn.send(commands.nop())  # its reader still reads: nsqd's read timeout waits
    assert nsqd.nsqd.faults.lift(fault.id)
    assert [(await conn.message()).body for _ in range(2)] == [b"a", b"b"]


async def test_a_stalled_client_is_cut_off_by_the_read_timeout(
    nsqd: NSQDAddresses, conns: AsyncExitStack, autojump_clock: trio.testing.MockClock
) -> None:
    conn = await _consumer(conns, nsqd, heartbeat_interval=1000)
    nsqd.nsqd.faults.stall(topic="orders", duration=600)
    # no heartbeat reaches it, so it sends no NOP: nsqd's read timeout (2 heartbeats)
    # closes the connection, and the held write is abandoned with it
    await conn.expect_closed()
    await trio.testing.wait_all_tasks_blocked()
    assert nsqd.nsqd.clients == {}
    (listed,) = nsqd.nsqd.faults.active()
    assert (listed.kind, listed.topic, listed.until is not None) == ("stall", "orders", True)


async def test_a_stall_with_a_count_holds_only_the_first_connections(
    start_nsqd: StartNSQD, conns: AsyncExitStack, autojump_clock: trio.testing.MockClock
) -> None:
    nsqd = await start_nsqd()
    fault = nsqd.nsqd.faults.stall(user_agent="app/", count=1)
    first = await _open(conns, nsqd)
    await first.send(commands.identify({"user_agent": "app/1", "feature_negotiation": True}))
    await _nothing_for(first, 5.0)  # caught: even its IDENTIFY answer waits
    second = await _consumer(conns, nsqd, user_agent="app/2")  # the count is spent: it goes free
    await publish(nsqd.tcp, "orders", b"x")
    assert (await second.message()).body == b"x"
    assert fault.remaining == 0
    nsqd.nsqd.faults.lift_all()
    assert b"max_rdy_count" in await first.response()
