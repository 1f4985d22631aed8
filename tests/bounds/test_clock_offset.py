"""The broker clock's total offset is capped (issue #37, "Bounds"): advances one by one
up to ten years in all, the next one refused ``400 OFFSET_LIMIT`` by nsqd's and the
admin's routes, and a DPUB made at the cap delivered with broker time's timestamp."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import trio

from nsqbox.broker.clock import MAX_ADVANCE, MAX_OFFSET, BrokerClock
from nsqbox.net.addresses import format_address
from nsqbox.nsqd.domain.options import NSQDOptions
from nsqbox.run.box import BoxAddresses, BoxOptions, serve_box
from tests.helpers import RawConn

GUARD = 30


async def test_advances_stop_at_the_total_cap_and_a_dpub_still_arrives(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    options = BoxOptions(nsqd=NSQDOptions(data_path=str(tmp_path), node_id=0), clock="manual")
    options.use_ephemeral_ports()
    with trio.fail_after(GUARD):
        addresses: BoxAddresses = await nursery.start(serve_box, options)
        nsqd = addresses.nsqds[0]
        assert nsqd.http is not None
        base = f"http://{format_address(nsqd.http)}"
        admin = f"http://{format_address(addresses.admin.http)}"
        advance = f"{base}/nsqbox/clock/advance"
        async with httpx.AsyncClient(timeout=GUARD, trust_env=False) as client:
            steps = int(MAX_OFFSET // MAX_ADVANCE)
            for _ in range(steps - 1):
                answer = await client.post(advance, params={"by": repr(MAX_ADVANCE)})
                assert answer.status_code == 200, answer.text
            # the last year but two hours, through the admin service
            last = MAX_ADVANCE - 7200
            answer = await client.post(f"{admin}/api/clock/advance", params={"by": repr(last)})
            assert answer.status_code == 200, answer.text
            offset = (await client.get(f"{base}/nsqbox/clock")).json()["offset"]
            assert offset == MAX_OFFSET - 7200

            sub = await RawConn.open(nsqd.tcp)
            await sub.sub("later", "work", rdy=1)
            answer = await client.post(
                f"{base}/pub", params={"topic": "later", "defer": "3600000"}, content=b"at the cap"
            )
            assert answer.status_code == 200, answer.text
            # more than the two hours left: refused by nsqd and by the admin, nothing moved
            for url in (advance, f"{admin}/api/clock/advance"):
                answer = await client.post(url, params={"by": "3h"})
                assert (answer.status_code, answer.json()["message"]) == (400, "OFFSET_LIMIT")
            doc = (await client.get(f"{base}/nsqbox/clock")).json()
            assert doc["offset"] == MAX_OFFSET - 7200
            # the hour the DPUB waits fits: it fires, its timestamp is broker time
            answer = await client.post(advance, params={"by": "1h"})
            assert answer.status_code == 200, answer.text
            assert answer.json()["fired"] == 1
            msg = await sub.message()
            assert msg.body == b"at the cap"
            assert msg.attempts == 1
            expected = time.time() + MAX_OFFSET - 7200
            assert abs(msg.timestamp / 1e9 - expected) < 600
            await sub.aclose()
        nursery.cancel_scope.cancel()


def test_a_manual_clock_stands_still_until_advanced() -> None:
    real = [1000.0]
    clock = BrokerClock(manual=True, real=lambda: real[0])
    start, wall = clock.now(), clock.wall_ns()
    real[0] += 3600.0  # an hour of real time passes: broker time does not move
    assert (clock.now(), clock.wall_ns()) == (start, wall)
    clock.offset = 90.0  # what an advance of 90 s leaves
    assert clock.now() == start + 90.0
    assert clock.wall_ns() == wall + 90_000_000_000
    running = BrokerClock(real=lambda: real[0])  # the real clock is real time
    real[0] += 5.0
    assert running.now() == real[0]
