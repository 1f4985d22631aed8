"""Listening sockets for the services: bind ``host:port`` strings, report what was bound,
and accept connections in batches (:func:`accept_batches`, :func:`serve_tcp`): every
connection waiting in the backlog on each wake-up, as Go's accept loop does, so a burst
of clients is not accepted one per pass of every busy connection, and a process out of
file descriptors logs one line per retry.
"""

from __future__ import annotations

import errno
import logging
import socket
from collections.abc import Awaitable, Callable
from typing import Final, NoReturn

import trio

from .addresses import split_host_port
from .exposure import exposure_warning

log = logging.getLogger("nsqbox")

#: Most connections taken from the kernel's backlog per wake-up of the accept loop.
ACCEPT_BATCH: Final = 512
# accept() errors that mean the process or the kernel is out of something: wait
# and retry, as trio.serve_listeners does, rather than crash the server.
ACCEPT_CAPACITY_ERRNOS: Final = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS})
ACCEPT_RETRY_DELAY: Final = 0.1
# accept() errors about one connection that died in the backlog: skip it.
_ACCEPT_SKIP_ERRNOS: Final = frozenset({errno.ECONNABORTED, errno.EPERM, errno.EPROTO})


async def open_listeners(address: str, name: str = "listener") -> list[trio.SocketListener]:
    """TCP listeners on ``host:port`` (port 0 picks a free one; an empty host means all).

    Each one bound anywhere but loopback logs a WARNING naming ``name`` (``"nsqd
    HTTP"``) and the addresses other machines reach it at (:mod:`nsqbox.exposure`).
    """
    host, port = split_host_port(address)
    listeners = await trio.open_tcp_listeners(port, host=host or None)
    for listener in listeners:
        sockname = listener.socket.getsockname()
        warning = exposure_warning(name, str(sockname[0]), int(sockname[1]))
        if warning is not None:
            log.warning("%s", warning)
    return listeners


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
