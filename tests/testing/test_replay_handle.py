"""The test handle's ``replay(path, topic=...)`` (issue #34): into a topic or one channel, at
once or step by step under the manual broker clock, in thread, subprocess and trio mode, and
against real nsqd (noproc) where only the whole-topic replay works.

Spacing in wall time is ``bench/replay_bench.py``'s; here, under the manual clock, the broker
timestamps are exact, so they are asserted.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from nsqbox.client import Config
from nsqbox.client.blocking import BlockingConsumer
from nsqbox.client.message import Message
from nsqbox.snapshot.files import SnapshotWriter, open_for_writing
from nsqbox.snapshot.format import Header, SnapshotError
from nsqbox.snapshot.replay import ReplayError, ReplayUnsupported
from nsqbox.testing import BoxAddresses, NoProcBox, NSQBox
from nsqbox.testing.boxes import ThreadBox
from nsqbox.testing.config import ClusterSpec
from nsqbox.testing.subprocess_box import SubprocessBox
from nsqbox.testing.trio_box import open_trio_box
from nsqbox.testing.waiting import poll

from .conftest import TIMEOUT, box_in_mode

T0 = 1_795_833_104_000_000_000
MS = 1_000_000
#: A recording: (offset from the first in ms, body, DPUB delay in ms).
RECORDING = [
    (0, b"first", 0),
    (0, b"\xff\x00 binary", 0),
    (1000, b"at 1s", 0),
    (2500, b"at 2.5s", 0),
    (10_000, b"at 10s, deferred 5s", 5000),
    (12_000, b"at 12s", 0),
]


def write_recording(path: Path, recording: list[tuple[int, bytes, int]] = RECORDING) -> Path:
    header = Header(nsqbox_snapshot=1, nodes=1, saved_at_ns=T0)
    with open_for_writing(path) as stream:
        writer = SnapshotWriter(stream, header)
        writer.topic(0, "recorded", False)
        for i, (offset_ms, body, delay_ms) in enumerate(recording):
            msg_id = b"%016x" % (0x18AB2F15E0400000 + i)
            writer.message(0, "recorded", None, msg_id, T0 + offset_ms * MS, 0, body, delay_ms)
        writer.finish()
    return path


def peek(box: NSQBox, topic: str, channel: str = "") -> list[dict[str, Any]]:
    params = {"topic": topic, "body_bytes": "1000", "limit": "1000"}
    if channel:
        params["channel"] = channel
    url = f"{box.addresses.nsqd_http[0].url}/nsqbox/peek"
    doc: dict[str, Any] = httpx.get(url, params=params, timeout=TIMEOUT, trust_env=False).json()
    return [
        {**m, "body": base64.b64decode(m["body"])}
        for m in doc["messages"]
        if m["state"] in ("memory", "disk")
    ]


def create(box: NSQBox, topic: str, *channels: str) -> None:
    """The topic and its channels, over nsqd's HTTP API (as real nsqd: the topic first)."""
    url = box.addresses.nsqd_http[0].url
    with httpx.Client(timeout=TIMEOUT, trust_env=False) as client:
        client.post(f"{url}/topic/create", params={"topic": topic}).raise_for_status()
        for channel in channels:
            params = {"topic": topic, "channel": channel}
            client.post(f"{url}/channel/create", params=params).raise_for_status()


def replays_of(box: NSQBox, topic: str) -> list[dict[str, Any]]:
    """The step replays running into ``topic`` (``GET /nsqbox/replay/step``)."""
    url = f"{box.addresses.nsqd_http[0].url}/nsqbox/replay/step"
    doc = httpx.get(url, timeout=TIMEOUT, trust_env=False).json()
    return [r for r in doc["replays"] if r["topic"] == topic]


def bodies(box: NSQBox, topic: str, channel: str = "") -> list[bytes]:
    return [m["body"] for m in peek(box, topic, channel)]


@pytest.fixture(scope="module", params=["thread", "subprocess"])
def manual_box(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ThreadBox | SubprocessBox]:
    root = str(tmp_path_factory.mktemp(f"replay-{request.param}"))
    box = box_in_mode(request.param, ClusterSpec(clock="manual"), root)
    yield box
    box.stop()


@pytest.fixture
def box(manual_box: ThreadBox | SubprocessBox) -> Iterator[NSQBox]:
    with NSQBox(manual_box, timeout=TIMEOUT) as handle:
        yield handle


def test_replay_at_once_into_the_topic_and_into_one_channel(box: NSQBox, tmp_path: Path) -> None:
    path = write_recording(tmp_path / "rec.jsonl.gz")
    topic = box.name("copy")
    # the manual clock stands still: speed="max" does not wait for it (wall time)
    assert box.replay(path, topic, speed="max") == len(RECORDING)
    assert bodies(box, topic) == [body for _, body, _ in RECORDING]
    one = box.name("one")
    create(box, one, "billing", "audit")
    assert box.replay(path, one, speed="1000x", channel="billing") == len(RECORDING)
    state = box.wait_for(one, "billing", depth=len(RECORDING) - 1, deferred=1)
    assert state.message_count == len(RECORDING)
    assert box.wait_for(one, "audit").message_count == 0


