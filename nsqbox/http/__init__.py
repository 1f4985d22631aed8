"""nsqbox's HTTP layer: an HTTP/1.1 server on h11 and trio, with NSQ's conventions.

Shared by the nsqd, nsqlookupd and admin services. Build a :class:`Router`,
add ``async def handler(request) -> result`` routes, and serve it::

    listeners = await trio.open_tcp_listeners(4151, host="127.0.0.1")
    await serve_http(router, listeners)

Layers: :mod:`~nsqbox.http.messages` (values), :mod:`~nsqbox.http.router`
(dispatch), :mod:`~nsqbox.http.protocol` (sans-IO h11 connection),
:mod:`~nsqbox.http.server` (the trio pump).
"""

from __future__ import annotations

from nsqbox.http.messages import (
    JSON_CONTENT_TYPE,
    NSQ_CONTENT_TYPE,
    NSQ_CONTENT_TYPE_HEADER,
    HTTPError,
    Request,
    Response,
    parse_query,
)
from nsqbox.http.protocol import ServerConnection
from nsqbox.http.router import App, Endpoint, Handler, QuickHandler, Router
from nsqbox.http.server import peer_address, serve_http, serve_http_connection

__all__ = [
    "JSON_CONTENT_TYPE",
    "NSQ_CONTENT_TYPE",
    "NSQ_CONTENT_TYPE_HEADER",
    "App",
    "Endpoint",
    "HTTPError",
    "Handler",
    "QuickHandler",
    "Request",
    "Response",
    "Router",
    "ServerConnection",
    "parse_query",
    "peer_address",
    "serve_http",
    "serve_http_connection",
]
