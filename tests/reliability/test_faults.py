"""Faults: clients that vanish or stall, a lookupd that goes away, a disk that fails."""

from __future__ import annotations

import socket
from collections import deque
from collections.abc import Sequence

import httpx
import pytest
import trio
import trio.testing

from nsqbox.nsqd.domain.nsqd import NSQD
from nsqbox.nsqd.lookup import PING_INTERVAL, lookup_service
from nsqbox.nsqd.server import NSQDAddresses
from nsqbox.nsqd.tcp.connection import OUTPUT_HIGH_WATER, RECEIVE_SIZE
from nsqbox.wire import commands
from nsqbox.wire.frames import HEARTBEAT, FrameType
from nsqbox.wire.message import DecodedMessage, decode_message
from tests.conftest import StartNSQD
from tests.helpers import RawConn, publish, wait_until
from tests.lookupd.lookupd_helpers import RunningLookupd, open_lookupd
from tests.reliability import figures

TIMEOUT = 20.0


def http_client(addrs: NSQDAddresses) -> httpx.AsyncClient:
    assert addrs.http is not None
    return httpx.AsyncClient(base_url=f"http://{addrs.http[0]}:{addrs.http[1]}", timeout=TIMEOUT)


# -- consumers that vanish ------------------------------------------------------------


async def message_answering_heartbeats(conn: RawConn) -> DecodedMessage:
    """The next message; heartbeats on the way are answered with NOP, as clients do."""
    while True:
        frame_type, data = await conn.read_frame(skip_heartbeats=False)
        if (frame_type, data) == (FrameType.RESPONSE, HEARTBEAT):
            await conn.send(commands.nop())
            continue
        assert frame_type == FrameType.MESSAGE, (frame_type, data)
        return decode_message(data)


async def test_consumer_gone_with_messages_in_flight_gets_them_redelivered(
    start_nsqd: StartNSQD, autojump_clock: trio.testing.MockClock
) -> None:
    """At the default --msg-timeout (60s, on a virtual clock), with attempts counted."""
    addrs = await start_nsqd()
    bodies = [b"m%d" % i for i in range(20)]
    gone = await RawConn.open(addrs.tcp)
    await gone.sub("t", "c", rdy=len(bodies))
    await publish(addrs.tcp, "t", *bodies)
    first = [await gone.message() for _ in bodies]
    assert [m.attempts for m in first] == [1] * len(bodies)
    await gone.aclose()
    left_at = trio.current_time()

    survivor = await RawConn.open(addrs.tcp)
    survivor.timeout = 120
    await survivor.sub("t", "c", rdy=len(bodies))
    again = [await message_answering_heartbeats(survivor) for _ in bodies]
    assert trio.current_time() - left_at >= 60.0  # not one came back before its timeout
    assert sorted((m.id, m.body, m.attempts) for m in again) == sorted(
        (m.id, m.body, 2) for m in first
    )
    for msg in again:
        await survivor.send(commands.fin(msg.id))
    channel = addrs.nsqd.topics["t"].channels["c"]
    await wait_until(lambda: channel.in_flight_count() == 0)
    assert channel.timeout_count == len(bodies)
    assert channel.requeue_count == 0
    await survivor.aclose()


# -- producers that vanish mid-command ----------------------------------------------------


MPUB = commands.mpub("t", [b"one", b"two", b"three", b"four"])


@pytest.mark.parametrize("how", ["close", "reset"])
async def test_producer_gone_mid_mpub_stores_nothing(start_nsqd: StartNSQD, how: str) -> None:
    """Cut the MPUB at every byte: nothing is stored unless the whole command arrived."""
    addrs = await start_nsqd()
    nsqd = addrs.nsqd
    for cut in range(len(b"MPUB t\n"), len(MPUB)):
        conn = await RawConn.open(addrs.tcp)
        await conn.send(MPUB[:cut])
        if how == "reset":
            conn.stream.socket.setsockopt(
                socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00"
            )
        await conn.aclose()
        await wait_until(lambda: not nsqd.clients)
    topic = nsqd.topics["t"]  # nsqd creates the topic before it reads the body
    assert topic.message_count == 0
    assert topic.depth() == 0
    await publish(addrs.tcp, "t", b"whole", b"batch")
    assert topic.message_count == 2
    figures.record("faults: MPUB cut points tried", len(MPUB) - len(b"MPUB t\n"))


