"""A blocking publisher and consumer over plain sockets, for scripts and Spark executors.

No trio and no threads: every call blocks until nsqd has answered (or a
timeout passes); only :func:`lookup_nsqds` runs a short trio loop for its HTTP
queries. TLS, snappy, deflate and AUTH work as in the trio client::

    with Publisher("127.0.0.1:4150") as pub:
        pub.pub("events", b"hello")
        pub.mpub("events", [b"a", b"b"])
        pub.dpub("events", b"later", delay=5.0)

    with BlockingConsumer("127.0.0.1:4150", "events", "spark",
                          config=Config(max_in_flight=100)) as consumer:
        for message in consumer.messages(timeout=1.0):   # stops after 1s without messages
            process(message.body)
            message.finish()

    with BlockingConsumer(...) as consumer:               # or: handler, auto FIN/REQ
        consumer.run(handle, max_messages=10_000)

    addresses = lookup_nsqds(["127.0.0.1:4161"], "events")  # one discovery round

The consumer keeps RDY and backoff with the same :class:`~nsqbox.client.rdy.RdyController`
as the trio consumer (one connection, the monotonic clock). Heartbeats are
answered whenever it reads, so iterate (or :meth:`BlockingConsumer.touch` the
message in hand) at least every heartbeat interval.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import TYPE_CHECKING

from ..wire import commands
from ..wire.errors import NSQError
from ..wire.frames import CLOSE_WAIT, FrameType
from ..wire.message import MESSAGE_HEADER
from ..wire.names import is_valid_channel_name, is_valid_topic_name
from .backoff import BackoffTimer
from .config import Config, format_address
from .discovery import LookupdQueryError, lookup_url, open_lookupd_client, query_lookupd
from .errors import ConnectionClosed
from .handling import HandlerRunner
from .handshake import Negotiated
from .message import Message
from .rdy import RdyController
from .sync_conn import SyncConnection

if TYPE_CHECKING:
    import httpx

__all__ = ["BlockingConsumer", "Publisher", "lookup_nsqds"]

log = logging.getLogger("nsqbox.client")


class _IdleTimer:
    """How long a receive loop may still wait for its next message (None: forever)."""

    def __init__(self, timeout: float | None) -> None:
        self.timeout = timeout
        self.reset()

    def reset(self) -> None:
        self._deadline = None if self.timeout is None else time.monotonic() + self.timeout

    def remaining(self) -> float | None:
        return None if self._deadline is None else max(0.0, self._deadline - time.monotonic())

    def expired(self) -> bool:
        return self._deadline is not None and time.monotonic() >= self._deadline


class _Closable:
    def close(self) -> None:
        raise NotImplementedError

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class Publisher(_Closable):
    """PUB, MPUB and DPUB to one nsqd; reconnects on the next call after a failure.

    A call that fails because the connection broke raises :class:`ConnectionClosed`
    and is not retried (nsqd may have taken the message).
    """

    def __init__(self, address: str | tuple[str, int], *, config: Config | None = None) -> None:
        self.address = format_address(address)
        self.config = config or Config()
        self._conn: SyncConnection | None = None

    def __enter__(self) -> Publisher:
        self._connection()
        return self

    def _connection(self) -> SyncConnection:
        if self._conn is None or self._conn.closed:
            self._conn = SyncConnection(self.address, self.config)
        return self._conn

    def _send(self, topic: str, command: bytes) -> None:
        if not is_valid_topic_name(topic):
            raise ValueError(f"invalid topic name {topic!r}")
        self._connection().request(command)

    def pub(self, topic: str, body: bytes) -> None:
        """Publish one message; :class:`NSQError` when nsqd refuses it."""
        if not body:
            raise ValueError("cannot publish an empty message")
        self._send(topic, commands.pub(topic, body))

    def mpub(self, topic: str, bodies: Iterable[bytes]) -> None:
        """Publish several messages atomically."""
        batch = list(bodies)
        if not batch or not all(batch):
            raise ValueError("mpub needs one or more non-empty messages")
        self._send(topic, commands.mpub(topic, batch))

    def dpub(self, topic: str, body: bytes, delay: float) -> None:
        """Publish one message delivered after ``delay`` seconds."""
        if not body:
            raise ValueError("cannot publish an empty message")
        if delay < 0:
            raise ValueError("delay must be >= 0")
        self._send(topic, commands.dpub(topic, round(delay * 1000), body))

    def close(self) -> None:
        """Close the connection."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None


