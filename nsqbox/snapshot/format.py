"""The snapshot format: one JSON document per line, each line one record (docs/state.md).

A snapshot is a :class:`Header` line, then :class:`TopicLine`, :class:`ChannelLine` and
:class:`MessageLine` records, then one :class:`EndLine` that counts them. Every record names
its kind in ``"kind"``; the header names the format and its version in ``"nsqbox_snapshot"``.
A message's body is ``"body"`` (text) when it is UTF-8, else ``"body_b64"`` (base64).

This module encodes and decodes one line at a time and checks what one line can say alone
(names, id, numbers in range, one body field); the order of the lines and the counts are
checked by :class:`nsqbox.snapshot.files.SnapshotReader`. Pure functions: no I/O.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Annotated, Final

import msgspec

from ..wire.names import is_valid_channel_name, is_valid_topic_name

__all__ = [
    "FORMAT_VERSION",
    "MAX_ATTEMPTS",
    "MAX_DELAY_MS",
    "MAX_LINE_BYTES",
    "MAX_NODES",
    "ChannelLine",
    "EndLine",
    "Header",
    "MessageLine",
    "Publisher",
    "Record",
    "SnapshotError",
    "TopicLine",
    "body_fields",
    "check_record",
    "decode_block",
    "decode_header",
    "decode_record",
    "decode_records",
    "encode",
    "encode_lines",
    "message_body",
]

#: The version this module writes and the only one it reads.
FORMAT_VERSION: Final = 1
#: The longest line read (a 1 MiB body, nsqd's default --max-msg-size, in base64 or escaped
#: JSON text is far below it; a longer line is refused before it is held whole).
MAX_LINE_BYTES: Final = 64 * 1024 * 1024
#: A box runs at most 64 nsqds.
MAX_NODES: Final = 64
#: Attempts are a uint16 on the wire and on disk.
MAX_ATTEMPTS: Final = 0xFFFF
#: The longest remaining delay a snapshot may hold: ten years, the broker clock's own bound.
MAX_DELAY_MS: Final = 10 * 365 * 24 * 3600 * 1000
_INT64_MAX: Final = 2**63 - 1
_is_hex: Final = re.compile("[0-9a-fA-F]*").fullmatch

# What one field may hold, checked by msgspec while it decodes (in C: a million lines a run).
_Node = Annotated[int, msgspec.Meta(ge=0, lt=MAX_NODES)]
# 16 characters here; that they are hex digits is checked after decoding, a block of ids in
# one call (a pattern here would cost a regex call per line).
_MessageID = Annotated[str, msgspec.Meta(min_length=16, max_length=16)]
_Timestamp = Annotated[int, msgspec.Meta(ge=0, le=_INT64_MAX)]
_Attempts = Annotated[int, msgspec.Meta(ge=0, le=MAX_ATTEMPTS)]
_DelayMs = Annotated[int, msgspec.Meta(ge=0, le=MAX_DELAY_MS)]
_Count = Annotated[int, msgspec.Meta(ge=0)]
_Field = Annotated[str, msgspec.Meta(max_length=1024)]


class SnapshotError(ValueError):
    """A snapshot that cannot be read: ``line`` is the 1-based line it failed on."""

    def __init__(self, line: int, reason: str) -> None:
        super().__init__(f"line {line}: {reason}")
        self.line = line
        self.reason = reason


class Header(msgspec.Struct, forbid_unknown_fields=True):
    """The first line: the format's version, when and from what the snapshot was taken."""

    nsqbox_snapshot: int
    #: How many nsqds the box had; every record's ``node`` is below it.
    nodes: int
    #: Wall-clock ns when it was taken (broker time's wall clock).
    saved_at_ns: int = 0
    #: The broker clock's mode (``real`` or ``manual``) and its offset in seconds.
    clock: str = "real"
    clock_offset: float = 0.0


class TopicLine(
    msgspec.Struct, tag="topic", tag_field="kind", forbid_unknown_fields=True, omit_defaults=True
):
    """A topic of node ``node`` (ephemeral ones are never saved, as nsqd's metadata)."""

    node: _Node
    topic: str
    paused: bool = False


