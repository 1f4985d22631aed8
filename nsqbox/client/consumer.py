"""Consumer: subscribe to a topic's channel on every nsqd that has it.

::

    def handle(message: Message) -> None:
        print(message.body)          # returning finishes it; raising requeues it

    async with open_consumer("clicks", "archive", handle,
                             lookupd_http_addresses=["127.0.0.1:4161"],
                             config=Config(max_in_flight=100)) as consumer:
        await trio.sleep_forever()

One connection per nsqd (guide, Connection Handling), found directly or through
lookupd polling (:mod:`.discovery`). Every RDY is decided by a
:class:`~nsqbox.client.rdy.RdyController`; this module only does the I/O.

A plain function handler runs inline, in the connection's reader, for each
message of a received batch; there is no task per message, and the batch's
FINs go out in one write. An ``async def`` handler runs in
``config.handler_concurrency`` worker tasks fed by one queue.
"""

from __future__ import annotations

import logging
import math
import random
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass

import httpx
import trio

from ..wire import commands
from ..wire.errors import NSQError
from ..wire.frames import CLOSE_WAIT
from ..wire.message import MESSAGE_HEADER
from ..wire.names import is_valid_channel_name, is_valid_topic_name
from ._util import open_service_nursery
from .backoff import BackoffTimer, ReconnectDelay
from .config import Config, format_address
from .conn import CONNECT_ERRORS, Connection, open_connection
from .discovery import initial_poll_delay, lookup_url, open_lookupd_client, query_lookupds
from .handling import GiveUpCallback, Handler, HandlerRunner
from .message import Message
from .rdy import ConnRdy, RdyController

__all__ = ["Consumer", "ConsumerStats", "Handler", "open_consumer"]

log = logging.getLogger("nsqbox.client")

_CLS = commands.cls()


@dataclass(frozen=True)
class ConsumerStats:
    """Counters since the consumer started."""

    received: int
    finished: int
    requeued: int
    given_up: int
    connections: int


class _ConsumerConn:
    """One subscribed connection: the frame sink and the responder for its messages."""

    __slots__ = ("address", "close_wait", "conn", "consumer", "state")

    def __init__(self, consumer: Consumer, conn: Connection) -> None:
        self.consumer = consumer
        self.conn = conn
        self.address = conn.address
        self.state: ConnRdy | None = None
        self.close_wait = False

    # FrameSink
    def on_message(self, data: bytes) -> None:
        timestamp, attempts = MESSAGE_HEADER.unpack_from(data)
        msg = Message(data[10:26], data[26:], timestamp, attempts, self, self.address)
        self.consumer._deliver(self, msg)

    def on_response(self, data: bytes) -> None:
        if data == CLOSE_WAIT:
            self.close_wait = True
            self.consumer._maybe_close(self)
        else:
            log.warning("[%s] unexpected response %r", self.address, data[:64])

    def on_error(self, error: NSQError) -> None:
        if error.fatal:
            log.error("[%s] %s (nsqd closes the connection)", self.address, error)
        else:
            # E_FIN_FAILED and friends: usually the message timed out and went to
            # another consumer meanwhile (guide, Errors); the connection stays up.
            log.warning("[%s] %s", self.address, error)

    # Responder
    def _respond(self, data: bytes) -> None:
        if not self.conn.closed:
            self.conn.write(data)

    def _finish(self, message: Message) -> None:
        consumer = self.consumer
        consumer._finished += 1
        self._respond(b"FIN " + message.id + b"\n")
        if self.state is not None:
            consumer._rdy.finished(self.state)
        if self.close_wait:
            consumer._maybe_close(self)

    def _requeue(self, message: Message, delay: float | None, backoff: bool) -> None:
        consumer = self.consumer
        consumer._requeued += 1
        if delay is None:
            delay = consumer.config.requeue_delay_for(message.attempts)
        self._respond(commands.req(message.id, round(delay * 1000)))
        if self.state is not None:
            consumer._rdy.requeued(self.state, backoff=backoff)
        if self.close_wait:
            consumer._maybe_close(self)

    def _touch(self, message: Message) -> None:
        self._respond(commands.touch(message.id))


