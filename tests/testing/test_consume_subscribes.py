"""``consume`` subscribes before its ``timeout`` starts counting.

Connecting, IDENTIFY and SUB have the handle's own timeout; ``timeout`` is only the
wait for messages, from SUB's OK on. So a consume of nothing, or one with a zero
``timeout`` (the way tests create a channel), creates the channel however starved the
machine is, on the threaded handle and on the trio handle. Real servers on 127.0.0.1
port 0; the SUB nsqd never acknowledges is a real nsqd under a stall fault.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from nsqbox.testing import NSQBox, ThreadBox, WaitTimeout
from nsqbox.testing.config import ClusterSpec
from nsqbox.testing.trio_box import open_trio_box

from .conftest import TIMEOUT


def assert_created_empty(handle: NSQBox, topic: str, channel: str) -> None:
    """SUB's OK came after nsqd created the channel: it is there, holding nothing."""
    state = handle.stats().channel(topic, channel)
    assert state is not None, f"no channel {channel!r} of topic {topic!r}"
    assert (state.depth, state.in_flight, state.deferred) == (0, 0, 0)


def test_a_consume_of_nothing_with_no_time_still_creates_the_channel(handle: NSQBox) -> None:
    assert handle.consume("jobs", "created", 0, timeout=0) == []
    assert_created_empty(handle, "jobs", "created")


def test_a_zero_timeout_times_out_on_the_messages_not_on_sub(handle: NSQBox) -> None:
    with pytest.raises(WaitTimeout) as info:
        handle.consume("jobs", "worker", 1, timeout=0)
    assert str(info.value) == (
        "nsqbox: timed out after 0s consuming 1 message(s) from channel 'worker' of topic "
        "'jobs'; got 0: []"
    )
    assert_created_empty(handle, "jobs", "worker")


async def test_the_async_twin_subscribes_before_its_timeout(handle: NSQBox) -> None:
    with trio.fail_after(TIMEOUT):
        assert await handle.aconsume("jobs", "created", 0, timeout=0) == []
        with pytest.raises(WaitTimeout, match="timed out after 0s consuming 2 message"):
            await handle.aconsume("jobs", "worker", 2, timeout=0)
    assert_created_empty(handle, "jobs", "created")
    assert_created_empty(handle, "jobs", "worker")


def test_a_sub_nsqd_never_acknowledges_is_bounded_by_the_handles_timeout(
    thread_box: ThreadBox,
) -> None:
    with NSQBox(thread_box, timeout=0.5) as handle:
        # a stall on the topic: SUB's OK is never written
        with handle.faults.stall(topic="stalled"), pytest.raises(WaitTimeout) as info:
            handle.consume("stalled", "c", 0, timeout=0)
        assert str(info.value) == (
            "nsqbox: timed out after 0.5s subscribing to channel 'c' of topic 'stalled' "
            f"(nsqd {handle.nsqd_tcp_address} did not acknowledge SUB)"
        )


async def test_the_trio_handle_subscribes_before_its_timeout(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    box = await open_trio_box(nursery, ClusterSpec(lookupd=0), str(tmp_path))
    with trio.fail_after(TIMEOUT):
        assert await box.consume("jobs", "created", 0, timeout=0) == []
        with pytest.raises(WaitTimeout, match="timed out after 0s consuming 1 message"):
            await box.consume("jobs", "worker", 1, timeout=0)
        for channel in ("created", "worker"):
            state = box.stats().channel("jobs", channel)
            assert state is not None, channel
            assert (state.depth, state.in_flight) == (0, 0)
        await box.aclose()