async def test_producer_gone_mid_http_mpub_stores_nothing(start_nsqd: StartNSQD) -> None:
    addrs = await start_nsqd()
    assert addrs.http is not None
    body = b"one\ntwo\nthree\n"
    head = (
        f"POST /mpub?topic=t HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    for cut in range(len(body)):
        stream = await trio.open_tcp_stream(*addrs.http)
        await stream.send_all(head + body[:cut])
        await stream.aclose()
    async with http_client(addrs) as http:
        response = await http.post("/mpub", params={"topic": "t"}, content=body)
        assert response.status_code == 200
    assert addrs.nsqd.topics["t"].message_count == 3


# -- a consumer that stops reading ----------------------------------------------------------

#: The server side's send buffer for a connection that stops reading (fixed, so the
#: kernel's share of what the server wrote is known: Linux doubles it).
SERVER_SNDBUF = 64 * 1024
CLIENT_RCVBUF = 4096


async def open_unread_consumer(address: tuple[str, int]) -> RawConn:
    """A consumer with a tiny receive buffer, so the server's writes to it soon block."""
    sock = trio.socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, CLIENT_RCVBUF)
    await sock.connect(address)
    conn = RawConn(trio.SocketStream(sock))
    await conn.send(commands.MAGIC_V2)
    return conn


async def server_side(nsqd: NSQD, conn: RawConn) -> trio.SocketStream:
    """The server's stream for ``conn``, with its send buffer fixed at SERVER_SNDBUF."""
    port = conn.stream.socket.getsockname()[1]
    found: list[object] = []

    def registered() -> bool:
        found[:] = [c for c in nsqd.clients.values() if c.remote_address.endswith(f":{port}")]
        return bool(found)

    await wait_until(registered)
    conn_ = getattr(found[0], "conn", None)  # the client holds its Connection
    stream = getattr(conn_, "stream", None)
    assert isinstance(stream, trio.SocketStream)
    stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SERVER_SNDBUF)
    return stream


#: Most a connection that stopped reading can have in the kernel: both buffers, doubled.
KERNEL_SHARE = 2 * (SERVER_SNDBUF + CLIENT_RCVBUF)


async def consume(conn: RawConn, got: list[bytes], count: float = float("inf")) -> None:
    """Read and FIN messages into ``got`` (``count`` of them, or until cancelled)."""
    while len(got) < count:
        msg = await conn.message()
        got.append(msg.body)
        await conn.send(commands.fin(msg.id))


async def stall_one_consumer(addrs: NSQDAddresses, body_size: int, count: int) -> dict[str, int]:
    """A consumer that stops reading, a peer on its channel and one on another channel.

    Publishes ``count`` messages; returns what each got once everything is accounted
    for (the stalled one's share is what it holds in flight), after checking that
    nothing was lost, not even what the stalled consumer holds.
    """
    bodies = [b"%06d" % i + b"x" * (body_size - 6) for i in range(count)]
    stalled = await open_unread_consumer(addrs.tcp)
    await stalled.send(commands.sub("t", "c") + commands.rdy(2500))
    await server_side(addrs.nsqd, stalled)
    peer = await RawConn.open(addrs.tcp)  # same channel
    await peer.sub("t", "c", rdy=100)
    other = await RawConn.open(addrs.tcp)  # another channel
    await other.sub("t", "other", rdy=100)
    channel = addrs.nsqd.get_topic("t").get_channel("c")
    await wait_until(lambda: len(channel.clients) == 2)

    from_peer: list[bytes] = []
    from_other: list[bytes] = []
    producer = await RawConn.open(addrs.tcp)
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(consume, peer, from_peer)
            nursery.start_soon(consume, other, from_other, count)
            for i in range(0, count, 100):
                await producer.mpub("t", bodies[i : i + 100])
            # all accounted for: FINed by the peer, or held by the stalled consumer
            await wait_until(
                lambda: (
                    channel.depth() == 0
                    and len(from_peer) + channel.in_flight_count() == count
                    and len(from_other) == count
                ),
                within=TIMEOUT,
            )
            nursery.cancel_scope.cancel()
    held = channel.in_flight_count()
    assert sorted(from_other) == sorted(bodies)
    # once the stalled consumer reads again, it has every one it held, intact
    stalled.timeout = TIMEOUT
    assert await stalled.response() == b"OK"  # its SUB's
    held_bodies = [(await stalled.message()).body for _ in range(held)]
    assert sorted(from_peer + held_bodies) == sorted(bodies)
    for conn in (stalled, peer, other, producer):
        await conn.aclose()
    return {"held": held, "peer": len(from_peer), "other": len(from_other)}


