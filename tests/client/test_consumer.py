"""The trio Consumer against one real nsqbox nsqd: handlers, answers, limits, closing."""

from __future__ import annotations

import pytest
import trio

from nsqbox.client import Config, Message, open_consumer, open_producer
from nsqbox.nsqd.server import NSQDAddresses
from nsqbox.wire import commands
from tests.client.helpers import TIMEOUT, Collector, RecordingProxy, tcp, wait_for
from tests.conftest import StartNSQD


def channel(nsqd: NSQDAddresses, topic: str = "t", name: str = "c") -> object:
    return nsqd.nsqd.topics[topic].channels[name]


async def publish(nsqd: NSQDAddresses, *bodies: bytes, topic: str = "t") -> None:
    async with open_producer(tcp(nsqd)) as producer:
        if len(bodies) == 1:
            await producer.pub(topic, bodies[0])
        else:
            await producer.mpub(topic, list(bodies))


async def test_consumes_and_finishes_everything(nsqd: NSQDAddresses) -> None:
    bodies = [b"m%d" % i for i in range(200)]
    await publish(nsqd, *bodies)
    handler = Collector(expected=200)
    async with open_consumer(
        "t", "c", handler, nsqd_tcp_addresses=[tcp(nsqd)], config=Config(max_in_flight=50)
    ) as consumer:
        await handler.wait()
        await wait_for(lambda: consumer.stats().finished == 200)
        stats = consumer.stats()
    assert sorted(handler.bodies) == sorted(bodies)
    assert (stats.received, stats.finished, stats.requeued, stats.connections) == (200, 200, 0, 1)
    ch = nsqd.nsqd.topics["t"].channels["c"]
    assert ch.in_flight_count() == 0
    assert ch.depth() == 0
    message = handler.messages[0]
    assert len(message.id) == 16
    assert message.attempts == 1
    assert message.timestamp > 0
    assert message.nsqd_address == tcp(nsqd)
    assert message.has_responded


async def test_handshake_and_initial_rdy_on_the_wire(
    nsqd: NSQDAddresses, nursery: trio.Nursery
) -> None:
    proxy = RecordingProxy(nsqd.tcp)
    await nursery.start(proxy.serve)
    await publish(nsqd, b"a", b"b")
    handler = Collector(expected=2)
    async with open_consumer(
        "t", "c", handler, nsqd_tcp_addresses=[proxy.address], config=Config(max_in_flight=10)
    ):
        await handler.wait()
        await wait_for(lambda: proxy.commands().count(b"FIN " + handler.messages[1].id) == 1)
    sent = proxy.commands()
    ids = [m.id for m in handler.messages]
    # IDENTIFY, SUB, RDY 1; the first message raises RDY to the full share
    assert sent[:4] == [b"IDENTIFY", b"SUB t c", b"RDY 1", b"RDY 10"]
    assert sent[4:] == [b"FIN " + ids[0], b"FIN " + ids[1], b"CLS"]


async def test_identify_settings_reach_nsqd(nsqd: NSQDAddresses) -> None:
    config = Config(
        client_id="cid",
        hostname="host.example",
        user_agent="test/1.0",
        sample_rate=0,
        msg_timeout=12.5,
        output_buffer_timeout=0.1,
    )
    async with open_consumer("t", "c", Collector(), nsqd_tcp_addresses=[tcp(nsqd)], config=config):
        await wait_for(lambda: len(nsqd.nsqd.clients) == 1)
        (client,) = nsqd.nsqd.clients.values()
        assert (client.client_id, client.hostname, client.user_agent) == (
            "cid",
            "host.example",
            "test/1.0",
        )
        assert client.msg_timeout == 12.5
        assert client.output_buffer_timeout == 0.1


async def test_sample_rate(nsqd: NSQDAddresses) -> None:
    async with open_consumer(
        "t", "c", Collector(), nsqd_tcp_addresses=[tcp(nsqd)], config=Config(sample_rate=42)
    ):
        await wait_for(lambda: len(nsqd.nsqd.clients) == 1)
        (client,) = nsqd.nsqd.clients.values()
        assert client.sample_rate == 42


async def test_rdy_capped_at_the_servers_max_rdy_count(start_nsqd: StartNSQD) -> None:
    nsqd = await start_nsqd(max_rdy_count=5)
    await publish(nsqd, *[b"x"] * 20)
    handler = Collector(expected=20)
    async with open_consumer(
        "t", "c", handler, nsqd_tcp_addresses=[tcp(nsqd)], config=Config(max_in_flight=100)
    ) as consumer:
        await handler.wait()
        state = consumer.rdy_state(tcp(nsqd))
        assert state is not None
        assert state.max_rdy_count == 5
        assert state.rdy == 5  # RDY 100 would have been a fatal E_INVALID


