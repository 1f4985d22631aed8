"""What in-process boxes do to their servers: read state, publish, tap topics, reset.

Every method here touches server objects, so it must run on the cluster's own trio
loop: directly in a trio-native box, through :meth:`LoopThread.call` in a threaded one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

import trio

from ..nsqd.domain.topic import Topic
from ..wire.names import is_valid_topic_name
from .cluster import RunningCluster, wait_registered
from .config import Cleanup
from .state import BoxStats, CapturedMessage, ChannelState, TopicState

if TYPE_CHECKING:
    from ..nsqd.domain.channel import Channel
    from ..nsqd.domain.message import Message
    from ..nsqd.domain.nsqd import NSQD

__all__ = ["ClusterOps", "TapList"]


class TapList(list["Message"]):
    """A ``Topic.taps`` entry: turns every published batch into CapturedMessages at once.

    The conversion happens while the topic publishes, because the Message objects
    change afterwards (their ``deadline`` holds the DPUB delay only until fan-out).
    """

    def __init__(self, node: int) -> None:
        super().__init__()
        self.node = node
        self.captured: list[CapturedMessage] = []

    def tapped(self, msgs: list[Message], publisher: object = None) -> None:
        """Record ``msgs`` (called by the topic with each published batch)."""
        self.extend(msgs)

    def extend(self, msgs: Iterable[Message]) -> None:
        """Record ``msgs``."""
        node = self.node
        self.captured.extend(
            CapturedMessage(
                m.body, m.id.decode("ascii"), m.timestamp, node, round(m.deadline * 1000)
            )
            for m in msgs
        )


class _Tap:
    """One capture: a TapList per nsqd, attached to the topic whenever it exists."""

    def __init__(self, topic: str, nodes: int) -> None:
        self.topic = topic
        self.lists = [TapList(i) for i in range(nodes)]

    def messages(self) -> list[CapturedMessage]:
        out = [m for tap in self.lists for m in tap.captured]
        if len(self.lists) > 1:
            out.sort(key=lambda m: m.timestamp)
        return out


class ClusterOps:
    """Server-side operations on a :class:`RunningCluster` (its loop's thread only)."""

    def __init__(self, cluster: RunningCluster) -> None:
        self.cluster = cluster
        self.lookupds = [lk.lookupd for lk in cluster.lookupd]
        self._taps: dict[str, list[_Tap]] = {}
        for index, nsqd in cluster.running():
            self._attach(index, nsqd)
        cluster.on_start.append(self._attach)

    @property
    def nsqds(self) -> list[NSQD]:
        """Every nsqd (NodeStopped when one is stopped)."""
        return self.cluster.nsqds

    def _attach(self, index: int, nsqd: NSQD) -> None:
        """Follow a (re)started nsqd: topic notifications, and the open taps."""
        nsqd.add_notify_callback(self._on_notify_for(index))
        for name, taps in self._taps.items():
            existing = nsqd.topics.get(name)
            if existing is not None and not existing.exiting:
                existing.taps.extend(tap.lists[index] for tap in taps)

    # -- state -------------------------------------------------------------------
    def stats(self, node: int | None = None) -> BoxStats:
        """Every topic and channel (of one nsqd, or summed over the running ones)."""
        if node is not None:
            return _node_stats(self.cluster.node(node))
        return BoxStats.merge(_node_stats(n) for _, n in self.cluster.running())

    # -- nodes -------------------------------------------------------------------
    async def stop_nsqd(self, node: int) -> None:
        """Shut nsqd ``node`` down cleanly; its lookupd registrations go with it."""
        self.cluster.node(node)  # IndexError for a node that does not exist
        await self.cluster.stop_nsqd(node)

    async def crash_nsqd(self, node: int) -> None:
        """Stop nsqd ``node`` as a SIGKILL would: memory queues and in-flight lost."""
        self.cluster.node(node)  # IndexError for a node that does not exist
        await self.cluster.crash_nsqd(node)

    async def start_nsqd(self, node: int) -> None:
        """Start nsqd ``node`` again (same ports and data), registered when this returns."""
        await self.cluster.start_nsqd(node)

    async def start_all(self) -> None:
        """Start every nsqd a test left stopped."""
        for index, runner in enumerate(self.cluster.runners):
            if runner.running is None:
                await self.cluster.start_nsqd(index)

    # -- publishing --------------------------------------------------------------
    def publish(self, topic: str, bodies: list[bytes], defer_ms: int = 0, node: int = 0) -> bool:
        """Publish as PUB/MPUB/DPUB would; True when this created the topic."""
        if not is_valid_topic_name(topic):
            raise ValueError(f"invalid topic name {topic!r}")
        nsqd = self.cluster.node(node)
        max_defer = int(nsqd.options.max_req_timeout * 1000)
        if not 0 <= defer_ms <= max_defer:
            raise ValueError(f"defer_ms must be in [0, {max_defer}] (--max-req-timeout)")
        limit = nsqd.options.max_msg_size
        for body in bodies:
            if len(body) > limit:
                raise ValueError(f"message too big: {len(body)} > --max-msg-size {limit}")
        created = topic not in nsqd.topics
        if nsqd.journal is not None:
            nsqd.journal.publisher_in_process()
        nsqd.get_topic(topic).put_messages(bodies, defer_ms / 1000)
        return created

    async def settle(self, limit: float = 5.0) -> None:
        """Wait (at most ``limit`` seconds) until nsqlookupd has every registration sent."""
        with trio.move_on_after(limit):
            await wait_registered([n for _, n in self.cluster.running()])

    # -- capture -----------------------------------------------------------------
    def _on_notify_for(self, node: int) -> Callable[[Topic | Channel], None]:
        def on_notify(obj: Topic | Channel) -> None:
            # A topic was created (or deleted): a new Topic object for a tapped name
            # gets the taps before its first message (NSQD.get_topic notifies first).
            if isinstance(obj, Topic) and not obj.exiting:
                for tap in self._taps.get(obj.name, ()):
                    obj.taps.append(tap.lists[node])

        return on_notify

    def open_tap(self, topic: str) -> _Tap:
        """Start recording what is published to ``topic`` on every nsqd (created or not)."""
        tap = _Tap(topic, len(self.cluster.nsqd))
        self._taps.setdefault(topic, []).append(tap)
        for node, nsqd in self.cluster.running():
            existing = nsqd.topics.get(topic)
            if existing is not None and not existing.exiting:
                existing.taps.append(tap.lists[node])
        return tap

    @staticmethod
    def read_tap(tap: _Tap) -> list[CapturedMessage]:
        """What ``tap`` recorded so far."""
        return tap.messages()

    def close_tap(self, tap: _Tap) -> list[CapturedMessage]:
        """Stop recording; what ``tap`` recorded."""
        taps = self._taps.get(tap.topic, [])
        if tap in taps:
            taps.remove(tap)
        if not taps:
            self._taps.pop(tap.topic, None)
        for node, nsqd in self.cluster.running():
            existing = nsqd.topics.get(tap.topic)
            if existing is not None:
                mine = tap.lists[node]
                existing.taps[:] = [t for t in existing.taps if t is not mine]
        return tap.messages()

    # -- between tests -----------------------------------------------------------
    async def reset(self, cleanup: Cleanup, limit: float = 5.0) -> None:
        """Delete (or empty) every topic, then forget them in nsqlookupd."""
        await self.start_all()  # a node a test stopped comes back for the next test
        if cleanup is Cleanup.NONE:
            return
        for _, nsqd in self.cluster.running():
            for name, topic in list(nsqd.topics.items()):
                if cleanup is Cleanup.DELETE:
                    # Channels first: each sends its own UNREGISTER, so the topic's
                    # UNREGISTER finds none left (nsqlookupd warns about those).
                    for channel_name in list(topic.channels):
                        topic.delete_existing_channel(channel_name)
                    nsqd.delete_existing_topic(name)
                else:
                    topic.empty()
                    for channel in topic.channels.values():
                        channel.empty()
        if cleanup is Cleanup.DELETE:
            # nsqlookupd keeps a topic's key after its last producer unregisters;
            # drop those too, once every UNREGISTER has been acknowledged.
            await self.settle(limit)
            for lookupd in self.lookupds:
                for name in lookupd.topics():
                    lookupd.delete_topic(name)


def _node_stats(nsqd: NSQD) -> BoxStats:
    topics: dict[str, TopicState] = {}
    for topic in nsqd.topics.values():
        if topic.exiting:
            continue
        topics[topic.name] = TopicState(
            name=topic.name,
            depth=topic.depth(),
            message_count=topic.message_count,
            paused=topic.paused,
            channels={c.name: _channel_state(c) for c in topic.channels.values() if not c.exiting},
        )
    return BoxStats(topics)


def _channel_state(channel: Channel) -> ChannelState:
    return ChannelState(
        name=channel.name,
        depth=channel.depth(),
        in_flight=channel.in_flight_count(),
        deferred=channel.deferred_count(),
        message_count=channel.message_count,
        requeue_count=channel.requeue_count,
        timeout_count=channel.timeout_count,
        clients=len(channel.clients),
        paused=channel.paused,
    )
