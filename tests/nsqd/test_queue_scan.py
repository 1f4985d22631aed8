"""The queue scan's view of the node: every live channel, whatever was created or deleted.

``NSQD.channels()`` is kept between scans (so a scan costs the same with 10,000 topics as
with ten); these pin that it never serves a deleted channel or misses a new one.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from nsqbox.nsqd.domain.nsqd import NSQD
from nsqbox.nsqd.domain.options import NSQDOptions


@pytest.fixture
def nsqd(tmp_path: Path) -> Iterator[NSQD]:
    node = NSQD(NSQDOptions(data_path=str(tmp_path)))
    yield node
    node.close()


def _names(nsqd: NSQD) -> set[tuple[str, str]]:
    return {(c.topic_name, c.name) for c in nsqd.channels()}


def test_the_scan_sees_channels_as_they_come_and_go(nsqd: NSQD) -> None:
    a = nsqd.get_topic("a")
    a.get_channel("one")
    assert _names(nsqd) == {("a", "one")}
    assert nsqd.channels() is nsqd.channels()  # kept while nothing changes
    a.get_channel("two")
    nsqd.get_topic("b").get_channel("three")
    assert _names(nsqd) == {("a", "one"), ("a", "two"), ("b", "three")}
    assert a.delete_existing_channel("one")
    assert _names(nsqd) == {("a", "two"), ("b", "three")}
    assert nsqd.delete_existing_topic("a")
    assert _names(nsqd) == {("b", "three")}
    nsqd.get_topic("a").get_channel("one")
    assert _names(nsqd) == {("a", "one"), ("b", "three")}


def test_a_deleted_ephemeral_channel_leaves_the_scan(nsqd: NSQD) -> None:
    topic = nsqd.get_topic("t")
    topic.get_channel("kept")
    topic.get_channel("gone#ephemeral")
    assert _names(nsqd) == {("t", "kept"), ("t", "gone#ephemeral")}
    assert topic.delete_existing_channel("gone#ephemeral")
    assert all(not c.exiting for c in nsqd.channels())
    assert _names(nsqd) == {("t", "kept")}