class BlockingConsumer(_Closable):
    """Consume ``topic``/``channel`` from one nsqd, on the caller's thread."""

    def __init__(
        self,
        address: str | tuple[str, int],
        topic: str,
        channel: str,
        *,
        config: Config | None = None,
        on_give_up: Callable[[Message], object] | None = None,
    ) -> None:
        if not is_valid_topic_name(topic) or not is_valid_channel_name(channel):
            raise ValueError(f"invalid topic or channel name: {topic!r} {channel!r}")
        self.config = config or Config()
        self.topic = topic
        self.channel = channel
        self._on_give_up = on_give_up
        self._batching = False
        #: The last RDY given through :meth:`set_rdy` (None: the controller decides RDY).
        self._set_rdy: int | None = None
        #: Messages handed out and not answered yet (close requeues them), by id.
        self._unanswered: dict[bytes, Message] = {}
        self._conn = SyncConnection(address, self.config)
        try:
            self._conn.subscribe(topic, channel)
        except BaseException:
            self._conn.close()
            raise
        self.address = self._conn.address
        #: This end's ``host:port`` (nsqd's ``/stats`` names the client by it).
        self.local_address = self._conn.local_address
        self._rdy = RdyController(
            self.config.max_in_flight,
            self._send_rdy,
            clock=time.monotonic,
            backoff=BackoffTimer(self.config.backoff_multiplier, self.config.max_backoff_duration),
        )
        self._state = self._rdy.add(self.address, self._conn.negotiated.max_rdy_count)
        self._conn.flush()

    def __enter__(self) -> BlockingConsumer:
        return self

    # -- RDY and responses ------------------------------------------------------------
    def _send_rdy(self, address: str, count: int) -> None:
        if not self._conn.closed:
            self._conn.write(commands.rdy(count))

    def _respond(self, data: bytes) -> None:
        if self._conn.closed:
            return
        self._conn.write(data)
        if not self._batching:
            self._conn.flush()

    def _finish(self, message: Message) -> None:
        self._unanswered.pop(message.id, None)
        self._respond(b"FIN " + message.id + b"\n")
        self._rdy.finished(self._state)

    def _requeue(self, message: Message, delay: float | None, backoff: bool) -> None:
        self._unanswered.pop(message.id, None)
        if delay is None:
            delay = self.config.requeue_delay_for(message.attempts)
        self._respond(commands.req(message.id, round(delay * 1000)))
        self._rdy.requeued(self._state, backoff=backoff)

    def _touch(self, message: Message) -> None:
        self._respond(commands.touch(message.id))

    @contextmanager
    def batched_answers(self) -> Iterator[None]:
        """Buffer the FIN/REQ/TOUCH given inside the block; send them in one write at its end.

        :meth:`run` does this for each batch itself; this is for code that
        answers messages from :meth:`receive` or :meth:`messages` in bulk.
        """
        outer = self._batching
        self._batching = True
        try:
            yield
        finally:
            self._batching = outer
            if not outer:
                self.flush()

    def flush(self) -> None:
        """Send buffered answers now."""
        if not self._conn.closed:
            self._conn.flush()

    def touch(self, message: Message) -> None:
        """TOUCH ``message`` and answer any heartbeat waiting (for long processing)."""
        message.touch()
        self._conn.frames(0)

    def is_starved(self) -> bool:
        """The guide's starvation test (85% of RDY in flight)."""
        return self._rdy.is_starved()

    @property
    def total_rdy(self) -> int:
        """The RDY count nsqd holds for this consumer (the last :meth:`set_rdy`, if RDY is set
        from outside)."""
        return self._rdy.total_rdy if self._set_rdy is None else self._set_rdy

    @property
    def negotiated(self) -> Negotiated:
        """What nsqd agreed to in its IDENTIFY reply: ``max_rdy_count``, ``msg_timeout``,
        ``max_msg_timeout`` (seconds; None when nsqd did not say), the features in use."""
        return self._conn.negotiated

    def set_rdy(self, count: int) -> None:
        """Send ``RDY count``: for a caller that decides RDY itself, over several consumers.

        Such a caller (the Spark reader's in-flight budget) builds its consumers with
        ``config.max_in_flight=0``, so their own RDY controller never sends one and this is
        the only RDY nsqd gets; a consumer with ``max_in_flight`` above 0 manages RDY itself
        (:class:`RuntimeError`). ``count`` must be within ``0..negotiated.max_rdy_count``
        (nsqd closes the connection for more): :class:`ValueError`. Sent at once, or with the
        answers at the end of a :meth:`batched_answers` block; :class:`ConnectionClosed` or
        :class:`OSError` when the connection is gone.
        """
        if self.config.max_in_flight:
            raise RuntimeError(
                f"this consumer sets RDY itself (max_in_flight={self.config.max_in_flight})"
            )
        limit = self._conn.negotiated.max_rdy_count
        if not 0 <= count <= limit:
            raise ValueError(f"RDY {count} is outside 0..{limit} (nsqd's --max-rdy-count)")
        self._conn.write(commands.rdy(count))
        self._set_rdy = count
        if not self._batching:
            self._conn.flush()

    # -- receiving ------------------------------------------------------------------------
    def receive(self, timeout: float | None = None) -> list[Message]:
        """The messages one read brings (maybe several), or [] after ``timeout`` seconds.

        Nothing is answered for them: finish, requeue or touch each one.
        """
        return self._batch(timeout)

    def _batch(self, timeout: float | None) -> list[Message]:
        """One receive's messages; [] when ``timeout`` passes first."""
        deadline = self._rdy.backoff_deadline
        wait = timeout
        if deadline is not None:
            until_deadline = max(0.0, deadline - time.monotonic())
            wait = until_deadline if wait is None else min(wait, until_deadline)
        frames = self._conn.frames(wait)
        if deadline is not None and time.monotonic() >= deadline:
            self._rdy.backoff_expired()
            self._conn.flush()
        out = []
        for frame_type, data in frames:
            if frame_type == FrameType.MESSAGE:
                timestamp, attempts = MESSAGE_HEADER.unpack_from(data)
                msg = Message(data[10:26], data[26:], timestamp, attempts, self, self.address)
                self._rdy.received(self._state)
                self._unanswered[msg.id] = msg
                out.append(msg)
            elif frame_type == FrameType.ERROR:
                error = NSQError.from_frame_body(data)
                if error.fatal:
                    self._conn.close()
                    raise error
                log.warning("[%s] %s", self.address, error)
            elif data == CLOSE_WAIT:
                self._conn.close()
        self._conn.flush()  # RDY updates decided while receiving
        return out

    def messages(self, timeout: float | None = None) -> Iterator[Message]:
        """Yield messages as they come; stop after ``timeout`` seconds without one.

        Answer each with :meth:`Message.finish`, :meth:`Message.requeue` or
        :meth:`Message.touch`; answers are sent at once. Raises
        :class:`ConnectionClosed` if nsqd goes away.
        """
        idle = _IdleTimer(timeout)
        while not idle.expired():
            batch = self._batch(idle.remaining())
            if batch:
                idle.reset()
                yield from batch

    def run(
        self,
        handler: Callable[[Message], object],
        *,
        max_messages: int | None = None,
        timeout: float | None = None,
    ) -> int:
        """Call ``handler`` for each message until ``max_messages`` or ``timeout`` idle seconds.

        Returning finishes the message and raising requeues it (with backoff),
        unless the handler answered it or disabled auto-response; messages
        delivered more than ``config.max_attempts`` times go to ``on_give_up``
        and are finished. Answers for a batch go out in one write. Returns the
        number of messages handled.
        """
        runner = HandlerRunner(
            handler, max_attempts=self.config.max_attempts, on_give_up=self._on_give_up
        )
        if runner.is_async:
            raise TypeError("the blocking consumer takes a plain function, not an async one")
        handled = 0
        idle = _IdleTimer(timeout)
        while (max_messages is None or handled < max_messages) and not idle.expired():
            batch = self._batch(idle.remaining())
            if not batch:
                continue
            idle.reset()
            self._batching = True
            try:
                for message in batch:
                    runner.run(message)
                    handled += 1
            finally:
                self._batching = False
                self._conn.flush()
        return handled

    def close(self) -> None:
        """Close gracefully: CLS, then REQ (delay 0, no backoff) every message taken and not
        answered, and those nsqd sent before it saw CLS; close the connection once nsqd
        confirms (CLOSE_WAIT) or after ``close_timeout``.

        So messages left unanswered when the ``with`` block ends go back to the channel
        at once, instead of staying in flight until nsqd's msg-timeout.
        """
        conn = self._conn
        if conn.closed:
            return
        try:
            conn.write(commands.cls())
            for message in list(self._unanswered.values()):
                if not message.has_responded:
                    message.requeue(0, backoff=False)
            self._unanswered.clear()
            deadline = time.monotonic() + self.config.close_timeout
            while not conn.closed and time.monotonic() < deadline:
                for frame_type, data in conn.frames(max(0.0, deadline - time.monotonic())):
                    if frame_type == FrameType.MESSAGE:
                        # sent before nsqd saw CLS: hand it back now rather than at its timeout
                        conn.write(commands.req(data[10:26], 0))
                    elif frame_type == FrameType.RESPONSE and data == CLOSE_WAIT:
                        conn.flush()
                        conn.close()
                        break
        except (ConnectionClosed, OSError):
            pass
        finally:
            conn.close()


