"""Plain TCP connections for the HTTP server: batched accept and a lean socket pump.

Under load (hundreds of keep-alive clients on ``/pub``) the server is CPU-bound,
and trio's high-level socket API costs a scheduler pass per operation: one per
accepted connection (``SocketListener.accept``) and one per successful
``receive_some`` and ``send_all``. This module does the same work with
non-blocking calls on the stdlib socket and waits only when the kernel says
"would block":

* :func:`accept_batches` takes every connection waiting in the backlog on each
  wake-up, as Go's accept loop does, so a burst of clients is not accepted one
  per pass of every busy connection;
* :class:`SocketIO` reads and writes without a checkpoint when the kernel has
  data or room; the pump yields once per answered request instead
  (:meth:`SocketIO.next_turn`), which is what keeps connections fair: one with
  pipelined requests always waiting gets one answer per turn, like every other.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import socket
from collections.abc import Awaitable, Callable
from typing import Final, NoReturn

import trio

from nsqbox.addresses import format_address

log = logging.getLogger("nsqbox.http")

#: Most connections taken from the kernel's backlog per wake-up of the accept loop.
ACCEPT_BATCH: Final = 512
RECEIVE_SIZE: Final = 64 * 1024
#: Reads in a row that found data without waiting before the reader yields anyway
#: (a client streaming a large body must not hold the scheduler for all of it).
READS_PER_TURN: Final = 16
# accept() errors that mean the process or the kernel is out of something: wait
# and retry, as trio.serve_listeners does, rather than crash the server.
ACCEPT_CAPACITY_ERRNOS: Final = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS})
ACCEPT_RETRY_DELAY: Final = 0.1
# accept() errors about one connection that died in the backlog: skip it.
_ACCEPT_SKIP_ERRNOS: Final = frozenset({errno.ECONNABORTED, errno.EPERM, errno.EPROTO})


async def accept_batches(
    listener: trio.SocketListener,
    nursery: trio.Nursery,
    handler: Callable[[socket.socket], Awaitable[None]],
) -> NoReturn:
    """Start ``handler(sock)`` in ``nursery`` for each connection; close ``listener`` on exit.

    trio's ``SocketListener.accept`` yields to the scheduler after each
    connection, so under load a connection waited a full scheduler pass (every
    busy connection's turn) per connection ahead of it in the backlog: with
    1,000 clients connecting at once the last waited seconds. This drains the
    backlog with non-blocking ``accept`` calls on a duplicate of the listening
    socket. The handler owns the (non-blocking) socket it is given.
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
                        if exc.errno not in ACCEPT_CAPACITY_ERRNOS:
                            raise
                        log.error("accept failed: %s; retrying in %ss", exc, ACCEPT_RETRY_DELAY)
                        await trio.sleep(ACCEPT_RETRY_DELAY)
                        break
                    sock.setblocking(False)
                    nursery.start_soon(handler, sock)
    finally:
        raw.close()


class SocketIO:
    """The HTTP pump's I/O on a connected non-blocking TCP socket (which it closes).

    Errors from the peer (reset, broken pipe) surface as
    :class:`trio.BrokenResourceError`, as they do from a trio stream.
    """

    __slots__ = ("_reads", "sock")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._reads = 0
        # Same as trio.SocketStream: answers are small and must not wait for Nagle.
        # A peer that already reset the connection is found out by the first read.
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def peer_address(self) -> str:
        """``ip:port`` (``[v6]:port``) of the peer, as Go's ``RemoteAddr``; else ""."""
        return socket_peer_address(self.sock)

    async def receive(self) -> bytes:
        """The next bytes from the peer; ``b""`` at EOF or on a reset."""
        await trio.lowlevel.checkpoint_if_cancelled()
        self._reads += 1
        if self._reads >= READS_PER_TURN:
            self._reads = 0
            await trio.lowlevel.checkpoint()
        while True:
            try:
                return self.sock.recv(RECEIVE_SIZE)
            except BlockingIOError:
                self._reads = 0
                await trio.lowlevel.wait_readable(self.sock)
            except OSError:
                # A reset (or any failure, as trio's streams treat them) is an
                # end of input as far as HTTP is concerned.
                return b""

    async def send_all(self, data: bytes) -> None:
        """Write all of ``data``, waiting only when the socket buffer is full."""
        await trio.lowlevel.checkpoint_if_cancelled()
        view = memoryview(data)
        try:
            while view:
                try:
                    sent = self.sock.send(view)
                except BlockingIOError:
                    await trio.lowlevel.wait_writable(self.sock)
                else:
                    view = view[sent:]
        except OSError as exc:
            raise trio.BrokenResourceError(f"send failed: {exc}") from exc

    async def next_turn(self) -> None:
        """Yield once per answered request, so every connection gets its turn."""
        self._reads = 0
        await trio.lowlevel.checkpoint()

    async def send_eof(self) -> None:
        """Half-close: the peer reads our answer, then EOF."""
        try:
            self.sock.shutdown(socket.SHUT_WR)
        except OSError as exc:
            raise trio.BrokenResourceError(f"shutdown failed: {exc}") from exc

    async def aclose(self) -> None:
        """Close the socket (nothing else waits on it: the pump is its only user)."""
        trio.lowlevel.notify_closing(self.sock)
        self.sock.close()
        await trio.lowlevel.checkpoint()


def socket_peer_address(sock: socket.socket | trio.socket.SocketType) -> str:
    """``ip:port`` (``[v6]:port``) of a connected socket's peer, as Go's ``RemoteAddr``; else ""."""
    try:
        peer = sock.getpeername()
    except OSError:
        return ""
    if isinstance(peer, tuple):
        return format_address((peer[0], peer[1]))
    return str(peer)


__all__ = ["ACCEPT_BATCH", "RECEIVE_SIZE", "SocketIO", "accept_batches", "socket_peer_address"]
