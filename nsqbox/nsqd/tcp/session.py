"""The seam between a protocol V2 connection's I/O and its commands.

A :class:`~nsqbox.nsqd.tcp.connection.Connection` moves bytes and calls a
:class:`Session` for what they mean; the session calls the connection's public
methods back. A command that must await something before it can answer raises
:class:`Suspend`. nsqd's session is a :class:`Commands` (its
:class:`~nsqbox.nsqd.tcp.protocol_v2.ProtocolV2`), which a
:class:`~nsqbox.nsqd.tcp.client_state.ClientState` holds beside its connection.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

from ...wire.parser import Body, CommandEvent, CommandParser, MPUBBody

__all__ = ["Commands", "Session", "Suspend", "Work"]

#: What a suspended command awaits: its response (None for none), or an NSQError.
Work = Callable[[], Awaitable["bytes | None"]]


class Suspend(Exception):
    """Raised by a command handler that has to await ``work`` before answering.

    The reader stops executing buffered commands, awaits ``work``, sends its
    response (or error frame), then goes on with the next buffered command.
    """

    def __init__(self, work: Work) -> None:
        super().__init__()
        self.work = work


class Session(Protocol):
    """What a connection calls: the commands' side of it.

    Every call is synchronous. ``on_command`` and ``on_body`` return the response
    to frame (None for none) or raise :class:`Suspend`, or an NSQError (a fatal
    one closes the connection).
    """

    def on_command(self, cmd: CommandEvent) -> bytes | None:
        """Execute one command line, or a run of lines of one command (a ``FinRun``, a
        ``Pub``: answered as those lines one by one would be)."""
        ...

    def on_body(self, body: Body | MPUBBody) -> bytes | None:
        """Take the body the last command asked the parser for."""
        ...

    def after_turn(self) -> None:
        """A run of buffered commands was executed (once per received chunk, not per command)."""
        ...

    def drained(self) -> None:
        """The writer sent enough that the output buffer is below its limit again."""
        ...

    def reader_ended(self) -> None:
        """The reader stopped (EOF, fatal error, close), before the writer's last flush."""
        ...

    def disconnected(self) -> None:
        """Both tasks ended; the stream is about to be closed."""
        ...


class Commands(Session, Protocol):
    """A session that owns the parser its connection feeds (it asks it for bodies)."""

    #: Built and configured by the commands (runs, which body to read next).
    parser: CommandParser
