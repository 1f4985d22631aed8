"""The trio side of nsqbox's HTTP server: listeners, connections, byte pumping.

All HTTP logic lives in :class:`nsqbox.http.protocol.ServerConnection`; this
module only moves bytes between it and a trio stream (hypercorn's
``trio/tcp_server.py`` shape), and keeps one broken or hostile connection from
ever taking the server down.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import AsyncIterator, Sequence
from functools import partial
from typing import Any, Final, NoReturn, Protocol

import trio

from nsqbox.http.messages import HTTPError, Response
from nsqbox.http.protocol import (
    MAX_HEADER_SIZE,
    NEED_DATA,
    CloseConnection,
    ConnectionEvent,
    Dispatch,
    SendBytes,
    ServerConnection,
)
from nsqbox.http.router import App
from nsqbox.http.sockets import RECEIVE_SIZE, SocketIO, socket_peer_address
from nsqbox.net.listeners import (
    ACCEPT_CAPACITY_ERRNOS,
    ACCEPT_RETRY_DELAY,
    ListenerGroup,
    accept_batches,
)

log = logging.getLogger("nsqbox.http")

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
    group: ListenerGroup | None = None,
    task_status: trio.TaskStatus[list[trio.abc.Listener[Any]]] = trio.TASK_STATUS_IGNORED,
) -> NoReturn:
    """Serve ``app`` over HTTP/1.1 on ``listeners`` until cancelled.

    Reports the listeners through ``task_status.started`` (as
    :func:`trio.serve_listeners` does); connections run in ``handler_nursery``
    if given. Cancelling the call closes the listeners (all of ``group``'s, with it: see
    :class:`~nsqbox.net.listeners.ListenerGroup`) and every connection.
    Plain TCP listeners take the lean path of :mod:`nsqbox.http.sockets`;
    others (TLS) are served through their trio streams.
    """
    serve_socket = partial(_serve_socket, app=app, max_header_size=max_header_size)
    serve_stream = partial(serve_http_connection, app=app, max_header_size=max_header_size)
    listeners = list(listeners)
    async with trio.open_nursery() as nursery:
        target = handler_nursery or nursery
        for listener in listeners:
            if isinstance(listener, trio.SocketListener):
                accept = partial(accept_batches, group=group)
                nursery.start_soon(accept, listener, target, serve_socket)
            else:
                nursery.start_soon(_accept_streams, listener, target, serve_stream)
        task_status.started(listeners)
    raise AssertionError("the accept loops returned")  # pragma: no cover


async def _accept_streams(
    listener: trio.abc.Listener[Any],
    nursery: trio.Nursery,
    handler: partial[Any],
) -> NoReturn:
    """trio.serve_listeners' loop for one listener that is not a plain socket."""
    async with listener:
        while True:
            try:
                stream = await listener.accept()
            except OSError as exc:
                if exc.errno not in ACCEPT_CAPACITY_ERRNOS:
                    raise
                log.error("accept failed: %s; retrying in %ss", exc, ACCEPT_RETRY_DELAY)
                await trio.sleep(ACCEPT_RETRY_DELAY)
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
    await _guarded(conn, _StreamIO(stream))


async def _serve_socket(sock: socket.socket, *, app: App, max_header_size: int) -> None:
    io = SocketIO(sock)
    conn = ServerConnection(app, remote_address=io.peer_address(), max_header_size=max_header_size)
    await _guarded(conn, io)


class _IO(Protocol):
    """What the pump needs of a transport: :class:`SocketIO`'s methods."""

    @property
    def turn_owed(self) -> bool: ...
    def receive_ready(self) -> bytes | None: ...
    async def receive(self) -> bytes: ...
    def send_ready(self, data: bytes) -> bytes: ...
    async def send_all(self, data: bytes) -> None: ...
    async def next_turn(self) -> None: ...
    async def send_eof(self) -> None: ...
    async def aclose(self) -> None: ...


async def _guarded(conn: ServerConnection, io: _IO) -> None:
    """Run the pump: a peer that went away or a failure ends this connection alone;
    then close ``io``."""
    try:
        await _pump(conn, io)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        log.debug("HTTP peer %s went away", conn.remote_address)
    except Exception:
        log.exception("HTTP connection from %s failed", conn.remote_address)
    finally:
        await io.aclose()


