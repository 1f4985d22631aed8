"""ansq (asyncio ``Writer``, ``Reader`` and ``NSQConnection``) against nsqbox's nsqd.

Each test drives one ``asyncio.run`` in the test's thread.

ansq's ``Reader`` subscribes every connection with ``RDY 1`` (its ``max_in_flight``
is its number of connections, and ``set_max_in_flight`` is not implemented), so the
test raises the window with the connection's public ``rdy()``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from tests.compat.loop_wait import wait_for

ansq = pytest.importorskip("ansq")

from ansq.tcp import exceptions as ansq_errors  # noqa: E402
from ansq.tcp.types import NSQCommands, NSQErrorSchema  # noqa: E402

TOPIC = "ansq_topic"
CHANNEL = "ansq_channel"
TIMEOUT = 20.0
MAX_IN_FLIGHT = 50
REQUEUE_DELAY_MS = 20


def ok(response: object) -> bool:
    return not isinstance(response, NSQErrorSchema) and getattr(response, "is_ok", False)


def test_pub_mpub_dpub_and_consume_with_requeues(threaded_nsqd, probe, workload) -> None:
    address = threaded_nsqd.tcp_address

    async def consume(reader: ansq.tcp.reader.Reader) -> None:
        async for message in reader.messages():
            if workload.handle(message.body, message.attempts):
                await message.fin()
            else:
                await message.req(REQUEUE_DELAY_MS)
            if workload.done:
                return

    async def scenario() -> None:
        reader = await ansq.create_reader(
            topic=TOPIC, channel=CHANNEL, nsqd_tcp_addresses=[address]
        )
        writer = None
        try:
            assert len(reader.connections) == 1
            for conn in reader.connections:
                await conn.rdy(MAX_IN_FLIGHT)
            consumer = asyncio.create_task(consume(reader))
            await wait_for(lambda: probe.channel_exists(TOPIC, CHANNEL), "SUB")

            writer = await ansq.create_writer(nsqd_tcp_addresses=[address])
            for body in workload.pub:
                response = await asyncio.wait_for(writer.pub(TOPIC, body), TIMEOUT)
                assert ok(response), response
            for batch in workload.mpub:
                response = await asyncio.wait_for(writer.mpub(TOPIC, *batch), TIMEOUT)
                assert ok(response), response
            # DPUBs pipelined: all sent before the first answer is awaited
            responses = await asyncio.wait_for(
                asyncio.gather(*(writer.dpub(TOPIC, body, delay) for body, delay in workload.dpub)),
                TIMEOUT,
            )
            assert all(ok(r) for r in responses), responses

            await asyncio.wait_for(consumer, TIMEOUT)
            # FINs are asynchronous: wait until the server has seen them all
            await wait_for(lambda: probe.drained(TOPIC, CHANNEL), "channel drained")
        finally:
            await asyncio.wait_for(reader.close(), TIMEOUT)
            if writer is not None:
                await asyncio.wait_for(writer.close(), TIMEOUT)

    asyncio.run(scenario())

    workload.check()
    state = probe.channel(TOPIC, CHANNEL)
    assert state is not None
    assert (state.depth, state.in_flight, state.deferred) == (0, 0, 0)
    assert state.topic_message_count == workload.total
    assert state.requeue_count == workload.expected_requeues
    assert state.timeout_count == 0


def test_error_responses_carry_nsqd_codes(start_threaded_nsqd) -> None:
    """E_BAD_TOPIC and E_BAD_MESSAGE come back as ``NSQErrorSchema`` with the code, and
    ``on_exception`` receives ansq's ``NSQBadTopic`` / ``NSQBadMessage``.

    ansq validates topic names before sending (``AssertionError``), so the bad topic
    goes through the connection's ``execute``.
    """
    box = start_threaded_nsqd(max_msg_size=1024)
    host, port = box.tcp_address.split(":")
    exceptions: list[Exception] = []
    options = ansq.ConnectionOptions(auto_reconnect=False, on_exception=exceptions.append)

    async def first_response(send: Callable[[object], object]) -> object:
        conn = await ansq.open_connection(host, int(port), connection_options=options)
        try:
            return await asyncio.wait_for(send(conn), TIMEOUT)
        finally:
            await asyncio.wait_for(conn.close(), TIMEOUT)

    async def scenario() -> tuple[object, object]:
        conn = await ansq.open_connection(host, int(port), connection_options=options)
        try:
            with pytest.raises(AssertionError):
                await conn.pub("bad!topic", b"x")
        finally:
            await asyncio.wait_for(conn.close(), TIMEOUT)
        bad_topic = await first_response(
            lambda conn: conn.execute(NSQCommands.PUB, "bad!topic", data=b"x")
        )
        too_big = await first_response(lambda conn: conn.pub("fine_topic", b"x" * 1025))
        return bad_topic, too_big

    bad_topic, too_big = asyncio.run(scenario())

    assert isinstance(bad_topic, NSQErrorSchema)
    assert bad_topic.code == "E_BAD_TOPIC"
    assert bad_topic.body == b'PUB topic name "bad!topic" is not valid'
    assert isinstance(too_big, NSQErrorSchema)
    assert too_big.code == "E_BAD_MESSAGE"
    assert too_big.body == b"PUB message too big 1025 > 1024"
    assert [type(e) for e in exceptions] == [ansq_errors.NSQBadTopic, ansq_errors.NSQBadMessage]