def lookup_nsqds(
    lookupd_http_addresses: str | Iterable[str], topic: str, *, timeout: float = 10.0
) -> list[str]:
    """One discovery round for the blocking client: the nsqds that have ``topic``.

    Asks every nsqlookupd (``host:port`` or an ``http://`` URL) for ``/lookup?topic=``
    and returns the union of the nsqd TCP addresses they list, sorted: ``[]`` when no
    nsqd has the topic yet. A lookupd that fails is logged and skipped; when none
    answers, :class:`ConnectionError`. Open one :class:`BlockingConsumer` per address,
    and call this again to find nsqds that appear later (nothing polls for you).

    The lookupds are asked together, as the trio consumer asks them
    (:func:`~nsqbox.client.discovery.query_lookupd`): no proxy from the environment,
    each answer at most 16 MiB and complete within ``timeout``. That takes one short
    trio run, so it cannot be called from inside trio (:class:`RuntimeError`; the trio
    :class:`~nsqbox.client.Consumer` polls lookupds itself).
    """
    addresses = (
        [lookupd_http_addresses]
        if isinstance(lookupd_http_addresses, str)
        else list(lookupd_http_addresses)
    )
    if not addresses:
        raise ValueError("lookup_nsqds needs at least one nsqlookupd address")
    urls = [lookup_url(address, topic) for address in addresses]
    import trio  # only a discovery round runs an event loop

    found, failures = trio.run(_query_lookupds, urls, timeout)
    if len(failures) == len(urls):
        raise ConnectionError("no nsqlookupd answered: " + "; ".join(failures))
    return sorted(found)


async def _query_lookupds(urls: list[str], seconds: float) -> tuple[set[str], list[str]]:
    """The addresses the lookupds at ``urls`` list, and one line for each that failed.

    ``seconds`` bounds each lookupd's whole answer (the client's timeout, which
    :func:`~nsqbox.client.discovery.query_lookupd` takes as its deadline).
    """
    import trio

    found: set[str] = set()
    failures: list[str] = []

    async def one(client: httpx.AsyncClient, url: str) -> None:
        try:
            found.update(await query_lookupd(client, url))
        except LookupdQueryError as exc:
            failures.append(f"{url}: {exc}")
            log.warning("lookupd %s %s", url, exc)

    async with open_lookupd_client(seconds, urls) as client, trio.open_nursery() as nursery:
        for url in urls:
            nursery.start_soon(one, client, url)
    return found, failures
