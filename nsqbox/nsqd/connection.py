"""How bytes move on a protocol V2 connection: the reader and writer tasks.

A :class:`Connection` runs two tasks. The reader parses commands and executes
them synchronously, many per received chunk. The writer sends everything
buffered since its last send in one ``send_all`` and emits heartbeats.
Messages a channel delivers are appended to the same output buffer, so a burst
of deliveries costs one wake-up and one write, not one per message.

A few commands must wait for something before they can answer: AUTH (and a
permission check whose authorization expired) asks an auth server over HTTP,
and an IDENTIFY that negotiated TLS or compression swaps the connection's
stream. Their handlers raise :class:`Suspend` with the work to await; the
reader stops executing commands, awaits it, sends the answer, and carries on
with what it had buffered. Every other command stays synchronous, so FIN, RDY
and PUB pay nothing for this. A stream swap holds the writer first
(:meth:`Connection.hold_writer`): it flushes what was queued on the old stream
and writes nothing until the new one is in place.

What the commands mean is :class:`~nsqbox.nsqd.protocol_v2.ClientV2`'s business.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final

import trio

from ..wire.errors import NSQError, ProtocolViolation
from ..wire.frames import HEARTBEAT, FrameType, encode_frame
from ..wire.parser import NEED_DATA, Command, CommandParser

if TYPE_CHECKING:
    from .nsqd import NSQD

__all__ = ["Connection", "Suspend"]

logger = logging.getLogger("nsqbox.nsqd")

RECEIVE_SIZE: Final = 256 * 1024

#: A body's handler, set by the command that expects the body.
Continuation = Callable[[Any], "bytes | None"]
#: What a suspended command awaits: its response (None for none), or an NSQError.
Work = Callable[[], Awaitable["bytes | None"]]


#: Deliveries to a client pause while this many bytes wait in its output buffer. Large
#: enough that a fast consumer's deliveries go out in big writes (a smaller mark costs
#: about 10% of consume throughput), small enough to bound what a stalled one holds.
OUTPUT_HIGH_WATER = 1 << 20

#: Commands executed from one connection's buffer before it yields to the others: a
#: chunk of 256 KiB (or 1 MiB inflated) of tiny commands would otherwise hold every
#: other client for a few hundred milliseconds. A turn's worth of MPUB or FIN costs
#: one scheduler pass, nothing per message.
COMMANDS_PER_TURN = 4096


class Suspend(Exception):
    """Raised by a command handler that has to await ``work`` before answering.

    The reader stops executing buffered commands, awaits ``work``, sends its
    response (or error frame), then goes on with the next buffered command.
    """

    def __init__(self, work: Work) -> None:
        super().__init__()
        self.work = work


class _WriterHold:
    """The reader asks the writer to flush and pause (``idle``) until ``release``."""

    def __init__(self) -> None:
        self.idle = trio.Event()
        self.release = trio.Event()


class Connection:
    """The I/O half of a protocol V2 connection (see the module doc).

    Subclasses implement :meth:`_exec` (one command line) and may set
    ``_pending`` (the handler of the body that follows), ``_refill`` (call
    :meth:`_ready_for_more` once the chunk is done) and ``_closing``.
    """

    def __init__(self, nsqd: NSQD, stream: trio.abc.Stream) -> None:
        self.nsqd = nsqd
        #: The connection as commands see it: the socket, or TLS/compression layers over it.
        self.stream = stream
        self.parser = CommandParser()
        self.heartbeat_interval = nsqd.options.client_timeout / 2
        self._out = bytearray()
        self._wake = trio.Event()
        self._pending: Continuation | None = None
        self._suspended: Work | None = None
        self._hold: _WriterHold | None = None
        self._refill = False
        #: The last _process stopped at COMMANDS_PER_TURN with commands still buffered.
        self._more = False
        self._closing = False
        self._cancel = trio.CancelScope()
        self._now = 0.0
        self._next_heartbeat = 0.0
        #: Output bytes at which deliveries pause and the reader waits for the writer:
        #: nsqd blocks on a slow client's socket; we stop feeding it instead.
        self.out_limit = max(OUTPUT_HIGH_WATER, nsqd.options.max_output_buffer_size)
        #: Bytes handed to send_all and not yet taken by the kernel (they count too).
        self._sending = 0
        self._drained = trio.Event()

    def close(self) -> None:
        """Disconnect: both tasks end and the stream is closed."""
        self._closing = True
        self._cancel.cancel()

    def restart_heartbeat(self) -> None:
        """Count the next heartbeat from now (nsqd restarts its ticker on IDENTIFY)."""
        self._next_heartbeat = self._now + self.heartbeat_interval
        self._wake.set()

    async def serve(self, initial: bytes) -> None:
        """Run both tasks until the connection ends, then close the stream.

        ``initial`` is what the server read behind the protocol magic.
        """
        self._next_heartbeat = self.nsqd.now() + self.heartbeat_interval
        try:
            with self._cancel:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._writer)
                    try:
                        await self._reader(initial)
                    finally:
                        self._closing = True
                        self._stop_deliveries()
                        self._wake.set()
        finally:
            self._disconnected()
            with trio.CancelScope(shield=True):
                await trio.aclose_forcefully(self.stream)

    # -- what subclasses provide -------------------------------------------------
    def _exec(self, cmd: Command) -> bytes | None:
        """Execute one command line; its response, or None."""
        raise NotImplementedError

    def _ready_for_more(self) -> None:
        """Called after a chunk of commands that set ``_refill``."""

    def _stop_deliveries(self) -> None:
        """Called as soon as the reader ends, before the writer's last flush."""

    def _disconnected(self) -> None:
        """Called when both tasks ended, before the stream is closed."""

    # -- reading and executing -----------------------------------------------------
    async def _reader(self, initial: bytes) -> None:
        if initial and not self._feed(initial):
            return
        while not self._closing:
            if self._suspended is not None:
                if not await self._resume():
                    return
                continue
            while len(self._out) + self._sending >= self.out_limit and not self._closing:
                # the peer is not reading: stop executing its commands until it does
                await self._drained.wait()
            if self._more:
                # a chunk held more commands than one turn's worth: let others run first
                await trio.lowlevel.checkpoint()
                if not self._execute():
                    return
                continue
            hb = self.heartbeat_interval
            with trio.move_on_after(hb * 2 if hb > 0 else math.inf) as scope:
                try:
                    data = await self.stream.receive_some(RECEIVE_SIZE)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    return
            if scope.cancelled_caught:
                logger.info("PROTOCOL(V2): [%s] read timeout, closing", self)
                return
            if not data:
                err = self.parser.eof_error()  # a body cut short: nsqd says which read failed
                if err is not None:
                    logger.error("[%s] - %s", self, err)
                    self._out += encode_frame(FrameType.ERROR, err.frame_body())
                    self._wake.set()
                return
            if not self._feed(data):
                return

    def _feed(self, data: bytes | bytearray) -> bool:
        """Parse and execute; False when the connection must close."""
        self.parser.receive_data(data)
        return self._execute()

    def _execute(self) -> bool:
        """Execute the buffered commands; False when the connection must close."""
        out = self._out
        was_empty = not out
        self._now = self.nsqd.now()
        try:
            self._process()
        except Suspend as suspend:
            self._suspended = suspend.work
        except NSQError as err:
            logger.error("[%s] - %s", self, err)
            out += encode_frame(FrameType.ERROR, err.frame_body())
            self._wake.set()
            return False
        except ProtocolViolation as err:
            logger.error("[%s] - %s", self, err)
            return False
        except Exception:  # a bug must cost one connection, never the server
            logger.exception("[%s] - unexpected error, closing", self)
            return False
        if self._refill:
            self._refill = False
            self._ready_for_more()
        if was_empty and out:
            self._wake.set()
        return True

    def _process(self) -> None:
        parser = self.parser
        out = self._out
        budget = COMMANDS_PER_TURN
        self._more = False
        while not self._closing:
            budget -= 1
            if budget < 0:
                self._more = True  # the reader yields, then goes on with what is buffered
                return
            event = parser.next_event()
            if event is NEED_DATA:
                return
            try:
                if type(event) is Command:
                    response = self._exec(event)
                else:
                    pending = self._pending
                    self._pending = None
                    assert pending is not None, "a body without a command"
                    response = pending(event)
            except NSQError as err:
                if err.fatal:
                    raise
                out += encode_frame(FrameType.ERROR, err.frame_body())
                continue
            if response is not None:
                out += encode_frame(FrameType.RESPONSE, response)

    async def _resume(self) -> bool:
        """Await a suspended command, answer it, then execute what is buffered behind it."""
        work = self._suspended
        assert work is not None
        self._suspended = None
        try:
            response = await work()
        except Suspend as suspend:
            self._suspended = suspend.work
            return True
        except NSQError as err:
            logger.error("[%s] - %s", self, err)
            self._out += encode_frame(FrameType.ERROR, err.frame_body())
            self._wake.set()
            if err.fatal:
                return False
        except Exception:  # as in _execute: a bug costs this connection, never the server
            logger.exception("[%s] - unexpected error, closing", self)
            return False
        else:
            if response is not None:
                self._out += encode_frame(FrameType.RESPONSE, response)
                self._wake.set()
        return self._execute()

    # -- writing --------------------------------------------------------------------
    async def _writer(self) -> None:
        nsqd = self.nsqd
        while True:
            if not self._out:
                if self._closing:
                    return
                hold = self._hold
                if hold is not None:
                    # the reader is changing the stream: nothing may be written meanwhile
                    hold.idle.set()
                    await hold.release.wait()
                    continue
                hb = self.heartbeat_interval
                with trio.move_on_at(self._next_heartbeat if hb > 0 else math.inf):
                    await self._wake.wait()
                self._wake = trio.Event()
                hb = self.heartbeat_interval  # IDENTIFY may have changed it meanwhile
                if hb > 0 and nsqd.now() >= self._next_heartbeat and self._hold is None:
                    self._out += encode_frame(FrameType.RESPONSE, HEARTBEAT)
                    self._next_heartbeat += hb
                if not self._out:
                    continue
            data = self._out
            self._out = bytearray()
            self._sending = len(data)
            hb = self.heartbeat_interval
            with trio.move_on_after(hb if hb > 0 else math.inf) as scope:
                try:
                    await self.stream.send_all(data)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    self.close()
                    return
            self._sending = 0
            if scope.cancelled_caught:
                logger.error("[%s] write timeout, closing", self)
                self.close()
                return
            if len(self._out) + self._sending < self.out_limit:
                self._drained.set()
                self._drained = trio.Event()
                if not self._closing:
                    self._now = nsqd.now()
                    self._ready_for_more()  # deliveries paused on a full buffer resume

    async def hold_writer(self) -> None:
        """Wait until the writer has sent everything queued, and keep it paused."""
        hold = self._hold = _WriterHold()
        self._wake.set()
        await hold.idle.wait()

    def release_writer(self) -> None:
        """Let the writer go on (on whatever ``stream`` is now)."""
        hold = self._hold
        self._hold = None
        if hold is not None:
            hold.release.set()
