"""Seed files: a box's starting state declared in TOML (docs/state.md, "Seeds").

A seed names topics (and the nsqd each is on), their channels, paused flags and fixture
messages: inline ``body`` text, or a ``file`` (relative to the seed file) read as one message
per line or, with ``whole = true``, as one body; any of them deferred with ``defer``, a Go
duration. :func:`read_seed` reads and checks the whole seed strictly (an unknown key, a bad
name or duration, a size over a bound: :class:`SeedError` naming the key path) before anything
is applied, and :func:`write_seed_snapshot` turns it into a snapshot file (the same records
``nsqbox snapshot save`` writes, each message where a PUB would have put it), which the
snapshot loader applies: a seed is a snapshot a person wrote.

Message ids are made here, deterministically (the same seed gives the same ids): snowflake
ids whose time part counts up from 1, far below any id an nsqd makes from its clock, so they
never collide with messages the box publishes.
"""

from __future__ import annotations

import os
import time
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from ..go.syntax import parse_duration_ns
from ..wire.names import is_valid_channel_name, is_valid_topic_name
from .files import SnapshotSummary, SnapshotWriter, open_for_writing
from .format import MAX_DELAY_MS, MAX_NODES, Header

__all__ = [
    "MAX_SEED_BYTES",
    "MAX_SEED_FILE_BYTES",
    "MAX_SEED_MESSAGES",
    "MAX_SEED_NAMES",
    "Seed",
    "SeedError",
    "SeedMessage",
    "SeedTopic",
    "read_seed",
    "write_seed_snapshot",
]

#: The largest seed file (the TOML itself).
MAX_SEED_FILE_BYTES: Final = 16 * 1024 * 1024
#: The most messages a seed may declare, inline and from files together.
MAX_SEED_MESSAGES: Final = 1_000_000
#: The most body bytes a seed may declare, inline and from files together.
MAX_SEED_BYTES: Final = 256 * 1024 * 1024
#: The most topics, and the most channels, a seed may declare.
MAX_SEED_NAMES: Final = 10_000

_TOPIC_KEYS: Final = frozenset({"node", "paused", "channels", "messages"})
_CHANNEL_KEYS: Final = frozenset({"paused"})
_MESSAGE_KEYS: Final = frozenset({"body", "file", "whole", "defer", "channel"})


