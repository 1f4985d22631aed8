"""How nsqd reaches its lookup service: handed out by serve_nsqd, held by the node while it runs.

There is no module-global table of services: ``serve_nsqd`` makes the :class:`LookupService`,
gives it to the HTTP API's ``/config`` hook and reports it in :class:`NSQDAddresses`; while it
runs it is the node's ``lookup`` (what :func:`lookup_service` reads), and once it stops the
node lets it go.
"""

from __future__ import annotations

import weakref
from pathlib import Path

import httpx
import trio

from nsqbox.net.addresses import format_address
from nsqbox.nsqd import lookup
from nsqbox.nsqd.lookup import lookup_service
from nsqbox.nsqd.server import NSQDAddresses, serve_nsqd
from tests.conftest import make_options
from tests.lookupd.lookupd_helpers import RunningLookupd, open_lookupd

TIMEOUT = 10.0


def tcp(lookupd: RunningLookupd) -> str:
    return format_address(lookupd.addresses.tcp)


async def test_serve_nsqd_hands_out_its_lookup_service(tmp_path: Path) -> None:
    async with open_lookupd() as lookupd, trio.open_nursery() as nursery:
        nodes: list[NSQDAddresses] = []
        for name in ("a", "b"):
            (tmp_path / name).mkdir()
            options = make_options(data_path=str(tmp_path / name), http_address="127.0.0.1:0")
            nodes.append(await nursery.start(serve_nsqd, options))
        a, b = nodes
        assert a.lookup is not None
        assert b.lookup is not None
        assert a.lookup is not b.lookup
        assert lookup_service(a.nsqd) is a.lookup
        assert lookup_service(b.nsqd) is b.lookup

        # PUT /config/nsqlookupd_tcp_addresses reaches the service serve_nsqd made
        assert a.http is not None
        async with httpx.AsyncClient(timeout=TIMEOUT, trust_env=False) as client:
            url = f"http://{format_address(a.http)}/config/nsqlookupd_tcp_addresses"
            put = await client.put(url, content=f'["{tcp(lookupd)}"]'.encode())
            assert put.status_code == 200, put.text
        a.nsqd.get_topic("t")
        with trio.fail_after(TIMEOUT):
            await a.lookup.wait_synced()
        found = await lookupd.get("/lookup", topic="t")
        assert [p["tcp_port"] for p in found["producers"]] == [a.tcp[1]]
        assert b.nsqd.options.lookupd_tcp_addresses == []  # the other node's service untouched
        nursery.cancel_scope.cancel()

    # stopped: the node no longer holds its service
    assert a.nsqd.lookup is None
    assert lookup_service(a.nsqd) is None


def test_no_module_global_table_of_services() -> None:
    tables = [
        name
        for name, value in vars(lookup).items()
        if not name.startswith("__")
        and isinstance(value, dict | weakref.WeakKeyDictionary | weakref.WeakValueDictionary)
    ]
    assert tables == []
