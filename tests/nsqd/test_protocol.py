"""Protocol V2 behaviour over real sockets: delivery, timeouts, REQ, DPUB, TOUCH, RDY, fan-out."""

from __future__ import annotations

import json
from collections import Counter

import pytest
import trio
import trio.testing

from nsqbox.nsqd.server import NSQDAddresses
from nsqbox.wire import commands
from nsqbox.wire.frames import FrameType
from tests.conftest import StartNSQD
from tests.helpers import RawConn, publish, wait_until


def channel_state(nsqd: NSQDAddresses, topic: str, channel: str) -> tuple[int, int, int]:
    """(depth, in flight, deferred) of a channel, read from the server."""
    ch = nsqd.nsqd.topics[topic].channels[channel]
    return ch.depth(), ch.in_flight_count(), ch.deferred_count()


async def test_identify_feature_negotiation(nsqd: NSQDAddresses) -> None:
    conn = await RawConn.open(nsqd.tcp)
    resp = await conn.identify(msg_timeout=5000, sample_rate=0, user_agent="test/1.0")
    assert resp == {
        "max_rdy_count": 2500,
        "version": "1.3.0",
        "max_msg_timeout": 900000,
        "msg_timeout": 5000,
        "tls_v1": False,
        "deflate": False,
        "deflate_level": 6,
        "max_deflate_level": 6,
        "snappy": False,
        "sample_rate": 0,
        "auth_required": False,
        "output_buffer_size": 16384,
        "output_buffer_timeout": 250,
    }
    assert list(resp) == list(resp.keys())  # key order is nsqd's (checked by the dict literal)
    client = next(iter(nsqd.nsqd.clients.values()))
    assert client.user_agent == "test/1.0"
    assert client.msg_timeout == 5.0
    await conn.aclose()


async def test_identify_without_negotiation_is_ok(nsqd: NSQDAddresses) -> None:
    conn = await RawConn.open(nsqd.tcp)
    assert await conn.identify(feature_negotiation=False, client_id="x") == b"OK"
    await conn.aclose()


async def test_identify_ignores_unknown_keys(nsqd: NSQDAddresses) -> None:
    conn = await RawConn.open(nsqd.tcp)
    await conn.send(commands.identify({"no_such_key": [1, 2], "hostname": "h"}))
    assert await conn.response() == b"OK"
    await conn.aclose()


async def test_heartbeats_and_nop(
    start_nsqd: StartNSQD, autojump_clock: trio.testing.MockClock
) -> None:
    nsqd = await start_nsqd()
    conn = await RawConn.open(nsqd.tcp)
    await conn.identify(heartbeat_interval=1000)
    start = trio.current_time()
    for _ in range(3):
        assert await conn.read_frame(skip_heartbeats=False) == (FrameType.RESPONSE, b"_heartbeat_")
        await conn.send(commands.nop())
    # three heartbeats, one interval apart (virtual time)
    assert trio.current_time() - start == pytest.approx(3.0, abs=0.05)
    await conn.aclose()


async def test_silent_client_is_dropped(
    start_nsqd: StartNSQD, autojump_clock: trio.testing.MockClock
) -> None:
    nsqd = await start_nsqd()
    conn = await RawConn.open(nsqd.tcp)
    await conn.identify(heartbeat_interval=1000)
    start = trio.current_time()
    await conn.expect_closed()
    # two heartbeats were sent, then the server hung up after 2 silent intervals
    assert conn.reader.frames() == [(FrameType.RESPONSE, b"_heartbeat_")] * 2
    assert trio.current_time() - start == pytest.approx(2.0, abs=0.05)
    assert not nsqd.nsqd.clients
    await conn.aclose()


