"""Runs of FIN lines and whole PUBs: one event each for the parser, answered as the commands
they stand for would be, one by one."""

from __future__ import annotations

import shutil
from pathlib import Path

import httpx
import pytest

from nsqbox.wire import commands
from nsqbox.wire.parser import NEED_DATA, Body, Command, CommandParser, Event, FinRun, Pub
from tests.conftest import StartNSQD
from tests.helpers import RawConn

ID = b"0123456789abcdef"


def events(data: bytes, *, chunk: int, fin_runs: bool, pub_limit: int = 0) -> list[Event]:
    parser = CommandParser(fin_runs=fin_runs, pub_limit=pub_limit)
    out: list[Event] = []
    for i in range(0, len(data), chunk):
        parser.receive_data(data[i : i + chunk])
        while (event := parser.next_event()) is not NEED_DATA:
            out.append(event)
            if isinstance(event, Command) and event.name == b"PUB":
                parser.expect_body("PUB", 10, message=True)  # as nsqd's handler, 10 B at most
    assert parser.buffered == 0
    return out


def as_lines(evs: list[Event]) -> list[Event]:
    """A FinRun as the FIN commands it stands for, a Pub as its commands and bodies."""
    flat: list[Event] = []
    for ev in evs:
        if isinstance(ev, FinRun):
            flat += [Command(b"FIN", [b"FIN", msg_id]) for msg_id in ev.ids]
        elif isinstance(ev, Pub):
            for data in ev.bodies:
                flat += [Command(b"PUB", ev.params), Body(data)]
        else:
            flat.append(ev)
    return flat


MIXED = (
    b"".join(b"FIN %016x\n" % i for i in range(5))
    + b"FIN 0123456789a cdef\n"  # a space in the id: [FIN, 0123456789a, cdef]
    + b"FIN 0123456789abcde\r\n"  # CR: a 15-byte id once stripped
    + b"FIN "
    + ID
    + b"\r\n"
    + b"NOP\n"
    + b"FIN "
    + ID
    + b"\n"
    + b"FIN short\n"
    + b"".join(b"FIN %016x\n" % i for i in range(5000))
    + b"".join(b"FIN %016x\nFIN 0123456789a cdef\n" % i for i in range(50))  # a run breaks
)


@pytest.mark.parametrize("chunk", [1, 7, 21, 100, 4096, len(MIXED)])
def test_fin_runs_stand_for_the_same_commands(chunk: int) -> None:
    plain = events(MIXED, chunk=chunk, fin_runs=False)
    runs = events(MIXED, chunk=chunk, fin_runs=True)
    assert not any(isinstance(ev, FinRun) for ev in plain)
    assert as_lines(runs) == plain
    if chunk == len(MIXED):
        # whole: the first five are one run, and 5,000 lines take ten (at most 512 each)
        sizes = [len(ev.ids) for ev in runs if isinstance(ev, FinRun)]
        assert sizes == [5, 1] + [512] * 9 + [393] + [1] * 49  # the next plain one joins


PUBS = (
    commands.pub("t", b"a")
    + commands.pub("t", b"0123456789")  # the largest a Pub may carry here: the same run
    + b"PUB t\r\n"
    + commands.pub("u", b"b")[6:]  # CR: another line (still a Pub, params as split)
    + commands.nop()
    + b"".join(commands.pub("t", b"%d" % i) for i in range(600))  # more than one run holds
    + commands.pub("u", b"c")
    + commands.pub("t", b"d")  # another topic: another run
    + commands.pub("t", b"b" * 11)[:-1]  # too big for a Pub: a Command (then its error)
)


@pytest.mark.parametrize("chunk", [1, 5, 16, 1000, len(PUBS)])
def test_whole_pubs_stand_for_their_commands_and_bodies(chunk: int) -> None:
    data = PUBS[: -len(b"PUB t\n") - 4 - 10]  # all but the too-big one, whose body errs
    plain = events(data, chunk=chunk, fin_runs=False)
    whole = events(data, chunk=chunk, fin_runs=False, pub_limit=10)
    assert not any(isinstance(ev, Pub) for ev in plain)
    assert as_lines(whole) == plain
    pubs = [ev for ev in whole if isinstance(ev, Pub)]  # each run's size, from positions
    assert [ev.nbytes for ev in pubs] == [sum(map(len, ev.bodies)) for ev in pubs]
    if chunk == len(PUBS):
        runs = [len(ev.bodies) if isinstance(ev, Pub) else ev for ev in whole]
        assert runs == [2, 1, Command(b"NOP", [b"NOP"]), 512, 88, 1, 1]
    parser = CommandParser(pub_limit=10)
    parser.receive_data(PUBS[len(data) :])
    assert parser.next_event() == Command(b"PUB", [b"PUB", b"t"])  # too big: the generic way


