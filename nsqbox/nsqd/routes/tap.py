"""nsqbox's tap routes: record what is published to a topic, over nsqd's HTTP API.

Not part of NSQ: the pytest plugin's ``capture`` uses them to see every message
published to a topic without subscribing a channel (which would take messages a
topic holds for later channels, and see a DPUB only when its delay is over). Every
route is under ``/nsqbox/``, a prefix no nsqd route uses, so a client that finds them
knows it talks to nsqbox; real nsqd answers ``404``.

- ``POST /nsqbox/tap/open?topic=T``: start recording; ``{"id": "..."}`` (16 hex digits).
- ``GET /nsqbox/tap/read?id=I&from=N``: the messages recorded from the ``N``-th on,
  ``{"messages": [{"id", "timestamp", "defer_ms", "body", "publisher"}], "next": M,
  "overflow": B, "lost": L}`` (``body`` in base64, ``timestamp`` in ns, ``defer_ms`` the DPUB
  delay, ``publisher`` who published it: ``{"protocol": "tcp", "client_id", "hostname",
  "user_agent", "remote_address"}`` as the client identified itself, or ``{"protocol":
  "http", "user_agent", "remote_address"}``; a field it did not have is left out, each at most
  256 characters; ``null`` when not known).
- ``POST /nsqbox/tap/close?id=I``: stop recording; the same document from ``from``.

A tap survives a restart and a crash of the node: it writes what it records through
to a file in the data path (:mod:`.tap_file`) before the publish is acknowledged, and
an nsqd that starts on that data path takes its taps back, with the same ids, so a
reader goes on where it was. ``"lost": true`` says the tap may lack messages published
while it was open: its file could not be written (a crash then lost what only memory
held) or a crash cut its last record short.

Bounded, since any HTTP client may open one: at most :data:`MAX_TAPS` open taps,
:data:`MAX_MESSAGES` messages each and :data:`MAX_BYTES` of bodies over all of them
(then a tap stops recording and reports ``"overflow": true``; publishers never see an
error). A tap nobody read for :data:`IDLE_TIMEOUT` seconds stops recording and lets go
of what it holds at its next message, and is dropped at the next tap request.

The routes exist only while nsqd has no ``--auth-http-address``: they would let a
client without a secret read what authorized clients publish.
"""

from __future__ import annotations

import base64
import secrets
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ...go.syntax import parse_count
from ...http import HTTPError, Request, Router
from ...wire.names import is_valid_topic_name
from ..domain.topic import Publisher, Topic
from ..tap_file import (
    Record,
    append_records,
    create_tap_file,
    load_tap_file,
    mark_lost,
    remove_tap_file,
    tap_file_ids,
    tap_file_path,
)

if TYPE_CHECKING:
    from ..domain.channel import Channel
    from ..domain.message import Message
    from ..domain.nsqd import NSQD

__all__ = [
    "IDLE_TIMEOUT",
    "MAX_BYTES",
    "MAX_MESSAGES",
    "MAX_TAPS",
    "NodeTaps",
    "add_tap_routes",
]

#: Seconds a tap lives without being read.
IDLE_TIMEOUT = 300.0
#: The most messages one tap records (then the topic's publishers get no error;
#: the tap reports ``"overflow": true``).
MAX_MESSAGES = 1_000_000
#: The most taps open at once on one nsqd (``open`` answers 503 ``TOO_MANY_TAPS``).
MAX_TAPS = 64
#: The most body bytes all of one nsqd's taps hold together (a record costs its body
#: plus :data:`_RECORD_COST`).
MAX_BYTES = 64 * 1024 * 1024
_RECORD_COST = 100


