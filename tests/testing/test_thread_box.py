"""The handle on an in-process (thread) box, used directly: publish, wait, capture, consume.

Servers run on 127.0.0.1 port 0 in a thread (see conftest's ``thread_box``); every wait
is bounded by the handle's timeout.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator

import pytest
import trio

from nsqbox.nsqd.domain.options import NSQDOptions
from nsqbox.testing import Cleanup, NSQBox, ThreadBox, ThreadedNSQD, WaitTimeout
from nsqbox.testing.config import ClusterSpec
from nsqbox.testing.portal import LoopThread
from nsqbox.testing.remote import http_json

from .conftest import TIMEOUT

# -- publish, stats, wait_for ----------------------------------------------------------


def test_publish_then_wait_for_and_stats(handle: NSQBox) -> None:
    handle.publish("orders", [b"a", "b"])
    handle.publish("orders", b"c", defer_ms=60_000)
    state = handle.wait_for("orders", depth=3, message_count=3)
    assert state.name == "orders"
    topic = handle.stats().topic("orders")
    assert topic is not None
    assert (topic.depth, topic.message_count, dict(topic.channels)) == (3, 3, {})


def test_wait_for_says_what_it_saw(handle: NSQBox) -> None:
    handle.publish("orders", b"one")
    with pytest.raises(WaitTimeout) as info:
        handle.wait_for("orders", depth=3, timeout=0.05)
    assert str(info.value) == (
        "nsqbox: timed out after 0.05s waiting for topic 'orders' to have depth=3; "
        "last seen: depth=1, message_count=1, channels=[]"
    )
    with pytest.raises(WaitTimeout, match=r"no topic 'nope' \(topics: \['orders'\]\)"):
        handle.wait_for("nope", "c", timeout=0.01)


def test_wait_until(handle: NSQBox) -> None:
    handle.publish("a", b"x")
    stats = handle.wait_until(lambda s: "a" in s.topics, "topic a")
    assert set(stats.topics) == {"a"}
    with pytest.raises(WaitTimeout, match=r"waiting for two topics; topics: a\(depth=1"):
        handle.wait_until(lambda s: len(s.topics) == 2, "two topics", timeout=0.01)


def test_sleep_lets_a_cooperative_loop_run(handle: NSQBox) -> None:
    """``sleep=`` runs between polls (gevent.sleep would run the app's greenlets there)."""
    naps: list[float] = []

    def sleep(seconds: float) -> None:
        naps.append(seconds)
        if len(naps) == 1:
            handle.publish("coop", b"published while the test waited")

    handle.wait_for("coop", depth=1, sleep=sleep)
    assert len(naps) == 1


@pytest.mark.parametrize(
    ("bodies", "topic", "message"),
    [
        ([], "t", "nothing to publish"),
        ([b"a", b""], "t", "empty message bodies"),
        ([b"a"], "bad name!", "invalid topic name 'bad name!'"),
        ([b"x" * (1024 * 1024 + 1)], "t", "message too big"),
    ],
    ids=["none", "empty", "name", "size"],
)
def test_publish_refuses_what_nsqd_would(
    handle: NSQBox, bodies: list[bytes], topic: str, message: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        handle.publish(topic, bodies)
    with pytest.raises(ValueError, match=re.escape("defer_ms must be in [0, 3600000]")):
        handle.publish("t", b"x", defer_ms=3600 * 1000 + 1)


def test_publish_registers_the_topic_with_lookupd_before_returning(handle: NSQBox) -> None:
    handle.publish("discover-me", b"x")
    assert handle.lookupd_http_address is not None
    found = http_json(handle.lookupd_http_address, "/lookup", {"topic": "discover-me"})
    assert [p["tcp_port"] for p in found["producers"]] == [handle.nsqd_tcp_address.port]


# -- consume ---------------------------------------------------------------------------


def test_consume_takes_and_finishes_messages(handle: NSQBox) -> None:
    handle.publish("jobs", [b"1", b"2", b"3"])
    assert handle.consume("jobs", "worker", 2) == [b"1", b"2"]
    handle.wait_for("jobs", "worker", depth=1, in_flight=0, clients=0)


def test_consume_takes_no_more_than_asked(handle: NSQBox) -> None:
    """nsqd refills a RDY slot at each FIN; nothing beyond ``count`` may be left in flight."""
    handle.publish("many", [b"%d" % i for i in range(100)])
    assert handle.consume("many", "c", 10) == [b"%d" % i for i in range(10)]
    channel = handle.stats().channel("many", "c")
    assert channel is not None
    assert (channel.depth, channel.in_flight) == (90, 0)


def test_consume_timeout_lists_what_arrived(handle: NSQBox) -> None:
    handle.publish("jobs", b"only")
    with pytest.raises(WaitTimeout) as info:
        handle.consume("jobs", "worker", 2, timeout=0.1)
    assert str(info.value) == (
        "nsqbox: timed out after 0.1s consuming 2 message(s) from channel 'worker' of topic "
        "'jobs'; got 1: [b'only']"
    )


# -- capture -----------------------------------------------------------------------------


def test_capture_taps_without_taking(handle: NSQBox) -> None:
    """A topic with no channel keeps its messages for the app's channel created later."""
    with handle.capture("orders") as cap:
        assert cap.mode == "tap"
        handle.publish("orders", [b"one", b"two"])
        handle.publish("orders", b"later", defer_ms=1500)
    assert cap.bodies == [b"one", b"two", b"later"]
    assert [m.defer_ms for m in cap.messages] == [0, 0, 1500]
    assert len({m.id for m in cap.messages}) == 3
    assert len(cap) == 3
    assert list(cap) == cap.bodies
    # the messages are all still there for the app (the DPUB waits at the topic too)
    handle.wait_for("orders", depth=3)
    assert handle.consume("orders", "app", 2) == [b"one", b"two"]


def test_capture_sees_only_its_block(handle: NSQBox) -> None:
    handle.publish("orders", b"before")
    with handle.capture("orders") as cap, handle.capture("other") as other:
        handle.publish("orders", b"during")
        assert cap.bodies == [b"during"]
    handle.publish("orders", b"after")
    assert cap.bodies == [b"during"]
    assert other.bodies == []
    assert repr(cap) == "Capture('orders', done, 1 message(s))"


def test_capture_follows_a_topic_created_and_recreated(
    handle: NSQBox, thread_box: ThreadBox
) -> None:
    with handle.capture("fresh") as cap:
        handle.publish("fresh", b"1")
        thread_box.call(lambda: thread_box.ops.nsqds[0].delete_existing_topic("fresh"))
        handle.publish("fresh", b"2")
    assert cap.bodies == [b"1", b"2"]
    topic = thread_box.call(lambda: thread_box.ops.nsqds[0].topics["fresh"])
    assert thread_box.call(lambda: list(topic.taps)) == []


def test_capture_wait_for(handle: NSQBox) -> None:
    with handle.capture("orders") as cap:
        handle.publish("orders", b"a")
        assert cap.wait_for(1) == [b"a"]
        with pytest.raises(WaitTimeout) as info:
            cap.wait_for(2, timeout=0.02)
    assert str(info.value) == (
        "nsqbox: timed out after 0.02s waiting for 2 message(s) published to topic 'orders'; "
        "captured 1: [b'a']"
    )


def test_capture_is_entered_once(handle: NSQBox) -> None:
    cap = handle.capture("t")
    assert cap.bodies == []
    with pytest.raises(RuntimeError, match="has not started"):
        _ = cap.mode
    with cap, pytest.raises(RuntimeError, match="entered once"), cap:
        pass


# -- names -------------------------------------------------------------------------------


def test_names_are_stable_in_a_test_and_unique_across_tests(thread_box: ThreadBox) -> None:
    with NSQBox(thread_box) as one, NSQBox(thread_box) as two:
        assert one.name("orders") == one.name("orders")
        assert one.name("orders") != two.name("orders")
        assert one.name("orders").startswith("orders.")
        assert one.name("c#ephemeral").endswith("#ephemeral")
        with pytest.raises(ValueError, match="not a valid topic or channel name"):
            one.name("x" * 64)


# -- cleanup -----------------------------------------------------------------------------


def test_cleanup_delete_forgets_everything(thread_box: ThreadBox) -> None:
    with NSQBox(thread_box) as first:
        first.publish("orders", [b"a", b"b"])
        first.consume("orders", "billing", 1)
        first.wait_for("orders", "billing", depth=1)
        assert first.lookupd_http_address is not None
        assert http_json(first.lookupd_http_address, "/topics")["topics"] == ["orders"]
    with NSQBox(thread_box) as second:
        assert second.stats().topics == {}
        assert second.lookupd_http_address is not None
        assert http_json(second.lookupd_http_address, "/topics")["topics"] == []
        assert http_json(second.lookupd_http_address, "/channels", {"topic": "orders"}) == {
            "channels": []
        }


@pytest.mark.parametrize("cleanup", [Cleanup.EMPTY, Cleanup.NONE], ids=["empty", "none"])
def test_cleanup_empty_and_none(thread_box: ThreadBox, cleanup: Cleanup) -> None:
    with NSQBox(thread_box, cleanup=cleanup) as first:
        first.publish("orders", [b"a", b"b"])
        first.consume("orders", "billing", 1)
        first.publish("orders", b"c")
    with NSQBox(thread_box) as second:  # cleanup=delete: nothing left for the next test
        channel = second.stats().channel("orders", "billing")
        assert channel is not None
        assert channel.depth == (0 if cleanup is Cleanup.EMPTY else 2)


# -- from async code ---------------------------------------------------------------------


async def test_blocking_waits_refuse_to_block_a_trio_loop(handle: NSQBox) -> None:
    with pytest.raises(RuntimeError, match=r"wait_for\(\) blocks, and this thread runs trio"):
        handle.wait_for("t")
    with pytest.raises(RuntimeError, match=re.escape("use 'await nsqbox.aconsume")):
        handle.consume("t", "c")
    with handle.capture("t") as cap, pytest.raises(RuntimeError, match=r"capture\.await_for"):
        cap.wait_for(1)


async def test_async_twins_under_trio(handle: NSQBox) -> None:
    with trio.fail_after(TIMEOUT):
        with handle.capture("t") as cap:
            await handle.apublish("t", [b"1", b"2"])
            assert await cap.await_for(2) == [b"1", b"2"]
        assert (await handle.await_for("t", depth=2)).name == "t"
        assert await handle.aconsume("t", "c", 2) == [b"1", b"2"]
        stats = await handle.await_until(lambda s: s.channel("t", "c") is not None)
        assert stats.channel("t", "c") is not None
        assert set((await handle.astats()).topics) == {"t"}


def test_async_twins_under_asyncio(handle: NSQBox) -> None:
    async def main() -> list[bytes]:
        async with asyncio.timeout(TIMEOUT):
            await handle.apublish("t", b"x")
            await handle.await_for("t", depth=1)
            with pytest.raises(RuntimeError, match="this thread runs asyncio"):
                handle.wait_for("t")
            return await handle.aconsume("t", "c")

    assert asyncio.run(main()) == [b"x"]


# -- clusters ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadBox]:
    box = ThreadBox(ClusterSpec(nsqd=2, lookupd=2), str(tmp_path_factory.mktemp("cluster")))
    yield box
    box.stop()


def test_cluster_nodes_register_with_every_lookupd(cluster: ThreadBox) -> None:
    with NSQBox(cluster) as box:
        assert len(box.nsqd_tcp_addresses) == len(box.nsqd_http_addresses) == 2
        assert len(box.lookupd_tcp_addresses) == len(box.lookupd_http_addresses) == 2
        ports = sorted(a.port for a in box.nsqd_tcp_addresses)
        for lookupd in box.lookupd_http_addresses:
            nodes = http_json(lookupd, "/nodes")["producers"]
            assert sorted(n["tcp_port"] for n in nodes) == ports


def test_cluster_capture_and_stats_span_nodes(cluster: ThreadBox) -> None:
    with NSQBox(cluster) as box:
        with box.capture("orders") as cap:
            box.publish("orders", b"on 0")
            box.publish("orders", b"on 1", node=1)
        assert sorted((m.node, m.body) for m in cap.messages) == [(0, b"on 0"), (1, b"on 1")]
        # distinct node ids make distinct message ids
        assert cap.messages[0].id != cap.messages[1].id
        assert box.wait_for("orders", depth=2).name == "orders"
        assert box.wait_for("orders", depth=1, node=1).name == "orders"
        assert box.consume("orders", "c", 1, node=1) == [b"on 1"]


# -- the loop thread ---------------------------------------------------------------------


async def _fail_at_start(*, task_status: trio.TaskStatus[None]) -> None:
    raise OSError("cannot bind")


async def _serve_value(*, task_status: trio.TaskStatus[int]) -> None:
    task_status.started(42)
    await trio.sleep_forever()


def test_loop_thread_reports_start_errors() -> None:
    loop: LoopThread[None] = LoopThread("failing")
    with pytest.raises(OSError, match="cannot bind"):
        loop.start(_fail_at_start)
    assert not loop.running


def test_loop_thread_calls_and_stops() -> None:
    loop: LoopThread[int] = LoopThread("value")
    assert loop.start(_serve_value) == 42
    assert loop.call(lambda: loop.call(lambda: 7)) == 7  # nested: runs inline on the loop

    async def boom() -> None:
        raise KeyError("inside")

    with pytest.raises(KeyError, match="inside"):
        loop.call_async(boom)
    loop.stop()
    loop.stop()
    with pytest.raises(RuntimeError, match="has stopped"):
        loop.call(lambda: 1)


# -- ThreadedNSQD (the compat tests' server) -------------------------------------------------


async def test_threaded_nsqd_call_works_from_a_trio_test() -> None:
    with ThreadedNSQD() as box:
        assert box.call(lambda nsqd: nsqd.tcp_port) == box.addresses.tcp[1]
        assert repr(box) == f"ThreadedNSQD({box.tcp_address})"


def test_threaded_nsqd_start_failure() -> None:
    with ThreadedNSQD() as running:
        taken = NSQDOptions(tcp_address=running.tcp_address, http_address="")
        with pytest.raises(RuntimeError, match="nsqd failed to start") as info:
            ThreadedNSQD(taken).start()
        assert isinstance(info.value.__cause__, OSError)
