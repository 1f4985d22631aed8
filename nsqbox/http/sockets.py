"""Plain TCP connections for the HTTP server: a lean socket pump.

Under load (hundreds of keep-alive clients on ``/pub``) the server is CPU-bound,
and trio's high-level socket API costs a scheduler pass per operation: one per
successful ``receive_some`` and ``send_all`` (and one per accepted connection,
which :func:`nsqbox.listeners.accept_batches` avoids). This module does the same
work with non-blocking calls on the stdlib socket and waits only when the kernel
says "would block":

* :class:`SocketIO` reads and writes without a checkpoint when the kernel has
  data or room; the pump yields once per answered request instead
  (:meth:`SocketIO.next_turn`, or the wait for the next request), which is what
  keeps connections fair: one with pipelined requests always waiting gets one
  answer per turn, like every other. The server's socket pump
  (``nsqbox.http.server._pump_socket``) makes the read and write that need no
  wait itself, one system call each, and leaves the rest to this class.
"""

from __future__ import annotations

import contextlib
import logging
import socket
from typing import Final

import trio

from nsqbox.addresses import format_address

log = logging.getLogger("nsqbox.http")

RECEIVE_SIZE: Final = 64 * 1024
#: Reads in a row that found data without waiting before the reader yields anyway
#: (a client streaming a large body must not hold the scheduler for all of it).
READS_PER_TURN: Final = 16


class SocketIO:
    """The HTTP pump's I/O on a connected non-blocking TCP socket (which it closes).

    Errors from the peer (reset, broken pipe) surface as
    :class:`trio.BrokenResourceError`, as they do from a trio stream.
    """

    __slots__ = ("reads", "sock")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        #: Reads since this connection last yielded (the server's pump reads inline too).
        self.reads = 0
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
        self.reads += 1
        if self.reads >= READS_PER_TURN:
            self.reads = 0
            await trio.lowlevel.checkpoint()
        try:
            return self.sock.recv(RECEIVE_SIZE)
        except BlockingIOError:
            return await self.receive_when_readable()
        except OSError:
            # A reset (or any failure, as trio's streams treat them) is an
            # end of input as far as HTTP is concerned.
            return b""

    async def receive_when_readable(self) -> bytes:
        """:meth:`receive` once a read found nothing: wait for the peer, then read."""
        self.reads = 0
        while True:
            await trio.lowlevel.wait_readable(self.sock)
            try:
                return self.sock.recv(RECEIVE_SIZE)
            except BlockingIOError:
                continue
            except OSError:
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
        self.reads = 0
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


__all__ = ["RECEIVE_SIZE", "SocketIO", "socket_peer_address"]