def test_step_replay_publishes_exactly_what_the_clock_reaches(box: NSQBox, tmp_path: Path) -> None:
    path = write_recording(tmp_path / "rec.jsonl")
    topic = box.name("stepped")
    create(box, topic, "work")
    start = box.clock.now()
    assert box.replay(path, topic, step=True) == 2  # those at offset 0, at once
    assert box.wait_for(topic, "work").message_count == 2  # published before it answered
    box.clock.advance("999ms")
    assert box.wait_for(topic, "work").message_count == 2  # 1 s is not reached yet
    box.clock.advance("1ms")
    assert box.wait_for(topic, "work").message_count == 3
    box.clock.advance("1.4s")  # 2.4 s
    assert box.wait_for(topic, "work").message_count == 3
    box.clock.advance("0.1s")  # 2.5 s
    assert box.wait_for(topic, "work").message_count == 4
    # one jump past the rest: the 10 s one is published there, deferred 5 s, and falls due
    # at 15 s inside the same jump, after the 12 s one
    box.clock.advance("20s")
    state = box.wait_for(topic, "work")
    assert (state.message_count, state.deferred, state.depth) == (6, 0, 6)
    listed = peek(box, topic, "work")
    assert [m["body"] for m in listed] == [
        b"first",
        b"\xff\x00 binary",
        b"at 1s",
        b"at 2.5s",
        b"at 12s",
        b"at 10s, deferred 5s",
    ]
    # each was published when broker time reached its recorded offset: its broker timestamp
    stamps = {m["body"]: (m["timestamp"] / 1e9) - start for m in listed}
    for offset_ms, body, _ in RECORDING:
        assert stamps[body] == pytest.approx(offset_ms / 1000, abs=0.002)
    assert replays_of(box, topic) == []  # done: it let go of the clock and its file


def test_step_replay_into_one_channel_at_double_speed(box: NSQBox, tmp_path: Path) -> None:
    path = write_recording(tmp_path / "rec.jsonl")
    topic = box.name("stepch")
    create(box, topic, "billing", "audit")
    assert box.replay(path, topic, step=True, speed="2x", channel="billing") == 2
    box.clock.advance("1.25s")  # 2.5 s of recording at 2x
    assert box.wait_for(topic, "billing").message_count == 4
    (listed,) = replays_of(box, topic)
    assert (listed["channel"], listed["messages"], listed["published"]) == ("billing", 6, 4)
    assert listed["next_in"] == pytest.approx(3.75, abs=0.002)  # 10 s / 2 - 1.25 s
    box.clock.advance("10s")
    assert box.wait_for(topic, "billing", depth=6).message_count == 6
    assert box.wait_for(topic, "audit").message_count == 0


def test_a_message_published_inside_a_long_jump_is_not_timed_out(
    box: NSQBox, tmp_path: Path
) -> None:
    # a consumer cannot answer inside a jump: a message the replay delivers at 1 s of a
    # 5-minute advance starts its 60 s msg-timeout when the jump ends, as the clock's own
    # deliveries do
    path = write_recording(tmp_path / "rec.jsonl", [(0, b"at once", 0), (1000, b"at 1s", 0)])
    topic = box.name("consumed")
    create(box, topic, "work")
    config = Config(max_in_flight=10, msg_timeout=60.0)
    with BlockingConsumer(box.nsqd_tcp_address, topic, "work", config=config) as consumer:
        box.wait_for(topic, "work", clients=1)
        got: list[Message] = []

        def received(count: int) -> tuple[bool, list[Message]]:
            got.extend(consumer.receive(0.1))
            return len(got) >= count, got

        assert box.replay(path, topic, step=True) == 1
        poll(lambda: received(1), TIMEOUT, repr)
        got[0].finish()
        box.wait_for(topic, "work", in_flight=0)
        box.clock.advance("5m")
        poll(lambda: received(2), TIMEOUT, repr)
        assert [(m.body, m.attempts) for m in got] == [(b"at once", 1), (b"at 1s", 1)]
        state = box.wait_for(topic, "work")
        assert (state.timeout_count, state.in_flight) == (0, 1)  # in flight since the end
        box.clock.advance("59s")
        assert box.wait_for(topic, "work").timeout_count == 0
        box.clock.advance("2s")  # its 60 s are up now
        assert box.wait_for(topic, "work").timeout_count == 1


