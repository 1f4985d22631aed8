"""The test handle's ``snapshot(path)`` and ``load(path)`` (issue #34), in thread and
subprocess mode: a box's state saved and loaded into another box, a damaged file refused."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from nsqbox.snapshot.format import SnapshotError
from nsqbox.testing import NSQBox
from nsqbox.testing.boxes import ThreadBox
from nsqbox.testing.config import ClusterSpec
from nsqbox.testing.subprocess_box import SubprocessBox
from nsqbox.testing.trio_box import open_trio_box

from .conftest import TIMEOUT


@pytest.fixture(params=["thread", "subprocess"])
def boxes(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[list[ThreadBox | SubprocessBox]]:
    """Two boxes of their own (a snapshot is of the whole box)."""
    made: list[ThreadBox | SubprocessBox] = []
    for i in range(2):
        root = str(tmp_path_factory.mktemp(f"snapshot-{request.param}{i}"))
        if request.param == "thread":
            made.append(ThreadBox(ClusterSpec(), root))
        else:
            made.append(SubprocessBox(ClusterSpec(), root, python=sys.executable, start_timeout=30))
    yield made
    for box in made:
        box.stop()


def test_the_handle_saves_and_loads_a_box(
    boxes: list[ThreadBox | SubprocessBox], tmp_path: Path
) -> None:
    path = tmp_path / "state.jsonl.gz"
    with NSQBox(boxes[0], timeout=TIMEOUT) as first:
        topic = first.name("orders")
        first.publish(topic, ["a", "b", b"\xff"])
        first.publish(topic, "later", defer_ms=3_600_000)
        first.wait_for(topic, depth=4)
        summary = first.snapshot(path)
        assert (summary.topics, summary.channels, summary.messages) == (1, 0, 4)
        with NSQBox(boxes[1], timeout=TIMEOUT) as second:
            bad = tmp_path / "bad.jsonl"
            bad.write_bytes(b'{"nsqbox_snapshot":1,"nodes":1}\n{"kind":"topic"}\n')
            with pytest.raises(SnapshotError, match=r"^line 2: ") as info:
                second.load(bad)
            assert info.value.line == 2
            assert second.stats().topics == {}
            assert second.load(path) == 4
            assert second.wait_for(topic, depth=4).depth == 4


async def test_the_trio_handle_and_the_async_twins(nursery: trio.Nursery, tmp_path: Path) -> None:
    first = await open_trio_box(nursery, ClusterSpec(), str(tmp_path / "a"))
    topic = first.name("jobs")
    first.nsqds[0].get_topic(topic).get_channel("work")
    await first.publish(topic, [b"one", b"two"])
    await first.wait_for(topic, "work", depth=2)
    path = tmp_path / "jobs.jsonl"
    assert (await first.snapshot(path)).messages == 2
    second = await open_trio_box(nursery, ClusterSpec(), str(tmp_path / "b"))
    assert await second.load(path) == 2
    assert (await second.wait_for(topic, "work", depth=2)).depth == 2
    thread_box = ThreadBox(ClusterSpec(), str(tmp_path / "c"))
    try:
        with NSQBox(thread_box, timeout=TIMEOUT) as handle:  # the sync handle's async twins
            assert await handle.aload(path) == 2
            await handle.await_for(topic, "work", depth=2)
            assert (await handle.asnapshot(tmp_path / "again.jsonl")).messages == 2
    finally:
        await trio.to_thread.run_sync(thread_box.stop)
    nursery.cancel_scope.cancel()
