"""The client's exceptions.

nsqd's error frames arrive as :class:`nsqbox.wire.NSQError` (``code``,
``description``, ``fatal``); everything else a client can meet is one of these.
"""

from __future__ import annotations

from ..wire.errors import NSQError

__all__ = ["ClientError", "ConnectionClosed", "HandshakeError", "NSQError"]


class ClientError(Exception):
    """Base class of the client's own errors."""


class HandshakeError(ClientError):
    """The connection could not be set up: bad IDENTIFY reply, a failed upgrade or AUTH."""


class ConnectionClosed(ClientError):
    """The connection ended (the peer hung up, or it was closed) before a reply arrived."""