async def test_default_heartbeat_interval_is_half_client_timeout(
    start_nsqd: StartNSQD, autojump_clock: trio.testing.MockClock
) -> None:
    nsqd = await start_nsqd()
    conn = await RawConn.open(nsqd.tcp)
    conn.timeout = 60
    start = trio.current_time()
    assert await conn.read_frame(skip_heartbeats=False) == (FrameType.RESPONSE, b"_heartbeat_")
    assert trio.current_time() - start == pytest.approx(30.0, abs=0.05)
    await conn.aclose()


async def test_msg_timeout_requeues_with_attempts(
    start_nsqd: StartNSQD, autojump_clock: trio.testing.MockClock
) -> None:
    nsqd = await start_nsqd()
    conn = await RawConn.open(nsqd.tcp)
    await conn.identify(msg_timeout=1000, heartbeat_interval=60000)
    await conn.sub("t", "c", rdy=1)
    await publish(nsqd.tcp, "t", b"slow")
    first = await conn.message()
    start = trio.current_time()
    second = await conn.message()  # not FINed: redelivered after msg_timeout
    assert trio.current_time() - start >= 1.0
    assert (second.id, second.body, second.attempts) == (first.id, b"slow", 2)
    ch = nsqd.nsqd.topics["t"].channels["c"]
    assert ch.timeout_count == 1
    assert ch.requeue_count == 0
    await conn.send(commands.fin(second.id))
    await conn.send(commands.nop())
    await conn.aclose()


async def test_req_with_delay_and_without(
    start_nsqd: StartNSQD, autojump_clock: trio.testing.MockClock
) -> None:
    nsqd = await start_nsqd()
    conn = await RawConn.open(nsqd.tcp)
    await conn.sub("t", "c", rdy=1)
    await publish(nsqd.tcp, "t", b"a")
    msg = await conn.message()
    await conn.send(commands.req(msg.id, 0))
    again = await conn.message()
    assert (again.id, again.attempts) == (msg.id, 2)
    start = trio.current_time()
    await conn.send(commands.req(msg.id, 5000))
    later = await conn.message()
    assert trio.current_time() - start >= 5.0
    assert later.attempts == 3
    ch = nsqd.nsqd.topics["t"].channels["c"]
    assert ch.requeue_count == 2
    await conn.send(commands.fin(later.id))
    client = next(iter(nsqd.nsqd.clients.values()))
    await conn.send(commands.cls())
    assert await conn.response() == b"CLOSE_WAIT"
    assert (client.message_count, client.requeue_count, client.finish_count) == (3, 2, 1)
    await conn.aclose()


async def test_req_timeout_is_clamped_to_max_req_timeout(
    start_nsqd: StartNSQD, autojump_clock: trio.testing.MockClock
) -> None:
    nsqd = await start_nsqd(max_req_timeout=10.0)
    conn = await RawConn.open(nsqd.tcp)
    await conn.identify(heartbeat_interval=60000)
    conn.timeout = 60
    await conn.sub("t", "c", rdy=1)
    await publish(nsqd.tcp, "t", b"a")
    msg = await conn.message()
    start = trio.current_time()
    await conn.send(commands.req(msg.id, 99_999_999))
    again = await conn.message()
    assert 10.0 <= trio.current_time() - start < 10.5
    assert again.attempts == 2
    await conn.aclose()


async def test_dpub_delivers_after_delay(
    start_nsqd: StartNSQD, autojump_clock: trio.testing.MockClock
) -> None:
    nsqd = await start_nsqd()
    conn = await RawConn.open(nsqd.tcp)
    await conn.sub("t", "c", rdy=10)
    start = trio.current_time()
    await conn.send(commands.dpub("t", 3000, b"later"))
    assert await conn.response() == b"OK"
    await publish(nsqd.tcp, "t", b"now")
    first = await conn.message()
    assert first.body == b"now"
    assert channel_state(nsqd, "t", "c")[2] == 1
    second = await conn.message()
    assert second.body == b"later"
    assert trio.current_time() - start >= 3.0
    await conn.aclose()


