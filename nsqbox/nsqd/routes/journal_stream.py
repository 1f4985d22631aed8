"""The streaming form of nsqbox's journal route: new events as JSON lines, as they come.

``GET /nsqbox/journal/stream`` (:mod:`.journal` parses it) answers with a body that does not
end until ``max_ms`` has passed or the client hangs up: one JSON document per line, written as
the journal records. An event's line is the event as ``GET /nsqbox/journal`` lists it (it has
``n`` and ``kind``); the other lines are markers, each with ``marker`` and ``next`` (the
``after`` a new stream would go on from):

- ``{"marker": "start", "next": N, "size": S, "recorded": R}`` first, at once;
- ``{"marker": "lost", "entries": K, "next": N}`` when the client read too slowly and the
  ring let ``K`` entries (steps of batches: one event or more each) go before they were
  sent;
- ``{"marker": "heartbeat", "time": T, "next": N}`` after :data:`HEARTBEAT` of silence (so a
  client that went away is found out by the write);
- ``{"marker": "end", "next": N}`` last, when ``max_ms`` is over.

The stream holds no more than one piece (at most :data:`PIECE_EVENTS` events) for its client:
while the client does not read, nothing more is decoded, and the journal's ring, whose size is
``--journal-size`` whoever reads, is the only backlog. The stream looks for new entries every
:data:`POLL` and decodes them on the loop the publishers share, a bounded piece at a time
(:mod:`..domain.journal_follow`), and takes at most :data:`SHARE` of the loop's time: after
each piece it waits as long as decoding it took. A stream that cannot keep up within
that share falls behind, and then loses entries (a ``lost`` marker), rather than slowing the
publishers further.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from time import perf_counter
from typing import TYPE_CHECKING, Final

import msgspec

from ..domain.journal_follow import Follower

if TYPE_CHECKING:
    from ..domain.journal import Journal

__all__ = ["HEARTBEAT", "PIECE_EVENTS", "POLL", "SHARE", "stream_lines"]

#: How often a stream looks for new entries (seconds).
POLL: Final = 0.05
#: A silent stream's heartbeat (seconds).
HEARTBEAT: Final = 5.0
#: The most events decoded and written as one piece of the body.
PIECE_EVENTS: Final = 250
#: The most of the loop's time one stream takes decoding: after each piece it waits until
#: the piece's decoding time is this share of the time since it began.
SHARE: Final = 0.5

_encoder = msgspec.json.Encoder()


async def stream_lines(
    journal: Journal, follower: Follower, seconds: float, *, poll: float = POLL
) -> AsyncIterator[bytes]:
    """The body of one stream: pieces of JSON lines for ``seconds`` (module doc)."""
    import trio

    encode = _encoder.encode
    end = trio.current_time() + seconds
    start = {"marker": "start", "next": follower.after}
    yield encode({**start, "size": journal.size, "recorded": journal.recorded}) + b"\n"
    quiet_since = trio.current_time()
    while (now := trio.current_time()) < end:
        if follower.pending():
            began = perf_counter()
            page = follower.read(PIECE_EVENTS)
            lines = []
            if page.lost:
                lost = {"marker": "lost", "entries": page.lost, "next": page.lost_until}
                lines.append(lost)
            lines.extend(page.events)
            piece = _encoder.encode_lines(lines)
            # the loop's share this stream may take: wait what the others are owed
            owed = (perf_counter() - began) * (1 / SHARE - 1)
            if lines:
                yield piece
                quiet_since = trio.current_time()
            await trio.sleep(owed)  # a turn for the publishers, at least
            if follower.pending():
                continue  # more already: no poll
        elif now - quiet_since >= HEARTBEAT:
            beat = {"marker": "heartbeat", "time": journal.wall_ns(), "next": follower.after}
            yield encode(beat) + b"\n"
            quiet_since = now
        await trio.sleep(min(poll, max(end - now, 0)))
    yield encode({"marker": "end", "next": follower.after}) + b"\n"
