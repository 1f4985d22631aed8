"""A tap's file in nsqd's data path: what it recorded, kept across a restart or a crash.

nsqbox's taps (:mod:`nsqbox.nsqd.routes.tap`) write each recorded batch through to a file of
their own, ``nsqbox.tap.<id>.dat``, before the publish is acknowledged, so the tap
and everything it recorded come back when the node starts again on the same data path:
after a clean shutdown, and after a crash (a write reaches the kernel at once, and a
killed process loses nothing the kernel holds). Real nsqd ignores these files.

The layout (big-endian)::

    "NSQBOXTAP2\\n" <topic> "\\n"                        the header
    [16 bytes id][8 timestamp ns][8 defer ms][4 n][n body][2 p][p publisher]   one record

``publisher`` is who published it, as JSON (``{"protocol": "tcp", "client_id": ...}``), or
nothing (``p`` = 0). A file an older nsqbox wrote (``NSQBOXTAP1``, records without the
publisher) still loads, its records without one.

A file whose last record is cut short (the machine, not the process, went down
mid-write) loads up to that record and says it lost something; so does a file renamed
``nsqbox.tap.<id>.lost.dat`` after a write to it failed (its records stop there, while
the tap went on recording in memory only).
"""

from __future__ import annotations

import os
import re
import struct
from collections.abc import Iterable

import msgspec

from ..wire.names import is_valid_topic_name

__all__ = [
    "LoadedTap",
    "Record",
    "append_records",
    "create_tap_file",
    "encode_records",
    "load_tap_file",
    "mark_lost",
    "remove_tap_file",
    "tap_file_ids",
    "tap_file_path",
]

#: One recorded message: id (hex), timestamp (ns), DPUB delay (ms), body, and who published it
#: (``{"protocol": "tcp" or "http", ...}``; None: not known).
Record = tuple[str, int, int, bytes, dict[str, str] | None]

MAGIC = b"NSQBOXTAP2\n"
#: The header of a file without publishers (nsqbox before they were recorded).
MAGIC_V1 = b"NSQBOXTAP1\n"
_HEAD = struct.Struct(">16sqqI")
_PUBLISHER = struct.Struct(">H")
_NAME = re.compile(r"^nsqbox\.tap\.([0-9a-f]{16})(\.lost)?\.dat$")
#: The longest header: the magic, a topic name (at most 64 bytes) and its newline.
_MAX_HEADER = len(MAGIC) + 65


def tap_file_path(data_path: str, tap_id: str, *, lost: bool = False) -> str:
    """The file of tap ``tap_id`` (a 16-digit hex id) in ``data_path``."""
    return os.path.join(data_path, f"nsqbox.tap.{tap_id}{'.lost' if lost else ''}.dat")


def tap_file_ids(data_path: str) -> list[tuple[str, bool]]:
    """The taps with a file in ``data_path``: ``(id, lost)`` each, by id."""
    try:
        names = os.listdir(data_path)
    except OSError:
        return []
    found = []
    for name in names:
        match = _NAME.match(name)
        if match is not None:
            found.append((match.group(1), match.group(2) is not None))
    return sorted(found)


def create_tap_file(path: str, topic: str) -> None:
    """Start the file of a new tap of ``topic`` (OSError if it cannot be written)."""
    with open(path, "xb", buffering=0) as f:
        f.write(MAGIC + topic.encode("ascii") + b"\n")


def _publisher_bytes(publisher: dict[str, str] | None) -> bytes:
    if not publisher:
        return _PUBLISHER.pack(0)
    data = msgspec.json.encode(publisher)
    if len(data) > 0xFFFF:  # its fields are bounded far below; never cut a document short
        return _PUBLISHER.pack(0)
    return _PUBLISHER.pack(len(data)) + data


def encode_records(records: Iterable[Record]) -> bytes:
    """``records`` as the file holds them."""
    return b"".join(
        _HEAD.pack(tap_id.encode("ascii"), timestamp, defer_ms, len(body))
        + body
        + _publisher_bytes(publisher)
        for tap_id, timestamp, defer_ms, body, publisher in records
    )


def _publisher(data: bytes) -> dict[str, str] | None:
    """A record's publisher, None when it is not a JSON object of strings."""
    try:
        doc = msgspec.json.decode(data)
    except msgspec.DecodeError:
        return None
    if not isinstance(doc, dict) or not all(isinstance(v, str) for v in doc.values()):
        return None
    return {str(k): v for k, v in doc.items()}


def append_records(path: str, records: Iterable[Record]) -> None:
    """Append ``records`` in one write (OSError if it fails)."""
    data = encode_records(records)
    if data:
        with open(path, "ab", buffering=0) as f:
            f.write(data)


def mark_lost(path: str, lost_path: str) -> None:
    """Rename the file of a tap whose write failed, so a restart says it lost records.

    A rename needs no free space, so it usually succeeds where the write did not;
    if it fails too, nothing more can be done (the tap still answers from memory).
    """
    try:
        os.rename(path, lost_path)
    except OSError:
        pass


def remove_tap_file(path: str) -> None:
    """Delete a tap's file (gone already is fine)."""
    try:
        os.unlink(path)
    except OSError:
        pass


class LoadedTap:
    """What a tap's file held: its topic and records, and whether some are missing."""

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.records: list[Record] = []
        #: A record cut short, or the file was marked lost: messages may be missing.
        self.lost = False
        #: The file held more than ``limit`` bytes allowed: loaded up to there.
        self.overflow = False


def load_tap_file(path: str, *, limit: int, lost: bool = False) -> LoadedTap | None:
    """Read a tap's file: at most ``limit`` bytes of records (None: not a tap file).

    ``lost`` is whether the file was renamed after a failed write. The read is
    bounded by ``limit`` plus the header, so a file that grew past what the tap
    budget allows cannot make the node read more than that.
    """
    try:
        with open(path, "rb") as f:
            data = f.read(_MAX_HEADER + limit + 1)
    except OSError:
        return None
    if data.startswith(MAGIC):
        with_publisher = True
    elif data.startswith(MAGIC_V1):
        with_publisher = False
    else:
        return None
    end = data.find(b"\n", len(MAGIC))
    if end < 0:
        return None
    try:
        topic = data[len(MAGIC) : end].decode("ascii")
    except UnicodeDecodeError:
        return None
    if not is_valid_topic_name(topic):
        return None
    loaded = LoadedTap(topic)
    loaded.lost = lost
    body = memoryview(data)[end + 1 :]
    if len(body) > limit:
        body = body[:limit]
        loaded.overflow = True
    offset = 0
    while offset < len(body):
        if offset + _HEAD.size > len(body):
            loaded.lost = loaded.lost or not loaded.overflow
            break
        raw_id, timestamp, defer_ms, size = _HEAD.unpack_from(body, offset)
        start = offset + _HEAD.size
        if start + size > len(body):
            loaded.lost = loaded.lost or not loaded.overflow
            break
        try:
            tap_id = raw_id.decode("ascii")
        except UnicodeDecodeError:
            loaded.lost = True
            break
        offset = start + size
        publisher = None
        if with_publisher:
            if offset + _PUBLISHER.size > len(body):
                loaded.lost = loaded.lost or not loaded.overflow
                break
            (length,) = _PUBLISHER.unpack_from(body, offset)
            offset += _PUBLISHER.size
            if offset + length > len(body):
                loaded.lost = loaded.lost or not loaded.overflow
                break
            publisher = _publisher(bytes(body[offset : offset + length])) if length else None
            offset += length
        record = (tap_id, timestamp, defer_ms, bytes(body[start : start + size]), publisher)
        loaded.records.append(record)
    return loaded