class ChannelLine(
    msgspec.Struct, tag="channel", tag_field="kind", forbid_unknown_fields=True, omit_defaults=True
):
    """A channel of a topic listed before it."""

    node: _Node
    topic: str
    channel: str
    paused: bool = False


class Publisher(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True, gc=False):
    """Who published a recorded message (``nsqbox record`` through nsqbox's tap): a TCP
    client as it identified itself, or an HTTP request's peer."""

    #: ``tcp`` or ``http``.
    protocol: Annotated[str, msgspec.Meta(pattern="^(tcp|http)$")]
    client_id: _Field = ""
    hostname: _Field = ""
    user_agent: _Field = ""
    remote_address: _Field = ""


class MessageLine(
    msgspec.Struct,
    tag="message",
    tag_field="kind",
    forbid_unknown_fields=True,
    omit_defaults=True,
    gc=False,  # no cycles: strings, numbers and a Publisher; a million are not tracked
):
    """A message a channel holds (or, with no ``channel``, the topic itself).

    ``delay_ms`` above 0 is a deferred message's remaining delay in broker time (at a topic:
    a DPUB's delay not yet started). ``attempts`` are as nsqd counts them; an in-flight
    message is saved as queued with the attempts it has. ``disk`` says a queued message was
    in the disk queue (loading puts it there again; the others go to memory while it has
    room, as nsqd queues them). ``publisher`` is who published it, in a recording made through
    nsqbox's tap (absent: not known; loading and replaying ignore it).
    """

    node: _Node
    topic: str
    id: _MessageID
    timestamp: _Timestamp
    attempts: _Attempts = 0
    channel: str | None = None
    delay_ms: _DelayMs = 0
    disk: bool = False
    body: str | None = None
    body_b64: str | None = None
    publisher: Publisher | None = None


class EndLine(msgspec.Struct, tag="end", tag_field="kind", forbid_unknown_fields=True):
    """The last line: how many records came before it (a truncated file has no end)."""

    topics: _Count
    channels: _Count
    messages: _Count


Record = TopicLine | ChannelLine | MessageLine | EndLine

_encoder: Final = msgspec.json.Encoder()
_header_decoder: Final = msgspec.json.Decoder(Header)
_record_decoder: Final = msgspec.json.Decoder(Record)


def encode(record: Header | Record) -> bytes:
    """One line: the record as JSON and a newline."""
    return _encoder.encode(record) + b"\n"


def encode_lines(records: list[MessageLine]) -> bytes:
    """Several lines at once: each record as JSON and a newline."""
    return _encoder.encode_lines(records)


def body_fields(body: bytes) -> tuple[str | None, str | None]:
    """``(body, body_b64)`` for a message body: text when it is UTF-8, else base64."""
    try:
        return body.decode("utf-8"), None
    except UnicodeDecodeError:
        return None, base64.b64encode(body).decode("ascii")


def message_body(record: MessageLine) -> bytes:
    """The body bytes of a decoded (and so checked) message record."""
    if record.body is not None:
        return record.body.encode("utf-8")
    assert record.body_b64 is not None
    return base64.b64decode(record.body_b64)


def decode_header(line: bytes, number: int = 1) -> Header:
    """The header line; :class:`SnapshotError` when it is not one this module reads."""
    try:
        header = _header_decoder.decode(line)
    except msgspec.ValidationError as exc:
        raise SnapshotError(number, f"not an nsqbox snapshot header ({exc})") from None
    except msgspec.DecodeError:
        raise SnapshotError(number, "not an nsqbox snapshot header (not JSON)") from None
    if header.nsqbox_snapshot != FORMAT_VERSION:
        raise SnapshotError(
            number,
            f"snapshot format version {header.nsqbox_snapshot} (this nsqbox reads "
            f"{FORMAT_VERSION})",
        )
    if not 1 <= header.nodes <= MAX_NODES:
        raise SnapshotError(number, f"nodes must be [1,{MAX_NODES}], not {header.nodes}")
    if header.clock not in ("real", "manual"):
        raise SnapshotError(number, f"clock must be real or manual, not {header.clock!r}")
    if not 0 <= header.clock_offset <= MAX_DELAY_MS / 1000:
        raise SnapshotError(number, f"clock_offset out of range: {header.clock_offset}")
    return header