async def test_stalled_consumer_does_not_stall_others(start_nsqd: StartNSQD) -> None:
    """A consumer that stops reading keeps what it holds; its peers and other channels go on."""
    addrs = await start_nsqd()
    body_size = 4096
    got = await stall_one_consumer(addrs, body_size, 3000)
    figures.record(
        "faults: stalled consumer held / its peer got / other channel got",
        f"{got['held']} ({got['held'] * body_size >> 10} KiB) / {got['peer']} / {got['other']}",
    )


async def test_stalled_consumer_takes_no_more_than_it_can_be_sent(start_nsqd: StartNSQD) -> None:
    addrs = await start_nsqd()
    body_size = 4096
    got = await stall_one_consumer(addrs, body_size, 3000)
    # the kernel's share, nsqbox's output high-water mark and a message in hand
    bound = (KERNEL_SHARE + OUTPUT_HIGH_WATER) // body_size + 2
    assert bound < 2500  # its RDY: the bound is what stops it
    assert got["held"] <= bound, (got, bound)


async def test_client_that_never_reads_is_not_buffered_without_bound(
    start_nsqd: StartNSQD,
) -> None:
    addrs = await start_nsqd()
    conn = await open_unread_consumer(addrs.tcp)
    await conn.send(commands.pub("t", b"x"))
    await server_side(addrs.nsqd, conn)
    flood = 400_000  # more OK frames than the kernel and the high-water mark hold
    async with trio.open_nursery() as nursery:
        nursery.start_soon(conn.send, commands.pub("t", b"x") * flood)
        await trio.testing.wait_all_tasks_blocked()
        processed = addrs.nsqd.topics["t"].message_count
        nursery.cancel_scope.cancel()
    await conn.aclose()
    # each PUB is answered with a 10-byte OK frame; none of them was read
    # plus the replies to one received chunk, which is executed as a whole
    pub = commands.pub("t", b"x")
    bound = (KERNEL_SHARE + OUTPUT_HIGH_WATER) // 10 + RECEIVE_SIZE // len(pub) + 1
    assert bound < flood
    assert processed <= bound, (processed, bound)


async def test_fatal_error_stops_deliveries_at_once(start_nsqd: StartNSQD) -> None:
    addrs = await start_nsqd()
    victim = await open_unread_consumer(addrs.tcp)
    await victim.send(commands.sub("t", "c") + commands.rdy(100))
    await server_side(addrs.nsqd, victim)
    channel = addrs.nsqd.get_topic("t").get_channel("c")
    await wait_until(lambda: len(channel.clients) == 1)
    # fill its socket and output buffer so its writer is stuck, then make it fail
    await publish(addrs.tcp, "t", *[b"x" * 8192] * 40)
    await wait_until(lambda: channel.in_flight_count() > 0)
    await trio.testing.wait_all_tasks_blocked()
    held = channel.in_flight_count()
    await victim.send(b"SUB t c\n")  # E_INVALID cannot SUB in current state: fatal
    await trio.testing.wait_all_tasks_blocked()
    await publish(addrs.tcp, "t", b"after")
    in_flight = channel.in_flight_count()
    await victim.aclose()
    assert in_flight == held  # "after" waits for a consumer that can take it


# -- a lookupd that goes away ---------------------------------------------------------------


async def producers(lookupd: RunningLookupd, topic: str) -> list[int]:
    response = await lookupd.http.get("/lookup", params={"topic": topic})
    if response.status_code == 404:
        return []
    return sorted(p["tcp_port"] for p in response.json()["producers"])


