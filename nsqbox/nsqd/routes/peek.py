"""nsqbox's peek route: list the messages a channel (or a topic) holds, changing nothing.

Not part of NSQ (nsqadmin users have long asked for it: nsq#375, #667, #848). The route is
under ``/nsqbox/``, a prefix no nsqd route uses; real nsqd answers ``404``, which tells a
client it talks to real nsqd.

``GET /nsqbox/peek?topic=T[&channel=C][&limit=N][&body_bytes=B][&cursor=X]``

answers ``{"topic", "channel", "depth", "in_flight_count", "deferred_count", "messages",
"next"}``. ``messages`` lists up to ``limit`` messages (default :data:`DEFAULT_LIMIT`, at
most :data:`MAX_LIMIT`, and fewer once their bodies pass :data:`PAGE_BYTES`), each
``{"id", "state", "attempts", "timestamp", "size", "body"}``: ``size`` is the body's length,
``body`` its first ``body_bytes`` bytes (default :data:`DEFAULT_BODY_BYTES`) in base64,
``timestamp`` in ns. ``state`` is where the message is, in this order:

- ``memory``: queued in the memory queue (a topic's DPUB message adds ``defer_ms``);
- ``disk``: queued in the disk queue, read from its files from the read position on with a
  file descriptor of its own (see :mod:`.diskqueue_peek`): the read position, the meta file
  and depth stay as they are;
- ``deferred`` (channels only): adds ``defer_left_ms``, the time left before it is queued;
- ``in_flight`` (channels only): adds ``timeout_left_ms``, ``client_id`` (the connection's
  id in ``/stats``) and ``client`` (its remote address).

``next`` is the cursor of the following page (pass it as ``cursor``), ``null`` after the
last one. A cursor is a position (``memory:120``, ``disk:3:4096``, ``deferred:0``, ...), so
messages consumed or added between pages may be skipped or listed twice; a disk position
the queue has read past continues at its read position. Without ``channel`` the route lists
what the topic holds for channels not yet created (``memory`` and ``disk``). An unknown topic
or channel is ``404`` (peeking never creates one). A disk file that cannot be read ends the
``disk`` part with ``"disk_error"`` in the answer.

Every page costs memory in proportion to the page, never to the depth. The route exists only
while nsqd has no ``--auth-http-address``: it lets any HTTP client read message bodies.
"""

from __future__ import annotations

import base64
import itertools
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ...go.syntax import parse_count
from ...http import HTTPError, Request, Router
from ...wire.message import MESSAGE_HEADER, MIN_VALID_MSG_LENGTH, MSG_ID_LENGTH
from ...wire.names import is_valid_channel_name, is_valid_topic_name
from ..diskqueue.reader import DiskQueueReader

if TYPE_CHECKING:
    from ..domain.channel import Channel
    from ..domain.message import Message
    from ..domain.nsqd import NSQD
    from ..domain.topic import Topic

__all__ = [
    "DEFAULT_BODY_BYTES",
    "DEFAULT_LIMIT",
    "MAX_BODY_BYTES",
    "MAX_LIMIT",
    "PAGE_BYTES",
    "add_peek_routes",
]

#: Messages per page unless ``limit`` says otherwise, and the most it may say.
DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
#: Body bytes listed per message unless ``body_bytes`` says otherwise, and the most.
DEFAULT_BODY_BYTES = 1024
MAX_BODY_BYTES = 1024 * 1024
#: A page ends once its bodies hold this many bytes (after at least one message).
PAGE_BYTES = 1024 * 1024

_CHANNEL_SECTIONS = ("memory", "disk", "deferred", "in_flight")
_TOPIC_SECTIONS = ("memory", "disk")
_HEADER = MIN_VALID_MSG_LENGTH  # timestamp, attempts, id: a record's bytes before the body

Doc = dict[str, object]


def _b64(body: bytes) -> str:
    return base64.b64encode(body).decode("ascii")


def _message_doc(msg: Message, state: str, body_bytes: int) -> Doc:
    body = msg.body
    return {
        "id": msg.id.decode("ascii", "replace"),
        "state": state,
        "attempts": msg.attempts,
        "timestamp": msg.timestamp,
        "size": len(body),
        "body": _b64(body[:body_bytes]),
    }


class _Page:
    """One page being built: its messages, their body bytes, and the room left."""

    def __init__(self, nsqd: NSQD, limit: int, body_bytes: int) -> None:
        self.nsqd = nsqd
        self.limit = limit
        self.body_bytes = body_bytes
        self.messages: list[Doc] = []
        self.held = 0
        self.disk_error = ""

    @property
    def full(self) -> bool:
        return len(self.messages) >= self.limit or (bool(self.messages) and self.held >= PAGE_BYTES)

    @property
    def room(self) -> int:
        return self.limit - len(self.messages)

    def add(self, doc: Doc, body_len: int) -> None:
        self.messages.append(doc)
        self.held += body_len

    def held_messages(
        self, msgs: Iterable[Message], state: str, start: int, now: float, at_topic: bool
    ) -> str | None:
        """Add ``msgs`` (from the ``start``-th on); the cursor to go on with, or None.

        ``at_topic``: they are a topic's, whose memory messages carry a DPUB's delay in their
        lease (a channel's carry the last delivery's, which is no delay).
        """
        taken = 0
        for msg in msgs:
            if self.full:
                break
            doc = _message_doc(msg, state, self.body_bytes)
            if state == "memory" and at_topic and msg.deadline:  # a DPUB: its delay
                doc["defer_ms"] = round(msg.deadline * 1000)
            elif state == "deferred":
                doc["defer_left_ms"] = max(0, round((msg.deadline - now) * 1000))
            elif state == "in_flight":
                doc["timeout_left_ms"] = max(0, round((msg.deadline - now) * 1000))
                doc["client_id"] = msg.client_id
                client = self.nsqd.clients.get(msg.client_id)
                doc["client"] = getattr(client, "remote_address", None)
            self.add(doc, min(len(msg.body), self.body_bytes))
            taken += 1
        else:
            return None
        return f"{state}:{start + taken}"

    def disk(self, backend: object, start: tuple[int, int] | None, depth: int) -> str | None:
        """Add records of the disk queue ``backend``; the cursor to go on with, or None."""
        if not isinstance(backend, DiskQueueReader):
            if depth:
                self.disk_error = "the disk queue cannot be read"
            return None
        from ..diskqueue.peek import scan  # loads on the first peek at a disk queue

        result = scan(backend, start, self.room, _HEADER + self.body_bytes, PAGE_BYTES - self.held)
        for record in result.records:
            head = record.head
            timestamp, attempts = MESSAGE_HEADER.unpack_from(head)
            body = head[_HEADER:]
            doc: Doc = {
                "id": head[10 : 10 + MSG_ID_LENGTH].decode("ascii", "replace"),
                "state": "disk",
                "attempts": attempts,
                "timestamp": timestamp,
                "size": record.size - _HEADER,
                "body": _b64(body),
            }
            self.add(doc, len(body))
        self.disk_error = result.error
        if result.next is None:
            return None
        return f"disk:{result.next[0]}:{result.next[1]}"


