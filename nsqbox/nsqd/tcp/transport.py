"""What a protocol V2 connection's stream is made of: the socket, TLS, snappy or deflate.

IDENTIFY may stack layers on the socket (:func:`nsqbox.nsqd.tcp.negotiate.upgrade_transport`
returns the new :class:`Transport`); the connection reads and writes through
:attr:`Transport.stream`, and ``/stats`` reports the layers.
"""

from __future__ import annotations

import msgspec
import trio

__all__ = ["Transport"]


class Transport(msgspec.Struct, frozen=True):
    """A connection's stream and the layers it is made of."""

    #: What commands are read from and answers written to: the topmost layer.
    stream: trio.abc.Stream
    #: The TLS layer (cipher(), version(), getpeercert()...), once upgraded.
    tls: trio.SSLStream[trio.abc.Stream] | None = None
    snappy: bool = False
    deflate: bool = False
