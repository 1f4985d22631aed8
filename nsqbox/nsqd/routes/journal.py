"""nsqbox's journal routes: what happened to each message, and the ones clients gave up on.

Not part of NSQ (nsq#848, #1311, #633; dead letters: nsq#974, #591, #1309). Under
``/nsqbox/``, a prefix no nsqd route uses; real nsqd answers ``404``.

- ``GET /nsqbox/journal[?id=I][&topic=T][&channel=C][&kind=K,K...][&client=N][&since=NS]
  [&until=NS][&after=N][&limit=L]``: the journal's events (:mod:`..domain.journal_views`),
  oldest first, as ``{"size", "recorded", "oldest", "events", "next"}``. Each event has a
  number ``n``; ``next`` is the ``after`` of the following page, ``null`` after the last.
  ``since`` and ``until`` are broker wall times in ns; ``client`` is a connection's id as
  ``/stats`` shows it; ``kind`` names kinds from :data:`~..domain.journal.KINDS`.
- ``GET /nsqbox/journal/stream[?<the same filters>][&after=N[&journal=J]][&max_ms=M]``: the
  streaming form (:mod:`.journal_stream`): the events recorded from now on (or after event
  ``N`` of journal ``J``, its start marker's: of another journal, from the oldest held), as
  JSON lines written as they come, for ``max_ms`` (at most an hour) or until the client
  hangs up; at most :data:`MAX_STREAMS` at once per nsqd (``503 TOO_MANY_STREAMS``).
- ``GET /nsqbox/journal/troubles?topic=T&channel=C[&requeues=N][&held_ms=X][&timed_out=true]
  [&body_bytes=B][&limit=L]``: the channel's messages in trouble now (requeued or timed
  out, not finished), with their bodies (base64, the first ``body_bytes`` bytes).
- ``GET /nsqbox/journal/given_up?topic=T&channel=C[&attempts=N][&body_bytes=B][&limit=L]``:
  the channel's messages finished at attempt ``N`` or later after earlier deliveries of
  them failed (what pynsq's ``max_tries`` and go-nsq's ``MaxAttempts`` do), newest first,
  with their bodies.

Every parameter is bounded; a read walks the journal once, so it costs time in proportion
to ``--journal-size``, never more. With ``--journal-size=0`` each route answers
``404 JOURNAL_OFF``. The routes exist only while nsqd has no ``--auth-http-address``: they
let any HTTP client read message bodies.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from ...go.syntax import parse_count
from ...http import HTTPError, Request, Response, Router
from ...wire.names import is_valid_channel_name, is_valid_topic_name
from ..domain.journal import KINDS
from ..domain.journal_follow import Follower
from ..domain.journal_views import EventFilter, events_page, given_up_doc, troubles_doc
from .journal_stream import stream_lines

if TYPE_CHECKING:
    from ..domain.journal import Journal
    from ..domain.nsqd import NSQD

__all__ = [
    "DEFAULT_LIMIT",
    "MAX_BODY_BYTES",
    "MAX_LIMIT",
    "MAX_STREAMS",
    "MAX_STREAM_MS",
    "add_journal_routes",
]

#: Events (or messages) per page unless ``limit`` says otherwise, and the most it may say.
DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
#: Body bytes shown per message unless ``body_bytes`` says otherwise, and the most.
DEFAULT_BODY_BYTES = 1024
MAX_BODY_BYTES = 1024 * 1024
_INT64 = (1 << 63) - 1
#: How long one stream may last (ms), and its default; a client goes on with a new stream
#: from the last one's ``next``.
MAX_STREAM_MS = 3_600_000
#: Streams one nsqd serves at once.
MAX_STREAMS = 64

Doc = dict[str, object]


def _arg(request: Request, name: str) -> str:
    return (request.args().get(name) or [""])[0]


def _count(request: Request, name: str, default: int, most: int, least: int = 0) -> int:
    raw = _arg(request, name)
    if not raw:
        return default
    try:
        return parse_count(raw, most, least=least)
    except ValueError:
        raise HTTPError(400, f"INVALID_{name.upper()}") from None


def _place(request: Request, *, required: bool) -> tuple[str, str]:
    topic, channel = _arg(request, "topic"), _arg(request, "channel")
    if required and not topic:
        raise HTTPError(400, "MISSING_ARG_TOPIC")
    if required and not channel:
        raise HTTPError(400, "MISSING_ARG_CHANNEL")
    if topic and not is_valid_topic_name(topic):
        raise HTTPError(400, "INVALID_TOPIC")
    if channel and not is_valid_channel_name(channel):
        raise HTTPError(400, "INVALID_CHANNEL")
    return topic, channel


def _filter(request: Request) -> EventFilter:
    topic, channel = _place(request, required=False)
    raw_id = _arg(request, "id")
    if raw_id and (len(raw_id) != 16 or not raw_id.isascii() or not raw_id.isalnum()):
        raise HTTPError(400, "INVALID_ID")
    kinds: set[int] = set()
    for name in filter(None, _arg(request, "kind").split(",")):
        if name not in KINDS:
            raise HTTPError(400, "INVALID_KIND")
        kinds.add(KINDS.index(name))
    return EventFilter(
        msg_id=raw_id.encode("ascii"),
        topic=topic,
        channel=channel,
        kinds=frozenset(kinds),
        client=_count(request, "client", 0, _INT64),
        since=_count(request, "since", 0, _INT64),
        until=_count(request, "until", 0, _INT64),
    )


def add_journal_routes(router: Router, nsqd: NSQD) -> None:
    """Add ``GET /nsqbox/journal`` and its views for ``nsqd`` to its HTTP router.

    The router leaves them out with ``--auth-http-address`` (they show message bodies)
    and checks Host and Origin for them, as for every route under ``/nsqbox/``.
    """

    def journal() -> Journal:
        if nsqd.journal is None:
            raise HTTPError(404, "JOURNAL_OFF")
        return nsqd.journal

    async def events(request: Request) -> Doc:
        want = _filter(request)
        after = _count(request, "after", 0, _INT64)
        limit = _count(request, "limit", DEFAULT_LIMIT, MAX_LIMIT, least=1)
        return events_page(journal(), want, after, limit)

    streams = 0

    async def stream(request: Request) -> Response:
        want = _filter(request)
        after = _count(request, "after", 0, _INT64) if _arg(request, "after") else None
        seconds = _count(request, "max_ms", MAX_STREAM_MS, MAX_STREAM_MS, least=1) / 1000
        named = _arg(request, "journal")  # whose event numbers ``after`` counts in
        if named and after is not None and named != journal().id:
            after = 0  # another journal's (the node restarted since): all of this one's
        follower = Follower(journal(), want, after)
        if streams >= MAX_STREAMS:
            raise HTTPError(503, "TOO_MANY_STREAMS")
        return Response(
            headers=(("Content-Type", "application/x-ndjson"),),
            nsq_header=False,
            stream=_counted(stream_lines(follower.journal, follower, seconds)),
        )

    async def _counted(lines: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        nonlocal streams
        streams += 1
        try:
            async for piece in lines:
                yield piece
        finally:
            streams -= 1

    async def troubles(request: Request) -> Doc:
        topic, channel = _place(request, required=True)
        timed_out = _arg(request, "timed_out")
        if timed_out not in ("", "true", "false"):
            raise HTTPError(400, "INVALID_TIMED_OUT")
        return troubles_doc(
            journal(),
            topic,
            channel,
            requeues=_count(request, "requeues", 0, 1 << 16),
            held_ms=_count(request, "held_ms", 0, _INT64),
            timed_out=timed_out == "true",
            body_bytes=_count(request, "body_bytes", DEFAULT_BODY_BYTES, MAX_BODY_BYTES),
            limit=_count(request, "limit", DEFAULT_LIMIT, MAX_LIMIT, least=1),
        )

    async def given_up(request: Request) -> Doc:
        topic, channel = _place(request, required=True)
        return given_up_doc(
            journal(),
            topic,
            channel,
            attempts=_count(request, "attempts", 0, 1 << 16),
            body_bytes=_count(request, "body_bytes", DEFAULT_BODY_BYTES, MAX_BODY_BYTES),
            limit=_count(request, "limit", DEFAULT_LIMIT, MAX_LIMIT, least=1),
        )

    router.add("GET", "/nsqbox/journal", events, log=False)
    router.add("GET", "/nsqbox/journal/stream", stream, log=False)
    router.add("GET", "/nsqbox/journal/troubles", troubles, log=False)
    router.add("GET", "/nsqbox/journal/given_up", given_up, log=False)
