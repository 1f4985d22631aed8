"""Fetching messages for the readers: blocking consumers on every nsqd of a topic.

A :class:`Fetcher` owns :class:`~nsqbox.client.blocking.BlockingConsumer`
connections to every nsqd address (given with ``nsqd`` or found through
``lookupd``) and a buffer of messages received but not yet handed out. It is used from two
threads in the stream reader (Spark's calls and the keep-alive thread), so
every method takes the fetcher's lock.

Messages are never answered behind the caller's back: the fetcher FINs,
REQs and TOUCHes only what it is told to, over the connection that received
each message (nsqd accepts those commands on that connection only).

The fetcher, not the client, decides every RDY: one in-flight budget
(``max_in_flight``) covers all connections to all nodes
(:class:`~.rdy_budget.RdyBudget`), so what the reader holds, read or still on
the wire, never exceeds it. :meth:`Fetcher.drain` reads everything nsqd has
sent into the buffer, where it can be TOUCHed.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager

from ..client.blocking import BlockingConsumer, lookup_nsqds
from ..client.config import Config, format_address
from ..client.errors import ClientError
from ..client.handshake import DEFAULT_MAX_RDY_COUNT
from ..client.message import Message
from ..wire.errors import NSQError
from .lag import ConnectionCount
from .options import ConnectionOptions, ReadOptions
from .rdy_budget import RdyBudget

__all__ = ["Fetcher", "discover_nsqd", "node_fetcher"]

log = logging.getLogger("nsqbox.spark")

#: After the first message, keep collecting while more arrive within this gap
#: (nsqd flushes deliveries every ``output_buffer_timeout``; the readers ask for
#: nsqd's minimum, 25 ms).
LINGER = 0.05
#: How long one wait may block on one connection when there are several.
SLICE = 0.02
#: The longest a read goes on collecting after its first message (past its wait).
MAX_COLLECT = 0.25
#: The socket timeout of a look at what has already arrived.
NO_WAIT = 0.001
#: The most connections a fetcher opens to one nsqd.
MAX_CONNECTIONS = 16
#: With fewer messages in the budget than connections, a connection holding RDY 1
#: gives it up after this long when another one waits (go-nsq rotates RDY too).
ROTATE_AFTER = 1.0


def discover_nsqd(connection: ConnectionOptions, topic: str) -> list[str]:
    """The nsqd TCP addresses for ``topic``: the ``nsqd`` option plus what lookupds know.

    The lookupds are asked as the blocking client asks them (:func:`lookup_nsqds`: no
    proxy from the environment, each answer bounded and complete within ``dialTimeout``);
    one that fails is logged and skipped, and when none answers only the ``nsqd`` option
    is known (the readers ask again later).
    """
    found = list(connection.nsqd)
    if connection.lookupd:
        try:
            addresses = lookup_nsqds(connection.lookupd, topic, timeout=connection.dial_timeout)
        except ConnectionError:
            addresses = []  # each lookupd's failure is logged already
        found.extend(a for a in addresses if a not in found)
    return found


@contextmanager
def _answers_batched(consumers: list[tuple[str, BlockingConsumer]]) -> Iterator[None]:
    """Send the FIN/REQ/TOUCH of many messages in one write per connection, not one each.

    Each consumer's :meth:`~BlockingConsumer.batched_answers`, all open at once; a
    connection whose final write fails is logged here and dropped at its next read.
    """
    batches = [(consumer, consumer.batched_answers()) for _, consumer in consumers]
    for _, batch in batches:
        batch.__enter__()
    try:
        yield
    finally:
        for consumer, batch in batches:
            try:
                batch.__exit__(None, None, None)
            except (OSError, ClientError) as exc:
                log.warning("sending answers to %s: %s", consumer.address, exc)


def _consumer_of(message: Message) -> BlockingConsumer | None:
    # The connection a message came on answers it (nsqd takes its FIN, REQ, TOUCH there only).
    responder = message.responder
    return responder if isinstance(responder, BlockingConsumer) else None


class Fetcher:
    """Consumers for one topic and channel, a buffer, and FIN/REQ/TOUCH by message.

    At most ``max_in_flight`` messages are held over all connections together
    (RDY split between them, see :mod:`.rdy_budget`). nsqd lets one
    connection hold at most ``--max-rdy-count`` messages (2500 by default), so
    a big budget opens several connections per nsqd: ``connections``, or by
    default as many as the budget's share of each node needs (at most 16).
    A node's connections are kept and lost together.
    """

    def __init__(
        self,
        topic: str,
        channel: str,
        config: Config,
        addresses: Callable[[], Iterable[str]],
        *,
        max_in_flight: int,
        connections: int | None = None,
        reconnect_interval: float = 5.0,
    ) -> None:
        self.topic = topic
        self.channel = channel
        # RDY 0 from the client itself: every RDY comes from the fetcher's budget.
        self.config = dataclasses.replace(config, max_in_flight=0)
        self._addresses = addresses
        self._connections = connections
        self._reconnect_interval = reconnect_interval
        self._next_connect = 0.0
        self._pools: dict[str, list[BlockingConsumer]] = {}
        self._buffer: deque[Message] = deque()
        #: When each buffered message arrived (by ``id()``): to hand back what gets stale.
        self._arrived: dict[int, float] = {}
        #: Messages read off each connection since it connected (for the lag, see .lag).
        self._received: dict[BlockingConsumer, int] = {}
        self.budget: RdyBudget[BlockingConsumer] = RdyBudget(
            max_in_flight, clock=time.monotonic, rotate_after=ROTATE_AFTER
        )
        self.lock = threading.RLock()
        self._stopped = False
        self._closed = False
        self._closing = threading.Event()

    # -- connections ----------------------------------------------------------------
    @property
    def addresses(self) -> list[str]:
        """The nsqd addresses with live consumers."""
        return list(self._pools)

    def _consumers(self) -> list[tuple[str, BlockingConsumer]]:
        return [(a, c) for a, pool in self._pools.items() for c in pool]

    def msg_timeout(self, default: float) -> float:
        """The shortest in-flight timeout nsqd granted the connections (IDENTIFY's reply)."""
        granted = [
            timeout
            for _, consumer in self._consumers()
            if (timeout := consumer.negotiated.msg_timeout) is not None
        ]
        return min(granted, default=default)

    def _per_node(self, nodes: int) -> int:
        if self._connections is not None:
            return self._connections
        share = -(-self.budget.total // max(1, nodes))
        return max(1, min(-(-share // DEFAULT_MAX_RDY_COUNT), MAX_CONNECTIONS))

    def connect(self, *, force: bool = False) -> None:
        """Open consumers for addresses that have none (at most every reconnect interval).

        With ``force`` (the first time), raises the first connection error when
        nsqd addresses are known but none of them could be reached; later,
        failures are logged and retried, so a query outlives an nsqd that
        restarts. No address at all (lookupd knows no nsqd with the topic yet)
        is not an error: the reader looks again every few seconds.
        """
        with self.lock:
            now = time.monotonic()
            if self._closed or (not force and now < self._next_connect):
                return
            error: Exception | None = None
            addresses = [format_address(a) for a in self._addresses()]
            per_node = self._per_node(len(addresses))
            for key in addresses:
                if key in self._pools:
                    continue
                pool: list[BlockingConsumer] = []
                try:
                    for _ in range(per_node):
                        pool.append(
                            BlockingConsumer(key, self.topic, self.channel, config=self.config)
                        )
                except (OSError, ClientError, NSQError) as exc:
                    log.warning("cannot consume from nsqd %s: %s", key, exc)
                    error = error or exc
                    for consumer in pool:
                        consumer.close()
                    continue
                self._pools[key] = pool
                for consumer in pool:
                    self.budget.add(consumer, consumer.negotiated.max_rdy_count)
            self._rebalance()
            interval = (
                self._reconnect_interval if self._pools else min(5.0, self._reconnect_interval)
            )
            self._next_connect = now + interval
            if force and not self._pools and error is not None:
                raise error
            if not addresses:
                log.warning("no nsqd has topic %s yet", self.topic)

    def _drop(self, address: str, exc: BaseException) -> None:
        log.warning("lost nsqd %s: %s", address, exc)
        for consumer in self._pools.pop(address, []):
            self.budget.remove(consumer)
            self._received.pop(consumer, None)
            consumer.close()
        # What it delivered can no longer be answered; nsqd redelivers it after msg_timeout.
        kept = deque(m for m in self._buffer if m.nsqd_address != address)
        for message in self._buffer:
            if message.nsqd_address == address:
                self._arrived.pop(id(message), None)
        self._buffer = kept

    def _rebalance(self) -> None:
        """Send the RDY changes the budget asks for (connections came, went, or rotate)."""
        while True:
            failed: list[tuple[str, BaseException]] = []
            for consumer, count in self.budget.plan().items():
                try:
                    # The consumers' own RDY controllers sit at max_in_flight 0 and never
                    # send one (see __init__): this is the only RDY.
                    consumer.set_rdy(count)
                except (OSError, ClientError) as exc:
                    failed.append((consumer.address, exc))
            if not failed:
                return
            for address, error in failed:
                self._drop(address, error)

    # -- receiving --------------------------------------------------------------------
    def _receive(self, address: str, consumer: BlockingConsumer, timeout: float) -> int:
        """One receive on one connection into the buffer (answers heartbeats too)."""
        if address not in self._pools:
            return 0  # dropped meanwhile
        try:
            got = consumer.receive(max(timeout, NO_WAIT))
        except (OSError, ClientError, NSQError) as exc:
            self._drop(address, exc)
            return 0
        if not got:
            self.budget.idle(consumer)
        else:
            now = time.monotonic()
            self.budget.received(consumer, len(got))
            self._received[consumer] = self._received.get(consumer, 0) + len(got)
            self._arrived.update((id(m), now) for m in got)
            self._buffer.extend(got)
        return len(got)

    def poll(self) -> int:
        """Receive whatever has arrived on every connection, without waiting (one read each)."""
        with self.lock:
            got = sum(self._receive(a, c, NO_WAIT) for a, c in self._consumers())
            self._rebalance()
            return got

    def drain(self) -> int:
        """Read everything nsqd has sent so far off every socket, into the buffer.

        Messages still in a socket are in flight on nsqd all the same, but
        cannot be TOUCHed until read: the keep-alive calls this before it touches.
        """
        with self.lock:
            total = 0
            for address, consumer in self._consumers():
                while got := self._receive(address, consumer, NO_WAIT):
                    total += got
            if self._stopped:
                self._requeue_buffered(lambda message: True)
            self._rebalance()
            return total

    def _wait(self, timeout: float) -> int:
        """Block up to ``timeout`` for messages on any connection."""
        self._rebalance()
        consumers = self._consumers()
        if not consumers:
            return 0
        if len(consumers) == 1:
            address, consumer = consumers[0]
            return self._receive(address, consumer, timeout)
        # The blocking client has no select over several sockets: look at each, then
        # take turns waiting on them.
        got = self.poll()
        deadline = time.monotonic() + timeout
        while not got and time.monotonic() < deadline:
            for address, consumer in consumers:
                remaining = deadline - time.monotonic()
                got += self._receive(address, consumer, min(SLICE, max(remaining, 0)))
                if got or remaining <= 0:
                    break
        return got

    def take(
        self,
        limit: int,
        wait: float,
        *,
        keep_alive: Callable[[], None] | None = None,
        keep_alive_interval: float | None = None,
        linger: float = LINGER,
    ) -> list[Message]:
        """Up to ``limit`` messages: the buffer first, then what arrives.

        Waits up to ``wait`` seconds for the first message, then keeps
        collecting while messages arrive within ``linger`` of each other (for
        at most ``MAX_COLLECT`` seconds past ``wait``). Calls ``keep_alive`` every
        ``keep_alive_interval`` seconds meanwhile. Extra messages stay buffered
        for the next call.
        """
        with self.lock:
            now = time.monotonic()
            deadline = now + wait
            last_keep_alive = now
            collect_until: float | None = None
            while len(self._buffer) < limit and not self._closing.is_set():
                now = time.monotonic()
                if (
                    keep_alive is not None
                    and keep_alive_interval is not None
                    and now - last_keep_alive >= keep_alive_interval
                ):
                    keep_alive()
                    last_keep_alive = now
                if self._buffer:
                    if collect_until is None:
                        collect_until = max(deadline, now + MAX_COLLECT)
                    if now >= collect_until or not self._wait(linger):
                        break
                    continue
                if now >= deadline:
                    self.poll()
                    if not self._buffer:
                        break
                    continue
                step = deadline - now
                if keep_alive_interval is not None:
                    step = min(step, keep_alive_interval)
                # Waiting for data: look for new nodes (rate-limited to the reconnect
                # interval), so a node that gets the topic now is read in this wait.
                self.connect()
                step = min(step, max(NO_WAIT, self._next_connect - time.monotonic()))
                if self._pools:
                    self._wait(step)
                else:  # nothing to wait on (no nsqd has the topic yet): idle till the deadline
                    self._closing.wait(step)
            out: list[Message] = []
            while self._buffer and len(out) < limit:
                message = self._buffer.popleft()
                self._arrived.pop(id(message), None)
                out.append(message)
            return out

    def stop_receiving(self) -> None:
        """RDY 0 everywhere, then REQ what is buffered: this fetcher reads nothing more.
        Messages nsqd sent before it saw the RDY 0 are REQ'd as they are drained."""
        with self.lock:
            self._stopped = True
            self.budget.total = 0
            self._rebalance()
            self._requeue_buffered(lambda message: True)

    def give_back_stale(self, margin: float) -> int:
        """REQ buffered messages that will reach nsqd's ``--max-msg-timeout`` within ``margin``.

        TOUCH cannot keep a message in flight past that cap (15 minutes by
        default, told in IDENTIFY): nsqd would time it out and deliver it again
        while the reader still holds the old copy. Given back now, it comes back
        once, to whoever is ready.
        """
        with self.lock:
            now = time.monotonic()

            def stale(message: Message) -> bool:
                consumer = _consumer_of(message)
                if consumer is None:
                    return False
                cap = consumer.negotiated.max_msg_timeout
                arrived = self._arrived.get(id(message), now)
                return cap is not None and now - arrived > cap - margin

            return self._requeue_buffered(stale)

    def _requeue_buffered(self, which: Callable[[Message], bool]) -> int:
        out = [m for m in self._buffer if which(m)]
        if out:
            self._buffer = deque(m for m in self._buffer if not which(m))
            for message in out:
                self._arrived.pop(id(message), None)
            self.requeue(out)
        return len(out)

    # -- answering ----------------------------------------------------------------------
    def _answer(self, messages: Iterable[Message], answer: Callable[[Message], None]) -> None:
        with self.lock:
            consumers = self._consumers()
            with _answers_batched(consumers):
                for message in messages:
                    consumer = _consumer_of(message)
                    if consumer not in self.budget.links or message.has_responded:
                        continue  # its connection is gone: nsqd times it out, redelivers it
                    try:
                        answer(message)
                    except (OSError, ClientError) as exc:
                        self._drop(message.nsqd_address, exc)
                        continue
                    if message.has_responded:
                        self.budget.answered(consumer)
            self._rebalance()

    def finish(self, messages: Iterable[Message]) -> None:
        """FIN each message on its own connection."""
        self._answer(messages, Message.finish)

    def requeue(self, messages: Iterable[Message]) -> None:
        """REQ each message with no delay and without backoff."""
        self._answer(messages, lambda m: m.requeue(0, backoff=False))

    def touch(self, messages: Iterable[Message]) -> None:
        """TOUCH each message: nsqd restarts its in-flight timeout (up to max-msg-timeout)."""
        self._answer(messages, Message.touch)

    def connection_counts(self) -> dict[str, list[ConnectionCount]]:
        """Per nsqd address, each live connection's local address and how many messages it
        brought (since it connected) and the buffer still holds: :mod:`.lag`'s input."""
        with self.lock:
            held = Counter(id(_consumer_of(m)) for m in self._buffer)
            return {
                address: [
                    ConnectionCount(c.local_address, self._received.get(c, 0), held[id(c)])
                    for c in pool
                ]
                for address, pool in self._pools.items()
            }

    @property
    def buffered(self) -> list[Message]:
        """Messages received but not handed out (in flight on nsqd all the same)."""
        with self.lock:
            return list(self._buffer)

    def close(self, *, requeue_buffered: bool = True) -> None:
        """RDY 0 (first, or nsqd sends a REQ'd message straight back), REQ the buffer (unless
        told not to), then each consumer's graceful close: CLS, REQ what nsqd sent meanwhile,
        wait for CLOSE_WAIT (within ``close_timeout``)."""
        self._closing.set()  # a reader idling in take() gives up the lock
        with self.lock:
            if self._closed:
                return
            self._stopped = True
            self.budget.total = 0
            self._rebalance()
            if requeue_buffered:
                self.requeue(list(self._buffer))
            self._buffer.clear()
            self._arrived.clear()
            self._received.clear()
            self._closed = True
            consumers = self._consumers()
            self._pools = {}
            for _, consumer in consumers:
                self.budget.remove(consumer)
                try:
                    consumer.close()
                except (OSError, ClientError) as exc:  # pragma: no cover - close is lenient
                    log.debug("closing consumer: %s", exc)


def node_fetcher(
    options: ReadOptions, address: str, max_in_flight: int, *, connections: int | None = None
) -> Fetcher:
    """A fetcher of the options' topic and channel from the one nsqd at ``address`` (an
    executor's partition), its writes flushed within 25 ms."""
    return Fetcher(
        options.topic,
        options.channel,
        options.connection.client_config(
            msg_timeout=options.msg_timeout, output_buffer_timeout=0.025
        ),
        lambda: [address],
        max_in_flight=max_in_flight,
        connections=connections,
    )
