"""Durability: clean shutdown persists everything, restart delivers it; SIGKILL with
--mem-queue-size 0 loses nothing acknowledged; a failing disk answers E_PUB_FAILED."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import httpx
import pytest
import trio
import trio.testing

from nsqbox.nsqd.server import serve_nsqd
from nsqbox.wire import commands
from tests.conftest import make_options
from tests.helpers import RawConn, publish, wait_until


async def drain(conn: RawConn, count: int) -> list[tuple[bytes, int]]:
    """Receive ``count`` messages, FIN each; return (body, attempts)."""
    got = []
    for _ in range(count):
        msg = await conn.message()
        got.append((msg.body, msg.attempts))
        await conn.send(commands.fin(msg.id))
    return got


async def test_clean_restart_delivers_exactly_the_unfinished(tmp_path: Path) -> None:
    opts: dict[str, object] = {"data_path": str(tmp_path), "mem_queue_size": 5}
    sent = {t: [f"{t}-{i}".encode() for i in range(40)] for t in ("t1", "t2")}
    finished: Counter[tuple[str, str, bytes]] = Counter()
    in_flight: set[tuple[str, str, bytes]] = set()
    async with trio.open_nursery() as nursery:
        first = await nursery.start(serve_nsqd, make_options(**opts))
        subs = {}
        for topic in sent:
            for channel in ("a", "b"):
                conn = await RawConn.open(first.tcp)
                await conn.sub(topic, channel)
                subs[topic, channel] = conn
        for topic, bodies in sent.items():
            await publish(first.tcp, topic, *bodies[:30])
            for body in bodies[30:]:
                await publish(first.tcp, topic, body)
        # consume part of each channel: FIN 10, hold 3 in flight
        for (topic, channel), conn in subs.items():
            await conn.send(commands.rdy(13))
            msgs = [await conn.message() for _ in range(13)]
            await conn.send(commands.rdy(0))  # no refill after the FINs
            for msg in msgs[:10]:
                await conn.send(commands.fin(msg.id))
                finished[topic, channel, msg.body] += 1
            in_flight.update((topic, channel, m.body) for m in msgs[10:])
        nsqd = first.nsqd
        await wait_until(lambda: all(c.in_flight_count() == 3 for c in nsqd.channels()))
        nursery.cancel_scope.cancel()
    for conn in subs.values():
        await conn.aclose()
    assert (tmp_path / "nsqd.dat").exists()

    async with trio.open_nursery() as nursery:
        second = await nursery.start(serve_nsqd, make_options(**opts))
        assert sorted(second.nsqd.topics) == ["t1", "t2"]
        for topic, bodies in sent.items():
            for channel in ("a", "b"):
                assert second.nsqd.topics[topic].channels[channel].depth() == 30
                conn = await RawConn.open(second.tcp)
                await conn.sub(topic, channel, rdy=50)
                got = await drain(conn, 30)
                expected = Counter(bodies) - Counter(
                    b for (t, c, b) in finished if (t, c) == (topic, channel)
                )
                assert Counter(b for b, _ in got) == expected
                # held messages were delivered once before: attempts kept, so now 2
                for body, attempts in got:
                    assert attempts == (2 if (topic, channel, body) in in_flight else 1)
                await conn.aclose()
        nursery.cancel_scope.cancel()


async def test_deferred_keeps_its_deadline_across_restart(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    opts: dict[str, object] = {"data_path": str(tmp_path)}
    async with trio.open_nursery() as nursery:
        first = await nursery.start(serve_nsqd, make_options(**opts))
        conn = await RawConn.open(first.tcp)
        await conn.sub("t", "c")
        await conn.send(commands.dpub("t", 30_000, b"later"))
        assert await conn.response() == b"OK"
        await publish(first.tcp, "t", b"now")
        assert first.nsqd.topics["t"].channels["c"].deferred_count() == 1
        nursery.cancel_scope.cancel()
    await conn.aclose()
    assert (tmp_path / "nsqbox.deferred.dat").exists()

    async with trio.open_nursery() as nursery:
        second = await nursery.start(serve_nsqd, make_options(**opts))
        conn = await RawConn.open(second.tcp)
        conn.timeout = 120
        await conn.sub("t", "c", rdy=10)
        start = trio.current_time()
        first_msg = await conn.message()
        assert first_msg.body == b"now"
        assert trio.current_time() - start < 1
        later = await conn.message()
        assert later.body == b"later"
        # the rest of its 30 s delay, not at once and not 30 s more than needed
        assert 25 <= trio.current_time() - start <= 31
        await conn.aclose()
        nursery.cancel_scope.cancel()


async def test_paused_state_and_channels_survive_restart(tmp_path: Path) -> None:
    opts: dict[str, object] = {"data_path": str(tmp_path)}
    async with trio.open_nursery() as nursery:
        first = await nursery.start(serve_nsqd, make_options(**opts))
        topic = first.nsqd.get_topic("t")
        topic.get_channel("c").pause()
        topic.get_channel("e#ephemeral")
        first.nsqd.get_topic("p").pause()
        nursery.cancel_scope.cancel()
    data = json.loads((tmp_path / "nsqd.dat").read_text())
    assert data == {
        "topics": [
            {"channels": [{"name": "c", "paused": True}], "name": "t", "paused": False},
            {"channels": None, "name": "p", "paused": True},  # Go marshals a nil slice
        ],
        "version": "1.3.0",
    }
    async with trio.open_nursery() as nursery:
        second = await nursery.start(serve_nsqd, make_options(**opts))
        assert second.nsqd.topics["t"].channels["c"].paused
        assert "e#ephemeral" not in second.nsqd.topics["t"].channels
        assert second.nsqd.topics["p"].paused
        nursery.cancel_scope.cancel()


async def test_data_path_is_locked(tmp_path: Path) -> None:
    async with trio.open_nursery() as nursery:
        await nursery.start(serve_nsqd, make_options(data_path=str(tmp_path)))
        with pytest.raises(OSError, match="failed to lock data-path"):
            await serve_nsqd(make_options(data_path=str(tmp_path)))
        nursery.cancel_scope.cancel()


class FailingBackend:
    """A disk that refuses every write."""

    depth = 0

    def put(self, data: bytes) -> None:
        raise OSError(28, "No space left on device")

    def put_many(self, items: Sequence[bytes]) -> None:
        raise OSError(28, "No space left on device")

    def maybe_sync(self) -> bool:
        return False

    def pop(self) -> bytes | None:
        return None

    def empty(self) -> None:
        pass

    def delete(self) -> None:
        pass

    def close(self) -> None:
        pass

    def release(self) -> None:
        pass


async def test_failing_disk_gives_pub_failed_and_unhealthy(tmp_path: Path) -> None:
    async with trio.open_nursery() as nursery:
        addrs = await nursery.start(
            serve_nsqd, make_options(data_path=str(tmp_path), mem_queue_size=0)
        )
        addrs.nsqd.new_backend = lambda name, ephemeral: FailingBackend()  # type: ignore[method-assign]
        conn = await RawConn.open(addrs.tcp)
        await conn.send(commands.pub("t", b"x"))
        assert await conn.error() == b"E_PUB_FAILED PUB failed [Errno 28] No space left on device"
        await conn.expect_closed()
        assert not addrs.nsqd.is_healthy()
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{addrs.http[1]}") as http:
            ping = await http.get("/ping")
            assert (ping.status_code, ping.text) == (
                500,
                "NOK - [Errno 28] No space left on device",
            )
            pub = await http.post("/pub?topic=t", content=b"x")
            # nsqd answers every failed HTTP publish with 503 EXITING
            assert (pub.status_code, pub.json()) == (503, {"message": "EXITING"})
        conn2 = await RawConn.open(addrs.tcp)
        await conn2.send(commands.mpub("t", [b"a", b"b"]))
        assert await conn2.error() == (
            b"E_MPUB_FAILED MPUB failed [Errno 28] No space left on device"
        )
        await conn.aclose()
        await conn2.aclose()
        nursery.cancel_scope.cancel()


def _start_box(data: Path) -> tuple[subprocess.Popen[str], tuple[str, int]]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "nsqbox",
            "up",
            "--ready-json",
            "--mem-queue-size=0",
            "--tcp-address=127.0.0.1:0",
            "--http-address=127.0.0.1:0",
            f"--data-path={data}",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    host, _, port = json.loads(line)["nsqd_tcp_address"].rpartition(":")
    return proc, (host, int(port))


async def test_sigkill_with_mem_queue_size_zero_loses_nothing_acknowledged(
    tmp_path: Path,
) -> None:
    proc, address = await trio.to_thread.run_sync(_start_box, tmp_path)
    try:
        conn = await RawConn.open(address)
        await conn.sub("t", "c")  # a channel, and no RDY: everything stays on disk
        sent = []
        for i in range(300):
            body = b"pub-%d" % i
            await conn.send(commands.pub("t", body))
            assert await conn.response() == b"OK"
            sent.append(body)
        batch = [b"mpub-%d" % i for i in range(700)]
        await conn.send(commands.mpub("t", batch))
        assert await conn.response() == b"OK"
        sent.extend(batch)
        await conn.send(commands.mpub("u", batch[:10]))  # a topic with no channel
        assert await conn.response() == b"OK"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        await trio.to_thread.run_sync(proc.wait)
        assert proc.stdout is not None
        proc.stdout.close()
    await conn.aclose()

    proc, address = await trio.to_thread.run_sync(_start_box, tmp_path)
    try:
        conn = await RawConn.open(address)
        await conn.sub("t", "c", rdy=2500)
        got = await drain(conn, len(sent))
        assert Counter(b for b, _ in got) == Counter(sent)
        other = await RawConn.open(address)
        await other.sub("u", "c", rdy=100)
        assert sorted(b for b, _ in await drain(other, 10)) == sorted(batch[:10])
        await conn.aclose()
        await other.aclose()
    finally:
        proc.send_signal(signal.SIGTERM)
        await trio.to_thread.run_sync(proc.wait)
        assert proc.stdout is not None
        proc.stdout.close()
