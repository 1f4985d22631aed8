"""A stream behind by many pieces (issue #33): it decodes a step of events at a time, with
turns for the publishers between them, and writes the same lines as one page of the ring
shows, in pieces of at most ``PIECE_EVENTS`` events.

A real nsqd on 127.0.0.1 port 0, the stream's body read straight from its generator; no
pass/fail depends on timing (what a step costs is measured by ``bench/trace_bench.py``).
"""

from __future__ import annotations

from pathlib import Path

import msgspec
import trio

from nsqbox.client import open_producer
from nsqbox.nsqd.domain.journal_follow import Follower
from nsqbox.nsqd.domain.journal_views import EventFilter, events_page
from nsqbox.nsqd.routes.journal_stream import PIECE_EVENTS, STEP_EVENTS, stream_lines
from tests.helpers import RawConn
from tests.http.nsqd_app import TIMEOUT, start_nsqd_http


async def test_a_stream_behind_writes_what_one_page_shows_in_bounded_pieces(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    server = await start_nsqd_http(nursery, tmp_path)
    journal = server.journal
    conn = await RawConn.open(server.tcp)
    await conn.identify(user_agent="steps")
    await conn.sub("t", "c", rdy=0)  # a channel: each publish also queues its copy
    async with open_producer(server.tcp) as producer:
        await producer.mpub("t", [b"m%d" % i for i in range(400)])  # one entry, 800 events
        for i in range(30):
            await producer.pub("t", b"p%d" % i)
    want = EventFilter(topic="t")
    page = events_page(journal, want, 0, 10_000)
    assert page["next"] is None
    assert len(page["events"]) == 860
    follower = Follower(journal, want, after=0)
    assert follower.behind() == journal.recorded  # every entry yet to read
    assert STEP_EVENTS < PIECE_EVENTS < len(page["events"])
    pieces: list[bytes] = []
    lines = 0
    stream = stream_lines(journal, follower, 60.0)
    with trio.fail_after(TIMEOUT * 4):
        start = await stream.__anext__()
        while lines < len(page["events"]):
            piece = await stream.__anext__()
            count = piece.count(b"\n")
            assert 0 < count <= PIECE_EVENTS
            pieces.append(piece)
            lines += count
    await stream.aclose()
    await conn.aclose()
    assert msgspec.json.decode(start)["marker"] == "start"
    assert b"".join(pieces) == msgspec.json.Encoder().encode_lines(page["events"])
    assert max(piece.count(b"\n") for piece in pieces) == PIECE_EVENTS  # behind: full pieces
    assert follower.behind() == 0
    assert not follower.pending()
