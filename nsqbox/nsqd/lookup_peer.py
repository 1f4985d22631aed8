"""One lookupd as nsqd's lookup loop sees it (nsqd/lookup_peer.go): its state, its IDENTIFY
reply, and the V1 round trip; the loop itself is :mod:`nsqbox.nsqd.lookup`.
"""

from __future__ import annotations

from collections import deque

import msgspec
import trio

from ..wire.errors import ProtocolViolation
from ..wire.lookupd import NEED_DATA, ResponseReader

__all__ = [
    "IO_TIMEOUT",
    "SESSION_ERRORS",
    "LookupPeer",
    "LookupdInfo",
    "LookupdRefused",
    "idle_until",
    "info_decoder",
    "roundtrip",
]

#: nsqd's lookupPeer dial, read and write deadline.
IO_TIMEOUT = 1.0


class LookupdInfo(msgspec.Struct, frozen=True):
    """What a lookupd says about itself in its IDENTIFY reply."""

    tcp_port: int = 0
    http_port: int = 0
    version: str = ""
    broadcast_address: str = ""
    hostname: str = ""


info_decoder = msgspec.json.Decoder(LookupdInfo)


class LookupdRefused(Exception):
    """The lookupd answered IDENTIFY with an error or something unreadable."""


# What ends one connection to a lookupd (ValueError: an address without a port).
SESSION_ERRORS = (
    OSError,
    ValueError,
    trio.BrokenResourceError,
    trio.TooSlowError,
    ProtocolViolation,
    LookupdRefused,
)


class LookupPeer(msgspec.Struct, eq=False):
    """One lookupd address and the state of nsqd's connection to it."""

    address: str
    #: Commands to send, each with its sequence number (``pushed`` counts them).
    queue: deque[tuple[int, bytes]] = msgspec.field(default_factory=deque)
    pushed: int = 0
    #: The sequence number of the last command the lookupd answered (or covered by a
    #: full re-registration).
    acked: int = 0
    wake: trio.Event = msgspec.field(default_factory=trio.Event)
    info: LookupdInfo | None = None
    #: Between a dial and the end of that session's registration (from the moment the
    #: peer is added, so a publish right after start-up waits for the first dial).
    connecting: bool = True
    connected: bool = False
    busy: bool = False
    removed: bool = False
    cancel_scope: trio.CancelScope = msgspec.field(default_factory=trio.CancelScope)

    def push(self, command: bytes) -> None:
        self.pushed += 1
        self.queue.append((self.pushed, command))
        self.wake.set()

    @property
    def idle(self) -> bool:
        return self.connected and not self.busy and not self.queue


async def roundtrip(stream: trio.SocketStream, reader: ResponseReader, data: bytes) -> bytes:
    with trio.fail_after(IO_TIMEOUT):
        await stream.send_all(data)
    with trio.fail_after(IO_TIMEOUT):
        while (reply := reader.next_response()) is NEED_DATA:
            chunk = await stream.receive_some()
            if not chunk:
                raise trio.BrokenResourceError("lookupd closed the connection")
            reader.receive_data(chunk)
    assert isinstance(reply, bytes)
    return reply


async def idle_until(peer: LookupPeer, stream: trio.SocketStream, deadline: float) -> bool:
    """Wait for a command, the deadline, or the socket turning readable (True)."""
    readable = False
    with trio.move_on_at(deadline):
        async with trio.open_nursery() as nursery:

            async def watch() -> None:
                nonlocal readable
                await trio.lowlevel.wait_readable(stream.socket)
                readable = True
                nursery.cancel_scope.cancel()

            async def woken() -> None:
                await peer.wake.wait()
                nursery.cancel_scope.cancel()

            nursery.start_soon(watch)
            nursery.start_soon(woken)
    return readable