def _parse_cursor(raw: str, sections: tuple[str, ...]) -> tuple[int, list[int]]:
    """The section index and numbers of a cursor; ``400 INVALID_CURSOR`` if not one."""
    name, *numbers = raw.split(":")
    want = (0, 2) if name == "disk" else (0, 1)
    if name not in sections or len(numbers) not in want:
        raise HTTPError(400, "INVALID_CURSOR")
    try:  # ASCII digits, within int64 (a file number and a byte offset, or a count)
        return sections.index(name), [parse_count(n) for n in numbers]
    except ValueError:
        raise HTTPError(400, "INVALID_CURSOR") from None


def _int_arg(request: Request, name: str, default: int, most: int, error: str) -> int:
    raw = (request.args().get(name) or [""])[0]
    if not raw:
        return default
    try:
        return parse_count(raw, most, least=1)
    except ValueError:
        raise HTTPError(400, error) from None


def peek_document(
    nsqd: NSQD,
    topic: Topic,
    channel: Channel | None,
    limit: int,
    body_bytes: int,
    cursor: str,
) -> Doc:
    """One page of what ``channel`` (or, if None, ``topic``) holds, from ``cursor`` on."""
    owner: Topic | Channel = channel if channel is not None else topic
    sections = _TOPIC_SECTIONS if channel is None else _CHANNEL_SECTIONS
    index, numbers = _parse_cursor(cursor, sections) if cursor else (0, [])
    page = _Page(nsqd, limit, body_bytes)
    now = nsqd.now()
    next_cursor: str | None = None
    for section in sections[index:]:
        if page.full:
            next_cursor = section
            break
        start = numbers[0] if numbers else 0
        if section == "disk":
            pos = (numbers[0], numbers[1]) if numbers else None
            next_cursor = page.disk(owner.backend, pos, owner.backend.depth)
        else:
            if section == "memory":
                held: Iterable[Message] = itertools.islice(owner.memory, start, None)
            else:
                assert channel is not None
                queue = channel.deferred if section == "deferred" else channel.in_flight
                held = queue.page(start, page.room + 1)
            next_cursor = page.held_messages(held, section, start, now, channel is None)
        numbers = []
        if next_cursor is not None:
            break
    doc: Doc = {
        "topic": topic.name,
        "channel": None if channel is None else channel.name,
        "depth": owner.depth(),
        "in_flight_count": 0 if channel is None else channel.in_flight_count(),
        "deferred_count": 0 if channel is None else channel.deferred_count(),
        "messages": page.messages,
        "next": next_cursor,
    }
    if page.disk_error:
        doc["disk_error"] = page.disk_error
    return doc


def add_peek_routes(router: Router, nsqd: NSQD) -> None:
    """Add ``GET /nsqbox/peek`` for ``nsqd`` to its HTTP router.

    The router leaves it out with ``--auth-http-address`` (reading message bodies
    needs no secret here) and checks Host and Origin for it.
    """

    async def peek(request: Request) -> Doc:
        args = request.args()
        topic_name = (args.get("topic") or [""])[0]
        if not topic_name:
            raise HTTPError(400, "MISSING_ARG_TOPIC")
        if not is_valid_topic_name(topic_name):
            raise HTTPError(400, "INVALID_TOPIC")
        channel_name = (args.get("channel") or [""])[0]
        if channel_name and not is_valid_channel_name(channel_name):
            raise HTTPError(400, "INVALID_CHANNEL")
        limit = _int_arg(request, "limit", DEFAULT_LIMIT, MAX_LIMIT, "INVALID_LIMIT")
        body_bytes = _int_arg(
            request, "body_bytes", DEFAULT_BODY_BYTES, MAX_BODY_BYTES, "INVALID_BODY_BYTES"
        )
        topic = nsqd.topics.get(topic_name)
        if topic is None or topic.exiting:
            raise HTTPError(404, "TOPIC_NOT_FOUND")
        channel = None
        if channel_name:
            channel = topic.channels.get(channel_name)
            if channel is None or channel.exiting:
                raise HTTPError(404, "CHANNEL_NOT_FOUND")
        cursor = (args.get("cursor") or [""])[0]
        return peek_document(nsqd, topic, channel, limit, body_bytes, cursor)

    router.add("GET", "/nsqbox/peek", peek, log=False)