class SeedError(ValueError):
    """A seed that cannot be applied: ``key`` is the key path it failed at (may be empty)."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"{key}: {reason}" if key else reason)
        self.key = key
        self.reason = reason


@dataclass(frozen=True, slots=True)
class SeedMessage:
    """One fixture message: its body, its delay (ms; 0: queued at once), and the channel it
    goes to alone (None: the topic's, as a PUB; every channel gets it)."""

    body: bytes
    delay_ms: int = 0
    channel: str | None = None


@dataclass(slots=True)
class SeedTopic:
    """A topic to create on node ``node``, its channels (name: paused) and its messages."""

    name: str
    node: int = 0
    paused: bool = False
    channels: dict[str, bool] = field(default_factory=dict)
    messages: list[SeedMessage] = field(default_factory=list)


@dataclass(slots=True)
class Seed:
    """A checked seed: its topics in file order, and totals."""

    topics: list[SeedTopic] = field(default_factory=list)
    messages: int = 0
    bytes: int = 0

    @property
    def nodes(self) -> int:
        """How many nsqds the seed needs (its highest node, plus one)."""
        return max((t.node for t in self.topics), default=0) + 1


def _table(value: object, key: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise SeedError(key, f"must be a table, not {type(value).__name__}")
    return value


def _unknown(table: Mapping[str, Any], allowed: frozenset[str], key: str) -> None:
    for name in table:
        if name not in allowed:
            where = f"{key}.{name}" if key else name
            raise SeedError(where, f"unknown key (known: {', '.join(sorted(allowed))})")


def _bool(table: Mapping[str, Any], name: str, key: str) -> bool:
    value = table.get(name, False)
    if not isinstance(value, bool):
        raise SeedError(f"{key}.{name}", f"must be true or false, not {value!r}")
    return value


class _Reader:
    """Reads one seed file, counting what it declares against the bounds."""

    def __init__(self, path: Path) -> None:
        self.base = path.parent
        self.seed = Seed()
        self.channels = 0

    def _count(self, body: bytes, key: str) -> None:
        seed = self.seed
        seed.messages += 1
        seed.bytes += len(body)
        if seed.messages > MAX_SEED_MESSAGES:
            raise SeedError(key, f"a seed holds at most {MAX_SEED_MESSAGES} messages")
        if seed.bytes > MAX_SEED_BYTES:
            raise SeedError(key, f"a seed holds at most {MAX_SEED_BYTES} bytes of bodies")

    def topics(self, doc: Mapping[str, Any]) -> None:
        _unknown(doc, frozenset({"topics"}), "")
        topics = _table(doc.get("topics", {}), "topics")
        if len(topics) > MAX_SEED_NAMES:
            raise SeedError("topics", f"a seed declares at most {MAX_SEED_NAMES} topics")
        for name, value in topics.items():
            key = f"topics.{name}"
            _check_name("topic", name, is_valid_topic_name(name), key)
            self.seed.topics.append(self.topic(name, _table(value, key), key))

    def topic(self, name: str, table: Mapping[str, Any], key: str) -> SeedTopic:
        _unknown(table, _TOPIC_KEYS, key)
        node = table.get("node", 0)
        if isinstance(node, bool) or not isinstance(node, int) or not 0 <= node < MAX_NODES:
            raise SeedError(
                f"{key}.node", f"must be an nsqd's index, [0,{MAX_NODES}), not {node!r}"
            )
        topic = SeedTopic(name, node, _bool(table, "paused", key))
        self.channels_of(topic, table.get("channels", {}), f"{key}.channels")
        messages = table.get("messages", [])
        if not isinstance(messages, list):
            raise SeedError(f"{key}.messages", "must be an array of tables ([[...messages]])")
        for index, value in enumerate(messages):
            where = f"{key}.messages[{index}]"
            self.message(topic, _table(value, where), where)
        return topic

    def channels_of(self, topic: SeedTopic, value: object, key: str) -> None:
        if isinstance(value, list):  # channels = ["a", "b"]
            names = value
            for index, name in enumerate(names):
                if not isinstance(name, str):
                    raise SeedError(f"{key}[{index}]", f"must be a channel name, not {name!r}")
            tables: dict[str, Mapping[str, Any]] = {name: {} for name in names}
            if len(tables) != len(names):
                raise SeedError(key, "a channel is listed twice")
        else:
            tables = {n: _table(v, f"{key}.{n}") for n, v in _table(value, key).items()}
        for name, table in tables.items():
            where = f"{key}.{name}"
            _check_name("channel", name, is_valid_channel_name(name), where)
            _unknown(table, _CHANNEL_KEYS, where)
            topic.channels[name] = _bool(table, "paused", where)
            self.channels += 1
            if self.channels > MAX_SEED_NAMES:
                raise SeedError(where, f"a seed declares at most {MAX_SEED_NAMES} channels")

    def message(self, topic: SeedTopic, table: Mapping[str, Any], key: str) -> None:
        _unknown(table, _MESSAGE_KEYS, key)
        channel = table.get("channel")
        if channel is not None and channel not in topic.channels:
            raise SeedError(f"{key}.channel", f"{channel!r} is not a channel of {topic.name!r}")
        delay_ms = self.delay(table.get("defer"), f"{key}.defer")
        body, file = table.get("body"), table.get("file")
        whole = _bool(table, "whole", key)
        if (body is None) == (file is None):
            raise SeedError(key, "a message has exactly one of body and file")
        if body is not None:
            if whole:
                raise SeedError(f"{key}.whole", "only a file is read whole")
            if not isinstance(body, str):
                raise SeedError(f"{key}.body", f"must be a string, not {type(body).__name__}")
            bodies = [body.encode("utf-8")]
        else:
            if not isinstance(file, str):
                raise SeedError(f"{key}.file", f"must be a path, not {type(file).__name__}")
            data = self.read_file(file, f"{key}.file")
            bodies = [data] if whole else [line for line in data.split(b"\n") if line]
        for index, data in enumerate(bodies):
            where = key if len(bodies) == 1 and body is not None else f"{key}.file line {index + 1}"
            if not data:
                raise SeedError(where, "an empty body (nsqd refuses one too)")
            self._count(data, where)
            topic.messages.append(SeedMessage(data, delay_ms, channel))

    def delay(self, value: object, key: str) -> int:
        if value is None:
            return 0
        if not isinstance(value, str):
            raise SeedError(key, f'must be a Go duration such as "5s", not {value!r}')
        try:
            ns = parse_duration_ns(value)
        except ValueError as exc:
            raise SeedError(key, str(exc)) from None
        if ns < 0 or ns > MAX_DELAY_MS * 1_000_000:
            raise SeedError(key, f"{value} is not within [0, 10 years]")
        return -(-ns // 1_000_000)  # a delay under a millisecond still defers

    def read_file(self, name: str, key: str) -> bytes:
        path = self.base / name
        room = MAX_SEED_BYTES - self.seed.bytes
        try:
            with open(path, "rb") as stream:
                data = stream.read(room + 1)
        except OSError as exc:
            raise SeedError(key, f"cannot read {os.fspath(path)}: {exc.strerror or exc}") from None
        if len(data) > room:
            raise SeedError(key, f"a seed holds at most {MAX_SEED_BYTES} bytes of bodies")
        return data


def read_seed(path: str | os.PathLike[str]) -> Seed:
    """Read and check the seed at ``path`` whole; :class:`SeedError` naming the key path
    (or the file) when it cannot be applied."""
    where = Path(path)
    try:
        with open(where, "rb") as stream:
            raw = stream.read(MAX_SEED_FILE_BYTES + 1)
    except OSError as exc:
        raise SeedError("", f"cannot read {os.fspath(where)}: {exc.strerror or exc}") from None
    if len(raw) > MAX_SEED_FILE_BYTES:
        raise SeedError("", f"a seed file holds at most {MAX_SEED_FILE_BYTES} bytes")
    try:
        doc = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise SeedError("", "not UTF-8 (TOML is)") from None
    except tomllib.TOMLDecodeError as exc:
        raise SeedError("", f"not TOML: {exc}") from None
    reader = _Reader(where)
    reader.topics(doc)
    return reader.seed


def _message_id(index: int, node: int) -> bytes:
    """The ``index``-th seed message's id on ``node``: tick ``1 + index // 4096``."""
    value = (1 + (index >> 12)) << 22 | node << 12 | (index & 0xFFF)
    return b"%016x" % value


def write_seed_snapshot(seed: Seed, path: str | os.PathLike[str]) -> SnapshotSummary:
    """Write ``seed`` as a snapshot file at ``path`` (``.gz``: gzip); what it holds.

    Every topic and channel line, then the topic's messages where a PUB (a DPUB, with
    ``defer``) would have put them: a copy in each channel (one with ``channel``: in that
    channel alone), in seed order, or held at the topic while it has no channel or is paused.
    Written into the channels, they are there before the box is ready, whenever the topic
    starts delivering.
    """
    now = time.time_ns()
    header = Header(nsqbox_snapshot=1, nodes=seed.nodes, saved_at_ns=now)
    start = 0
    with open_for_writing(path) as stream:
        writer = SnapshotWriter(stream, header)
        for topic in seed.topics:
            node, name = topic.node, topic.name
            writer.topic(node, name, topic.paused)
            for channel, paused in topic.channels.items():
                writer.channel(node, name, channel, paused)
            ids = [_message_id(start + i, node) for i in range(len(topic.messages))]
            start += len(topic.messages)
            held = topic.paused or not topic.channels
            for msg_id, msg in zip(ids, topic.messages, strict=True):
                if held and msg.channel is None:
                    writer.message(node, name, None, msg_id, now, 0, msg.body, msg.delay_ms)
            for channel in topic.channels:
                for msg_id, msg in zip(ids, topic.messages, strict=True):
                    if msg.channel == channel or (msg.channel is None and not held):
                        writer.message(node, name, channel, msg_id, now, 0, msg.body, msg.delay_ms)
        writer.finish()
    return SnapshotSummary(header, writer.topics, writer.channels, writer.messages, 0)


def _check_name(kind: str, name: str, valid: bool, where: str) -> None:
    """Refuse a topic or channel name nsqd would refuse, or an ephemeral one (never seeded)."""
    if valid and not name.endswith("#ephemeral"):
        return
    why = f" (an ephemeral {kind} cannot be seeded)" if name.endswith("#ephemeral") else ""
    raise SeedError(where, f"invalid {kind} name {name!r}{why}")