class _Tap(list["Message"]):
    """A ``Topic.taps`` entry: records each published batch as it is published, in
    memory and through to its file (``path``; None: memory only)."""

    def __init__(self, topic: str, budget: _Budget, path: str | None, lost_path: str) -> None:
        super().__init__()
        self.topic = topic
        self.budget = budget
        self.records: list[Record] = []
        self.size = 0
        self.overflow = False
        #: Messages may be missing (see the module doc).
        self.lost = False
        self.path = path
        self.lost_path = lost_path
        self.touched = time.monotonic()

    def tapped(self, msgs: Iterable[Message], publisher: Publisher | None = None) -> None:
        """Record ``msgs`` (the topic calls this with every batch, before fan-out)."""
        if time.monotonic() - self.touched > IDLE_TIMEOUT:
            self.release()  # abandoned: hold nothing until the next request drops it
            self.remove_file()
            self.overflow = True
            return
        budget = self.budget
        start = len(self.records)
        fields = publisher.publisher_fields() if publisher is not None else None
        extra = sum(len(k) + len(v) for k, v in fields.items()) if fields else 0
        for m in msgs:
            cost = len(m.body) + _RECORD_COST + extra
            if len(self.records) >= MAX_MESSAGES or budget.used + cost > MAX_BYTES:
                self.overflow = True
                break
            # the DPUB delay is in the deadline until fan-out
            self.records.append(
                (m.id.decode("ascii"), m.timestamp, round(m.deadline * 1000), m.body, fields)
            )
            self.size += cost
            budget.used += cost
        self.save(self.records[start:])

    def save(self, records: list[Record]) -> None:
        """Write ``records`` through to the tap's file; on failure, mark it lost."""
        if self.path is None or not records:
            return
        try:
            append_records(self.path, records)
        except OSError:
            # From here on only memory holds them: a crash would lose them, so the
            # file's name says so (a rename needs no free space) and the tap too.
            mark_lost(self.path, self.lost_path)
            self.path = None
            self.lost = True

    def release(self) -> None:
        """Give back what the records hold."""
        self.budget.used -= self.size
        self.size = 0
        self.records = []

    def remove_file(self) -> None:
        """Delete the tap's file (closed or abandoned)."""
        for path in (self.path, self.lost_path):
            if path is not None:
                remove_tap_file(path)
        self.path = None


def _cost(record: Record) -> int:
    """What a record holds of the budget: its body, its publisher and a fixed part."""
    fields = record[4]
    extra = sum(len(k) + len(v) for k, v in fields.items()) if fields else 0
    return len(record[3]) + _RECORD_COST + extra


class _Budget:
    """The bytes all of one nsqd's taps hold."""

    def __init__(self) -> None:
        self.used = 0


class _Taps:
    """One nsqd's open taps; attached to a tapped topic whenever it is (re)created."""

    def __init__(self, nsqd: NSQD) -> None:
        self.nsqd = nsqd
        self.taps: dict[str, _Tap] = {}
        self.budget = _Budget()
        self._restore()
        nsqd.add_notify_callback(self._on_notify)

    def _new_tap(self, tap_id: str, topic: str, path: str | None) -> _Tap:
        lost_path = tap_file_path(self.nsqd.data_path, tap_id, lost=True)
        tap = self.taps[tap_id] = _Tap(topic, self.budget, path, lost_path)
        existing = self.nsqd.topics.get(topic)
        if existing is not None and not existing.exiting:
            existing.taps.append(tap)
        return tap

    def _restore(self) -> None:
        """Take back the taps an earlier run on this data path left open."""
        data_path = self.nsqd.data_path
        for tap_id, lost in tap_file_ids(data_path)[:MAX_TAPS]:
            path = tap_file_path(data_path, tap_id, lost=lost)
            loaded = load_tap_file(path, limit=MAX_BYTES - self.budget.used, lost=lost)
            if loaded is None:
                continue  # not a tap's file after all: leave it alone
            tap = self._new_tap(tap_id, loaded.topic, None if lost else path)
            tap.records = loaded.records
            tap.size = sum(_cost(r) for r in loaded.records)
            self.budget.used += tap.size
            tap.lost = loaded.lost
            tap.overflow = loaded.overflow

    def _on_notify(self, obj: Topic | Channel) -> None:
        # A new Topic gets its taps before its first message (get_topic notifies first).
        if isinstance(obj, Topic) and not obj.exiting:
            obj.taps.extend(t for t in self.taps.values() if t.topic == obj.name)

    def expire(self) -> None:
        """Close taps nobody read for IDLE_TIMEOUT seconds."""
        now = time.monotonic()
        for tap_id, tap in list(self.taps.items()):
            if now - tap.touched > IDLE_TIMEOUT:
                self.close(tap_id)

    def open(self, topic: str) -> str:
        if len(self.taps) >= MAX_TAPS:
            raise HTTPError(503, "TOO_MANY_TAPS")
        tap_id = secrets.token_hex(8)  # unique across restarts, and not guessable
        path = tap_file_path(self.nsqd.data_path, tap_id)
        try:
            create_tap_file(path, topic)
        except OSError:
            # memory only: it will not survive a restart (a reader then sees 404)
            self._new_tap(tap_id, topic, None)
        else:
            self._new_tap(tap_id, topic, path)
        return tap_id

    def get(self, tap_id: str) -> _Tap:
        tap = self.taps.get(tap_id)
        if tap is None:
            raise HTTPError(404, "TAP_NOT_FOUND")
        tap.touched = time.monotonic()
        return tap

    def close(self, tap_id: str) -> _Tap:
        tap = self.get(tap_id)
        del self.taps[tap_id]
        existing = self.nsqd.topics.get(tap.topic)
        if existing is not None:
            existing.taps[:] = [t for t in existing.taps if t is not tap]
        self.budget.used -= tap.size  # the caller answers with the records, then drops them
        tap.size = 0
        tap.remove_file()
        return tap