class Consumer:
    """A running consumer; create it with :func:`open_consumer`."""

    def __init__(
        self,
        topic: str,
        channel: str,
        handler: Handler,
        *,
        nursery: trio.Nursery,
        config: Config,
        on_give_up: GiveUpCallback | None = None,
        rng: random.Random | None = None,
    ) -> None:
        if not is_valid_topic_name(topic):
            raise ValueError(f"invalid topic name {topic!r}")
        if not is_valid_channel_name(channel):
            raise ValueError(f"invalid channel name {channel!r}")
        self.topic = topic
        self.channel = channel
        self.config = config
        self._handling = HandlerRunner(
            handler, max_attempts=config.max_attempts, on_give_up=on_give_up
        )
        self._nursery = nursery
        self._rng = rng if rng is not None else random.Random()
        self._rdy_wakeup = trio.Event()
        self._rdy = RdyController(
            config.max_in_flight,
            self._send_rdy,
            clock=trio.current_time,
            backoff=BackoffTimer(config.backoff_multiplier, config.max_backoff_duration),
            rng=self._rng,
            low_rdy_idle_timeout=config.low_rdy_idle_timeout,
            low_rdy_timeout=config.low_rdy_timeout,
            on_schedule=self._rdy_wakeup_set,
        )
        self._conns: dict[str, _ConsumerConn] = {}
        self._active: set[str] = set()
        self._stopping = False
        self._stop = trio.Event()
        self._drained = trio.Event()
        send, receive = trio.open_memory_channel[Message](math.inf)
        self._queue, self._queue_out = send, receive
        self._received = self._finished = self._requeued = 0

    # -- public ----------------------------------------------------------------------
    def is_starved(self) -> bool:
        """True when a connection has 85% of its RDY in flight (guide, Message Flow Starvation).

        A batching handler processes its batch when this turns true: with
        ``max_in_flight`` split over connections, or some nsqd empty, the whole
        ``max_in_flight`` may never be in flight at once.
        """
        return self._rdy.is_starved()

    def set_max_in_flight(self, max_in_flight: int) -> None:
        """Change ``max_in_flight`` while running; 0 stops the flow of messages."""
        self._rdy.set_max_in_flight(max_in_flight)

    @property
    def max_in_flight(self) -> int:
        """The current ``max_in_flight``."""
        return self._rdy.max_in_flight

    @property
    def total_rdy(self) -> int:
        """The sum of RDY over all connections (never above ``max_in_flight``)."""
        return self._rdy.total_rdy

    @property
    def in_backoff(self) -> bool:
        """True while the consumer backs off after failures."""
        return self._rdy.in_backoff

    @property
    def connections(self) -> dict[str, Connection]:
        """The subscribed connections by ``host:port``."""
        return {address: cc.conn for address, cc in self._conns.items()}

    def rdy_state(self, address: str) -> ConnRdy | None:
        """RDY bookkeeping of one connection (RDY, in flight, last message time)."""
        cc = self._conns.get(format_address(address))
        return cc.state if cc is not None else None

    def stats(self) -> ConsumerStats:
        """Message counters and the number of connections."""
        return ConsumerStats(
            self._received,
            self._finished,
            self._requeued,
            self._handling.given_up,
            len(self._conns),
        )

    def connect_to_nsqd(self, address: str | tuple[str, int]) -> None:
        """Consume from one more nsqd, reconnecting with exponential delays if it goes away."""
        key = format_address(address)
        if key in self._active or self._stopping:
            return
        self._active.add(key)
        self._nursery.start_soon(self._direct_loop, key)

    def connect_to_lookupds(self, addresses: Iterable[str]) -> None:
        """Poll these nsqlookupds (first query now, then every poll interval plus jitter)."""
        urls = [lookup_url(address, self.topic) for address in addresses]
        if urls:
            self._nursery.start_soon(self._lookupd_loop, urls)

    async def aclose(self) -> None:
        """Stop gracefully: CLS everywhere, answer what is in flight, then close.

        Waits up to ``config.close_timeout`` for every nsqd's CLOSE_WAIT and for
        the messages in flight to be answered, then cancels what is left.
        """
        if not self._stopping:
            self._stopping = True
            self._stop.set()
            for cc in list(self._conns.values()):
                if not cc.conn.closed:
                    cc.conn.write(_CLS)
            self._check_drained()
            with trio.move_on_after(self.config.close_timeout):
                await self._drained.wait()
        self._nursery.cancel_scope.cancel()

    # -- connections ---------------------------------------------------------------
    def _start(self, nsqd: Iterable[str | tuple[str, int]], lookupds: Iterable[str]) -> None:
        self._nursery.start_soon(self._rdy_loop)
        if self._handling.is_async:
            for _ in range(self.config.handler_concurrency):
                self._nursery.start_soon(self._handling.worker, self._queue_out)
        for address in nsqd:
            self.connect_to_nsqd(address)
        self.connect_to_lookupds(lookupds)

    async def _run_connection(self, address: str) -> bool:
        """Connect, subscribe and serve until the connection ends; True if it subscribed."""
        conn = await open_connection(address, self.config)
        try:
            await conn.subscribe(self.topic, self.channel)
            if self._stopping:
                return True
            max_rdy = conn.negotiated.max_rdy_count
            if max_rdy < self.config.max_in_flight:
                log.warning(
                    "[%s] max RDY count %d < max_in_flight %d, truncation possible",
                    address,
                    max_rdy,
                    self.config.max_in_flight,
                )
            cc = _ConsumerConn(self, conn)
            self._conns[address] = cc
            try:
                cc.state = self._rdy.add(address, max_rdy)
                await conn.serve(cc)
            finally:
                del self._conns[address]
                self._rdy.remove(address)
                self._check_drained()
            return True
        finally:
            await conn.aclose()

    async def _direct_loop(self, address: str) -> None:
        # nsqd given directly: reconnect after 8s, 16s, 32s... (guide, Reconnection)
        delays = ReconnectDelay(self.config.reconnect_delay, self.config.max_reconnect_delay)
        try:
            while not self._stopping:
                try:
                    if await self._run_connection(address):
                        delays.reset()
                except CONNECT_ERRORS as exc:
                    log.warning("[%s] connection failed: %s", address, exc)
                if self._stopping:
                    break
                delay = delays.next()
                log.info("[%s] reconnecting in %.1fs", address, delay)
                with trio.move_on_after(delay):
                    await self._stop.wait()
        finally:
            self._active.discard(address)

    async def _discovered(self, address: str) -> None:
        # nsqd found through lookupd: no reconnect loop; the next poll that still
        # lists it connects again (guide, Reconnection).
        try:
            await self._run_connection(address)
        except CONNECT_ERRORS as exc:
            log.warning("[%s] connection failed: %s", address, exc)
        finally:
            self._active.discard(address)

    async def _lookupd_loop(self, urls: list[str]) -> None:
        config = self.config
        async with open_lookupd_client(config.lookupd_poll_timeout, urls) as client:
            with trio.CancelScope() as scope:
                self._nursery.start_soon(self._cancel_on_stop, scope)
                await self._poll(client, urls)  # the first query goes out at start
                await trio.sleep(
                    initial_poll_delay(
                        config.lookupd_poll_interval, config.lookupd_poll_jitter, self._rng
                    )
                )
                while True:
                    await trio.sleep(config.lookupd_poll_interval)
                    await self._poll(client, urls)

    async def _cancel_on_stop(self, scope: trio.CancelScope) -> None:
        await self._stop.wait()
        scope.cancel()

    async def _poll(self, client: httpx.AsyncClient, urls: list[str]) -> None:
        found = await query_lookupds(client, urls)
        for address in sorted(found - self._active):
            if self._stopping:
                return
            log.info("[%s] discovered through lookupd", address)
            self._active.add(address)
            self._nursery.start_soon(self._discovered, address)

    # -- RDY ---------------------------------------------------------------------------
    def _send_rdy(self, address: str, count: int) -> None:
        cc = self._conns.get(address)
        if cc is not None and not cc.conn.closed:
            cc.conn.write(commands.rdy(count))

    def _rdy_wakeup_set(self) -> None:
        self._rdy_wakeup.set()

    async def _rdy_loop(self) -> None:
        # The two timers of the RDY controller: the end of a backoff, and the
        # periodic redistribution.
        interval = self.config.rdy_redistribute_interval
        next_redistribute = trio.current_time() + interval
        while True:
            deadline = self._rdy.backoff_deadline
            wake_at = next_redistribute if deadline is None else min(deadline, next_redistribute)
            with trio.move_on_at(wake_at):
                await self._rdy_wakeup.wait()
            self._rdy_wakeup = trio.Event()
            now = trio.current_time()
            deadline = self._rdy.backoff_deadline
            if deadline is not None and now >= deadline:
                self._rdy.backoff_expired()
            if now >= next_redistribute:
                self._rdy.redistribute()
                next_redistribute = now + interval

    # -- messages ----------------------------------------------------------------------
    def _deliver(self, cc: _ConsumerConn, message: Message) -> None:
        self._received += 1
        if cc.state is not None:
            self._rdy.received(cc.state)
        if self._handling.is_async:
            self._queue.send_nowait(message)
        else:
            self._handling.run(message)

    # -- closing -----------------------------------------------------------------------
    def _maybe_close(self, cc: _ConsumerConn) -> None:
        # After CLOSE_WAIT, close once nothing received on the connection is unanswered.
        if cc.state is None or cc.state.in_flight == 0:
            cc.conn.close()

    def _check_drained(self) -> None:
        if self._stopping and not self._conns:
            self._drained.set()