def test_a_step_replay_ends_with_its_topic(box: NSQBox, tmp_path: Path) -> None:
    path = write_recording(tmp_path / "rec.jsonl")
    topic = box.name("gone")
    url = box.addresses.nsqd_http[0].url
    assert box.replay(path, topic, step=True) == 2
    assert len(replays_of(box, topic)) == 1
    httpx.post(f"{url}/topic/delete", params={"topic": topic}).raise_for_status()
    box.clock.advance("1m")
    assert topic not in box.stats().topics  # not created again by a late publish
    assert replays_of(box, topic) == []
    # one stopped by hand
    other = box.name("stopped")
    assert box.replay(path, other, step=True) == 2
    (listed,) = replays_of(box, other)
    assert httpx.delete(f"{url}/nsqbox/replay/step", params={"id": listed["id"]}).status_code == 200
    box.clock.advance("1m")
    assert box.wait_for(other).message_count == 2
    gone = httpx.delete(f"{url}/nsqbox/replay/step", params={"id": listed["id"]})
    assert (gone.status_code, gone.json()["message"]) == (404, "REPLAY_NOT_FOUND")


def test_step_replay_refuses_what_it_cannot_publish(box: NSQBox, tmp_path: Path) -> None:
    topic = box.name("refused")
    damaged = tmp_path / "damaged.jsonl"
    write_recording(damaged)
    lines = damaged.read_bytes().splitlines(keepends=True)
    damaged.write_bytes(b"".join(lines[:4]))
    with pytest.raises(SnapshotError, match=r"^line 5: truncated"):
        box.replay(damaged, topic, step=True)
    big = write_recording(tmp_path / "big.jsonl", [(0, b"x", 0), (5, b"y" * (2 << 20), 0)])
    with pytest.raises(SnapshotError, match=r"^line 4: a body over --max-msg-size"):
        box.replay(big, topic, step=True)  # the node checks what /pub would refuse
    with pytest.raises(ValueError, match="speed"):
        box.replay(big, topic, step=True, speed="max")
    assert topic not in box.stats().topics  # nothing was published, nothing created
    url = f"{box.addresses.nsqd_http[0].url}/nsqbox/replay/step"
    bad = httpx.post(url, params={"id": "0" * 32, "topic": topic, "speed": "inf"})
    assert (bad.status_code, bad.json()["message"]) == (400, "INVALID_SPEED")
    bad = httpx.post(url, params={"id": "0" * 32, "topic": topic})
    assert (bad.status_code, bad.json()["message"]) == (404, "SNAPSHOT_NOT_FOUND")
    bad = httpx.post(url, params={"id": "0" * 32, "topic": topic}, headers={"Origin": "http://x.y"})
    assert bad.status_code == 403


def test_step_replay_needs_a_manual_clock(handle: NSQBox, tmp_path: Path) -> None:
    path = write_recording(tmp_path / "rec.jsonl")
    topic = handle.name("realtime")
    with pytest.raises(ReplayError, match="manual broker clock"):
        handle.replay(path, topic, step=True)
    assert topic not in handle.stats().topics


async def test_the_trio_handle_and_the_async_twin(nursery: trio.Nursery, tmp_path: Path) -> None:
    path = write_recording(tmp_path / "rec.jsonl")
    box = await open_trio_box(nursery, ClusterSpec(clock="manual"), str(tmp_path / "trio"))
    topic = box.name("trio")
    box.nsqds[0].get_topic(topic).get_channel("work")
    assert await box.replay(path, topic, step=True) == 2
    await box.clock.advance("2.5s")
    assert (await box.wait_for(topic, "work")).message_count == 4
    assert await box.replay(path, box.name("fast"), speed="max") == len(RECORDING)
    assert (await box.wait_for(box.name("fast"))).depth == len(RECORDING)
    thread_box = ThreadBox(ClusterSpec(), str(tmp_path / "thread"))
    try:
        with NSQBox(thread_box, timeout=TIMEOUT) as handle:
            other = handle.name("twin")
            assert await handle.areplay(path, other, speed="max") == len(RECORDING)
            await handle.await_for(other, depth=len(RECORDING))
    finally:
        await trio.to_thread.run_sync(thread_box.stop)
    nursery.cancel_scope.cancel()


def test_against_real_nsqd_only_the_whole_topic(real_nsqd: BoxAddresses, tmp_path: Path) -> None:
    path = write_recording(tmp_path / "rec.jsonl")
    with NSQBox(NoProcBox(real_nsqd, timeout=TIMEOUT), timeout=TIMEOUT) as box:
        topic = box.name("real")
        create(box, topic, "c")
        assert box.replay(path, topic, speed="max") == len(RECORDING)  # /mpub and /pub?defer=
        state = box.wait_for(topic, "c", depth=len(RECORDING) - 1, deferred=1)
        assert state.message_count == len(RECORDING)
        other = box.name("other")
        with pytest.raises(ReplayUnsupported, match="--channel needs nsqbox"):
            box.replay(path, other, speed="max", channel="c")
        with pytest.raises(ReplayUnsupported, match="--step needs nsqbox"):
            box.replay(path, other, step=True)
        assert other not in box.stats().topics  # refused before anything was published