async def test_touch_extends_timeout(
    start_nsqd: StartNSQD, autojump_clock: trio.testing.MockClock
) -> None:
    nsqd = await start_nsqd()
    conn = await RawConn.open(nsqd.tcp)
    await conn.identify(msg_timeout=2000, heartbeat_interval=60000)
    await conn.sub("t", "c", rdy=1)
    await publish(nsqd.tcp, "t", b"a")
    msg = await conn.message()
    for _ in range(3):
        await trio.sleep(1.5)
        await conn.send(commands.touch(msg.id))
    await trio.sleep(1.0)
    # 5.5 s after delivery and never timed out: TOUCH kept it in flight
    assert channel_state(nsqd, "t", "c") == (0, 1, 0)
    assert nsqd.nsqd.topics["t"].channels["c"].timeout_count == 0
    await conn.send(commands.fin(msg.id))
    await conn.send(commands.cls())
    assert await conn.response() == b"CLOSE_WAIT"
    assert channel_state(nsqd, "t", "c") == (0, 0, 0)
    await conn.aclose()


async def test_touch_is_capped_by_max_msg_timeout(
    start_nsqd: StartNSQD, autojump_clock: trio.testing.MockClock
) -> None:
    nsqd = await start_nsqd(max_msg_timeout=3.0)
    conn = await RawConn.open(nsqd.tcp)
    await conn.identify(msg_timeout=2000, heartbeat_interval=60000)
    await conn.sub("t", "c", rdy=1)
    await publish(nsqd.tcp, "t", b"a")
    msg = await conn.message()
    start = trio.current_time()
    await trio.sleep(1.5)
    await conn.send(commands.touch(msg.id))
    again = await conn.message()
    # the TOUCH asked for 1.5 + 2 s but max-msg-timeout caps it at delivery + 3 s
    assert 3.0 <= trio.current_time() - start < 3.5
    assert again.attempts == 2
    await conn.aclose()


async def test_rdy_zero_stops_delivery(nsqd: NSQDAddresses) -> None:
    conn = await RawConn.open(nsqd.tcp)
    await conn.sub("t", "c", rdy=1)
    await publish(nsqd.tcp, "t", b"1")
    msg = await conn.message()
    await conn.send(commands.rdy(0) + commands.fin(msg.id))
    await publish(nsqd.tcp, "t", b"2")
    await publish(nsqd.tcp, "t", b"3")
    assert channel_state(nsqd, "t", "c") == (2, 0, 0)
    await conn.send(commands.rdy(5))
    assert {(await conn.message()).body, (await conn.message()).body} == {b"2", b"3"}
    await conn.aclose()


async def test_max_in_flight_never_exceeded(nsqd: NSQDAddresses) -> None:
    pub = await RawConn.open(nsqd.tcp)
    await pub.mpub("t", [b"%d" % i for i in range(100)])
    conn = await RawConn.open(nsqd.tcp)
    await conn.sub("t", "c", rdy=7)
    ch = nsqd.nsqd.topics["t"].channels["c"]
    got = []
    for _ in range(100):
        msg = await conn.message()
        assert ch.in_flight_count() <= 7
        got.append(msg.body)
        await conn.send(commands.fin(msg.id))
    assert sorted(got) == sorted(b"%d" % i for i in range(100))
    await conn.send(commands.nop())
    await conn.aclose()
    await pub.aclose()


async def test_in_flight_is_bounded_by_rdy_before_fin(nsqd: NSQDAddresses) -> None:
    pub = await RawConn.open(nsqd.tcp)
    await pub.mpub("t", [b"x"] * 20)
    conn = await RawConn.open(nsqd.tcp)
    await conn.sub("t", "c", rdy=5)
    msgs = [await conn.message() for _ in range(5)]
    await conn.send(commands.nop())
    await pub.pub("t", b"y")  # a round trip on another connection
    assert channel_state(nsqd, "t", "c") == (16, 5, 0)
    await conn.send(b"".join(commands.fin(m.id) for m in msgs))
    more = [await conn.message() for _ in range(5)]
    assert len({m.id for m in msgs + more}) == 10
    await conn.aclose()
    await pub.aclose()


