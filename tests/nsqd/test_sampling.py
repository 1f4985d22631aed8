"""IDENTIFY's sample_rate: nsqd delivers about that share and drops the rest for good.

nsqd's messagePump takes a message and, unless ``rand.Int31n(100) <= sample_rate``,
drops it: it is not requeued and not in flight (TestSampling in
nsqd/protocol_v2_test.go). The server runs in the test's thread, so seeding
:mod:`random` makes the draws, and the count, repeatable.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest

from tests.conftest import StartNSQD
from tests.helpers import RawConn, publish, wait_until

COUNT = 2000
SAMPLE_RATE = 42


@pytest.fixture
def seeded_random() -> Iterator[None]:
    state = random.getstate()
    random.seed(20240601)
    yield
    random.setstate(state)


@pytest.mark.usefixtures("seeded_random")
async def test_sampling_drops_the_unsampled_share(start_nsqd: StartNSQD) -> None:
    nsqd = await start_nsqd(max_rdy_count=COUNT)
    bodies = [b"sample %04d" % i for i in range(COUNT)]
    await publish(nsqd.tcp, "sampled", *bodies)
    conn = await RawConn.open(nsqd.tcp)
    assert (await conn.identify(sample_rate=SAMPLE_RATE))["sample_rate"] == SAMPLE_RATE
    await conn.sub("sampled", "ch", rdy=COUNT)
    topic = nsqd.nsqd.topics["sampled"]
    channel = topic.channels["ch"]
    # every message has been taken from the channel: delivered, or dropped
    await wait_until(lambda: topic.depth() == 0 and channel.depth() == 0)
    delivered = channel.in_flight_count()
    received = [(await conn.message()).body for _ in range(delivered)]
    assert len(set(received)) == delivered
    assert set(received) <= set(bodies)
    # dropped, not requeued: nothing waits, nothing is deferred, nothing came back
    assert (channel.depth(), channel.deferred_count(), channel.requeue_count) == (0, 0, 0)
    assert channel.message_count == COUNT
    # P(delivered) = 43/100 (draws 0..42 of 0..99); generous bounds around 860 of 2000
    assert 0.33 * COUNT < delivered < 0.53 * COUNT
    await conn.aclose()


async def test_no_sampling_delivers_everything(start_nsqd: StartNSQD) -> None:
    nsqd = await start_nsqd()
    await publish(nsqd.tcp, "all", *[b"m%d" % i for i in range(50)])
    conn = await RawConn.open(nsqd.tcp)
    assert (await conn.identify())["sample_rate"] == 0
    await conn.sub("all", "ch", rdy=100)
    received = {(await conn.message()).body for _ in range(50)}
    assert len(received) == 50
    await conn.aclose()
