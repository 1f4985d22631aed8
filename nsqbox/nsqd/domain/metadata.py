"""``nsqd.dat`` (the topics and channels that survive a restart) and nsqbox's deferral side file.

``nsqd.dat`` is byte for byte what real nsqd v1.3.0 writes (nsqd/nsqd.go: Metadata,
PersistMetadata, writeSyncFile): Go's ``json.Marshal`` output of::

    {"topics":[{"name":"t","paused":false,"channels":[{"name":"c","paused":false}]}],"version":"1.3.0"}

compact, no trailing newline, ``null`` for a nil slice (no topics at all, or a topic without
channels), written to ``nsqd.dat.<rand>.tmp``, fsynced and renamed over ``nsqd.dat``.

``nsqbox.deferred.dat`` is nsqbox's own: real nsqd forgets a deferred message's deadline at
shutdown (the message goes back into the disk queue and is delivered at once after a restart).
nsqbox also writes one JSON line per deferred message::

    {"topic":"t","channel":"c","id":"0a1b2c3d4e5f6789","deadline_ns":1700000000000000000}

so the channel can defer it again when it reads the message back. Real nsqd ignores the file, so
a data path stays usable by it.
"""

from __future__ import annotations

import logging
import os
import random
from collections.abc import Iterable

import msgspec

from nsqbox import NSQ_VERSION

# temp-file names from a generator of our own: never move the host's global random state
_tmp_names = random.Random()

__all__ = [
    "DEFERRED_FILE_NAME",
    "METADATA_FILE_NAME",
    "ChannelMetadata",
    "DeferredDeadline",
    "Metadata",
    "MetadataError",
    "TopicMetadata",
    "encode_metadata",
    "load_deferred",
    "load_metadata",
    "persist_metadata",
    "save_deferred",
    "write_sync_file",
]

log = logging.getLogger(__name__)

METADATA_FILE_NAME = "nsqd.dat"
DEFERRED_FILE_NAME = "nsqbox.deferred.dat"


class MetadataError(Exception):
    """``nsqd.dat`` exists but cannot be read or parsed; nsqd refuses to start on this."""


class ChannelMetadata(msgspec.Struct, frozen=True):
    """A durable channel, as nsqd.go's ChannelMetadata."""

    name: str
    paused: bool = False


class TopicMetadata(msgspec.Struct, frozen=True):
    """A durable topic and its durable channels, as nsqd.go's TopicMetadata."""

    name: str
    paused: bool = False
    channels: tuple[ChannelMetadata, ...] = ()


class Metadata(msgspec.Struct, frozen=True):
    """The contents of ``nsqd.dat``.

    The caller leaves ephemeral topics and channels out (nsqd's ``GetMetadata(false)``) and
    validates names after loading (nsqd skips invalid ones with a warning).
    """

    topics: tuple[TopicMetadata, ...] = ()
    version: str = NSQ_VERSION


# The JSON shapes, with Go's nil-slice ``null`` and Go's zero values for missing keys.
class _ChannelJSON(msgspec.Struct):
    name: str = ""
    paused: bool = False


class _TopicJSON(msgspec.Struct):
    name: str = ""
    paused: bool = False
    channels: list[_ChannelJSON | None] | None = None


class _MetadataJSON(msgspec.Struct):
    topics: list[_TopicJSON | None] | None = None
    version: str = ""


# json.Unmarshal takes ``null`` for a struct as "leave it at its zero value": a nsqd.dat of
# ``null`` is a start with no topics, and a ``null`` topic or channel is one with an empty
# (invalid, so skipped with a warning) name.
_metadata_decoder = msgspec.json.Decoder(_MetadataJSON | None)
_encoder = msgspec.json.Encoder()

# Go's json.Marshal escapes these inside strings (HTML safety); msgspec does not. Keys are fixed
# ASCII, so replacing them anywhere in the output only touches string values.
_GO_ESCAPES = (
    (b"<", b"\\u003c"),
    (b">", b"\\u003e"),
    (b"&", b"\\u0026"),
    ("\u2028".encode(), b"\\u2028"),
    ("\u2029".encode(), b"\\u2029"),
)


def encode_metadata(metadata: Metadata) -> bytes:
    """The exact bytes nsqd's ``json.Marshal(n.GetMetadata(false))`` produces."""
    wire = _MetadataJSON(
        topics=[
            _TopicJSON(
                name=t.name,
                paused=t.paused,
                channels=[_ChannelJSON(c.name, c.paused) for c in t.channels] or None,
            )
            for t in metadata.topics
        ]
        or None,
        version=metadata.version,
    )
    data = _encoder.encode(wire)
    for raw, escaped in _GO_ESCAPES:
        if raw in data:
            data = data.replace(raw, escaped)
    return data


