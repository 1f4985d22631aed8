"""Start an nsqd with its HTTP API on 127.0.0.1 port 0, for the nsqd HTTP, stats and statsd tests.

The TCP side is the real ``serve_nsqd``; the HTTP side is ``serve_http(make_app(nsqd))``
on a listener of our own (``serve_nsqd`` is given no HTTP address), so the tests
exercise exactly the app the server wires in.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from nsqbox.http import serve_http
from nsqbox.nsqd.domain.nsqd import NSQD
from nsqbox.nsqd.domain.options import NSQDOptions
from nsqbox.nsqd.routes.nsqd import make_app
from nsqbox.nsqd.server import NSQDAddresses, serve_nsqd

if TYPE_CHECKING:
    from nsqbox.nsqd.domain.journal import Journal

TIMEOUT = 10


@dataclass(frozen=True)
class NSQDWithHTTP:
    """A running nsqd: the container, its TCP address and its HTTP base URL."""

    nsqd: NSQD
    tcp: tuple[str, int]
    url: str

    @property
    def journal(self) -> Journal:
        """The nsqd's journal (the test fails when it keeps none)."""
        assert self.nsqd.journal is not None
        return self.nsqd.journal


def nsqd_options(data_path: Path, **overrides: object) -> NSQDOptions:
    """Loopback, port 0, data in ``data_path``; HTTP is served separately."""
    opts = NSQDOptions(
        tcp_address="127.0.0.1:0", http_address="", node_id=1, data_path=str(data_path)
    )
    for key, value in overrides.items():
        setattr(opts, key, value)
    return opts


async def start_nsqd_http(
    nursery: trio.Nursery, data_path: Path, **overrides: object
) -> NSQDWithHTTP:
    """An nsqd serving TCP and HTTP in ``nursery`` (cancelled with it)."""
    addresses: NSQDAddresses = await nursery.start(serve_nsqd, nsqd_options(data_path, **overrides))
    nsqd = addresses.nsqd
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    nsqd.http_port = listeners[0].socket.getsockname()[1]
    await nursery.start(serve_http, make_app(nsqd), listeners)
    return NSQDWithHTTP(nsqd, addresses.tcp, f"http://127.0.0.1:{nsqd.http_port}")
