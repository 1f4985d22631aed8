"""Snapshots of topics and channels, and the expectations ``wait_for`` checks against them.

A snapshot is read either from the server objects (in-process boxes) or from nsqd's
``/stats?format=json`` (subprocess and noproc boxes); both give the same values.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, Protocol

import msgspec

from ..wire import documents
from ..wire.documents import CHANNEL_COUNTS, TOPIC_COUNTS

__all__ = [
    "CHANNEL_COUNTS",
    "TOPIC_COUNTS",
    "BoxStats",
    "CaptureSource",
    "CapturedMessage",
    "ChannelState",
    "Expectation",
    "TopicState",
    "WaitTimeout",
]


class WaitTimeout(AssertionError):
    """An expected state or message count did not arrive in time.

    An AssertionError, so pytest reports it as a failed expectation; the message
    says what was awaited and what was last seen.
    """

    __module__ = "nsqbox.testing"  # as users import it


@dataclass(frozen=True, slots=True)
class CapturedMessage:
    """One message as published to a captured topic."""

    body: bytes
    #: The 16-character hex message id nsqd assigned.
    id: str
    #: When nsqd received it (wall clock, ns since the epoch).
    timestamp: int
    #: Which nsqd of the box received it (0 for the first).
    node: int = 0
    #: The DPUB delay in ms (0 for an immediate publish); None when unknown (channel capture).
    defer_ms: int | None = 0


@dataclass(frozen=True, slots=True)
class ChannelState:
    """One channel's counters (summed over the box's nsqds)."""

    name: str
    #: Messages waiting to be delivered (memory and disk), not in flight or deferred.
    depth: int = 0
    in_flight: int = 0
    deferred: int = 0
    message_count: int = 0
    requeue_count: int = 0
    timeout_count: int = 0
    #: Connected consumers.
    clients: int = 0
    paused: bool = False


@dataclass(frozen=True, slots=True)
class TopicState:
    """One topic's counters and its channels (summed over the box's nsqds)."""

    name: str
    #: Messages the topic holds itself (before it has channels, or while paused).
    depth: int = 0
    message_count: int = 0
    paused: bool = False
    channels: Mapping[str, ChannelState] = field(default_factory=dict)


_CHANNEL_SUMMED = tuple(f.name for f in fields(ChannelState) if f.name not in ("name", "paused"))


def _add_channel(a: ChannelState, b: ChannelState) -> ChannelState:
    sums = {k: getattr(a, k) + getattr(b, k) for k in _CHANNEL_SUMMED}
    return replace(a, paused=a.paused or b.paused, **sums)


@dataclass(frozen=True, slots=True)
class BoxStats:
    """Every topic on the box (or on one of its nsqds), by name."""

    topics: Mapping[str, TopicState]

    def topic(self, name: str) -> TopicState | None:
        """The topic, or None when no nsqd has it."""
        return self.topics.get(name)

    def channel(self, topic: str, channel: str) -> ChannelState | None:
        """The channel, or None when its topic or itself does not exist."""
        found = self.topics.get(topic)
        return None if found is None else found.channels.get(channel)

    @classmethod
    def merge(cls, parts: Iterable[BoxStats]) -> BoxStats:
        """Sum the stats of several nsqds (a topic on two nodes counts both)."""
        topics: dict[str, TopicState] = {}
        for part in parts:
            for name, t in part.topics.items():
                have = topics.get(name)
                if have is None:
                    topics[name] = t
                    continue
                channels = dict(have.channels)
                for cname, c in t.channels.items():
                    channels[cname] = _add_channel(channels[cname], c) if cname in channels else c
                topics[name] = TopicState(
                    name,
                    have.depth + t.depth,
                    have.message_count + t.message_count,
                    have.paused or t.paused,
                    channels,
                )
        return cls(topics)

    @classmethod
    def from_topic_stats(cls, rows: Iterable[documents.TopicStats]) -> BoxStats:
        """From the topics of nsqd's ``/stats`` document (the shared schema's rows)."""
        topics: dict[str, TopicState] = {}
        for t in rows:
            channels = {
                c.channel_name: ChannelState(
                    name=c.channel_name,
                    depth=c.depth,
                    in_flight=c.in_flight_count,
                    deferred=c.deferred_count,
                    message_count=c.message_count,
                    requeue_count=c.requeue_count,
                    timeout_count=c.timeout_count,
                    clients=c.client_count or len(c.clients or []),
                    paused=c.paused,
                )
                for c in t.channels
            }
            topics[t.topic_name] = TopicState(
                name=t.topic_name,
                depth=t.depth,
                message_count=t.message_count,
                paused=t.paused,
                channels=channels,
            )
        return cls(topics)

    @classmethod
    def from_stats_body(cls, body: bytes) -> BoxStats:
        """From the body of nsqd's ``/stats?format=json`` (any NSQ 1.x nsqd, or pre-1.0's
        ``{"status_code": ..., "data": ...}`` wrapping). Raises msgspec.ValidationError and
        msgspec.DecodeError."""
        return cls.from_topic_stats(msgspec.json.decode(body, type=_StatsReply).rows())

    @classmethod
    def from_stats_json(cls, doc: Mapping[str, Any]) -> BoxStats:
        """From nsqd's ``/stats?format=json`` document, already parsed into Python values."""
        return cls.from_topic_stats(msgspec.convert(doc, _StatsReply).rows())


