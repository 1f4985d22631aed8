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

Bytes move through a :class:`~nsqbox.net.rawsocket.ByteIO`: on a plain TCP
stream (no TLS or compression yet) a :class:`~nsqbox.net.rawsocket.RawSocket` on
the socket's descriptor (reads into the event loop's one scratch buffer, the spin
before epoll, writes without a wait when the kernel has room), else the stream's
own methods. A read is parsed before the reader awaits anything, so an idle
connection holds no read buffer.

What the commands mean is a :class:`Session`'s business (nsqd's is
:class:`~nsqbox.nsqd.tcp.protocol_v2.ProtocolV2`): the connection calls it and it
calls the connection's public methods back (``write``, ``write_messages``,
``out_room``, ``close``...); neither reaches into the other.
"""

from __future__ import annotations

import logging
import socket
import struct
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Final

import trio

from ...net.rawsocket import RECEIVE_SIZE, SPIN_BACKOFF_MAX, ByteIO, RawSocket, byte_io
from ...wire.errors import NSQError, ProtocolViolation
from ...wire.frames import HEARTBEAT, OK, FrameType, encode_frame
from ...wire.message import MESSAGE_FRAME_HEADER, MESSAGE_FRAME_SIZE_EXTRA
from ...wire.parser import Body, Command, CommandParser, MPUBBody, NeedData
from .session import Session, Suspend, Work
from .ticker import Ticker
from .transport import Transport

if TYPE_CHECKING:
    from ..domain.message import Message

__all__ = [
    "COMMANDS_PER_TURN",
    "OUTPUT_HIGH_WATER",
    "RECEIVE_SIZE",
    "SPIN_BACKOFF_MAX",
    "Connection",
    "Session",
    "Suspend",
]

logger = logging.getLogger("nsqbox.nsqd")

#: SO_LINGER on, 0 seconds: close() sends an RST (Connection.reset).
_LINGER_ZERO: Final = struct.pack("ii", 1, 0)
#: Most commands' answer, framed once.
_OK_FRAME: Final = encode_frame(FrameType.RESPONSE, OK)

#: Deliveries to a client pause while this many bytes wait in its output buffer. Large
#: enough that a fast consumer's deliveries go out in big writes (a smaller mark costs
#: about 10% of consume throughput), small enough to bound what a stalled one holds.
OUTPUT_HIGH_WATER = 1 << 20

#: Commands executed from one connection's buffer before it yields to the others: a
#: chunk of 256 KiB (or 1 MiB inflated) of tiny commands would otherwise hold every
#: other client for a few hundred milliseconds (a run of FINs or PUBs counts as the
#: commands it stands for). A turn's worth of MPUB or FIN costs one scheduler pass,
#: nothing per message.
COMMANDS_PER_TURN = 4096


class _WriterHold:
    """The reader asks the writer to flush and pause (``idle``) until ``release``."""

    def __init__(self) -> None:
        self.idle = trio.Event()
        self.release = trio.Event()


class Connection:
    """The I/O half of a protocol V2 connection (see the module doc).

    ``session`` executes the commands; ``clock`` is the server's monotonic clock,
    read once per turn into :attr:`now`. ``client_timeout`` gives the default
    heartbeat interval (half of it); ``max_output_buffer_size`` may raise the
    output high-water mark. ``parser`` is the session's: the session builds and
    configures it (runs, which body to read next), the connection feeds it what it
    reads and executes what it parses (default: a parser without runs).
    """

    def __init__(
        self,
        stream: trio.abc.Stream,
        session: Session,
        *,
        clock: Callable[[], float],
        client_timeout: float,
        max_output_buffer_size: int,
        parser: CommandParser | None = None,
    ) -> None:
        self._transport = Transport(stream)
        self._socket = stream  # the TCP stream under any TLS/compression (reset())
        self._io: ByteIO = byte_io(stream)
        #: The session's parser (it builds it, and asks it for bodies): fed here.
        self._parser = parser if parser is not None else CommandParser()
        #: The clock at the start of the current turn (commands that awaited refresh it).
        self.now = 0.0
        self._clock = clock
        self._session = session  # for its name in log lines
        # the session's hooks, bound once: the command loop calls them per command
        self._on_command = session.on_command
        self._on_body = session.on_body
        self._after_turn = session.after_turn
        self._drained_hook = session.drained
        self._reader_ended = session.reader_ended
        self._disconnected = session.disconnected
        self._out = bytearray()
        #: Where the reader hands what it read (bound once: it is called per read).
        self._sink = self._parser.receive_data
        self._wake = trio.Event()
        self._suspended: Work | None = None
        self._hold: _WriterHold | None = None
        #: The last _process stopped at COMMANDS_PER_TURN with commands still buffered.
        self._more = False
        self._closing = False
        self._cancel = trio.CancelScope()
        #: Cancelled by the ticker on a read timeout: the reader alone stops.
        self._reader_scope = trio.CancelScope()
        self._ticker = Ticker(
            client_timeout / 2,
            reading_since=lambda: self._io.waiting_since,
            heartbeat=self._wake_writer,
            read_timeout=self._reader_scope.cancel,
            write_timeout=self._write_timed_out,
        )
        #: Output bytes at which deliveries pause and the reader waits for the writer:
        #: nsqd blocks on a slow client's socket; we stop feeding it instead.
        self.out_limit = max(OUTPUT_HIGH_WATER, max_output_buffer_size)
        #: Bytes handed to send_all and not yet taken by the kernel (they count too).
        self._sending = 0
        self._drained = trio.Event()
        #: Awaited before each write when set (faults: latency, a stall); None costs a check.
        self.gate: Callable[[], Awaitable[None]] | None = None
        self._gated: trio.CancelScope | None = None

    def __repr__(self) -> str:
        return repr(self._session)

    @property
    def stream(self) -> trio.abc.Stream:
        """The connection as commands see it: the socket, or TLS/compression layers over it."""
        return self._transport.stream

    @property
    def transport(self) -> Transport:
        """The stream and the layers it is made of."""
        return self._transport

    def use(self, transport: Transport) -> None:
        """Read and write through ``transport`` from now on (with the writer held)."""
        self._transport = transport
        self._io = byte_io(transport.stream)

    # the plain socket's spin backoff (see nsqbox.net.rawsocket.SPIN_FOR)
    @property
    def _spin_misses(self) -> int:
        return self._io.spin_misses if isinstance(self._io, RawSocket) else 0

    @property
    def _spin_skip(self) -> int:
        return self._io.spin_skip if isinstance(self._io, RawSocket) else 0

    def close(self) -> None:
        """Disconnect: both tasks end and the stream is closed."""
        self._closing = True
        self._cancel.cancel()

    def reset(self) -> None:
        """Disconnect with an RST instead of a FIN (SO_LINGER 0), as a crashed peer."""
        if isinstance(self._socket, trio.SocketStream):
            self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_ZERO)
        self.close()

    # -- what the session calls ----------------------------------------------------
    def write(self, frame_type: FrameType, data: bytes) -> None:
        """Buffer one frame for the writer."""
        out = self._out
        if not out:
            self._wake.set()
        out += encode_frame(frame_type, data)

    def write_message(self, msg: Message) -> None:
        """Buffer one message frame for the writer."""
        out = self._out
        if not out:
            self._wake.set()
        data = msg.data
        out += MESSAGE_FRAME_HEADER.pack(
            len(data) + MESSAGE_FRAME_SIZE_EXTRA, 2, msg.timestamp, msg.attempts
        )
        out += data

    def write_messages(self, msgs: list[Message]) -> None:
        """Buffer message frames for the writer: one wake-up for the lot."""
        out = self._out
        if not out and msgs:
            self._wake.set()
        pack = MESSAGE_FRAME_HEADER.pack
        extra = MESSAGE_FRAME_SIZE_EXTRA
        for msg in msgs:
            data = msg.data
            out += pack(len(data) + extra, 2, msg.timestamp, msg.attempts)
            out += data

    def respond_ok(self, count: int = 1) -> None:
        """Answer ``OK`` ``count`` times, from a command or a suspended command's work: the
        end of the turn sends it (no wake-up of the writer per answer)."""
        self._out += _OK_FRAME * count

    def out_room(self) -> int:
        """Bytes the output buffer may still take before it counts as full."""
        return self.out_limit - len(self._out) - self._sending

    def refresh_now(self) -> None:
        """Read the clock again (a command that awaited goes on at a later time)."""
        self.now = self._clock()

    @property
    def heartbeat_interval(self) -> float:
        """Seconds between heartbeats (0: none); IDENTIFY may change it."""
        return self._ticker.interval

    @heartbeat_interval.setter
    def heartbeat_interval(self, interval: float) -> None:
        self._ticker.interval = interval

    def restart_heartbeat(self) -> None:
        """Count the next heartbeat from now (nsqd restarts its ticker on IDENTIFY)."""
        self._ticker.restart()

    async def serve(self, initial: bytes) -> None:
        """Run both tasks until the connection ends, then close the stream.

        ``initial`` is what the server read behind the protocol magic.
        """
        self._ticker.restart()
        try:
            with self._cancel:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._writer_then_stop_ticker)
                    nursery.start_soon(self._ticker.run)
                    try:
                        with self._reader_scope:
                            await self._reader(initial)
                        if self._reader_scope.cancelled_caught:
                            logger.info("PROTOCOL(V2): [%s] read timeout, closing", self)
                    finally:
                        self._closing = True
                        self._reader_ended()
                        self._wake.set()
                        if self._gated is not None:  # a held write never delays the end
                            self._gated.cancel()
        finally:
            self._disconnected()
            with trio.CancelScope(shield=True):
                await trio.aclose_forcefully(self._transport.stream)

    async def _receive(self) -> int:
        """Read the next bytes into the parser: how many (0: EOF; -1: broken or closed).
        The ticker times a wait out."""
        return await self._io.receive_into(self._sink)

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
            size = await self._receive()
            if size < 0:
                return
            if not size:
                err = self._parser.eof_error()  # a body cut short: nsqd says which read failed
                if err is not None:
                    logger.error("[%s] - %s", self, err)
                    self._out += encode_frame(FrameType.ERROR, err.frame_body())
                    self._wake.set()
                return
            if not self._execute():
                return

    def _feed(self, data: bytes | bytearray | memoryview) -> bool:
        """Parse and execute; False when the connection must close."""
        self._parser.receive_data(data)
        return self._execute()

    def _execute(self) -> bool:
        """Execute the buffered commands; False when the connection must close."""
        out = self._out
        self.now = self._clock()
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
        self._after_turn()
        self._write_through()
        if out:
            self._wake.set()
        return True

    def _write_through(self) -> None:
        """Send the turn's output from the reader while the writer is idle.

        A command's answer (and what its turn delivered) then goes out without a
        task switch to the writer: one less per round trip. What the socket does not
        take at once is left to the writer, and so is any stream but plain TCP.
        """
        out = self._out
        if not out or self._sending or self._hold is not None or self._closing or self.gate:
            return
        sent = self._io.send_now(out)
        if not sent:  # no room (the writer waits for it), or broken (the writer finds out)
            return
        full = len(out) >= self.out_limit
        del out[:sent]
        if full and len(out) < self.out_limit:  # as after the writer's sends
            self._drained.set()
            self._drained = trio.Event()
            self._drained_hook()

    def _process(self) -> None:
        parser = self._parser
        out = self._out
        on_command = self._on_command
        on_body = self._on_body
        budget = COMMANDS_PER_TURN
        self._more = False
        while not self._closing:
            budget -= 1
            if budget < 0:
                self._more = True  # the reader yields, then goes on with what is buffered
                return
            event = parser.next_event()
            try:
                if isinstance(event, Command):
                    response = on_command(event)
                elif isinstance(event, (Body, MPUBBody)):
                    response = on_body(event)
                elif isinstance(event, NeedData):
                    return
                else:  # a run: it counts as the commands it stands for
                    budget -= event.times - 1
                    response = on_command(event)
            except NSQError as err:
                if err.fatal:
                    raise
                out += encode_frame(FrameType.ERROR, err.frame_body())
                continue
            if response is not None:
                out += _OK_FRAME if response is OK else encode_frame(FrameType.RESPONSE, response)

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
        clock = self._clock
        ticker = self._ticker
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
                await self._wake.wait()  # woken by output, the ticker (heartbeat) or close
                self._wake = trio.Event()
                if ticker.heartbeat_due and self._hold is None:
                    ticker.heartbeat_due = False
                    self._out += encode_frame(FrameType.RESPONSE, HEARTBEAT)
                if not self._out:
                    continue
            data = self._out
            self._out = bytearray()
            self._sending = len(data)
            if self.gate is not None:
                await self._pass_gate(self.gate)
            ticker.sending_since = trio.current_time()  # the ticker times the send out
            try:
                await self._io.send_all(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                self.close()
                return
            finally:
                ticker.sending_since = None
            self._sending = 0
            if len(self._out) + self._sending < self.out_limit:
                self._drained.set()
                self._drained = trio.Event()
                if not self._closing:
                    self.now = clock()
                    self._drained_hook()  # deliveries paused on a full buffer resume

    async def _pass_gate(self, gate: Callable[[], Awaitable[None]]) -> None:
        """Await ``gate`` (the write waits); the reader's end cancels the wait."""
        with trio.CancelScope() as self._gated:
            await gate()
        self._gated = None

    async def _writer_then_stop_ticker(self) -> None:
        try:
            await self._writer()
        finally:
            self._ticker.stop()  # nothing left to time: the ticker ends too

    def _wake_writer(self) -> None:
        self._wake.set()

    def _write_timed_out(self) -> None:
        logger.error("[%s] write timeout, closing", self)
        self.close()

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
