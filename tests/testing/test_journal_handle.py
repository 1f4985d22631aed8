"""The test handle's journal (issue #33): ``journey(id)``, ``events(...)`` and
``given_up(topic, channel)``, in thread, subprocess and trio mode, the async twins, and
against real nsqd (noproc), where they raise ``JournalUnsupported``.

A consumer of nsqbox's blocking client takes a message three times, requeues it twice and
finishes it: the handle shows the journey and lists the message as given up, with its body.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from nsqbox.client import Config
from nsqbox.client.blocking import BlockingConsumer
from nsqbox.client.journal import REPR_BODY, JournalUnsupported
from nsqbox.testing import BoxAddresses, NoProcBox, NSQBox
from nsqbox.testing.boxes import ThreadBox
from nsqbox.testing.config import ClusterSpec
from nsqbox.testing.subprocess_box import SubprocessBox
from nsqbox.testing.trio_box import open_trio_box

from .conftest import TIMEOUT, box_in_mode


@pytest.fixture(scope="module", params=["thread", "subprocess"])
def two_nodes(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ThreadBox | SubprocessBox]:
    root = str(tmp_path_factory.mktemp(f"journal-{request.param}"))
    box = box_in_mode(request.param, ClusterSpec(nsqd=2), root)
    yield box
    box.stop()


@pytest.fixture
def box(two_nodes: ThreadBox | SubprocessBox) -> Iterator[NSQBox]:
    with NSQBox(two_nodes, timeout=TIMEOUT) as handle:
        yield handle


def fail_twice_then_finish(address: str, topic: str, channel: str) -> bytes:
    """Take the channel's one message three times (REQ, REQ, FIN); its id."""
    config = Config(user_agent="the-worker", max_in_flight=1)
    with BlockingConsumer(address, topic, channel, config=config) as consumer:
        for attempt in (1, 2, 3):
            (message,) = consumer.receive(timeout=TIMEOUT)
            assert message.attempts == attempt
            if attempt < 3:
                message.requeue(0, backoff=False)
            else:
                message.finish()
        return message.id


def test_journey_events_and_given_up(box: NSQBox) -> None:
    topic, channel = box.name("jh"), "work"
    box.publish(topic, b"other node", node=1)
    box.wait_for(topic, node=1, depth=1)
    box.publish(topic, b"payload", node=0)
    box.wait_for(topic, node=0, depth=1)
    msg_id = fail_twice_then_finish(str(box.addresses.nsqd_tcp[0]), topic, channel)
    box.wait_for(topic, channel, node=0, in_flight=0, depth=0)

    journey = box.journey(msg_id)
    assert [e["kind"] for e in journey] == [
        "published",
        "queued",  # the topic held it; its first channel took a copy
        "delivered",
        "requeued",
        "delivered",
        "requeued",
        "delivered",
        "finished",
    ]
    node = str(box.addresses.nsqd_http[0])
    assert {e["node"] for e in journey} == {node}
    delivered = [e for e in journey if e["kind"] == "delivered"]
    assert [(e["attempt"], e["user_agent"]) for e in delivered] == [
        (1, "the-worker"),
        (2, "the-worker"),
        (3, "the-worker"),
    ]
    assert box.journey(msg_id.decode(), channel=channel) == journey[1:]  # not the publish

    published = box.events(topic=topic, kind="published")
    assert [(e["node"], e["size"]) for e in published] == [
        (str(box.addresses.nsqd_http[1]), len(b"other node")),
        (node, len(b"payload")),
    ]  # both nodes, in broker-time order
    assert box.events(topic=topic, kind="published", node=1) == published[:1]
    requeues = box.events(topic=topic, channel=channel, kind=["requeued", "finished"])
    assert [e["kind"] for e in requeues] == ["requeued", "requeued", "finished"]

    (gave,) = box.given_up(topic, channel)
    assert (gave.id, gave.body, gave.attempts, gave.requeues) == (msg_id.decode(), b"payload", 3, 2)
    assert gave.finished_by["user_agent"] == "the-worker"
    assert gave.node == node
    assert box.given_up(topic, channel, attempts=4) == []
    box.publish(topic, gave.body)  # what a test does with it: publish it again
    box.wait_for(topic, channel, node=0, depth=1)


def test_the_async_twins(box: NSQBox) -> None:
    topic = box.name("jh_async")
    box.publish(topic, b"x")
    box.wait_for(topic, depth=1)

    async def main() -> None:
        (event,) = await box.aevents(topic=topic)
        assert event["kind"] == "published"
        assert await box.ajourney(event["id"]) == [event]
        assert await box.agiven_up(topic, "nobody") == []

    trio.run(main)
    asyncio.run(main())


def test_bad_ids_are_refused_before_any_request(box: NSQBox) -> None:
    with pytest.raises(ValueError, match="is not a message id"):
        box.journey("short")


async def test_the_trio_handle(nursery: trio.Nursery, tmp_path: Path) -> None:
    box = await open_trio_box(nursery, ClusterSpec(), str(tmp_path / "trio"))
    topic = box.name("jh_trio")
    payload = b"payload " * 8192  # 64 KiB
    await box.publish(topic, payload)
    address = str(box.addresses.nsqd_tcp[0])
    msg_id = await trio.to_thread.run_sync(fail_twice_then_finish, address, topic, "c")
    await box.wait_for(topic, "c", in_flight=0, depth=0)
    kinds = [e["kind"] for e in await box.journey(msg_id)]
    assert kinds.count("requeued") == 2
    assert kinds[-1] == "finished"
    assert len(await box.events(topic=topic, kind="delivered")) == 3
    (gave,) = await box.given_up(topic, "c")
    assert (gave.body, gave.size) == (payload, len(payload))
    # its repr is a preview: an assertion that shows it does not print 64 KiB
    assert repr(gave) == (
        f"GivenUp(id={gave.id!r}, node={gave.node!r}, attempts=3, requeues=2, timeouts=0, "
        f"size=65536, body={payload[:REPR_BODY]!r}...)"
    )
    nursery.cancel_scope.cancel()


def test_against_real_nsqd_not_supported(real_nsqd: BoxAddresses) -> None:
    with NSQBox(NoProcBox(real_nsqd, timeout=TIMEOUT), timeout=TIMEOUT) as box:
        with pytest.raises(JournalUnsupported, match="not supported by this nsqd"):
            box.journey("0" * 16)
        with pytest.raises(JournalUnsupported, match="not supported by this nsqd"):
            box.events(topic="t")
        with pytest.raises(JournalUnsupported, match="not supported by this nsqd"):
            box.given_up("t", "c")