async def test_whole_pubs_are_published(start_nsqd: StartNSQD) -> None:
    # their errors are in test_errors.py's table (pub-topic-whole, pub-too-big-whole)
    nsqd = await start_nsqd(max_msg_size=10)
    ok = await RawConn.open(nsqd.tcp)
    await ok.send(commands.pub("t", b"x") + b"PUB t extra\n" + commands.pub("t", b"y")[6:])
    assert [await ok.response(), await ok.response()] == [b"OK", b"OK"]
    await ok.aclose()


async def test_a_run_of_fins_is_answered_as_line_by_line(start_nsqd: StartNSQD) -> None:
    nsqd = await start_nsqd()
    a = await RawConn.open(nsqd.tcp)
    await a.sub("t", "c", rdy=3)
    b = await RawConn.open(nsqd.tcp)
    await b.sub("t", "c", rdy=1)
    publisher = await RawConn.open(nsqd.tcp)
    await publisher.mpub("t", [b"1", b"2", b"3", b"4", b"5"])
    await publisher.aclose()
    got = [await a.message() for _ in range(3)]
    theirs = await b.message()
    # one write: two of ours, one unknown, one of b's, our third; then a bad id (fatal)
    await a.send(
        b"FIN " + got[0].id + b"\n"
        b"FIN " + got[1].id + b"\n"
        b"FIN " + ID + b"\n"
        b"FIN " + theirs.id + b"\n"
        b"FIN " + got[2].id + b"\n"
        b"FIN abc\n"
    )
    assert await a.error() == b"E_FIN_FAILED FIN " + ID + b" failed ID not in flight"
    assert await a.error() == (
        b"E_FIN_FAILED FIN " + theirs.id + b" failed client does not own message"
    )
    assert await a.error() == b"E_INVALID invalid message ID"
    await a.expect_closed()
    await b.send(b"FIN " + theirs.id + b"\n")
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{nsqd.http[1]}") as http:
        stats = (await http.get("/stats?format=json&topic=t")).json()
    channel = stats["topics"][0]["channels"][0]
    assert channel["clients"][0]["finish_count"] == 1  # b's, once a has gone
    # a's three FINs took: only the fifth message is left (requeued when a went)
    assert channel["depth"] + channel["in_flight_count"] == 1
    await a.aclose()
    await b.aclose()


async def test_a_run_of_fins_before_sub_is_refused_once(start_nsqd: StartNSQD) -> None:
    nsqd = await start_nsqd()
    conn = await RawConn.open(nsqd.tcp)
    await conn.send(b"".join(b"FIN %016x\n" % i for i in range(50)))
    assert await conn.error() == b"E_INVALID cannot FIN in current state"
    await conn.expect_closed()
    assert conn.reader.take_buffered() == b""
    await conn.aclose()


async def test_pipelined_pubs_are_each_published_and_answered(start_nsqd: StartNSQD) -> None:
    nsqd = await start_nsqd()
    conn = await RawConn.open(nsqd.tcp)
    bodies = [b"%d" % i for i in range(1500)]  # three runs at least, however it is read
    await conn.send(b"".join(commands.pub("t", body) for body in bodies) + commands.nop())
    assert [await conn.response() for _ in bodies] == [b"OK"] * len(bodies)
    consumer = await RawConn.open(nsqd.tcp)
    await consumer.sub("t", "c", rdy=len(bodies))
    got = [await consumer.message() for _ in bodies]
    assert [m.body for m in got] == bodies
    assert [m.id for m in got] == sorted(m.id for m in got)
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{nsqd.http[1]}") as http:
        stats = (await http.get("/stats?format=json")).json()
    assert stats["topics"][0]["message_count"] == len(bodies)
    assert stats["producers"][0]["pub_counts"] == [{"topic": "t", "count": len(bodies)}]
    await consumer.aclose()
    await conn.aclose()


async def test_a_pub_that_fails_in_a_run_is_answered_after_those_before(
    start_nsqd: StartNSQD, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    nsqd = await start_nsqd(mem_queue_size=2, data_path=str(data))
    conn = await RawConn.open(nsqd.tcp)
    await conn.pub("t", b"0")  # the topic exists, and holds it in memory (no channel)
    shutil.rmtree(data)
    data.write_bytes(b"")  # the disk queue cannot open its file any more
    await conn.send(b"".join(commands.pub("t", b"%d" % i) for i in range(1, 4)))
    assert await conn.response() == b"OK"  # the second fits in memory
    error = await conn.error()  # the third needs the disk: as nsqd, fatal
    assert error.startswith(b"E_PUB_FAILED PUB failed "), error
    await conn.expect_closed()
    await conn.aclose()
    data.unlink()
    data.mkdir()  # for the shutdown's flush of the two held in memory