async def _pump(conn: ServerConnection, io: _IO) -> None:
    """Move bytes between ``conn`` and ``io`` until the connection ends.

    The read and the write that need no wait (``receive_ready``, ``send_ready``)
    are made without a coroutine; ``io`` decides when they do, and when the
    connection owes the others a turn (once per answer, unless it has since
    waited for the peer: a client that waits for each answer costs one
    scheduler pass per request, not two). A quick handler's answer needs no
    coroutine either.
    """
    while True:
        event = conn.next_event()
        if event is NEED_DATA:
            data = io.receive_ready()
            if data is None:
                data = await io.receive()
            conn.receive_data(data)
        elif type(event) is Dispatch:
            if io.turn_owed:
                await io.next_turn()
            response = _answer_now(conn, event)
            if response is None:
                response = await _answer_later(conn, event)
            rest = io.send_ready(conn.respond(response))
            if rest:
                await io.send_all(rest)
            if response.stream is not None:
                await _stream(conn, io, response.stream)
        elif await _ends(event, io):
            return


async def _stream(conn: ServerConnection, io: _IO, pieces: AsyncIterator[bytes]) -> None:
    """Send a streamed body's pieces as they come, then its end.

    The body ends when ``pieces`` does; the peer hanging up (its end of input, seen by a
    read beside the writes) or a failed write ends the connection instead, and ``pieces``
    is closed either way. A peer that sends again meanwhile (a pipelined request) is read
    once the body has ended.
    """
    gone = False
    failed: Exception | None = None
    try:
        async with trio.open_nursery() as nursery:

            async def watch() -> None:
                nonlocal gone
                data = await io.receive()
                if data:
                    conn.receive_data(data)  # the next request: left for after the body
                    return
                gone = True
                nursery.cancel_scope.cancel()

            nursery.start_soon(watch)
            try:
                async for piece in pieces:
                    data = conn.stream_data(piece)
                    if data:
                        await io.send_all(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                failed = exc  # as a bare error: the pump's "peer went away"
            nursery.cancel_scope.cancel()
    finally:
        aclose = getattr(pieces, "aclose", None)
        if aclose is not None:
            with trio.CancelScope(shield=True):
                await aclose()
    if failed is not None:
        raise failed
    if gone:
        raise trio.BrokenResourceError("the peer went away during a streamed answer")
    await io.send_all(conn.end_stream())


async def _answer(conn: ServerConnection, event: Dispatch) -> Response:
    """The endpoint's answer to a dispatched request; a 500 if it failed."""
    response = _answer_now(conn, event)
    return response if response is not None else await _answer_later(conn, event)


def _answer_now(conn: ServerConnection, event: Dispatch) -> Response | None:
    """The endpoint's quick answer (a 500 if it failed), or None: :func:`_answer_later`."""
    quick = event.endpoint.respond_now
    if quick is None:
        return None
    try:
        return quick(event.request)
    except Exception:
        return _failed(conn, event)


async def _answer_later(conn: ServerConnection, event: Dispatch) -> Response:
    """The endpoint's handler's answer; a 500 if it failed."""
    try:
        return await event.endpoint.respond(event.request)
    except Exception:
        return _failed(conn, event)


def _failed(conn: ServerConnection, event: Dispatch) -> Response:
    """Log the endpoint's exception (being handled); the 500 that answers the request."""
    log.exception("HTTP endpoint failed for %s from %s", event.request.target, conn.remote_address)
    return Response.error(HTTPError(500, "INTERNAL_ERROR"))


async def _ends(event: ConnectionEvent, io: _IO) -> bool:
    """Act on an event other than NEED_DATA and Dispatch; True when the connection is over."""
    if isinstance(event, SendBytes):
        await io.send_all(event.data)
        return False
    if isinstance(event, CloseConnection):
        if event.drain:
            await _drain(io)
        return True
    raise RuntimeError(f"unexpected connection event {event!r}")  # pragma: no cover


class _StreamIO:
    """The pump's I/O on a trio stream (TLS, or a test's stream): every read and
    write through the stream, whose ``send_all`` yields already."""

    __slots__ = ("stream",)

    #: A trio stream's send_all has already yielded.
    turn_owed = False

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream

    def receive_ready(self) -> None:
        return None

    async def receive(self) -> bytes:
        try:
            return bytes(await self.stream.receive_some(RECEIVE_SIZE))
        except trio.BrokenResourceError:
            # A reset is an end of input as far as HTTP is concerned.
            return b""

    def send_ready(self, data: bytes) -> bytes:
        return data

    async def send_all(self, data: bytes) -> None:
        await self.stream.send_all(data)

    async def next_turn(self) -> None:  # pragma: no cover - turn_owed is never set
        pass

    async def send_eof(self) -> None:
        if isinstance(self.stream, trio.abc.HalfCloseableStream):
            await self.stream.send_eof()

    async def aclose(self) -> None:
        await self.stream.aclose()


async def _drain(io: _IO) -> None:
    with trio.move_on_after(DRAIN_TIMEOUT):
        try:
            await io.send_eof()
            drained = 0
            while drained < DRAIN_LIMIT:
                data = await io.receive()
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
    return socket_peer_address(stream.socket)
