"""Listening sockets for the services: bind ``host:port`` strings (a failure names the
service and the address: :class:`ListenError`), report what was bound, and accept
connections in batches (:func:`accept_batches`, :func:`serve_tcp`): every connection
waiting in the backlog on each wake-up, as Go's accept loop does, so a burst of clients is
not accepted one per pass of every busy connection, and a process out of file descriptors
logs one line per retry. A :class:`ListenerGroup` makes a server's listeners stop
listening together.
"""

from __future__ import annotations

import errno
import logging
import socket
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
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
    opened (:class:`ListenError`), and in the WARNING that each one bound anywhere but
    loopback logs with the addresses other machines reach it at (:mod:`nsqbox.net.exposure`).
    """
    host, port = split_host_port(address)
    try:
        listeners = await trio.open_tcp_listeners(port, host=host or None)
    except OSError as exc:
        raise ListenError(exc, address, service, kind) from exc
    for listener in listeners:
        sockname = listener.socket.getsockname()
        warning = exposure_warning(f"{service} {kind}", str(sockname[0]), int(sockname[1]))
        if warning is not None:
            log.warning("%s", warning)
    return listeners


def bound_address(listeners: list[trio.SocketListener]) -> tuple[str, int]:
    """The (host, port) the first listener is bound to."""
    sockname = listeners[0].socket.getsockname()
    return str(sockname[0]), int(sockname[1])


class ListenerGroup:
    """One server's listening sockets (nsqd's TCP, HTTP and HTTPS), which stop listening
    together, in order, in one synchronous step.

    A harness that waits on one port must find the others in the same state, as with nsqd,
    which binds every listener before it serves any and closes them together on exit
    (``NSQD.Exit``). Each accept loop would close its own listener when cancelled, in
    whatever order trio resumes them, so a client could see the HTTP port refuse and the
    TCP port still take its connection. Here the first accept loop that ends closes every
    listener of its group, in the group's order (TCP first): once a later one refuses,
    the earlier ones refuse too. Closing is idempotent.
    """

    def __init__(self, listeners: Sequence[trio.SocketListener]) -> None:
        self._listeners = list(listeners)
        #: The accept loops' duplicates of each listening socket: the kernel's socket
        #: listens until every descriptor of it is closed.
        self._duplicates: dict[int, list[socket.socket]] = {}
        self.closed = False

    def adopt(self, listener: trio.SocketListener, duplicate: socket.socket) -> None:
        """Close ``duplicate`` (a descriptor of ``listener``'s socket) with ``listener``."""
        self._duplicates.setdefault(id(listener), []).append(duplicate)

    def close(self) -> None:
        """Stop every listener listening, in order, without yielding to another task."""
        if self.closed:
            return
        self.closed = True
        for listener in self._listeners:
            for duplicate in self._duplicates.pop(id(listener), []):
                if duplicate.fileno() != -1:
                    trio.lowlevel.notify_closing(duplicate)  # a waiting loop wakes, not hangs
                    duplicate.close()
            listener.socket.close()  # trio's close: notifies its waiters too


async def accept_batches(
    listener: trio.SocketListener,
    nursery: trio.Nursery,
    handler: Callable[[socket.socket], Awaitable[None]],
    *,
    group: ListenerGroup | None = None,
) -> NoReturn:
    """Start ``handler(sock)`` in ``nursery`` for each connection; close ``listener`` on exit
    (with ``group``: every listener of the group, at once).

    trio's ``SocketListener.accept`` yields to the scheduler after each
    connection, so under load a connection waited a full scheduler pass (every
    busy connection's turn) per connection ahead of it in the backlog: with
    1,000 clients connecting at once the last waited seconds. This drains the
    backlog with non-blocking ``accept`` calls on a duplicate of the listening
    socket. The handler owns the (non-blocking) socket it is given.
    """
    raw = socket.socket(fileno=listener.socket.dup().detach())
    if group is not None:
        group.adopt(listener, raw)
    try:
        async with listener:
            try:
                raw.setblocking(False)
                while True:
                    if group is not None and group.closed:
                        # Another loop of the group ended (with an error, which is
                        # cancelling the server) and closed this listener: wait for that.
                        await trio.sleep_forever()
                    try:
                        await trio.lowlevel.wait_readable(raw)
                    except trio.ClosedResourceError:
                        if group is None or not group.closed:
                            raise
                        continue
                    await _accept_waiting(raw, nursery, handler)
            finally:
                if group is not None:
                    group.close()  # every listener of the group, before this one alone
    finally:
        raw.close()


async def _accept_waiting(
    raw: socket.socket,
    nursery: trio.Nursery,
    handler: Callable[[socket.socket], Awaitable[None]],
) -> None:
    """Start a handler for each connection waiting in ``raw``'s backlog (ACCEPT_BATCH at
    most); after an error that means the process is out of something, wait, then return."""
    for _ in range(ACCEPT_BATCH):
        try:
            sock, _ = raw.accept()
        except BlockingIOError:
            return
        except OSError as exc:
            if exc.errno in _ACCEPT_SKIP_ERRNOS:
                continue
            if exc.errno not in ACCEPT_CAPACITY_ERRNOS:
                raise
            log.error("accept failed: %s; retrying in %ss", exc, ACCEPT_RETRY_DELAY)
            await trio.sleep(ACCEPT_RETRY_DELAY)
            return
        sock.setblocking(False)
        nursery.start_soon(handler, sock)


async def serve_tcp(
    listeners: list[trio.SocketListener],
    handler: Callable[[trio.SocketStream], Awaitable[None]],
    *,
    group: ListenerGroup | None = None,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> NoReturn:
    """``trio.serve_listeners`` for plain TCP, accepting with :func:`accept_batches`.

    Each connection runs ``handler(stream)`` in this call's nursery; cancelling the
    call closes the listeners (all of ``group``'s, with it) and every connection.
    """

    async def serve(sock: socket.socket) -> None:
        await handler(trio.SocketStream(trio.socket.from_stdlib_socket(sock)))

    async with trio.open_nursery() as nursery:
        for listener in listeners:
            nursery.start_soon(partial(accept_batches, group=group), listener, nursery, serve)
        task_status.started()
    raise AssertionError("the accept loops returned")  # pragma: no cover