async def test_fan_out_to_every_channel(nsqd: NSQDAddresses) -> None:
    pub = await RawConn.open(nsqd.tcp)
    subs = []
    for name in ("a", "b", "c"):
        conn = await RawConn.open(nsqd.tcp)
        await conn.sub("t", name, rdy=10)
        subs.append(conn)
    await pub.mpub("t", [b"m1", b"m2"])
    per_channel = []
    for conn in subs:
        msgs = [await conn.message(), await conn.message()]
        per_channel.append([(m.id, m.body) for m in msgs])
    assert per_channel[0] == per_channel[1] == per_channel[2]
    assert [b for _, b in per_channel[0]] == [b"m1", b"m2"]
    for conn in subs:
        await conn.aclose()
    await pub.aclose()


async def test_topic_buffers_until_first_channel(nsqd: NSQDAddresses) -> None:
    pub = await RawConn.open(nsqd.tcp)
    await pub.mpub("t", [b"1", b"2", b"3"])
    assert nsqd.nsqd.topics["t"].depth() == 3
    conn = await RawConn.open(nsqd.tcp)
    await conn.sub("t", "c", rdy=10)
    assert [(await conn.message()).body for _ in range(3)] == [b"1", b"2", b"3"]
    assert nsqd.nsqd.topics["t"].depth() == 0
    # a second channel only sees what comes after it
    late = await RawConn.open(nsqd.tcp)
    await late.sub("t", "late", rdy=10)
    await pub.pub("t", b"4")
    assert (await late.message()).body == b"4"
    assert (await conn.message()).body == b"4"
    for c in (conn, late, pub):
        await c.aclose()


async def test_competing_consumers_share_a_channel(nsqd: NSQDAddresses) -> None:
    a = await RawConn.open(nsqd.tcp)
    b = await RawConn.open(nsqd.tcp)
    await a.sub("t", "c", rdy=100)
    await b.sub("t", "c", rdy=100)
    pub = await RawConn.open(nsqd.tcp)
    await pub.mpub("t", [b"%d" % i for i in range(200)])
    counts = Counter[str]()
    seen = []
    for name, conn in (("a", a), ("b", b)):
        for _ in range(100):
            msg = await conn.message()
            counts[name] += 1
            seen.append(msg.body)
    # each message went to exactly one consumer; RDY 100 each means a 100/100 split
    assert sorted(seen) == sorted(b"%d" % i for i in range(200))
    assert counts == {"a": 100, "b": 100}
    for c in (a, b, pub):
        await c.aclose()


async def test_cls_then_rdy_is_ignored(nsqd: NSQDAddresses) -> None:
    conn = await RawConn.open(nsqd.tcp)
    await conn.sub("t", "c", rdy=0)
    await conn.send(commands.cls())
    assert await conn.response() == b"CLOSE_WAIT"
    await conn.send(commands.rdy(10))
    await publish(nsqd.tcp, "t", b"x")
    assert channel_state(nsqd, "t", "c") == (1, 0, 0)
    await conn.aclose()


async def test_ephemeral_channel_and_topic_are_deleted(nsqd: NSQDAddresses) -> None:
    conn = await RawConn.open(nsqd.tcp)
    await conn.sub("e#ephemeral", "c#ephemeral", rdy=1)
    await publish(nsqd.tcp, "e#ephemeral", b"x")
    await conn.message()
    assert "c#ephemeral" in nsqd.nsqd.topics["e#ephemeral"].channels
    await conn.aclose()
    await wait_until(lambda: "e#ephemeral" not in nsqd.nsqd.topics)