@asynccontextmanager
async def open_consumer(
    topic: str,
    channel: str,
    handler: Handler,
    *,
    nsqd_tcp_addresses: Iterable[str | tuple[str, int]] = (),
    lookupd_http_addresses: Iterable[str] = (),
    config: Config | None = None,
    on_give_up: GiveUpCallback | None = None,
    rng: random.Random | None = None,
) -> AsyncIterator[Consumer]:
    """Consume ``topic``/``channel`` with ``handler`` for the duration of the block.

    Give nsqd TCP addresses (``host:port``) to connect to directly, and/or
    nsqlookupd HTTP addresses (``host:port`` or URLs) to discover nsqds.
    ``handler`` takes a :class:`Message`: returning finishes it, raising
    requeues it (with backoff), unless it answered the message itself or
    called :meth:`Message.disable_auto_response`. ``on_give_up`` receives
    messages delivered more than ``config.max_attempts`` times, which are then
    finished. Leaving the block closes gracefully (:meth:`Consumer.aclose`);
    an exception leaving it closes at once.
    """
    nsqd = list(nsqd_tcp_addresses)
    lookupds = list(lookupd_http_addresses)
    if not nsqd and not lookupds:
        raise ValueError("give nsqd_tcp_addresses or lookupd_http_addresses")
    async with open_service_nursery() as nursery:
        consumer = Consumer(
            topic,
            channel,
            handler,
            nursery=nursery,
            config=config or Config(),
            on_give_up=on_give_up,
            rng=rng,
        )
        consumer._start(nsqd, lookupds)
        try:
            yield consumer
        except BaseException:
            nursery.cancel_scope.cancel()
            raise
        await consumer.aclose()
