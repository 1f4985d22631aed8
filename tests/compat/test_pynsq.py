"""pynsq (tornado ``nsq.Writer`` and ``nsq.Reader``) against nsqbox's nsqd.

Tornado runs on asyncio here: each test drives one ``asyncio.run`` in the test's
thread, so every tornado object lives and dies with that loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from tests.compat.loop_wait import wait_for

nsq = pytest.importorskip("nsq")

TOPIC = "pynsq_topic"
CHANNEL = "pynsq_channel"
TIMEOUT = 20.0


class PubResults:
    """Collects the (conn, data) callbacks of ``Writer.pub/mpub/dpub``."""

    def __init__(self) -> None:
        self.results: list[object] = []

    def __call__(self, conn: object, data: object) -> None:
        self.results.append(data)


async def connected_writer(address: str) -> nsq.Writer:
    writer = nsq.Writer([address], reconnect_interval=60.0)
    try:
        await wait_for(lambda: any(c.connected() for c in writer.conns.values()), "writer connect")
    except BaseException:  # pytest.fail's too: a socket left open warns in a later test
        close_writer(writer)
        raise
    return writer


def close_writer(writer: nsq.Writer) -> None:
    for conn in list(writer.conns.values()):
        conn.close()


def test_pub_mpub_dpub_and_consume_with_requeues(threaded_nsqd, probe, workload, wait) -> None:
    address = threaded_nsqd.tcp_address

    def handler(message: nsq.Message) -> bool | None:
        if workload.handle(message.body, message.attempts):
            return True
        # immediate requeue, neutral for the reader's backoff state
        message.requeue(backoff=False, delay=0)
        return None

    async def scenario() -> None:
        reader = nsq.Reader(
            topic=TOPIC,
            channel=CHANNEL,
            message_handler=handler,
            nsqd_tcp_addresses=[address],
            max_in_flight=50,
            max_tries=0,  # never give up (and auto-finish) a message
            max_backoff_duration=0.1,
        )
        writer = None
        try:
            await wait_for(lambda: probe.channel_exists(TOPIC, CHANNEL), "SUB")
            writer = await connected_writer(address)

            results = PubResults()
            for body in workload.pub:
                writer.pub(TOPIC, body, callback=results)
            for batch in workload.mpub:
                writer.mpub(TOPIC, batch, callback=results)
            for body, delay_ms in workload.dpub:
                writer.dpub(TOPIC, delay_ms, body, callback=results)
            commands = len(workload.pub) + len(workload.mpub) + len(workload.dpub)
            await wait_for(lambda: len(results.results) == commands, "publish responses")
            assert results.results == [b"OK"] * commands

            await wait_for(lambda: workload.done, "all messages finished")
            # FINs are asynchronous: wait until the server has seen them all
            await wait_for(lambda: probe.drained(TOPIC, CHANNEL), "channel drained")
        finally:
            reader.close()
            if writer is not None:
                close_writer(writer)
            await asyncio.sleep(0)  # let the IOStreams run their close callbacks

    asyncio.run(scenario())

    workload.check()
    state = probe.channel(TOPIC, CHANNEL)
    assert state is not None
    assert (state.depth, state.in_flight, state.deferred) == (0, 0, 0)
    assert state.topic_message_count == workload.total
    assert state.requeue_count == workload.expected_requeues
    assert state.timeout_count == 0


def test_backoff_on_requeue(threaded_nsqd, probe) -> None:
    """The default requeue (with backoff) drives the Reader through RDY 0 / RDY 1 and back."""
    total = 200
    bodies = [b"backoff-%04d" % i for i in range(total)]
    received: dict[bytes, int] = {}
    attempts_seen: list[int] = []

    def handler(message: nsq.Message) -> bool:
        attempts_seen.append(message.attempts)
        if message.body.endswith(b"7") and message.attempts == 1:
            return False  # requeue with backoff (delay computed from requeue_delay=0)
        received[message.body] = received.get(message.body, 0) + 1
        return True

    async def scenario() -> None:
        reader = nsq.Reader(
            topic=TOPIC,
            channel=CHANNEL,
            message_handler=handler,
            nsqd_tcp_addresses=[threaded_nsqd.tcp_address],
            max_in_flight=20,
            max_tries=0,
            max_backoff_duration=0.05,
            requeue_delay=0,
        )
        writer = None
        try:
            await wait_for(lambda: probe.channel_exists(TOPIC, CHANNEL), "SUB")
            writer = await connected_writer(threaded_nsqd.tcp_address)
            results = PubResults()
            writer.mpub(TOPIC, bodies, callback=results)
            await wait_for(lambda: results.results == [b"OK"], "MPUB response")
            await wait_for(lambda: len(received) == total, "all messages finished")
            await wait_for(lambda: probe.drained(TOPIC, CHANNEL), "channel drained")
            # once the requeues are behind it the reader leaves backoff
            await wait_for(lambda: reader.backoff_timer.get_interval() == 0, "backoff to end")
        finally:
            reader.close()
            if writer is not None:
                close_writer(writer)
            await asyncio.sleep(0)

    asyncio.run(scenario())

    assert received == dict.fromkeys(bodies, 1)
    assert attempts_seen.count(2) == total // 10
    state = probe.channel(TOPIC, CHANNEL)
    assert state is not None
    assert state.requeue_count == total // 10


def test_error_frames_carry_nsqd_codes(start_threaded_nsqd) -> None:
    """E_BAD_TOPIC and E_BAD_MESSAGE come back to the pub callback as ``nsq.Error``."""
    box = start_threaded_nsqd(max_msg_size=1024)

    async def publish_and_get_error(send: Callable[[nsq.Writer, PubResults], object]) -> object:
        writer = await connected_writer(box.tcp_address)
        try:
            results = PubResults()
            send(writer, results)
            await wait_for(lambda: bool(results.results), "error response")
            return results.results[0]
        finally:
            close_writer(writer)
            await asyncio.sleep(0)

    async def scenario() -> tuple[object, object]:
        bad_topic = await publish_and_get_error(lambda w, cb: w.pub("bad!topic", b"x", callback=cb))
        too_big = await publish_and_get_error(
            lambda w, cb: w.pub("fine_topic", b"x" * 1025, callback=cb)
        )
        return bad_topic, too_big

    bad_topic, too_big = asyncio.run(scenario())

    # pynsq hands over the error frame's payload as is: nsqd's code and text
    assert isinstance(bad_topic, nsq.Error)
    assert bad_topic.args == (b'E_BAD_TOPIC PUB topic name "bad!topic" is not valid',)
    assert isinstance(too_big, nsq.Error)
    assert too_big.args == (b"E_BAD_MESSAGE PUB message too big 1025 > 1024",)
