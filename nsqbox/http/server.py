"""The trio side of nsqbox's HTTP server: listeners, connections, byte pumping.

All HTTP logic lives in :class:`nsqbox.http.protocol.ServerConnection`; this
module only moves bytes between it and a trio stream (hypercorn's
``trio/tcp_server.py`` shape), and keeps one broken or hostile connection from
ever taking the server down.
"""

from __future__ import annotations

import errno
import logging
import socket
from collections.abc import Awaitable, Callable, Sequence
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
#: Most connections taken from the kernel's backlog per wake-up of the accept loop.
ACCEPT_BATCH: Final = 512
# accept() errors that mean the process or the kernel is out of something: wait
# and retry, as trio.serve_listeners does, rather than crash the server.
_ACCEPT_CAPACITY_ERRNOS: Final = frozenset(
    {errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS}
)
# accept() errors about one connection that died in the backlog: skip it.
_ACCEPT_SKIP_ERRNOS: Final = frozenset({errno.ECONNABORTED, errno.EPERM, errno.EPROTO})
_ACCEPT_RETRY_DELAY: Final = 0.1


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
    listeners = list(listeners)
    async with trio.open_nursery() as nursery:
        target = handler_nursery or nursery
        for listener in listeners:
            if isinstance(listener, trio.SocketListener):
                nursery.start_soon(_accept_batches, listener, target, handler)
            else:
                nursery.start_soon(_accept_one_by_one, listener, target, handler)
        task_status.started(listeners)
    raise AssertionError("the accept loops returned")  # pragma: no cover


async def _accept_batches(
    listener: trio.SocketListener,
    nursery: trio.Nursery,
    handler: Callable[[trio.SocketStream], Awaitable[None]],
) -> NoReturn:
    """Accept every connection waiting in the backlog on each wake-up.

    trio's ``SocketListener.accept`` yields to the scheduler after each
    connection, so under load a connection waits a full scheduler pass (every
    busy connection's turn) per connection ahead of it in the backlog: with
    1,000 clients connecting at once the last waited seconds before its first
    byte was read. Go's accept loop takes them as fast as the kernel hands them
    over; this does the same with non-blocking ``accept`` calls on a duplicate
    of the listening socket.
    """
    raw = socket.socket(fileno=listener.socket.dup().detach())
    try:
        async with listener:
            raw.setblocking(False)
            while True:
                await trio.lowlevel.wait_readable(raw)
                for _ in range(ACCEPT_BATCH):
                    try:
                        sock, _ = raw.accept()
                    except BlockingIOError:
                        break
                    except OSError as exc:
                        if exc.errno in _ACCEPT_SKIP_ERRNOS:
                            continue
                        if exc.errno not in _ACCEPT_CAPACITY_ERRNOS:
                            raise
                        log.error("accept failed: %s; retrying in %ss", exc, _ACCEPT_RETRY_DELAY)
                        await trio.sleep(_ACCEPT_RETRY_DELAY)
                        break
                    stream = trio.SocketStream(trio.socket.from_stdlib_socket(sock))
                    nursery.start_soon(handler, stream)
    finally:
        raw.close()


async def _accept_one_by_one(
    listener: trio.abc.Listener[Any],
    nursery: trio.Nursery,
    handler: Callable[[Any], Awaitable[None]],
) -> NoReturn:
    """The accept loop for listeners that are not plain sockets (TLS)."""
    async with listener:
        while True:
            try:
                stream = await listener.accept()
            except OSError as exc:
                if exc.errno not in _ACCEPT_CAPACITY_ERRNOS:
                    raise
                log.error("accept failed: %s; retrying in %ss", exc, _ACCEPT_RETRY_DELAY)
                await trio.sleep(_ACCEPT_RETRY_DELAY)
            else:
                nursery.start_soon(handler, stream)


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
                    log.exception("HTTP endpoint failed for %s", event.request.target)
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
