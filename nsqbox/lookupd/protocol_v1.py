"""nsqlookupd's TCP protocol V1 over a trio stream: one task per nsqd connection.

The bytes are :mod:`nsqbox.wire.lookupd`'s business and the registrations
:class:`~.core.NSQLookupd`'s; this module pumps one into the other. Every V1
error is fatal: the reply is sent, then the connection closes. When the
connection ends, for any reason, the peer leaves every registration it held
(nsqlookupd's IOLoop exit), while the keys themselves stay.
"""

from __future__ import annotations

import logging

import trio

from ..wire.errors import NSQError, ProtocolViolation
from ..wire.lookupd import (
    NEED_DATA,
    ConnectionClosed,
    Identify,
    LookupdV1Parser,
    Ping,
    Register,
    Unregister,
    encode_error,
    encode_response,
)
from .core import NSQLookupd
from .registration_db import PeerInfo

log = logging.getLogger("nsqbox.lookupd")

_OK = encode_response(b"OK")
_RECEIVE_SIZE = 64 * 1024

__all__ = ["handle_v1_connection"]


def _format_address(stream: trio.SocketStream) -> str:
    """``ip:port`` (``[v6]:port``), as Go's net.Addr String() writes it."""
    name = stream.socket.getpeername()
    host, port = name[0], name[1]
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


async def handle_v1_connection(lookupd: NSQLookupd, stream: trio.SocketStream) -> None:
    """Serve one client connection until it closes or breaks the protocol."""
    try:
        remote = _format_address(stream)
    except OSError:  # already gone
        await stream.aclose()
        return
    log.info("TCP: new client(%s)", remote)
    session = _Session(lookupd, stream, remote)
    try:
        async with stream:
            try:
                await session.serve()
            except trio.BrokenResourceError:
                pass
            except Exception:
                # The boundary of one connection: whatever went wrong in it ends it, and only it.
                log.exception("[%s] unexpected error, closing", remote)
    finally:
        # However the connection ended (a reset too), the peer leaves its registrations.
        if session.peer is not None:
            lookupd.disconnect(session.peer)
        log.info("PROTOCOL(V1): [%s] exiting ioloop", remote)


class _Session:
    """One connection's read-dispatch loop and the peer it identified (for cleanup)."""

    def __init__(self, lookupd: NSQLookupd, stream: trio.SocketStream, remote: str) -> None:
        self.lookupd = lookupd
        self.stream = stream
        self.remote = remote
        self.peer: PeerInfo | None = None

    async def serve(self) -> None:
        lookupd, stream, remote = self.lookupd, self.stream, self.remote
        parser = LookupdV1Parser()
        while True:
            try:
                event = parser.next_event()
            except NSQError as err:
                log.error("[%s] - %s", remote, err)
                await _send_quietly(stream, encode_error(err))
                return
            except ProtocolViolation as exc:
                log.error("[%s] - %s", remote, exc)
                return
            if event is NEED_DATA:
                parser.receive_data(await stream.receive_some(_RECEIVE_SIZE))
                continue
            if isinstance(event, ConnectionClosed):
                return
            peer = self.peer
            if isinstance(event, Ping):
                lookupd.ping(peer)
                reply = _OK
            elif isinstance(event, Identify):
                self.peer = lookupd.identify(remote, remote, event)
                reply = encode_response(lookupd.identify_response())
            elif isinstance(event, Register):
                assert peer is not None  # the parser refuses REGISTER before IDENTIFY
                lookupd.register(peer, event.topic, event.channel)
                reply = _OK
            else:
                assert isinstance(event, Unregister)
                assert peer is not None
                lookupd.unregister(peer, event.topic, event.channel)
                reply = _OK
            await stream.send_all(reply)


async def _send_quietly(stream: trio.SocketStream, data: bytes) -> None:
    # The peer may have gone already (e.g. an IDENTIFY cut short by EOF); the
    # error is only a courtesy, as in nsqlookupd.
    try:
        await stream.send_all(data)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass
