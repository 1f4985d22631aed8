"""Listening sockets for the services: bind ``host:port`` strings (a failure names the
service and the address: :class:`ListenError`), report what was bound, and accept
connections in batches (:func:`accept_batches`, :func:`serve_tcp`): every connection
waiting in the backlog on each wake-up, as Go's accept loop does, so a burst of clients is
not accepted one per pass of every busy connection, and a process out of file descriptors
logs one line per retry.
"""

from __future__ import annotations

import errno
import logging
import socket
from collections.abc import Awaitable, Callable
from typing import Final, NoReturn

import trio

from .addresses import split_host_port

log = logging.getLogger("nsqbox")

#: Most connections taken from the kernel's backlog per wake-up of the accept loop.
ACCEPT_BATCH: Final = 512
# accept() errors that mean the process or the kernel is out of something: wait
# and retry, as trio.serve_listeners does, rather than crash the server.
ACCEPT_CAPACITY_ERRNOS: Final = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS})
ACCEPT_RETRY_DELAY: Final = 0.1
# accept() errors about one connection that died in the backlog: skip it.
_ACCEPT_SKIP_ERRNOS: Final = frozenset({errno.ECONNABORTED, errno.EPERM, errno.EPROTO})


class ListenError(OSError):
    """A service could not listen on its address; says which service and which address.

    ``nsqd's TCP address 127.0.0.1:4150 is in use (another nsqd or nsqbox up?)``: with two
    ``nsqbox up`` (or an nsqd already there) the bare ``[Errno 98] Address already in use``
    named neither. Keeps the ``errno`` of the failure.
    """

    def __init__(self, cause: OSError, address: str, service: str, kind: str) -> None:
        super().__init__(cause.errno, cause.strerror)
        self.address = address
        self.service = service
        self.kind = kind

    def __str__(self) -> str:
        what = f"{self.service}'s {self.kind} address {self.address}"
        if self.errno == errno.EADDRINUSE:
            return f"{what} is in use (another {self.service} or nsqbox up?)"
        return f"{what}: cannot listen - {self.strerror or 'error'}"


async def open_listeners(
    address: str, service: str = "nsqbox", kind: str = "TCP"
) -> list[trio.SocketListener]:
    """TCP listeners on ``host:port`` (port 0 picks a free one; an empty host means all).

    ``service`` and ``kind`` (``"nsqd"``, ``"HTTP"``) name the listener when it cannot be
    opened: :class:`ListenError`.
    """
    host, port = split_host_port(address)
    try:
        return await trio.open_tcp_listeners(port, host=host or None)
    except OSError as exc:
        raise ListenError(exc, address, service, kind) from exc


def bound_address(listeners: list[trio.SocketListener]) -> tuple[str, int]:
    """The (host, port) the first listener is bound to."""
    sockname = listeners[0].socket.getsockname()
    return str(sockname[0]), int(sockname[1])


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


async def serve_tcp(
    listeners: list[trio.SocketListener],
    handler: Callable[[trio.SocketStream], Awaitable[None]],
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> NoReturn:
    """``trio.serve_listeners`` for plain TCP, accepting with :func:`accept_batches`.

    Each connection runs ``handler(stream)`` in this call's nursery; cancelling the
    call closes the listeners and every connection.
    """

    async def serve(sock: socket.socket) -> None:
        await handler(trio.SocketStream(trio.socket.from_stdlib_socket(sock)))

    async with trio.open_nursery() as nursery:
        for listener in listeners:
            nursery.start_soon(accept_batches, listener, nursery, serve)
        task_status.started()
    raise AssertionError("the accept loops returned")  # pragma: no cover
