"""The trio side of nsqbox's HTTP server: listeners, connections, byte pumping.

All HTTP logic lives in :class:`nsqbox.http.protocol.ServerConnection`; this
module only moves bytes between it and a trio stream (hypercorn's
``trio/tcp_server.py`` shape), and keeps one broken or hostile connection from
ever taking the server down.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Sequence
from functools import partial
from typing import Any, Final, NoReturn

import trio

from nsqbox.http.messages import HTTPError, Response
from nsqbox.http.protocol import (
    MAX_HEADER_SIZE,
    NEED_DATA,
    CloseConnection,
    Dispatch,
    SendBytes,
    ServerConnection,
)
from nsqbox.http.router import App

log = logging.getLogger("nsqbox.http")

RECEIVE_SIZE: Final = 64 * 1024
#: After refusing a request mid-body, how long and how much to keep reading so
#: the client finishes sending and sees the answer instead of a reset (Go's
#: net/http lingers the same way after closing its write side).
DRAIN_TIMEOUT: Final = 2.0
DRAIN_LIMIT: Final = 16 * 1024 * 1024


async def serve_http(
    app: App,
    listeners: Sequence[trio.abc.Listener[Any]],
    *,
    handler_nursery: trio.Nursery | None = None,
    max_header_size: int = MAX_HEADER_SIZE,
    task_status: trio.TaskStatus[list[trio.abc.Listener[Any]]] = trio.TASK_STATUS_IGNORED,
) -> NoReturn:
    """Serve ``app`` over HTTP/1.1 on ``listeners`` until cancelled.

    Reports the listeners through ``task_status.started`` (as
    :func:`trio.serve_listeners` does); connections run in ``handler_nursery``
    if given. Cancelling the call closes the listeners and every connection.
    """
    handler = partial(serve_http_connection, app=app, max_header_size=max_header_size)
    await trio.serve_listeners(
        handler, list(listeners), handler_nursery=handler_nursery, task_status=task_status
    )
    raise AssertionError("trio.serve_listeners returned")  # pragma: no cover


async def serve_http_connection(
    stream: trio.abc.Stream, *, app: App, max_header_size: int = MAX_HEADER_SIZE
) -> None:
    """Answer HTTP requests on one connection until either side closes it; then close it.

    Never raises (except Cancelled): a failing handler becomes a 500, a broken
    peer just ends the connection.
    """
    conn = ServerConnection(
        app, remote_address=peer_address(stream), max_header_size=max_header_size
    )
    try:
        while True:
            event = conn.next_event()
            if event is NEED_DATA:
                conn.receive_data(await _receive(stream))
            elif isinstance(event, SendBytes):
                await stream.send_all(event.data)
            elif isinstance(event, Dispatch):
                try:
                    response = await event.endpoint.respond(event.request)
                except Exception:
                    log.exception(
                        "HTTP endpoint failed for %s from %s",
                        event.request.target,
                        conn.remote_address,
                    )
                    response = Response.error(HTTPError(500, "INTERNAL_ERROR"))
                await stream.send_all(conn.respond(response))
            elif isinstance(event, CloseConnection):
                if event.drain:
                    await _drain(stream)
                return
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        log.debug("HTTP peer %s went away", conn.remote_address)
    except Exception:
        log.exception("HTTP connection from %s failed", conn.remote_address)
    finally:
        await stream.aclose()


async def _receive(stream: trio.abc.Stream) -> bytes:
    try:
        return bytes(await stream.receive_some(RECEIVE_SIZE))
    except trio.BrokenResourceError:
        # A reset is an end of input as far as HTTP is concerned.
        return b""


async def _drain(stream: trio.abc.Stream) -> None:
    with trio.move_on_after(DRAIN_TIMEOUT):
        try:
            if isinstance(stream, trio.abc.HalfCloseableStream):
                await stream.send_eof()
            drained = 0
            while drained < DRAIN_LIMIT:
                data = await stream.receive_some(RECEIVE_SIZE)
                if not data:
                    break
                drained += len(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass


def peer_address(stream: trio.abc.Stream) -> str:
    """``ip:port`` (``[v6]:port``) of a socket stream's peer, as Go's ``RemoteAddr``; else ""."""
    while isinstance(stream, trio.SSLStream):  # HTTPS: the socket under the TLS layer
        stream = stream.transport_stream
    if not isinstance(stream, trio.SocketStream):
        return ""
    try:
        peer = stream.socket.getpeername()
    except OSError:
        return ""
    if stream.socket.family == socket.AF_INET6:
        return f"[{peer[0]}]:{peer[1]}"
    if isinstance(peer, tuple):
        return f"{peer[0]}:{peer[1]}"
    return str(peer)
