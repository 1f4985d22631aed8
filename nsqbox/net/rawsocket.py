"""One connection's bytes in and out, with as few Python layers as possible.

:class:`RawSocket` works on a plain TCP socket's file descriptor (non-blocking):
``os.readv`` and ``os.write`` first, and a wait through trio only when the kernel
says the call would block: trio's stream layers cost more per call than the system
call under them. :class:`StreamIO` offers the same three calls over any trio stream
(a TLS or compression layer), so a pump is written once against :class:`ByteIO`.

Reads land in one scratch buffer per thread (per event loop), not one per
connection, and are handed to the caller's ``sink`` (its parser's
``receive_data``, which copies them) before anything is awaited: another
connection's read may overwrite the scratch at the next checkpoint. An idle
connection therefore holds no read buffer (a 256 KiB buffer each cost 265 KB of
RSS per idle connection), and a busy one no fresh bytes object per read (above
malloc's mmap threshold that is an mmap, an mremap and an munmap each time).

A reader that finds nothing to read polls the sockets of every waiting reader for a
moment (:data:`SPIN_FOR`) before it sleeps in epoll, when no task is runnable: a
peer that sends its next request as soon as it has the answers to the last one is
then read without a wake-up from epoll, which costs more than the wait (Go's
scheduler spins the same way before it parks a thread). The poll ends as soon as
any waiting reader's socket can be read, and a reader whose polls find nothing polls
less and less often (an idle peer, or one in this process, which cannot send while
we poll).
"""

from __future__ import annotations

import os
import select
import threading
from collections.abc import Callable
from time import perf_counter
from typing import Final, Protocol

import trio

__all__ = [
    "RECEIVE_SIZE",
    "SPIN_BACKOFF_MAX",
    "SPIN_FOR",
    "SPIN_READERS_MAX",
    "ByteIO",
    "RawSocket",
    "StreamIO",
    "byte_io",
]

#: The most one read takes (the scratch buffer's size).
RECEIVE_SIZE: Final = 256 * 1024
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

#: Takes the bytes just read; they are valid only during the call.
Sink = Callable[[memoryview], object]


class ByteIO(Protocol):
    """What a connection's pump needs of its transport."""

    #: When the reader began waiting for bytes (trio's clock; None: it is not waiting).
    waiting_since: float | None

    async def receive_into(self, sink: Sink) -> int:
        """Read the next bytes and hand them to ``sink`` before anything is awaited:
        how many (0: EOF; -1: the connection broke or was closed)."""
        ...

    def send_now(self, data: bytes | bytearray) -> int:
        """Write what the transport takes without waiting: how many bytes (0: none, or it
        cannot write without awaiting). Never raises: a broken peer is found by the next
        :meth:`send_all` or read."""
        ...

    async def send_all(self, data: bytes | bytearray) -> None:
        """Send it all; ``trio.BrokenResourceError``/``ClosedResourceError`` when the peer
        is gone."""
        ...


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


class _ThreadState(threading.local):
    """One event loop's scratch buffer and waiting readers."""

    def __init__(self) -> None:
        buffer = bytearray(RECEIVE_SIZE)
        self.scratch = (buffer,)  # os.readv's argument
        self.view = memoryview(buffer)
        self.waiting = _Waiting()


_THREAD: Final = _ThreadState()


class RawSocket:
    """A connected non-blocking TCP socket's descriptor, read and written directly (see
    the module doc). The caller keeps the socket open while this is in use."""

    __slots__ = ("fd", "spin_misses", "spin_skip", "waiting_since")

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.waiting_since: float | None = None
        #: Waits left before the reader spins again, and the spins in a row that found
        #: nothing (the backoff's exponent; see SPIN_FOR).
        self.spin_skip = 0
        self.spin_misses = 0

    async def receive_into(self, sink: Sink) -> int:
        """Read the next bytes into the thread's scratch and hand them to ``sink`` (see
        :class:`ByteIO`); a read without a wait yields once after it, as trio's
        ``receive_some`` does."""
        fd = self.fd
        state = _THREAD
        scratch = state.scratch
        try:
            size = os.readv(fd, scratch)
        except BlockingIOError:
            waiting = state.waiting
            waiting.add(fd)
            if self.spin_skip:
                self.spin_skip -= 1
            elif (
                len(waiting.fds) <= SPIN_READERS_MAX
                and trio.lowlevel.current_statistics().tasks_runnable == 0
            ):
                size = self._spin(scratch, waiting.poller)
                if size >= 0:
                    waiting.remove(fd)
                    sink(state.view[:size])
                    await trio.lowlevel.checkpoint()  # the others' turn, as below
                    return size
            # nothing yet: wait for the socket (as receive_some would), then read
            self.waiting_since = trio.current_time()
            try:
                while True:
                    await trio.lowlevel.wait_readable(fd)
                    try:
                        size = os.readv(fd, scratch)
                        break
                    except BlockingIOError:
                        continue  # woken with nothing to read after all
            except (trio.ClosedResourceError, OSError):  # closed meanwhile, or broken
                return -1
            finally:
                self.waiting_since = None
                waiting.remove(fd)
            sink(state.view[:size])
            return size
        except OSError:
            return -1  # what receive_some raises Broken/ClosedResourceError for
        sink(state.view[:size])
        await trio.lowlevel.checkpoint()  # the others' turn, as receive_some gives
        return size

    def _spin(self, scratch: tuple[bytearray], waiting: select.poll) -> int:
        """Poll every waiting reader's socket for up to SPIN_FOR: the size read from
        ours, or -1: nothing came, or another's came first (the event loop serves
        it without delay), or an error (the wait that follows finds it). ``poll``
        takes no socket lock, so the spin does not hold up bytes on their way in."""
        fd = self.fd
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
            self.spin_misses = 0
            return size
        self.spin_misses = misses = min(self.spin_misses + 1, SPIN_BACKOFF_MAX)
        self.spin_skip = (1 << misses) - 1
        return -1

    def send_now(self, data: bytes | bytearray) -> int:
        """One ``os.write`` (see :class:`ByteIO`)."""
        try:
            return os.write(self.fd, data)
        except OSError:  # no room (a wait finds it), or broken (the next send finds out)
            return 0

    async def send_all(self, data: bytes | bytearray) -> None:
        """Write it all, waiting for room only when the socket has none (see :class:`ByteIO`)."""
        fd = self.fd
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


class StreamIO:
    """:class:`ByteIO` over a trio stream (TLS, snappy, deflate...): its own methods."""

    __slots__ = ("stream", "waiting_since")

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        self.waiting_since: float | None = None

    async def receive_into(self, sink: Sink) -> int:
        """``receive_some``, handed to ``sink`` (see :class:`ByteIO`)."""
        self.waiting_since = trio.current_time()
        try:
            data = await self.stream.receive_some(RECEIVE_SIZE)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return -1
        finally:
            self.waiting_since = None
        sink(memoryview(data))
        return len(data)

    def send_now(self, data: bytes | bytearray) -> int:
        """Nothing: a stream writes only by awaiting."""
        return 0

    async def send_all(self, data: bytes | bytearray) -> None:
        """The stream's ``send_all``."""
        await self.stream.send_all(data)


def byte_io(stream: trio.abc.Stream) -> ByteIO:
    """A plain TCP stream's descriptor, read and written directly (:class:`RawSocket`:
    the stream keeps the socket open); any other stream through its own methods."""
    if isinstance(stream, trio.SocketStream):
        return RawSocket(stream.socket.fileno())
    return StreamIO(stream)
