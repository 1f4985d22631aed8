"""Boxes reached only through NSQ's public APIs: subprocess mode and noproc mode."""

from __future__ import annotations

import sys

import pytest

from nsqbox.testing import Cleanup, NoProcBox, NSQBox, SubprocessBox, ThreadBox, WaitTimeout
from nsqbox.testing.config import Address, BoxAddresses, ClusterSpec
from nsqbox.testing.remote import NSQHTTPError, http_json

from .conftest import TIMEOUT

# -- subprocess mode -----------------------------------------------------------------------


def test_subprocess_box_runs_nsqbox_up(remote: NSQBox) -> None:
    assert len(remote.nsqd_tcp_addresses) == 2
    assert remote.lookupd_http_address is not None
    nodes = http_json(remote.lookupd_http_address, "/nodes")["producers"]
    assert sorted(n["tcp_port"] for n in nodes) == sorted(a.port for a in remote.nsqd_tcp_addresses)
    assert http_json(remote.nsqd_http_address, "/config/msg_timeout") == 30_000_000_000


def test_publish_wait_consume_over_the_public_api(remote: NSQBox) -> None:
    remote.publish("jobs", [b"1", b"2"])
    remote.publish("jobs", b"3", node=1)
    remote.publish("jobs", b"later", defer_ms=60_000)
    assert remote.wait_for("jobs", depth=4).name == "jobs"
    assert remote.wait_for("jobs", depth=1, node=1).name == "jobs"
    assert remote.consume("jobs", "worker", 2) == [b"1", b"2"]
    remote.wait_for("jobs", "worker", in_flight=0, clients=0, node=0)
    with pytest.raises(WaitTimeout, match="to have depth=5; last seen: depth=0"):
        remote.wait_for("jobs", "worker", depth=5, timeout=0.05)


def test_channel_capture_copies_what_other_channels_get(remote: NSQBox) -> None:
    """With a channel on the topic, the capture's own channel changes nothing for it."""
    remote.publish("orders", b"before")
    remote.consume("orders", "app", 1)  # the app's channel exists from here on
    with remote.capture("orders", mode="channel") as cap:
        assert cap.mode == "channel"
        remote.publish("orders", [b"a", b"b"])
        remote.publish("orders", b"c", node=1)
    assert sorted(cap.bodies) == [b"a", b"b", b"c"]
    assert {m.node for m in cap.messages} == {0, 1}
    assert all(m.defer_ms is None for m in cap.messages)
    assert remote.consume("orders", "app", 2) == [b"a", b"b"]


def test_channel_capture_on_a_topic_without_channels_takes_its_messages(remote: NSQBox) -> None:
    """The documented difference from the in-process tap: the capture channel is the
    topic's first, so what it published is not held for a channel created afterwards."""
    with remote.capture("orders", mode="channel") as cap:
        remote.publish("orders", [b"a", b"b"])
    assert cap.bodies == [b"a", b"b"]
    remote.publish("orders", b"after")
    assert remote.consume("orders", "late", 1) == [b"after"]


def test_subprocess_cleanup_deletes_everything(subprocess_box: SubprocessBox) -> None:
    with NSQBox(subprocess_box) as first:
        first.publish("t", b"x")
        first.consume("t", "c", 1)
    with NSQBox(subprocess_box) as second:
        assert second.stats().topics == {}
        assert second.lookupd_http_address is not None
        assert http_json(second.lookupd_http_address, "/topics")["topics"] == []


def test_subprocess_mode_has_one_lookupd(tmp_path: object) -> None:
    with pytest.raises(ValueError, match="one nsqlookupd"):
        SubprocessBox(ClusterSpec(lookupd=2), str(tmp_path), python=sys.executable)


def test_subprocess_start_failure_shows_the_output(tmp_path: object) -> None:
    with pytest.raises(RuntimeError) as info:
        SubprocessBox(
            ClusterSpec(nsqd_args=("--no-such-flag",)), str(tmp_path), python=sys.executable
        )
    message = str(info.value)
    assert message.startswith("nsqbox subprocess nsqbox up exited: ")
    assert "flag provided but not defined: -no-such-flag" in message


# -- noproc mode ---------------------------------------------------------------------------


@pytest.fixture
def noproc(thread_box: ThreadBox) -> NoProcBox:
    """A noproc box pointing at servers this test did not start."""
    return NoProcBox(thread_box.addresses, timeout=TIMEOUT)


def test_noproc_cleans_up_only_what_the_test_created(
    thread_box: ThreadBox, noproc: NoProcBox
) -> None:
    with NSQBox(thread_box, cleanup=Cleanup.NONE) as other:
        other.publish("someone-elses", b"keep me")
    with NSQBox(noproc) as mine:
        mine.publish("mine", b"x")
        mine.publish("someone-elses", b"and me")
    with NSQBox(noproc, cleanup=Cleanup.NONE) as after:
        topic = after.stats().topic("someone-elses")
        assert topic is not None
        assert topic.depth == 2
        assert after.stats().topic("mine") is None
    NSQBox(thread_box).close()


def test_noproc_under_xdist_cleans_up_only_its_own_names(
    noproc: NoProcBox, thread_box: ThreadBox, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw7")
    with NSQBox(noproc) as mine:
        assert mine.namespace.startswith("gw7-")
        named = mine.name("orders")
        mine.publish(named, b"x")
        mine.publish("published-by-me", b"x")
        # another worker's topic, created during this test
        thread_box.call(lambda: thread_box.ops.publish("gw3-topic", [b"x"]))
    with NSQBox(noproc, cleanup=Cleanup.NONE) as after:
        assert set(after.stats().topics) == {"gw3-topic"}
    NSQBox(thread_box).close()


def test_noproc_capture_taps_nsqbox_servers(noproc: NoProcBox) -> None:
    with NSQBox(noproc) as box:
        with box.capture("t") as cap:
            box.publish("t", b"x", defer_ms=1000)
        assert (cap.mode, cap.bodies, cap.messages[0].defer_ms) == ("tap", [b"x"], 1000)
        assert box.stats().topic("t").channels == {}  # type: ignore[union-attr]


def test_remote_capture_taps_on_a_topic_without_channels(remote: NSQBox) -> None:
    """Through /nsqbox/tap the capture creates no channel, so the topic keeps its messages."""
    with remote.capture("orders") as cap:
        remote.publish("orders", [b"a", b"b"], node=1)
    assert (cap.mode, cap.bodies) == ("tap", [b"a", b"b"])
    assert remote.consume("orders", "late", 2, node=1) == [b"a", b"b"]


def test_noproc_unreachable() -> None:
    dead = BoxAddresses(nsqd_tcp=(Address("127.0.0.1:1"),), nsqd_http=(Address("127.0.0.1:1"),))
    with pytest.raises(NSQHTTPError, match=r"GET http://127.0.0.1:1/ping: "):
        NoProcBox(dead, timeout=1)