async def test_failed_handler_requeues_with_delay_from_attempts(
    nsqd: NSQDAddresses, nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    proxy = RecordingProxy(nsqd.tcp)
    await nursery.start(proxy.serve)
    await publish(nsqd, b"flaky")
    seen: list[tuple[int, float]] = []

    def handler(message: Message) -> None:
        seen.append((message.attempts, trio.current_time()))
        if message.attempts < 3:
            raise RuntimeError("not yet")

    config = Config(requeue_delay=2.0, max_backoff_duration=0)
    async with open_consumer("t", "c", handler, nsqd_tcp_addresses=[proxy.address], config=config):
        await wait_for(lambda: len(seen) == 3)
    assert nsqd.nsqd.topics["t"].channels["c"].requeue_count == 2
    reqs = [c for c in proxy.commands() if c.startswith(b"REQ")]
    assert [r.split()[2] for r in reqs] == [b"2000", b"4000"]  # 2s * attempts
    assert [a for a, _ in seen] == [1, 2, 3]
    assert seen[1][1] - seen[0][1] >= 2.0
    assert seen[2][1] - seen[1][1] >= 4.0


async def test_explicit_requeue_delay_and_manual_touch(
    nsqd: NSQDAddresses, nursery: trio.Nursery
) -> None:
    proxy = RecordingProxy(nsqd.tcp)
    await nursery.start(proxy.serve)
    await publish(nsqd, b"a", b"b")

    def handler(message: Message) -> None:
        message.touch()
        if message.body == b"a":
            message.requeue(delay=7.25, backoff=False)

    collector = Collector(expected=2, action=handler)
    async with open_consumer(
        "t", "c", collector, nsqd_tcp_addresses=[proxy.address], config=Config(max_in_flight=2)
    ):
        await collector.wait()
        await wait_for(lambda: b"CLS" not in proxy.commands() and len(proxy.commands()) >= 8)
    by_body = {m.body: m.id for m in collector.messages}
    sent = proxy.commands()
    assert b"TOUCH " + by_body[b"a"] in sent
    assert b"REQ " + by_body[b"a"] + b" 7250" in sent
    assert b"FIN " + by_body[b"b"] in sent
    assert b"FIN " + by_body[b"a"] not in sent


async def test_never_touches_on_the_users_behalf(
    start_nsqd: StartNSQD, autojump_clock: trio.testing.MockClock
) -> None:
    nsqd = await start_nsqd(msg_timeout=60.0)
    await publish(nsqd, b"slow")
    attempts: list[int] = []

    async def handler(message: Message) -> None:
        attempts.append(message.attempts)
        if message.attempts == 1:
            await trio.sleep(5)  # longer than msg_timeout: nsqd takes it back

    async with open_consumer(
        "t",
        "c",
        handler,
        nsqd_tcp_addresses=[tcp(nsqd)],
        config=Config(msg_timeout=1.0, max_in_flight=2, handler_concurrency=2),
    ):
        await wait_for(lambda: attempts == [1, 2])
    assert nsqd.nsqd.topics["t"].channels["c"].timeout_count == 1


async def test_message_past_max_attempts_reaches_the_give_up_callback(
    nsqd: NSQDAddresses, autojump_clock: trio.testing.MockClock
) -> None:
    await publish(nsqd, b"poison")
    given_up: list[Message] = []
    calls: list[int] = []

    def handler(message: Message) -> None:
        calls.append(message.attempts)
        raise ValueError("always fails")

    config = Config(max_attempts=3, requeue_delay=0.5, max_backoff_duration=0)
    async with open_consumer(
        "t",
        "c",
        handler,
        nsqd_tcp_addresses=[tcp(nsqd)],
        config=config,
        on_give_up=given_up.append,
    ) as consumer:
        await wait_for(lambda: given_up)
        await wait_for(lambda: consumer.stats().finished == 1)
        assert consumer.stats().given_up == 1
    assert calls == [1, 2, 3]
    assert given_up[0].attempts == 4
    assert given_up[0].body == b"poison"
    ch = nsqd.nsqd.topics["t"].channels["c"]
    assert (ch.depth(), ch.in_flight_count(), ch.deferred_count()) == (0, 0, 0)


async def test_heartbeats_are_answered_with_nop(
    nsqd: NSQDAddresses, nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    proxy = RecordingProxy(nsqd.tcp)
    await nursery.start(proxy.serve)
    async with open_consumer(
        "t",
        "c",
        Collector(),
        nsqd_tcp_addresses=[proxy.address],
        config=Config(heartbeat_interval=1.0, read_timeout=5.0),
    ) as consumer:
        await trio.sleep(10.5)  # nsqd drops a client silent for two heartbeats
        assert consumer.stats().connections == 1
        assert len(nsqd.nsqd.clients) == 1
    assert proxy.commands().count(b"NOP") == 10
    assert len(proxy.sent) == 1


async def test_non_fatal_errors_are_tolerated(nsqd: NSQDAddresses) -> None:
    await publish(nsqd, b"first")
    handler = Collector(expected=1)
    async with open_consumer(
        "t", "c", handler, nsqd_tcp_addresses=[tcp(nsqd)], config=Config(max_in_flight=5)
    ) as consumer:
        await handler.wait()
        (conn,) = consumer.connections.values()
        conn.write(commands.fin(b"0123456789abcdef"))  # nsqd: E_FIN_FAILED, not fatal
        conn.write(commands.req(b"0123456789abcdef", 0))
        conn.write(commands.touch(b"0123456789abcdef"))
        handler.expected = 2
        handler.done = trio.Event()
        await publish(nsqd, b"second")
        await handler.wait()
        assert consumer.stats().connections == 1
        assert handler.bodies == [b"first", b"second"]


async def test_is_starved_when_85_percent_is_in_flight(nsqd: NSQDAddresses) -> None:
    held: list[Message] = []

    def hold(message: Message) -> None:
        message.disable_auto_response()
        held.append(message)

    await publish(nsqd, b"0")
    async with open_consumer(
        "t", "c", hold, nsqd_tcp_addresses=[tcp(nsqd)], config=Config(max_in_flight=4)
    ) as consumer:
        await wait_for(lambda: len(held) == 1)
        # RDY went from 1 to 4 on the first message: 1 of 4 in flight is not starved
        assert not consumer.is_starved()
        await publish(nsqd, b"1", b"2")
        await wait_for(lambda: len(held) == 3)
        assert not consumer.is_starved()  # 3 < 0.85 * 4
        await publish(nsqd, b"3")
        await wait_for(lambda: len(held) == 4)
        assert consumer.is_starved()  # 4 >= 3.4
        for message in held:
            message.finish()
        assert not consumer.is_starved()


async def test_async_handler_with_concurrency(nsqd: NSQDAddresses) -> None:
    await publish(nsqd, *[b"%d" % i for i in range(20)])
    running = 0
    peak = 0
    done: list[bytes] = []

    async def handler(message: Message) -> None:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await trio.sleep(0.01)
        running -= 1
        done.append(message.body)

    async with open_consumer(
        "t",
        "c",
        handler,
        nsqd_tcp_addresses=[tcp(nsqd)],
        config=Config(max_in_flight=10, handler_concurrency=4),
    ) as consumer:
        await wait_for(lambda: len(done) == 20)
        await wait_for(lambda: consumer.stats().finished == 20)
    assert 1 < peak <= 4


async def test_async_handler_failure_requeues(
    nsqd: NSQDAddresses, autojump_clock: trio.testing.MockClock
) -> None:
    await publish(nsqd, b"x")
    attempts: list[int] = []

    async def handler(message: Message) -> None:
        attempts.append(message.attempts)
        if message.attempts == 1:
            raise RuntimeError("boom")

    async with open_consumer(
        "t",
        "c",
        handler,
        nsqd_tcp_addresses=[tcp(nsqd)],
        config=Config(requeue_delay=1.0, max_backoff_duration=0),
    ) as consumer:
        await wait_for(lambda: consumer.stats().finished == 1)
    assert attempts == [1, 2]


async def test_graceful_close_answers_in_flight_messages(
    nsqd: NSQDAddresses, nursery: trio.Nursery
) -> None:
    proxy = RecordingProxy(nsqd.tcp)
    await nursery.start(proxy.serve)
    await publish(nsqd, b"a", b"b", b"c")
    held: list[Message] = []
    release = trio.Event()

    async def handler(message: Message) -> None:
        held.append(message)
        await release.wait()

    async with trio.open_nursery() as inner:

        async def release_after_cls() -> None:
            await wait_for(lambda: proxy.sent and b"CLS" in proxy.commands())
            release.set()

        inner.start_soon(release_after_cls)
        with trio.fail_after(TIMEOUT):
            async with open_consumer(
                "t",
                "c",
                handler,
                nsqd_tcp_addresses=[proxy.address],
                config=Config(max_in_flight=3, handler_concurrency=3),
            ) as consumer:
                await wait_for(lambda: len(held) == 3)
            # leaving the block sent CLS, then waited for the three handlers
            assert consumer.stats().finished == 3
    sent = proxy.commands()
    cls = sent.index(b"CLS")
    assert sorted(sent[cls + 1 :]) == sorted(b"FIN " + m.id for m in held)
    ch = nsqd.nsqd.topics["t"].channels["c"]
    assert ch.in_flight_count() == 0


async def test_exception_in_the_block_closes_at_once(nsqd: NSQDAddresses) -> None:
    async def fail_inside() -> None:
        async with open_consumer("t", "c", Collector(), nsqd_tcp_addresses=[tcp(nsqd)]):
            await wait_for(lambda: len(nsqd.nsqd.clients) == 1)
            raise KeyError("user error")

    with trio.fail_after(TIMEOUT), pytest.raises(KeyError, match="user error"):
        await fail_inside()  # the lone exception, not an ExceptionGroup
    await wait_for(lambda: not nsqd.nsqd.clients)


async def test_argument_checks() -> None:
    with pytest.raises(ValueError, match="addresses"):
        async with open_consumer("t", "c", Collector()):
            pass  # pragma: no cover
    with pytest.raises(ValueError, match="topic"):
        async with open_consumer("bad topic", "c", Collector(), nsqd_tcp_addresses=["a:1"]):
            pass  # pragma: no cover
