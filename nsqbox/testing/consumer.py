"""A small blocking NSQ consumer over a plain socket, on nsqbox's sans-IO wire codec.

It backs ``consume()`` in every mode and the channel capture of subprocess and
noproc boxes. It runs in the caller's thread (or a helper thread), never on a
server's loop, so it works against any nsqd.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time

from .. import __version__
from ..wire import commands
from ..wire.frames import CLOSE_WAIT, HEARTBEAT, OK, FrameReader, FrameType
from ..wire.message import DecodedMessage, decode_message
from .config import Address
from .state import WaitTimeout
from .waiting import Sleep, preview

__all__ = ["ChannelTapThread", "NSQConnection", "NSQServerError", "consume", "consume_bodies"]

#: How long one read waits before the caller's ``sleep`` runs (gevent and friends).
POLL = 0.005


class NSQServerError(RuntimeError):
    """nsqd answered with an error frame (``E_INVALID ...``)."""


class NSQConnection:
    """One protocol V2 connection: IDENTIFY, then commands and frames."""

    def __init__(self, address: Address, timeout: float) -> None:
        """Connect and IDENTIFY, both within ``timeout`` seconds (TimeoutError beyond)."""
        deadline = time.monotonic() + timeout
        self.address = address
        self.sock = socket.create_connection(address.pair, timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.reader = FrameReader()
        identity = {
            "client_id": "nsqbox-testing",
            "hostname": socket.gethostname(),
            "user_agent": f"nsqbox-testing/{__version__}",
            "feature_negotiation": False,
        }
        try:
            self.send(commands.MAGIC_V2 + commands.identify(identity))
            self.expect_ok(deadline)
        except BaseException:
            self.sock.close()  # nobody else holds it yet
            raise

    def send(self, data: bytes) -> None:
        """Send raw command bytes."""
        self.sock.sendall(data)

    def next_frame(self, deadline: float, sleep: Sleep | None = None) -> tuple[int, bytes] | None:
        """The next frame other than a heartbeat (answered with NOP); None at ``deadline``."""
        while True:
            frame = self.reader.next_frame()
            if frame is not None:
                if frame == (FrameType.RESPONSE, HEARTBEAT):
                    self.send(commands.nop())
                    continue
                return frame
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            self.sock.settimeout(min(remaining, POLL) if sleep is not None else remaining)
            try:
                data = self.sock.recv(65536)
            except TimeoutError:
                if sleep is not None:
                    sleep(POLL)
                continue
            if not data:
                raise ConnectionError(f"nsqd {self.address} closed the connection")
            self.reader.receive_data(data)

    def expect_ok(self, deadline: float) -> None:
        """Read the answer to the last command; raise unless it is OK."""
        frame = self.next_frame(deadline)
        if frame is None:
            raise TimeoutError(f"no answer from nsqd {self.address}")
        kind, data = frame
        if kind == FrameType.ERROR:
            raise NSQServerError(data.decode(errors="replace"))
        if data != OK:
            raise NSQServerError(f"unexpected answer {data[:100]!r}")

    def close_cleanly(self, deadline: float) -> None:
        """CLS, wait for CLOSE_WAIT (so every FIN sent before was processed), close."""
        try:
            self.send(commands.cls())
            while (frame := self.next_frame(deadline)) is not None:
                if frame == (FrameType.RESPONSE, CLOSE_WAIT):
                    break
        except OSError:
            pass
        finally:
            self.sock.close()


#: nsqd's default --max-rdy-count: the most messages one connection may hold in flight.
MAX_RDY = 2500


def consume(
    address: Address,
    topic: str,
    channel: str,
    count: int,
    timeout: float,
    *,
    subscribe_timeout: float = 10.0,
    sleep: Sleep | None = None,
) -> tuple[list[DecodedMessage], str | None]:
    """SUB, take exactly ``count`` messages (FIN each), CLS.

    Connecting, IDENTIFY and SUB have ``subscribe_timeout`` seconds together; ``timeout``
    counts only the wait for messages, from SUB's OK on. So a consume of nothing
    (``count=0``), or one with a tiny ``timeout``, still creates the channel however
    slow the machine is. Returns the messages and why fewer arrived, if they did:
    ``"subscribe"`` when nsqd did not acknowledge SUB within ``subscribe_timeout``
    (nothing was taken), ``"timeout"`` when the messages did not come within
    ``timeout``. ``sleep`` is called between short reads (pass ``gevent.sleep`` to let
    gevent run).

    RDY in nsqd is a bound on messages in flight, not a budget: a FIN frees a slot that
    nsqd fills at once. So each batch is held unfinished until it is complete, then RDY 0
    stops deliveries before the FINs go out, and no message beyond ``count`` is taken.
    """
    subscribed_by = time.monotonic() + subscribe_timeout
    try:
        conn = NSQConnection(address, subscribe_timeout)
    except TimeoutError:
        return [], "subscribe"
    got: list[DecodedMessage] = []
    timed_out = False
    try:
        conn.send(commands.sub(topic, channel))
        try:
            conn.expect_ok(subscribed_by)
        except TimeoutError:
            return [], "subscribe"
        deadline = time.monotonic() + timeout  # the wait for messages starts here
        while len(got) < count and not timed_out:
            batch: list[DecodedMessage] = []
            size = min(count - len(got), MAX_RDY)
            conn.send(commands.rdy(size))
            try:
                while len(batch) < size:
                    frame = conn.next_frame(deadline, sleep)
                    if frame is None:
                        timed_out = True
                        break
                    kind, data = frame
                    if kind == FrameType.ERROR:
                        raise NSQServerError(data.decode(errors="replace"))
                    if kind == FrameType.MESSAGE:
                        batch.append(decode_message(data))
            finally:
                got.extend(batch)
                with contextlib.suppress(OSError):  # keep the error that got us here
                    conn.send(commands.rdy(0) + b"".join(commands.fin(m.id) for m in batch))
    finally:
        conn.close_cleanly(time.monotonic() + 2.0)
    return got, "timeout" if timed_out else None


def consume_bodies(
    address: Address,
    topic: str,
    channel: str,
    count: int,
    timeout: float,
    subscribe_timeout: float,
    sleep: Sleep | None = None,
) -> list[bytes]:
    """:func:`~nsqbox.testing.consumer.consume`, with a WaitTimeout when too few arrive."""
    __tracebackhide__ = True  # failures point at the test's line
    messages, problem = consume(
        address, topic, channel, count, timeout, subscribe_timeout=subscribe_timeout, sleep=sleep
    )
    bodies = [m.body for m in messages]
    where = f"channel {channel!r} of topic {topic!r}"
    if problem == "subscribe":
        raise WaitTimeout(
            f"nsqbox: timed out after {subscribe_timeout:g}s subscribing to {where} "
            f"(nsqd {address} did not acknowledge SUB)"
        )
    if problem is not None:
        raise WaitTimeout(
            f"nsqbox: timed out after {timeout:g}s consuming {count} message(s) from "
            f"{where}; got {len(bodies)}: {preview(bodies)}"
        )
    return bodies


class ChannelTapThread:
    """Consume a channel in a helper thread, finishing and recording every message."""

    def __init__(self, address: Address, topic: str, channel: str, node: int, timeout: float):
        self.topic, self.channel, self.node = topic, channel, node
        self.messages: list[DecodedMessage] = []
        self.error: BaseException | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._conn = NSQConnection(address, timeout)
        self._conn.send(commands.sub(topic, channel))
        self._conn.expect_ok(time.monotonic() + timeout)
        self._conn.send(commands.rdy(2500))
        self._thread = threading.Thread(
            target=self._run, name=f"nsqbox-capture-{topic}", daemon=True
        )
        self._thread.start()

    def _run(self) -> None:
        conn = self._conn
        try:
            while not self._stop.is_set():
                frame = conn.next_frame(time.monotonic() + 0.05)
                if frame is None:
                    continue
                kind, data = frame
                if kind == FrameType.ERROR:
                    raise NSQServerError(data.decode(errors="replace"))
                if kind == FrameType.MESSAGE:
                    msg = decode_message(data)
                    with self._lock:
                        self.messages.append(msg)
                    conn.send(commands.fin(msg.id))
        except (OSError, NSQServerError) as exc:
            self.error = exc
        finally:
            conn.close_cleanly(time.monotonic() + 2.0)

    @property
    def count(self) -> int:
        """Messages received so far."""
        with self._lock:
            return len(self.messages)

    def snapshot(self) -> list[DecodedMessage]:
        """The messages received so far."""
        with self._lock:
            return list(self.messages)

    def stop(self) -> None:
        """Unsubscribe (the ephemeral channel then goes away) and join the thread."""
        self._stop.set()
        self._thread.join(10)
