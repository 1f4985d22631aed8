"""Plain TCP connections for the HTTP server: a lean socket pump's I/O.

Under load (hundreds of keep-alive clients on ``/pub``) the server is CPU-bound,
and trio's high-level socket API costs a scheduler pass per operation: one per
successful ``receive_some`` and ``send_all`` (and one per accepted connection,
which :func:`nsqbox.net.listeners.accept_batches` avoids). :class:`SocketIO` does the
same work with non-blocking calls on the stdlib socket and waits only when the
kernel says "would block":

* :meth:`SocketIO.receive_ready` and :meth:`SocketIO.send_ready` are the read
  and the write that need no wait: one system call each, no coroutine. The
  server's one pump (``nsqbox.http.server._pump``) tries them first and awaits
  :meth:`SocketIO.receive` or :meth:`SocketIO.send_all` only for the rest.
* The connection yields once per answered request instead of once per
  operation (:meth:`SocketIO.next_turn` when :attr:`SocketIO.turn_owed`, or the
  wait for the next request), which is what keeps connections fair: one with
  pipelined requests always waiting gets one answer per turn, like every other.
  A client streaming a large body yields every :data:`READS_PER_TURN` reads.
  The counts behind this are this class's alone.
"""

from __future__ import annotations

import contextlib
import logging
import socket
from typing import Final

import trio

from nsqbox.net.addresses import format_address

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

    __slots__ = ("_reads", "_would_block", "sock", "turn_owed")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        # Reads since this connection last yielded.
        self._reads = 0
        # The last read would have blocked: the next receive() waits at once.
        self._would_block = False
        #: An answer was written since this connection last yielded: the pump
        #: owes the other connections a turn before it answers again.
        self.turn_owed = False
        # Same as trio.SocketStream: answers are small and must not wait for Nagle.
        # A peer that already reset the connection is found out by the first read.
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def peer_address(self) -> str:
        """``ip:port`` (``[v6]:port``) of the peer, as Go's ``RemoteAddr``; else ""."""
        return socket_peer_address(self.sock)

    def receive_ready(self) -> bytes | None:
        """The peer's next bytes if they are there now (``b""`` at EOF or on a reset);
        None when :meth:`receive` must be awaited (nothing yet, or this turn's reads used)."""
        if self._reads >= READS_PER_TURN - 1:
            return None
        try:
            data = self.sock.recv(RECEIVE_SIZE)
        except BlockingIOError:
            self._would_block = True
            return None
        except OSError:
            return b""  # as receive()
        self._reads += 1
        return data

    async def receive(self) -> bytes:
        """The next bytes from the peer; ``b""`` at EOF or on a reset."""
        if self._would_block:
            self._would_block = False
            return await self._receive_when_readable()
        await trio.lowlevel.checkpoint_if_cancelled()
        self._reads += 1
        if self._reads >= READS_PER_TURN:
            await self.next_turn()
        try:
            return self.sock.recv(RECEIVE_SIZE)
        except BlockingIOError:
            return await self._receive_when_readable()
        except OSError:
            # A reset (or any failure, as trio's streams treat them) is an
            # end of input as far as HTTP is concerned.
            return b""

    async def _receive_when_readable(self) -> bytes:
        """:meth:`receive` once a read found nothing: wait for the peer (a turn), then read."""
        self._reads = 0
        self.turn_owed = False
        while True:
            await trio.lowlevel.wait_readable(self.sock)
            try:
                return self.sock.recv(RECEIVE_SIZE)
            except BlockingIOError:
                continue
            except OSError:
                return b""

    def send_ready(self, data: bytes) -> bytes:
        """Write what of an answer fits in the socket buffer now; the rest (``b""``: all
        sent) is for :meth:`send_all`. The connection owes a turn (:attr:`turn_owed`)."""
        self.turn_owed = True
        try:
            sent = self.sock.send(data)
        except BlockingIOError:
            return data
        except OSError as exc:
            raise trio.BrokenResourceError(f"send failed: {exc}") from exc
        return data[sent:] if sent < len(data) else b""

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
        """Yield, so every connection gets its turn."""
        self._reads = 0
        self.turn_owed = False
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
