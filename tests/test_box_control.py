"""``serve_box``'s :class:`~nsqbox.run.box.BoxControl`: stop, crash and start one nsqd of a box.

Real servers on 127.0.0.1 port 0, in the test's nursery; state is read over the public
HTTP APIs (nsqd /stats, lookupd /nodes), messages are published and read over TCP.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
import trio

from nsqbox.client.blocking import Publisher
from nsqbox.net.addresses import format_address
from nsqbox.nsqd.domain.options import NSQDOptions
from nsqbox.run.box import BoxAddresses, BoxControl, BoxOptions, serve_box
from tests.helpers import eventually

TIMEOUT = 10.0


async def _depth(client: httpx.AsyncClient, http: str, topic: str) -> int:
    stats = (await client.get(f"http://{http}/stats", params={"format": "json"})).json()
    return sum(t["depth"] for t in stats["topics"] if t["topic_name"] == topic)


async def _producer_ports(client: httpx.AsyncClient, lookupd: str) -> set[int]:
    nodes = (await client.get(f"http://{lookupd}/nodes")).json()["producers"]
    return {node["tcp_port"] for node in nodes}


async def test_box_control_crashes_stops_and_starts_one_node(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    options = BoxOptions(nsqd=NSQDOptions(data_path=str(tmp_path), node_id=0), nsqd_count=2)
    options.use_ephemeral_ports()
    box: BoxAddresses = await nursery.start(serve_box, options)
    control = box.control
    assert isinstance(control, BoxControl)
    assert (len(control), control.states()) == (2, ["running", "running"])
    ready = box.ready()
    tcp, http = ready["nsqd_tcp_addresses"], ready["nsqd_http_addresses"]
    lookupd = ready["lookupd_http_address"]
    for address in tcp:  # acknowledged, in memory (mem-queue-size 10000)
        await trio.to_thread.run_sync(_publish, address)
    async with httpx.AsyncClient(trust_env=False, timeout=TIMEOUT) as client:
        await control.crash(1)
        assert (control.state(1), control.nsqd(1)) == ("crashed", None)
        with pytest.raises(OSError, match="connect"):
            await trio.open_tcp_stream(*box.nsqds[1].tcp)
        await eventually(lambda: _gone(client, lookupd, box.nsqds[1].tcp[1]))
        assert (await client.get(f"http://{ready['admin_http_address']}/ping")).text == "OK"
        await control.restart(0)  # a clean restart: its message persisted
        await control.start(1)  # same ports; the crash lost its message
        assert control.states() == ["running", "running"]
        assert [format_address(n.tcp) for n in box.nsqds] == tcp  # the first start's
        assert [await _depth(client, address, "orders") for address in http] == [1, 0]
        assert await _producer_ports(client, lookupd) == {n.tcp[1] for n in box.nsqds}
        await control.crash(0, restart=True)  # the clean restart left it on disk: it stays
        assert await _depth(client, http[0], "orders") == 1
        await control.stop(1)
        assert control.state(1) == "stopped"
        for index in (2, -1):
            with pytest.raises(IndexError, match="the box has 2"):
                await control.start(index)


def _publish(address: str) -> None:
    with Publisher(address) as producer:
        producer.pub("orders", b"x")


async def _gone(client: httpx.AsyncClient, lookupd: str, port: int) -> bool:
    return port not in await _producer_ports(client, lookupd)
