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

Timeouts cost nothing per read or write: a third task, the ticker, sleeps until
the next heartbeat, read deadline (twice the heartbeat interval of a reader
waiting for bytes, as nsqd's SetReadDeadline) or write deadline (one interval
of a send in progress), whichever comes first, and acts on the one that passed.
A cancel scope per receive and per send cost more than the receive itself.

On a plain TCP stream (no TLS or compression yet) both tasks first try the
socket's file descriptor directly (``os.readv``/``os.write``: it is non-blocking)
and fall back to trio's stream methods only when it would block: trio's layers
cost more per call than the system call under them. Reads go into one scratch
buffer per connection: a fresh 256 KiB bytes object per read is an mmap, an
mremap and an munmap each time (above malloc's mmap threshold).

A reader that finds nothing to read polls the sockets of every waiting reader for a
moment (:data:`SPIN_FOR`) before it sleeps in epoll, when no task is runnable: a
publisher that sends its next batch as soon as it has the OKs of the last one is then
read without a wake-up from epoll, which costs more than the wait (Go's scheduler
spins the same way before it parks a thread). The poll ends as soon as any waiting
reader's socket can be read, and a reader whose polls find nothing polls less and less
often (an idle peer, or one in this process, which cannot send while we poll).

What the commands mean is a :class:`Session`'s business (nsqd's is
:class:`~nsqbox.nsqd.protocol_v2.ClientV2`): the connection calls it and it
calls the connection's public methods back (``write``, ``write_messages``,
``out_room``, ``close``...); neither reaches into the other.
"""

from __future__ import annotations

import logging
import math
import os
import select
import socket
import struct
import threading
from collections.abc import Awaitable, Callable
from time import perf_counter
from typing import TYPE_CHECKING, Final, Protocol

import trio

from ..wire.errors import NSQError, ProtocolViolation
from ..wire.frames import HEARTBEAT, OK, FrameType, encode_frame
from ..wire.message import MESSAGE_FRAME_HEADER
from ..wire.parser import NEED_DATA, Body, Command, CommandParser, FinRun, MPUBBody, Pub

if TYPE_CHECKING:
    from .message import Message

__all__ = ["Connection", "Session", "Suspend"]

logger = logging.getLogger("nsqbox.nsqd")

RECEIVE_SIZE: Final = 256 * 1024
#: SO_LINGER on, 0 seconds: close() sends an RST (Connection.reset).
_LINGER_ZERO: Final = struct.pack("ii", 1, 0)
#: Most commands' answer, framed once.
_OK_FRAME: Final = encode_frame(FrameType.RESPONSE, OK)

#: What a suspended command awaits: its response (None for none), or an NSQError.
Work = Callable[[], Awaitable["bytes | None"]]


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

#: How long a reader with nothing to read polls its socket before it sleeps in epoll,
#: when no other task is runnable: as Go's scheduler spins before it parks a thread. A
#: publisher that answers each batch of OKs with the next batch (a ping-pong) sends it
#: within this; waking from epoll costs more than the wait (PUB one at a time: 1.4x).
SPIN_FOR: Final = 50e-6
#: No spin while more readers than this wait (polling them all would cost more).
SPIN_READERS_MAX: Final = 64
#: After this many spins in a row that found nothing, a reader spins once per
#: 2**SPIN_BACKOFF_MAX waits (an idle peer, or one in this process, waits for us).
SPIN_BACKOFF_MAX: Final = 10


class _Waiting:
    """The sockets of one thread's readers waiting for bytes (one event loop's): a spin
    polls them all, and ends as soon as any of them can read."""

    __slots__ = ("fds", "poller")

    def __init__(self) -> None:
        self.poller = select.poll()
        self.fds: set[int] = set()

    def add(self, fd: int) -> None:
        self.poller.register(fd, select.POLLIN)
        self.fds.add(fd)

    def remove(self, fd: int) -> None:
        if fd in self.fds:
            self.fds.remove(fd)
            self.poller.unregister(fd)


_THREAD = threading.local()


def _waiting_readers() -> _Waiting:
    try:
        return _THREAD.waiting  # type: ignore[no-any-return]
    except AttributeError:
        _THREAD.waiting = waiting = _Waiting()
        return waiting


class Suspend(Exception):
    """Raised by a command handler that has to await ``work`` before answering.

    The reader stops executing buffered commands, awaits ``work``, sends its
    response (or error frame), then goes on with the next buffered command.
    """

    def __init__(self, work: Work) -> None:
        super().__init__()
        self.work = work


class Session(Protocol):
    """What a connection calls: the commands' side of it (see the module doc).

    Every call is synchronous. ``on_command`` and ``on_body`` return the response
    to frame (None for none) or raise :class:`Suspend`, or an NSQError (a fatal
    one closes the connection).
    """

    def on_command(self, cmd: Command) -> bytes | None:
        """Execute one command line."""
        ...

    def on_body(self, body: Body | MPUBBody) -> bytes | None:
        """Take the body the last command asked the parser for."""
        ...

    def on_fins(self, ids: list[bytes]) -> list[NSQError]:
        """Execute a run of ``FIN <id>`` lines; the non-fatal errors, in order, to send."""
        ...

    def on_pub(self, params: list[bytes], bodies: list[bytes]) -> None:
        """Execute PUBs with the same line, bodies read whole (the parser's ``pub_limit``),
        each as one PUB (answered with :meth:`Connection.respond_ok`)."""
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
    output high-water mark.
    """

    def __init__(
        self,
        stream: trio.abc.Stream,
        session: Session,
        *,
        clock: Callable[[], float],
        client_timeout: float,
        max_output_buffer_size: int,
    ) -> None:
        #: The connection as commands see it: the socket, or TLS/compression layers over it.
        self.stream = stream
        self._socket = stream  # the TCP stream under any TLS/compression (reset())
        #: The TLS layer (a trio.SSLStream: cipher(), version(), getpeercert()...) once upgraded.
        self.tls_info: trio.SSLStream[trio.abc.Stream] | None = None
        self.snappy = False
        self.deflate = False
        self.parser = CommandParser(fin_runs=True)
        self.heartbeat_interval = client_timeout / 2
        #: The clock at the start of the current turn (commands that awaited refresh it).
        self.now = 0.0
        self._clock = clock
        self._session = session  # for its name in log lines
        # the session's hooks, bound once: the command loop calls them per command
        self._on_command = session.on_command
        self._on_body = session.on_body
        self._on_fins = session.on_fins
        self._on_pub = session.on_pub
        self._after_turn = session.after_turn
        self._drained_hook = session.drained
        self._reader_ended = session.reader_ended
        self._disconnected = session.disconnected
        self._out = bytearray()
        #: Where plain TCP reads land (the parser copies out of it before the next read).
        self._scratch = bytearray(RECEIVE_SIZE)
        self._scratch_view = memoryview(self._scratch)
        #: Waits left before the reader spins again, and the spins in a row that found
        #: nothing (the backoff's exponent; see SPIN_FOR).
        self._spin_skip = 0
        self._spin_misses = 0
        self._wake = trio.Event()
        self._suspended: Work | None = None
        self._hold: _WriterHold | None = None
        #: The last _process stopped at COMMANDS_PER_TURN with commands still buffered.
        self._more = False
        self._closing = False
        self._cancel = trio.CancelScope()
        #: Cancelled by the ticker on a read timeout: the reader alone stops.
        self._reader_scope = trio.CancelScope()
        #: The ticker's sleep: cancelled when a deadline may have moved earlier.
        self._tick_scope = trio.CancelScope()
        self._next_heartbeat = 0.0
        #: The ticker found a heartbeat due: the writer sends it.
        self._heartbeat_due = False
        #: When the reader began waiting for bytes (None: it is not waiting).
        self._receiving_since: float | None = None
        #: When the writer's current send began (None: it is not sending).
        self._sending_since: float | None = None
        self._writer_done = False
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
        out += MESSAGE_FRAME_HEADER.pack(len(data) + 14, 2, msg.timestamp, msg.attempts)
        out += data

    def write_messages(self, msgs: list[Message]) -> None:
        """Buffer message frames for the writer: one wake-up for the lot."""
        out = self._out
        if not out and msgs:
            self._wake.set()
        pack = MESSAGE_FRAME_HEADER.pack
        for msg in msgs:
            data = msg.data
            out += pack(len(data) + 14, 2, msg.timestamp, msg.attempts)
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

    def restart_heartbeat(self) -> None:
        """Count the next heartbeat from now (nsqd restarts its ticker on IDENTIFY)."""
        self._next_heartbeat = trio.current_time() + self.heartbeat_interval  # real time
        self._heartbeat_due = False
        self._tick_scope.cancel()  # the interval may have changed: the ticker looks again

    async def serve(self, initial: bytes) -> None:
        """Run both tasks until the connection ends, then close the stream.

        ``initial`` is what the server read behind the protocol magic.
        """
        self._next_heartbeat = trio.current_time() + self.heartbeat_interval
        try:
            with self._cancel:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._writer_then_stop_ticker)
                    nursery.start_soon(self._ticker)
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
                await trio.aclose_forcefully(self.stream)

    def _plain_fd(self) -> int:
        """The socket's descriptor while the stream is plain TCP; -1 after an upgrade."""
        sock = self._socket
        if self.stream is sock and isinstance(sock, trio.SocketStream):
            return sock.socket.fileno()
        return -1

    async def _receive(self) -> bytes | bytearray | memoryview | None:
        """The next bytes from the peer (empty: EOF; None: the connection broke or was
        closed), valid until the next call. The ticker times a wait out."""
        fd = self._plain_fd()
        if fd < 0:
            self._receiving_since = trio.current_time()  # real time, as the ticker's deadlines
            try:
                return await self.stream.receive_some(RECEIVE_SIZE)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return None
            finally:
                self._receiving_since = None
        scratch = (self._scratch,)
        try:
            size = os.readv(fd, scratch)
        except BlockingIOError:
            waiting = _waiting_readers()
            waiting.add(fd)
            if self._spin_skip:
                self._spin_skip -= 1
            elif (
                len(waiting.fds) <= SPIN_READERS_MAX
                and trio.lowlevel.current_statistics().tasks_runnable == 0
            ):
                size = self._spin(fd, scratch, waiting.poller)
                if size >= 0:
                    waiting.remove(fd)
                    await trio.lowlevel.checkpoint()  # the others' turn, as below
                    return self._scratch_view[:size]
            # nothing yet: wait for the socket (as receive_some would), then read
            self._receiving_since = trio.current_time()
            try:
                while True:
                    await trio.lowlevel.wait_readable(fd)
                    try:
                        size = os.readv(fd, scratch)
                        break
                    except BlockingIOError:
                        continue  # woken with nothing to read after all
            except (trio.ClosedResourceError, OSError):  # closed meanwhile, or broken
                return None
            finally:
                self._receiving_since = None
                waiting.remove(fd)
        except OSError:
            return None  # what receive_some raises Broken/ClosedResourceError for
        else:
            await trio.lowlevel.checkpoint()  # the others' turn, as receive_some gives
        return self._scratch_view[:size]

    def _spin(self, fd: int, scratch: tuple[bytearray], waiting: select.poll) -> int:
        """Poll every waiting reader's socket for up to SPIN_FOR: the size read from
        ``fd``, or -1: nothing came, or another's came first (the event loop serves
        it without delay), or an error (the wait that follows finds it). ``poll``
        takes no socket lock, so the spin does not hold up bytes on their way in."""
        end = perf_counter() + SPIN_FOR
        while perf_counter() < end:
            ready = waiting.poll(0)
            if not ready:
                continue
            if all(ready_fd != fd for ready_fd, _ in ready):
                return -1  # not a miss: another peer is quicker
            try:
                size = os.readv(fd, scratch)
            except OSError:
                break
            self._spin_misses = 0
            return size
        self._spin_misses = misses = min(self._spin_misses + 1, SPIN_BACKOFF_MAX)
        self._spin_skip = (1 << misses) - 1
        return -1

    async def _send(self, data: bytearray) -> None:
        """Send it all; BrokenResourceError/ClosedResourceError when the peer is gone."""
        fd = self._plain_fd()
        if fd < 0:
            await self.stream.send_all(data)
            return
        try:
            sent = os.write(fd, data)
        except BlockingIOError:
            sent = 0
        except OSError as exc:
            raise trio.BrokenResourceError(str(exc)) from exc
        if sent == len(data):
            await trio.lowlevel.checkpoint()  # the others' turn, as send_all gives
            return
        with memoryview(data) as view:
            while sent < len(view):
                await trio.lowlevel.wait_writable(fd)  # as send_all would
                try:
                    sent += os.write(fd, view[sent:])
                except BlockingIOError:
                    continue  # woken with no room after all
                except OSError as exc:
                    raise trio.BrokenResourceError(str(exc)) from exc

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
            data = await self._receive()
            if data is None:
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

    def _feed(self, data: bytes | bytearray | memoryview) -> bool:
        """Parse and execute; False when the connection must close."""
        self.parser.receive_data(data)
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
        fd = self._plain_fd()
        if fd < 0:
            return
        try:
            sent = os.write(fd, out)
        except OSError:  # no room (the writer waits for it), or broken (the writer finds out)
            return
        full = len(out) >= self.out_limit
        del out[:sent]
        if full and len(out) < self.out_limit:  # as after the writer's sends
            self._drained.set()
            self._drained = trio.Event()
            self._drained_hook()

    def _process(self) -> None:
        parser = self.parser
        out = self._out
        on_command = self._on_command
        on_body = self._on_body
        on_fins = self._on_fins
        on_pub = self._on_pub
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
            kind = type(event)
            try:
                if kind is Command:
                    response = on_command(event)  # type: ignore[arg-type]
                elif kind is Pub:
                    params, bodies = event  # type: ignore[misc]
                    budget -= len(bodies) - 1  # each counts as the command it stands for
                    on_pub(params, bodies)  # type: ignore[arg-type]
                    continue
                elif kind is FinRun:
                    ids = event.ids  # type: ignore[union-attr]
                    budget -= len(ids) - 1
                    for err in on_fins(ids):
                        out += encode_frame(FrameType.ERROR, err.frame_body())
                    continue
                else:  # a body (NEED_DATA returned above; mypy cannot narrow on `is`)
                    response = on_body(event)  # type: ignore[arg-type]
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
                if self._heartbeat_due and self._hold is None:
                    self._heartbeat_due = False
                    self._out += encode_frame(FrameType.RESPONSE, HEARTBEAT)
                if not self._out:
                    continue
            data = self._out
            self._out = bytearray()
            self._sending = len(data)
            if self.gate is not None:
                await self._pass_gate(self.gate)
            self._sending_since = trio.current_time()  # the ticker times the send out
            try:
                await self._send(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                self.close()
                return
            finally:
                self._sending_since = None
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
            self._writer_done = True  # nothing left to time: the ticker ends too
            self._tick_scope.cancel()

    async def _ticker(self) -> None:
        """Heartbeats and the read and write timeouts (see the module doc), on real time
        (trio's clock), never the broker's: a manual clock's jump must not time clients out."""
        clock = trio.current_time
        while not self._writer_done:
            hb = self.heartbeat_interval
            wake_at = math.inf
            if hb > 0:
                wake_at = self._next_heartbeat
                if self._receiving_since is not None:
                    wake_at = min(wake_at, self._receiving_since + 2 * hb)
                if self._sending_since is not None:
                    wake_at = min(wake_at, self._sending_since + hb)
            self._tick_scope = trio.CancelScope(deadline=wake_at)
            with self._tick_scope:
                await trio.sleep_forever()
            if hb <= 0 or hb != self.heartbeat_interval or self._writer_done:
                continue  # IDENTIFY changed the interval: every deadline is counted anew
            now = clock()
            sending_since = self._sending_since
            if sending_since is not None and now >= sending_since + hb:
                logger.error("[%s] write timeout, closing", self)
                self.close()
                return
            if now >= self._next_heartbeat:
                self._heartbeat_due = True
                self._next_heartbeat += hb
                self._wake.set()
            receiving_since = self._receiving_since
            if receiving_since is not None and now >= receiving_since + 2 * hb:
                # serve() logs it; the writer flushes (a heartbeat due now too) and ends
                self._reader_scope.cancel()
                return

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
