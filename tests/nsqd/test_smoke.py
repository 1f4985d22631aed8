from __future__ import annotations

from nsqbox.nsqd.server import NSQDAddresses
from tests.helpers import RawConn


async def test_pub_sub_roundtrip(nsqd: NSQDAddresses) -> None:
    pub = await RawConn.open(nsqd.tcp)
    await pub.pub("t", b"hello")
    sub = await RawConn.open(nsqd.tcp)
    await sub.sub("t", "c", rdy=1)
    msg = await sub.message()
    assert msg.body == b"hello"
    assert msg.attempts == 1
    await sub.aclose()
    await pub.aclose()