class NodeTaps:
    """One nsqd's taps, made on first use: its server makes one and gives it to the HTTP and
    the HTTPS app alike, so a tap opened on one is read on the other."""

    def __init__(self, nsqd: NSQD) -> None:
        self.nsqd = nsqd
        self._taps: _Taps | None = None

    def get(self) -> _Taps:
        """The node's taps (taking back those an earlier run left open), idle ones closed."""
        taps = self._taps
        if taps is None:
            taps = self._taps = _Taps(self.nsqd)
        taps.expire()
        return taps


def _arg(request: Request, name: str, error: str) -> str:
    values = request.args().get(name)
    if not values or not values[0]:
        raise HTTPError(400, error)
    return values[0]


def _document(tap: _Tap, start: int) -> dict[str, object]:
    messages = [
        {
            "id": tap_id,
            "timestamp": timestamp,
            "defer_ms": defer_ms,
            "body": base64.b64encode(body).decode("ascii"),
            "publisher": publisher,
        }
        for tap_id, timestamp, defer_ms, body, publisher in tap.records[start:]
    ]
    return {
        "messages": messages,
        "next": len(tap.records),
        "overflow": tap.overflow,
        "lost": tap.lost,
    }


def add_tap_routes(router: Router, node_taps: NodeTaps) -> None:
    """Add the ``/nsqbox/tap/...`` routes for ``node_taps`` to its node's HTTP router.

    The router leaves them out with ``--auth-http-address`` (reading what others
    publish needs no secret here) and checks Host and Origin for them. Taps an
    earlier run on the data path left open start recording again now, before the
    node takes its first publish.
    """
    if router.nsqbox_routes and tap_file_ids(node_taps.nsqd.data_path):
        node_taps.get()

    async def tap_open(request: Request) -> dict[str, object]:
        topic = _arg(request, "topic", "MISSING_ARG_TOPIC")
        if not is_valid_topic_name(topic):
            raise HTTPError(400, "INVALID_TOPIC")
        return {"id": node_taps.get().open(topic)}

    def start(request: Request) -> int:
        raw = (request.args().get("from") or ["0"])[0]
        try:
            return parse_count(raw)
        except ValueError:
            raise HTTPError(400, "INVALID_FROM") from None

    async def tap_read(request: Request) -> dict[str, object]:
        tap = node_taps.get().get(_arg(request, "id", "MISSING_ARG_ID"))
        return _document(tap, start(request))

    async def tap_close(request: Request) -> dict[str, object]:
        tap = node_taps.get().close(_arg(request, "id", "MISSING_ARG_ID"))
        return _document(tap, start(request))

    router.add("POST", "/nsqbox/tap/open", tap_open)
    router.add("GET", "/nsqbox/tap/read", tap_read, log=False)
    router.add("POST", "/nsqbox/tap/close", tap_close)
