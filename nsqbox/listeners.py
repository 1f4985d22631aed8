"""Listening sockets for the services: bind ``host:port`` strings, report what was bound."""

from __future__ import annotations

import trio

from .nsqd.options import split_host_port


async def open_listeners(address: str) -> list[trio.SocketListener]:
    """TCP listeners on ``host:port`` (port 0 picks a free one; an empty host means all)."""
    host, port = split_host_port(address)
    return await trio.open_tcp_listeners(port, host=host or None)


def bound_address(listeners: list[trio.SocketListener]) -> tuple[str, int]:
    """The (host, port) the first listener is bound to."""
    sockname = listeners[0].socket.getsockname()
    return str(sockname[0]), int(sockname[1])