def decode_record(line: bytes, number: int, nodes: int) -> Record:
    """One record line, checked alone; SnapshotError if bad.

    A topic or channel line's names are checked here; a message's names are only compared
    with the lines before it (by the reader), which is cheaper and as strict.
    """
    try:
        record: Record = _record_decoder.decode(line)
    except msgspec.ValidationError as exc:
        raise SnapshotError(number, str(exc)) from None
    except msgspec.DecodeError as exc:
        raise SnapshotError(number, f"not a JSON record ({exc})") from None
    check_record(record, number, nodes)
    return record


def decode_records(block: bytes, first: int, nodes: int) -> list[Record]:
    """The records of ``block``, whole lines each ending in a newline, the first of them
    line ``first``; each checked alone, as :func:`decode_record` checks one.

    One call decodes the whole block (the fast way); only a block that fails is read again a
    line at a time, to name the line it fails on with the same reason.
    """
    return decode_block(block, first, nodes)[0]


def decode_block(block: bytes, first: int, nodes: int) -> tuple[list[Record], bool]:
    """:func:`decode_records`' records, and whether the block is *plain*: only messages, all
    of one node, topic and channel, with text bodies and no delay (what a big snapshot is,
    block after block). A plain block was checked whole in a few passes over it, not record
    by record, and its reader and loader may treat it whole too.
    """
    try:
        records: list[Record] = _record_decoder.decode_lines(block)
    except (msgspec.ValidationError, msgspec.DecodeError):
        records = []
    message = MessageLine
    if len(records) != block.count(b"\n") or not _all_hex(
        [r.id for r in records if type(r) is message]
    ):  # a bad or blank line, or an id that is not hex: find it
        found: list[Record] = []
        for number, line in enumerate(block.split(b"\n")[:-1], first):
            found.append(decode_record(line, number, nodes))
            if type(found[-1]) is EndLine:
                break  # the reader refuses what follows it
        return found, False
    head = records[0] if records else None
    if type(head) is message and head.node < nodes:
        topic, channel, node = head.topic, head.channel, head.node
        odd = [
            r
            for r in records
            if type(r) is not message
            or r.body is None
            or r.body_b64 is not None
            or r.delay_ms
            or r.channel != channel
            or r.topic != topic
            or r.node != node
        ]
        if not odd:  # one node, text bodies: nothing more to check
            return records, True
    for index, record in enumerate(records):
        # a message with a text body on a node of the header: nothing more to check
        if (
            type(record) is not message
            or record.body is None
            or record.body_b64 is not None
            or record.node >= nodes
        ):
            check_record(record, first + index, nodes)
    return records, False


def _all_hex(ids: list[str]) -> bool:
    """Whether every id of ``ids`` (16 characters each) is 16 hex digits: one C call for
    all of them (``bytes.fromhex`` skips whitespace, which the length then gives away)."""
    try:
        return len(bytes.fromhex("".join(ids))) == 8 * len(ids)
    except ValueError:
        return False


def check_record(record: Record, number: int, nodes: int) -> None:
    """What JSON alone does not say of a decoded record (line ``number``): SnapshotError."""
    kind = type(record)
    if kind is MessageLine:
        assert isinstance(record, MessageLine)
        if not _is_hex(record.id):
            raise SnapshotError(number, "Expected `str` of 16 hex digits - at `$.id`")
        if record.node >= nodes:
            raise SnapshotError(number, f"node {record.node} is not below the header's {nodes}")
        if record.body is None:
            if record.body_b64 is None:
                raise SnapshotError(number, "a message has one of body and body_b64")
            try:
                base64.b64decode(record.body_b64, validate=True)
            except binascii.Error:
                raise SnapshotError(number, "body_b64 is not base64") from None
        elif record.body_b64 is not None:
            raise SnapshotError(number, "a message has only one of body and body_b64")
        return
    if kind is EndLine:
        return
    assert isinstance(record, TopicLine | ChannelLine)
    if record.node >= nodes:
        raise SnapshotError(number, f"node {record.node} is not below the header's {nodes}")
    if not is_valid_topic_name(record.topic):
        raise SnapshotError(number, f"invalid topic name {record.topic!r}")
    if isinstance(record, ChannelLine) and not is_valid_channel_name(record.channel):
        raise SnapshotError(number, f"invalid channel name {record.channel!r}")