async def test_lookupd_gone_nsqd_serves_on_and_registers_again(
    start_nsqd: StartNSQD, autojump_clock: trio.testing.MockClock
) -> None:
    async with open_lookupd() as first:
        host, port = first.addresses.tcp
        addrs = await start_nsqd(lookupd_tcp_addresses=[f"{host}:{port}"])
        service = lookup_service(addrs.nsqd)
        assert service is not None
        consumer = await RawConn.open(addrs.tcp)
        await consumer.sub("before", "c", rdy=100)
        with trio.fail_after(TIMEOUT):
            await service.wait_synced()
        assert await producers(first, "before") == [addrs.tcp[1]]
        tcp_address = first.addresses.tcp
    await trio.testing.wait_all_tasks_blocked()  # nsqd has seen it go

    # nsqd keeps serving: publish, consume, create topics, while no lookupd answers
    await publish(addrs.tcp, "before", b"a", b"b")
    assert {(await consumer.message()).body for _ in range(2)} == {b"a", b"b"}
    await publish(addrs.tcp, "during", b"c")
    await trio.sleep(3 * PING_INTERVAL)  # a few failed reconnects
    other = await RawConn.open(addrs.tcp)
    await other.sub("during", "d", rdy=1)
    assert (await other.message()).body == b"c"

    # a lookupd comes back on the same address: everything is registered again
    async with open_lookupd(tcp_address=f"{tcp_address[0]}:{tcp_address[1]}") as second:
        with trio.fail_after(PING_INTERVAL + 1):
            await service.wait_synced()
        assert await producers(second, "before") == [addrs.tcp[1]]
        assert await producers(second, "during") == [addrs.tcp[1]]
        channels = await second.http.get("/channels", params={"topic": "during"})
        assert channels.json() == {"channels": ["d"]}
    for conn in (consumer, other):
        await conn.aclose()


# -- a disk that fails ----------------------------------------------------------------------


class FlakyDisk:
    """Backends that store records until told to fail, and again once told to work."""

    def __init__(self) -> None:
        self.failing = False
        self.refused = 0

    def backend(self, name: str, ephemeral: bool) -> FlakyBackend:
        return FlakyBackend(self)


class FlakyBackend:
    """One queue on a :class:`FlakyDisk` (a BackendQueue)."""

    def __init__(self, disk: FlakyDisk) -> None:
        self.disk = disk
        self.records: deque[bytes] = deque()

    @property
    def depth(self) -> int:
        return len(self.records)

    def put(self, data: bytes) -> None:
        if self.disk.failing:
            self.disk.refused += 1
            raise OSError(5, "Input/output error")
        self.records.append(data)

    def put_many(self, items: Sequence[bytes]) -> None:
        for data in items:
            self.put(data)

    def maybe_sync(self) -> bool:
        return False

    def pop(self) -> bytes | None:
        return self.records.popleft() if self.records else None

    def empty(self) -> None:
        self.records.clear()

    def delete(self) -> None:
        self.records.clear()

    def close(self) -> None:
        pass


async def test_failing_disk_refuses_publishes_and_recovers(start_nsqd: StartNSQD) -> None:
    addrs = await start_nsqd(mem_queue_size=2)
    disk = FlakyDisk()
    addrs.nsqd.new_backend = disk.backend  # type: ignore[method-assign]
    acknowledged: list[bytes] = []
    conn = await RawConn.open(addrs.tcp)
    for i in range(4):  # two in memory, two on disk
        await conn.pub("t", b"ok-%d" % i)
        acknowledged.append(b"ok-%d" % i)

    disk.failing = True
    async with http_client(addrs) as http:
        await conn.send(commands.pub("t", b"lost"))
        assert await conn.error() == b"E_PUB_FAILED PUB failed [Errno 5] Input/output error"
        await conn.expect_closed()
        await conn.aclose()
        ping = await http.get("/ping")
        assert (ping.status_code, ping.text) == (500, "NOK - [Errno 5] Input/output error")
        stats = (await http.get("/stats", params={"format": "json"})).json()
        assert stats["health"] == "NOK - [Errno 5] Input/output error"
        pub = await http.post("/pub", params={"topic": "t"}, content=b"lost")
        assert (pub.status_code, pub.json()) == (503, {"message": "EXITING"})
        mpub = await RawConn.open(addrs.tcp)
        await mpub.send(commands.mpub("t", [b"lost", b"lost"]))
        assert (await mpub.error()).startswith(b"E_MPUB_FAILED MPUB failed")
        await mpub.aclose()

        disk.failing = False  # the disk works again: the next write heals the node
        await publish(addrs.tcp, "t", b"ok-after")
        acknowledged.append(b"ok-after")
        ping = await http.get("/ping")
        assert (ping.status_code, ping.text) == (200, "OK")
        pub = await http.post("/pub", params={"topic": "t"}, content=b"ok-http")
        assert pub.status_code == 200
        acknowledged.append(b"ok-http")

    # every acknowledged message is delivered; what was refused is not
    consumer = await RawConn.open(addrs.tcp)
    await consumer.sub("t", "c", rdy=100)
    got = [(await consumer.message()).body for _ in acknowledged]
    assert sorted(got) == sorted(acknowledged)
    assert addrs.nsqd.topics["t"].channels["c"].depth() == 0
    assert disk.refused >= 3
    await consumer.aclose()
