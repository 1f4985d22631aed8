"""Time control: ``nsqbox.clock`` on a box with a manual clock (issue #24).

A DPUB deferred an hour, a REQ delay, an in-flight timeout and a consumer's max
attempts, seen by nsqbox's own consumer and by gnsq, in thread and subprocess mode;
nsqlookupd's tombstones; two boxes moving independently. No test here sleeps: the
clock jumps, and each assertion looks at what the jump delivered.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from nsqbox.broker.clock import ClockError
from nsqbox.client import Config
from nsqbox.client.blocking import BlockingConsumer
from nsqbox.client.message import Message
from nsqbox.testing import NSQBox
from nsqbox.testing.boxes import ThreadBox
from nsqbox.testing.clock import ClockUnsupported, HTTPClock
from nsqbox.testing.config import BoxAddresses, ClusterSpec
from nsqbox.testing.subprocess_box import SubprocessBox
from nsqbox.testing.trio_box import open_trio_box
from nsqbox.testing.waiting import poll
from tests.admin.conftest import register_ghost

from .conftest import TIMEOUT, box_in_mode
from .fault_clients import gevent_wait, gnsq_consumer

HOUR = 3600 * 1000
#: nsqd's default --msg-timeout.
MSG_TIMEOUT = 60.0


@pytest.fixture(scope="module", params=["thread", "subprocess"])
def manual_box(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ThreadBox | SubprocessBox]:
    """A box with a manual clock, in this process or in an ``nsqbox up`` child."""
    root = str(tmp_path_factory.mktemp(f"clock-{request.param}"))
    box = box_in_mode(request.param, ClusterSpec(clock="manual"), root)
    yield box
    box.stop()


@pytest.fixture
def box(manual_box: ThreadBox | SubprocessBox) -> Iterator[NSQBox]:
    with NSQBox(manual_box, timeout=TIMEOUT) as handle:
        yield handle


def _consumer(box: NSQBox, topic: str, **config: Any) -> BlockingConsumer:
    consumer = BlockingConsumer(box.nsqd_tcp_address, topic, "work", config=Config(**config))
    box.wait_for(topic, "work", clients=1)
    return consumer


def _one(consumer: BlockingConsumer) -> Message:
    got: list[Message] = []
    poll(lambda: (bool(got.extend(consumer.receive(0.1)) or got), got), TIMEOUT, repr)
    assert len(got) == 1
    return got[0]


def test_a_message_deferred_an_hour_comes_out_after_an_hour(box: NSQBox) -> None:
    topic = box.name("later")
    with _consumer(box, topic) as consumer:
        before = box.clock.now()
        box.publish(topic, b"in an hour", defer_ms=HOUR)
        box.wait_for(topic, "work", deferred=1)
        # the clock stands still between advances, and an advance moves it exactly as far,
        # also one that fires a deadline (whose timer bucket ends a little later)
        assert box.clock.advance(3599) == pytest.approx(before + 3599, abs=1e-3)
        state = box.wait_for(topic, "work")
        assert (state.deferred, state.in_flight) == (1, 0)  # an hour is not up yet
        assert box.clock.advance("1s") == pytest.approx(before + 3600, abs=1e-3)
        state = box.wait_for(topic, "work")  # settled: no waiting for the delivery
        assert (state.deferred, state.in_flight + state.depth) == (0, 1)
        msg = _one(consumer)
        assert (msg.body, msg.attempts) == (b"in an hour", 1)
        # the frame's timestamp is broker time (the publish's, before the jump)
        assert before - 5 <= msg.timestamp / 1e9 <= before + 3600
        msg.finish()


def test_deadlines_fire_in_order(box: NSQBox) -> None:
    topic = box.name("order")
    with _consumer(box, topic, max_in_flight=10) as consumer:
        box.publish(topic, b"one hour", defer_ms=HOUR)
        box.publish(topic, b"half an hour", defer_ms=HOUR // 2)
        box.wait_for(topic, "work", deferred=2)
        box.clock.advance("2h")
        got: list[Message] = []
        poll(lambda: (len(got.extend(consumer.receive(0.1)) or got) == 2, got), TIMEOUT, repr)
        assert [m.body for m in got] == [b"half an hour", b"one hour"]
        # delivered inside the jump, their msg-timeout starts at its end: no timeout
        assert [m.attempts for m in got] == [1, 1]
        assert box.wait_for(topic, "work").timeout_count == 0
        for msg in got:
            msg.finish()


def test_a_req_delay_ends_when_the_clock_passes_it(box: NSQBox) -> None:
    topic = box.name("retry")
    with _consumer(box, topic) as consumer:
        box.publish(topic, b"again")
        _one(consumer).requeue(90, backoff=False)
        box.wait_for(topic, "work", deferred=1, requeue_count=1)
        box.clock.advance(89)
        assert box.wait_for(topic, "work").deferred == 1
        box.clock.advance(1)
        msg = _one(consumer)
        assert (msg.body, msg.attempts) == (b"again", 2)
        msg.finish()


def test_an_unanswered_message_times_out_once(box: NSQBox) -> None:
    topic = box.name("slow")
    with _consumer(box, topic) as consumer:
        box.publish(topic, b"slow")
        first = _one(consumer)
        assert first.attempts == 1
        box.clock.advance(MSG_TIMEOUT)
        assert box.wait_for(topic, "work").timeout_count == 1
        again = _one(consumer)
        assert (again.id, again.attempts) == (first.id, 2)
        again.finish()
        assert box.wait_for(topic, "work", in_flight=0).timeout_count == 1


def test_a_consumer_gives_up_after_three_advances(box: NSQBox) -> None:
    topic = box.name("doomed")
    attempts: list[int] = []
    given_up: list[Message] = []

    def hold(message: Message) -> None:
        attempts.append(message.attempts)
        message.disable_auto_response()  # never answered: it times out

    consumer = BlockingConsumer(
        box.nsqd_tcp_address,
        topic,
        "work",
        config=Config(max_attempts=3),
        on_give_up=given_up.append,
    )
    with consumer:
        box.wait_for(topic, "work", clients=1)
        box.publish(topic, b"doomed")
        assert consumer.run(hold, max_messages=1, timeout=TIMEOUT) == 1
        for _ in range(3):
            box.clock.advance(MSG_TIMEOUT)
            assert consumer.run(hold, max_messages=1, timeout=TIMEOUT) == 1
        assert attempts == [1, 2, 3]
        assert [m.attempts for m in given_up] == [4]  # finished by the give-up
        state = box.wait_for(topic, "work", in_flight=0, depth=0)
        assert state.timeout_count == 3


def test_gnsq_sees_a_deferred_message_after_the_jump(box: NSQBox, gevent_hub: Any) -> None:
    gevent = gevent_hub
    topic = box.name("gnsq")
    got: list[tuple[bytes, int]] = []

    def handle(_consumer: Any, message: Any) -> None:
        got.append((message.body, message.attempts))
        if message.attempts == 1:
            message.enable_async()  # never answered: msg-timeout redelivers it

    with gnsq_consumer(box, topic, handle):
        box.publish(topic, b"hello gnsq", defer_ms=HOUR)
        box.wait_for(topic, "work", deferred=1, sleep=gevent.sleep)
        box.clock.advance(3599)
        assert box.wait_for(topic, "work").deferred == 1
        box.clock.advance(1)
        gevent_wait(lambda: len(got) == 1, "the delivery")
        box.clock.advance(MSG_TIMEOUT)
        gevent_wait(lambda: len(got) == 2, "the redelivery")
        assert got == [(b"hello gnsq", 1), (b"hello gnsq", 2)]
        state = box.wait_for(topic, "work", in_flight=0, sleep=gevent.sleep)
        assert state.timeout_count == 1


def test_gnsq_requeues_with_a_delay_and_gives_up_after_three_tries(
    box: NSQBox, gevent_hub: Any
) -> None:
    gevent = gevent_hub
    topic = box.name("gnsq-req")
    attempts: list[int] = []
    given_up: list[int] = []

    def handle(_consumer: Any, message: Any) -> None:
        attempts.append(message.attempts)
        message.requeue(90_000, backoff=False)  # REQ, 90 s

    def give_up(_consumer: Any, message: Any) -> None:
        given_up.append(message.attempts)

    def wait(n: int) -> None:
        gevent_wait(lambda: len(attempts) + len(given_up) == n, f"{n} deliveries")

    # give_up lives as long as the test (the signal holds a weak reference)
    with gnsq_consumer(box, topic, handle, on_giving_up=give_up, max_tries=3):
        box.publish(topic, b"retry me")
        wait(1)
        box.wait_for(topic, "work", deferred=1, requeue_count=1, sleep=gevent.sleep)
        box.clock.advance(89)
        assert box.wait_for(topic, "work").deferred == 1  # the REQ delay is not over
        box.clock.advance(1)
        wait(2)
        box.wait_for(topic, "work", deferred=1, requeue_count=2, sleep=gevent.sleep)
        box.clock.advance(90)
        wait(3)
        box.wait_for(topic, "work", deferred=1, requeue_count=3, sleep=gevent.sleep)
        box.clock.advance(90)
        wait(4)
        assert (attempts, given_up) == ([1, 2, 3], [4])
        state = box.wait_for(topic, "work", in_flight=0, deferred=0, sleep=gevent.sleep)
        assert (state.depth, state.timeout_count) == (0, 0)


def test_a_lookupd_tombstone_expires_after_45_seconds(box: NSQBox) -> None:
    topic = box.name("tomb")
    box.publish(topic, b"x")
    box.wait_for_producers(topic)
    lookupd = box.addresses.lookupd_http[0].url
    nsqd_http = box.addresses.nsqd_http[0]
    node = f"{nsqd_http.host}:{nsqd_http.port}"

    def producers() -> int:
        doc = httpx.get(f"{lookupd}/lookup", params={"topic": topic}, trust_env=False).json()
        return len(doc["producers"])

    answer = httpx.post(
        f"{lookupd}/topic/tombstone", params={"topic": topic, "node": node}, trust_env=False
    )
    assert answer.status_code == 200, answer.text
    assert producers() == 0
    box.clock.advance(44)
    assert producers() == 0
    box.clock.advance(1)
    assert producers() == 1


def test_two_boxes_keep_their_own_time(tmp_path_factory: pytest.TempPathFactory) -> None:
    boxes = [
        ThreadBox(ClusterSpec(clock="manual"), str(tmp_path_factory.mktemp(f"two{i}")))
        for i in range(2)
    ]
    try:
        with NSQBox(boxes[0], timeout=TIMEOUT) as a, NSQBox(boxes[1], timeout=TIMEOUT) as b:
            topic_a, topic_b = a.name("mine"), b.name("mine")
            with _consumer(a, topic_a), _consumer(b, topic_b):
                a.publish(topic_a, b"a", defer_ms=HOUR)
                b.publish(topic_b, b"b", defer_ms=HOUR)
                a.wait_for(topic_a, "work", deferred=1)
                b.wait_for(topic_b, "work", deferred=1)
                a.clock.advance("1h")
                assert a.wait_for(topic_a, "work").deferred == 0
                assert b.wait_for(topic_b, "work").deferred == 1  # b's hour is not up
                assert a.clock.now() - b.clock.now() >= 3600 - 5
    finally:
        for box in boxes:
            box.stop()


def test_a_real_clock_refuses_to_move(handle: NSQBox) -> None:
    assert handle.clock.manual is False
    with pytest.raises(ClockError, match="real time"):
        handle.clock.advance(1)


def test_the_clock_routes_check_the_span(box: NSQBox) -> None:
    url = box.addresses.nsqd_http[0].url + "/nsqbox/clock/advance"
    for by, message in (("", "MISSING_ARG_BY"), ("soon", "INVALID_BY"), ("-1s", "INVALID_BY")):
        answer = httpx.post(url, params={"by": by}, trust_env=False)
        assert (answer.status_code, answer.json()["message"]) == (400, message)
    doc = httpx.post(url, params={"by": "1m30s"}, trust_env=False).json()
    assert doc["mode"] == "manual"
    assert doc["offset"] >= 90


def test_a_real_nsqd_has_no_clock(not_nsqbox: Any) -> None:
    clock = HTTPClock(BoxAddresses(nsqd_tcp=(not_nsqbox,), nsqd_http=(not_nsqbox,)), mode="noproc")
    with pytest.raises(ClockUnsupported, match="nsqbox's servers"):
        clock.advance("1h")


async def test_the_trio_clock_is_awaited(nursery: trio.Nursery, tmp_path: Path) -> None:
    box = await open_trio_box(nursery, ClusterSpec(clock="manual"), str(tmp_path))
    topic = box.name("trio")
    box.nsqds[0].get_topic(topic).get_channel("work")  # a channel holds the deferral
    await box.publish(topic, b"in an hour", defer_ms=HOUR)
    await box.wait_for(topic, "work", deferred=1)
    before = box.clock.now()
    assert box.clock.manual
    assert await box.clock.advance(3599) >= before + 3599
    assert (await box.wait_for(topic, "work")).deferred == 1
    await box.clock.advance("1s")
    state = await box.wait_for(topic, "work")
    assert (state.deferred, state.depth) == (0, 1)
    assert await box.consume(topic, "work") == [b"in an hour"]
    await box.aclose()


def test_timestamps_and_latency_are_broker_time(tmp_path: Path) -> None:
    options = {"e2e_processing_latency_percentiles": [1.0], "msg_timeout": 900.0}
    spec = ClusterSpec(clock="manual", nsqd_options=options)
    box = ThreadBox(spec, str(tmp_path))
    try:
        with NSQBox(box, timeout=TIMEOUT) as handle:
            topic = handle.name("stamps")
            handle.clock.advance("1h")
            with _consumer(handle, topic) as consumer:
                handle.publish(topic, b"late")
                msg = _one(consumer)
                # the frame carries broker time: an hour ahead of this machine's clock
                assert msg.timestamp / 1e9 >= time.time() + 3600 - 60
                handle.clock.advance("10m")  # the consumer takes ten minutes to answer
                msg.finish()
                assert handle.wait_for(topic, "work", in_flight=0).timeout_count == 0
            address = handle.addresses.nsqd_http[0].url
            doc = httpx.get(
                f"{address}/stats", params={"format": "json", "topic": topic}, trust_env=False
            ).json()
            (channel,) = doc["topics"][0]["channels"]
            (p100,) = channel["e2e_processing_latency"]["percentiles"]
            assert p100["value"] >= 600 * 1e9  # ns, from publish to FIN in broker time
    finally:
        box.stop()


async def test_a_silent_producer_goes_inactive_after_five_minutes(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    box = await open_trio_box(nursery, ClusterSpec(clock="manual"), str(tmp_path))
    topic = box.name("quiet")
    await box.publish(topic, b"x")
    (lookupd,) = box.cluster.lookupd
    ghost = await register_ghost(lookupd.tcp, 9, topic)  # registers, never pings
    url = f"{box.addresses.lookupd_http[0].url}/lookup"

    async def producers() -> list[str]:
        answer = await trio.to_thread.run_sync(
            lambda: httpx.get(url, params={"topic": topic}, trust_env=False)
        )
        return sorted(p["hostname"] for p in answer.json()["producers"])

    assert len(await producers()) == 2
    await box.clock.advance("4m")
    assert len(await producers()) == 2
    await box.clock.advance("61s")  # past the ghost's inactive-producer timeout (5 min)
    assert await producers() == [box.nsqds[0].hostname]  # the box's own nsqd stays
    await ghost.aclose()
    await box.aclose()