async def test_ephemeral_channel_on_durable_topic(nsqd: NSQDAddresses) -> None:
    keep = await RawConn.open(nsqd.tcp)
    await keep.sub("t", "durable")
    conn = await RawConn.open(nsqd.tcp)
    await conn.sub("t", "tmp#ephemeral")
    await conn.aclose()
    await wait_until(lambda: "tmp#ephemeral" not in nsqd.nsqd.topics["t"].channels)
    assert "durable" in nsqd.nsqd.topics["t"].channels
    assert "t" in nsqd.nsqd.topics
    await keep.aclose()


async def test_ephemeral_channel_drops_overflow(start_nsqd: StartNSQD) -> None:
    nsqd = await start_nsqd(mem_queue_size=2)
    conn = await RawConn.open(nsqd.tcp)
    await conn.sub("t", "c#ephemeral")
    pub = await RawConn.open(nsqd.tcp)
    await pub.mpub("t", [b"1", b"2", b"3", b"4"])
    assert channel_state(nsqd, "t", "c#ephemeral") == (2, 0, 0)
    await conn.aclose()
    await pub.aclose()


async def test_max_channel_consumers(start_nsqd: StartNSQD) -> None:
    nsqd = await start_nsqd(max_channel_consumers=1)
    a = await RawConn.open(nsqd.tcp)
    await a.sub("t", "c")
    b = await RawConn.open(nsqd.tcp)
    await b.send(commands.sub("t", "c"))
    assert await b.error() == b"E_SUB_FAILED SUB failed consumers for t:c exceeds limit of 1"
    await b.expect_closed()
    await a.aclose()
    await b.aclose()


async def test_disconnect_keeps_messages_in_flight_until_timeout(
    start_nsqd: StartNSQD, autojump_clock: trio.testing.MockClock
) -> None:
    nsqd = await start_nsqd()
    conn = await RawConn.open(nsqd.tcp)
    await conn.identify(msg_timeout=2000)
    await conn.sub("t", "c", rdy=1)
    await publish(nsqd.tcp, "t", b"x")
    await conn.message()
    await conn.aclose()
    await wait_until(lambda: not nsqd.nsqd.clients)
    assert channel_state(nsqd, "t", "c") == (0, 1, 0)
    other = await RawConn.open(nsqd.tcp)
    await other.sub("t", "c", rdy=1)
    msg = await other.message()
    assert (msg.body, msg.attempts) == (b"x", 2)
    await other.aclose()


async def test_mpub_split_across_reads(nsqd: NSQDAddresses) -> None:
    conn = await RawConn.open(nsqd.tcp)
    data = commands.mpub("t", [b"a" * 100, b"b" * 200, b"c"])
    for i in range(len(data)):
        await conn.send(data[i : i + 1])
    assert await conn.response() == b"OK"
    assert nsqd.nsqd.topics["t"].depth() == 3
    await conn.aclose()


async def test_pipelined_commands_answer_in_order(nsqd: NSQDAddresses) -> None:
    conn = await RawConn.open(nsqd.tcp)
    await conn.send(
        commands.identify({"feature_negotiation": False})
        + commands.pub("t", b"1")
        + commands.mpub("t", [b"2", b"3"])
        + commands.dpub("t", 100, b"4")
        + commands.sub("t", "c")
    )
    assert [await conn.response() for _ in range(5)] == [b"OK"] * 5
    assert nsqd.nsqd.topics["t"].message_count == 4
    await conn.aclose()


async def test_identify_reply_json_is_valid_for_sample_rate(nsqd: NSQDAddresses) -> None:
    conn = await RawConn.open(nsqd.tcp)
    resp = await conn.identify(sample_rate=50, output_buffer_size=-1)
    assert resp["sample_rate"] == 50
    assert resp["output_buffer_size"] == 1
    assert resp["output_buffer_timeout"] == 0
    assert json.dumps(resp)
    await conn.aclose()
