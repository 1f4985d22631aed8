"""The streaming form of nsqbox's journal route: new events as JSON lines, as they come.

``GET /nsqbox/journal/stream`` (:mod:`.journal` parses it) answers with a body that does not
end until ``max_ms`` has passed or the client hangs up: one JSON document per line, written as
the journal records. An event's line is the event as ``GET /nsqbox/journal`` lists it (it has
``n`` and ``kind``); the other lines are markers, each with ``marker`` and ``next`` (the
``after`` a new stream would go on from):

- ``{"marker": "start", "next": N, "size": S, "recorded": R, "journal": J}`` first, at
  once (``J`` names this journal: a new one each time the node starts; a stream asked for
  ``after=N&journal=J`` of another journal starts from the oldest entry held);
- ``{"marker": "lost", "entries": K, "next": N}`` when the client read too slowly and the
  ring let ``K`` entries (steps of batches: one event or more each) go before they were
  sent;
- ``{"marker": "heartbeat", "time": T, "next": N}`` after :data:`HEARTBEAT` of silence (so a
  client that went away is found out by the write);
- ``{"marker": "end", "next": N}`` last, when ``max_ms`` is over.

The stream holds no more than one piece (at most :data:`PIECE_EVENTS` events) for its client:
while the client does not read, nothing more is decoded, and the journal's ring, whose size is
``--journal-size`` whoever reads, is the only backlog. The stream looks for new entries every
:data:`POLL` (:data:`IDLE_POLL` after a look that found none; at once while it is
:data:`BEHIND` or more entries behind) and decodes them on the loop the publishers share,
:data:`STEP_EVENTS` events at a time (:mod:`..domain.journal_follow`), with a turn for the
publishers after each step, and takes at most :data:`SHARE` of the loop's time: after each
piece it waits as long as its steps took (the poll's wait, when that is longer). So what a
stream holds the loop for at once is one step (and a new reading's decoding of the entries
recorded since the last poll), not a piece. A stream that cannot keep up within its share
falls behind, and then loses entries (a ``lost`` marker), rather than slowing the
publishers further.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from time import perf_counter
from typing import TYPE_CHECKING, Any, Final

import msgspec

from ..domain.journal_follow import Follower

if TYPE_CHECKING:
    from ..domain.journal import Journal

__all__ = [
    "BEHIND",
    "HEARTBEAT",
    "IDLE_POLL",
    "PIECE_EVENTS",
    "POLL",
    "SHARE",
    "STEP_EVENTS",
    "stream_lines",
]

#: How often a stream looks for new entries (seconds) while it finds some...
POLL: Final = 0.01
#: ...and while it found none at its last look.
IDLE_POLL: Final = 0.05
#: How many entries behind a stream reads on at once, without waiting for the next poll.
BEHIND: Final = 128
#: A silent stream's heartbeat (seconds).
HEARTBEAT: Final = 5.0
#: The most events written as one piece of the body.
PIECE_EVENTS: Final = 250
#: The most events decoded in one go, between turns for the publishers (about 0.15 ms).
STEP_EVENTS: Final = 50
#: The most of the loop's time one stream takes decoding: after each piece it waits until
#: the piece's decoding time is this share of the time since it began.
SHARE: Final = 0.5

_encoder = msgspec.json.Encoder()


async def stream_lines(
    journal: Journal,
    follower: Follower,
    seconds: float,
    *,
    poll: float = POLL,
    idle_poll: float = IDLE_POLL,
) -> AsyncIterator[bytes]:
    """The body of one stream: pieces of JSON lines for ``seconds`` (module doc)."""
    import trio

    encode = _encoder.encode
    end = trio.current_time() + seconds
    start = {"marker": "start", "next": follower.after}
    yield (
        encode({**start, "size": journal.size, "recorded": journal.recorded, "journal": journal.id})
        + b"\n"
    )
    quiet_since = trio.current_time()
    while (now := trio.current_time()) < end:
        owed, wait = 0.0, idle_poll
        if follower.pending():
            wait = poll
            piece: list[bytes] = []
            held = 0
            busy = 0.0  # the steps' time, not the turns' between them
            while True:
                began = perf_counter()
                held += _step(follower, min(STEP_EVENTS, PIECE_EVENTS - held), piece)
                busy += perf_counter() - began
                if held >= PIECE_EVENTS or not follower.reading:
                    break
                await trio.lowlevel.checkpoint()  # a turn for the publishers between steps
            # the loop's share this stream may take: wait what the others are owed
            owed = busy * (1 / SHARE - 1)
            if piece:
                yield b"".join(piece)
                quiet_since = trio.current_time()
            if held >= PIECE_EVENTS or follower.behind() >= BEHIND:
                await trio.sleep(owed)  # behind: no poll
                continue
        elif now - quiet_since >= HEARTBEAT:
            beat = {"marker": "heartbeat", "time": journal.wall_ns(), "next": follower.after}
            yield encode(beat) + b"\n"
            quiet_since = now
        await trio.sleep(max(owed, min(wait, end - now)))
    yield encode({"marker": "end", "next": follower.after}) + b"\n"


def _step(follower: Follower, limit: int, piece: list[bytes]) -> int:
    """Decode at most ``limit`` events (and a ``lost`` marker) and add their lines to
    ``piece``; how many lines."""
    page = follower.read(limit)
    lines: list[Any] = []
    if page.lost:
        lines.append({"marker": "lost", "entries": page.lost, "next": page.lost_until})
    lines += page.events
    if lines:
        piece.append(_encoder.encode_lines(lines))
    return len(lines)