class _StatsReply(msgspec.Struct, frozen=True):
    """A /stats document, or pre-1.0 nsqd's reply that wraps it in ``data``."""

    topics: list[documents.TopicStats] | None = None
    data: documents.StatsDocument | None = None

    def rows(self) -> list[documents.TopicStats]:
        return (self.topics if self.data is None else self.data.topics) or []


def _counts(state: TopicState | ChannelState, names: Iterable[str]) -> str:
    return ", ".join(f"{n}={getattr(state, n)}" for n in names)


@dataclass(frozen=True, slots=True)
class Expectation:
    """A topic or channel that should exist with the given counter values."""

    topic: str
    channel: str | None = None
    counts: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        counts = dict(self.counts)
        allowed = CHANNEL_COUNTS if self.channel is not None else TOPIC_COUNTS
        unknown = sorted(set(counts) - set(allowed))
        if unknown:
            where = "a channel" if self.channel is not None else "a topic (give channel=...)"
            raise TypeError(f"cannot wait for {', '.join(unknown)} of {where}; use {allowed}")
        object.__setattr__(self, "counts", counts)

    @property
    def subject(self) -> str:
        """``topic 'orders'`` or ``channel 'billing' of topic 'orders'``."""
        if self.channel is None:
            return f"topic {self.topic!r}"
        return f"channel {self.channel!r} of topic {self.topic!r}"

    def describe(self) -> str:
        """What is awaited, in words."""
        if not self.counts:
            return f"{self.subject} to exist"
        wanted = ", ".join(f"{k}={v}" for k, v in self.counts.items())
        return f"{self.subject} to have {wanted}"

    def state(self, stats: BoxStats) -> TopicState | ChannelState | None:
        """The topic or channel in ``stats``, if it exists."""
        if self.channel is None:
            return stats.topic(self.topic)
        return stats.channel(self.topic, self.channel)

    def met(self, stats: BoxStats) -> bool:
        """True when ``stats`` shows what is awaited."""
        state = self.state(stats)
        return state is not None and all(getattr(state, k) == v for k, v in self.counts.items())

    def last_seen(self, stats: BoxStats) -> str:
        """What ``stats`` shows instead, in words (for the timeout message)."""
        topic = stats.topic(self.topic)
        if topic is None:
            known = sorted(stats.topics)
            return f"no topic {self.topic!r} (topics: {known})"
        if self.channel is None:
            return _counts(topic, TOPIC_COUNTS) + f", channels={sorted(topic.channels)}"
        channel = topic.channels.get(self.channel)
        if channel is None:
            return f"topic {self.topic!r} has no channel {self.channel!r} (channels: " + (
                f"{sorted(topic.channels)}; topic depth={topic.depth})"
            )
        return _counts(channel, CHANNEL_COUNTS)

    def timeout_message(self, timeout: float, stats: BoxStats) -> str:
        """The WaitTimeout message."""
        return (
            f"nsqbox: timed out after {timeout:g}s waiting for {self.describe()}; "
            f"last seen: {self.last_seen(stats)}"
        )


class CaptureSource(Protocol):
    """Where a capture's messages come from."""

    #: ``"tap"`` (server-side, sees every publish) or ``"channel"`` (an ephemeral channel).
    mode: str
    #: Messages published while it ran may be missing (a crash took what it had not read).
    lost: bool

    def messages(self) -> list[CapturedMessage]:
        """What was captured so far."""
        ...

    def close(self) -> list[CapturedMessage]:
        """Stop capturing; everything captured."""
        ...