def load_metadata(data_path: str) -> Metadata | None:
    """Read ``<data_path>/nsqd.dat``; ``None`` when it does not exist (a fresh start).

    Raises :class:`MetadataError` with nsqd's text when the file cannot be read or parsed.
    Unknown keys are ignored and missing ones take Go's zero values, as ``json.Unmarshal`` does.
    """
    fn = os.path.join(data_path, METADATA_FILE_NAME)
    try:
        with open(fn, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise MetadataError(f"failed to read metadata from {fn} - {exc}") from exc
    try:
        wire = _metadata_decoder.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        # nsqd's text; msgspec's reason (Go's would be e.g. "unexpected end of JSON input")
        raise MetadataError(f"failed to parse metadata in {fn} - {exc}") from exc
    if wire is None:
        return Metadata(version="")
    topics = [t or _TopicJSON() for t in wire.topics or ()]
    return Metadata(
        topics=tuple(
            TopicMetadata(
                name=t.name,
                paused=t.paused,
                channels=tuple(
                    ChannelMetadata(c.name, c.paused)
                    for c in (c or _ChannelJSON() for c in t.channels or ())
                ),
            )
            for t in topics
        ),
        version=wire.version,
    )


def persist_metadata(data_path: str, metadata: Metadata) -> None:
    """Atomically rewrite ``<data_path>/nsqd.dat`` as nsqd's PersistMetadata does."""
    _replace_file(os.path.join(data_path, METADATA_FILE_NAME), encode_metadata(metadata))


def write_sync_file(fn: str, data: bytes) -> None:
    """Create or truncate ``fn`` (mode 0600), write ``data`` and fsync it (writeSyncFile)."""
    fd = os.open(fn, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def _replace_file(fn: str, data: bytes) -> None:
    # nsqd's temp name: fmt.Sprintf("%s.%d.tmp", fileName, rand.Int()), rand.Int() in [0, 2**63).
    tmp = f"{fn}.{_tmp_names.getrandbits(63)}.tmp"
    try:
        write_sync_file(tmp, data)
        os.rename(tmp, fn)
    except OSError:
        try:
            os.remove(tmp)
        except OSError:
            pass
        raise


# -- deferred deadlines ---------------------------------------------------------------------


class DeferredDeadline(msgspec.Struct, frozen=True):
    """When a deferred message of a channel becomes due.

    ``message_id`` is the 16-byte id as it sits in the message encoding; ``deadline_ns`` is
    wall-clock time in nanoseconds since the epoch (``time.time_ns()``), since a monotonic clock
    does not survive a restart.
    """

    topic: str
    channel: str
    message_id: bytes
    deadline_ns: int


class _DeferredJSON(msgspec.Struct):
    topic: str
    channel: str
    id: str  # the id bytes as latin-1 text: readable for nsqd's hex ids, lossless for any byte
    deadline_ns: int


_deferred_decoder = msgspec.json.Decoder(_DeferredJSON)


def save_deferred(data_path: str, deadlines: Iterable[DeferredDeadline]) -> None:
    """Atomically write ``<data_path>/nsqbox.deferred.dat``; with no deadlines, remove it."""
    fn = os.path.join(data_path, DEFERRED_FILE_NAME)
    wire = [
        _DeferredJSON(d.topic, d.channel, d.message_id.decode("latin-1"), d.deadline_ns)
        for d in deadlines
    ]
    if not wire:
        try:
            os.remove(fn)
        except FileNotFoundError:
            pass
        return
    _replace_file(fn, _encoder.encode_lines(wire))


def load_deferred(data_path: str) -> dict[tuple[str, str, bytes], int]:
    """Read ``nsqbox.deferred.dat``: ``{(topic, channel, message_id): deadline_ns}``.

    A missing file gives ``{}``. A line that does not parse is skipped with a warning: losing a
    deadline only means the message is delivered now, which is what real nsqd would do.
    """
    fn = os.path.join(data_path, DEFERRED_FILE_NAME)
    try:
        with open(fn, "rb") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return {}
    deadlines: dict[tuple[str, str, bytes], int] = {}
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            entry = _deferred_decoder.decode(line)
            key = (entry.topic, entry.channel, entry.id.encode("latin-1"))
        except (msgspec.DecodeError, msgspec.ValidationError, UnicodeEncodeError) as exc:
            log.warning("skipping line %d of %s - %s", number, fn, exc)
            continue
        deadlines[key] = entry.deadline_ns
    return deadlines
