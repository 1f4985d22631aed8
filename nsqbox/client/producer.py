"""Producer: PUB, MPUB and DPUB to one nsqd over a small pool of connections.

::

    async with open_producer("127.0.0.1:4150", pool_size=2) as producer:
        await producer.pub("clicks", b"...")
        await producer.mpub("clicks", [b"a", b"b"])
        await producer.dpub("clicks", b"later", delay=1.5)

Each connection pipelines: commands are written as they come (one write for
everything queued meanwhile) and nsqd answers them in order, so a FIFO of
waiters pairs each reply with its command. A publish goes to the connection
with the fewest replies outstanding. Connections open lazily; a broken one is
replaced by a fresh connection on the next publish. A publish whose command
may have reached nsqd is never resent: it fails with :class:`ConnectionClosed`.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager

import trio

from ..wire import commands
from ..wire.errors import NSQError
from ..wire.names import is_valid_topic_name
from ._util import open_service_nursery
from .config import Config, format_address
from .conn import Connection, open_connection
from .errors import ConnectionClosed

__all__ = ["Producer", "open_producer"]

log = logging.getLogger("nsqbox.client")


class _Reply:
    """One command's outcome, filled in by the connection's reader."""

    __slots__ = ("done", "error")

    def __init__(self) -> None:
        self.done = trio.Event()
        self.error: Exception | None = None

    def set(self, error: Exception | None) -> None:
        self.error = error
        self.done.set()


class _ProducerConn:
    """A pooled connection and the replies it still owes."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.pending: deque[_Reply] = deque()

    def on_message(self, data: bytes) -> None:
        log.warning("[%s] unexpected message on a producer connection", self.conn.address)

    def on_response(self, data: bytes) -> None:
        self._pop(None, data)

    def on_error(self, error: NSQError) -> None:
        if error.fatal:
            # nsqd hangs up after a fatal error: publish elsewhere from now on
            self.conn.close()
        self._pop(error, b"")

    def _pop(self, error: NSQError | None, data: bytes) -> None:
        if not self.pending:
            log.error("[%s] reply without a command: %r", self.conn.address, data[:32])
            self.conn.abort()
            return
        self.pending.popleft().set(error)

    def fail_all(self, reason: str) -> None:
        while self.pending:
            self.pending.popleft().set(ConnectionClosed(reason))


class Producer:
    """A publisher to one nsqd; create it with :func:`open_producer`."""

    def __init__(
        self,
        address: str | tuple[str, int],
        *,
        nursery: trio.Nursery,
        config: Config,
        pool_size: int,
    ) -> None:
        if pool_size < 1:
            raise ValueError("pool_size must be >= 1")
        self.address = format_address(address)
        self.config = config
        self._nursery = nursery
        self._slots: list[_ProducerConn | None] = [None] * pool_size
        self._locks = [trio.Lock() for _ in range(pool_size)]
        self._closed = False

    async def pub(self, topic: str, body: bytes) -> None:
        """Publish one message; raises :class:`NSQError` when nsqd refuses it."""
        _check_topic(topic)
        if not body:
            raise ValueError("cannot publish an empty message")
        await self._send(commands.pub(topic, body))

    async def mpub(self, topic: str, bodies: Iterable[bytes]) -> None:
        """Publish several messages atomically (MPUB)."""
        _check_topic(topic)
        batch = list(bodies)
        if not batch:
            raise ValueError("mpub needs at least one message")
        if not all(batch):
            raise ValueError("cannot publish an empty message")
        await self._send(commands.mpub(topic, batch))

    async def dpub(self, topic: str, body: bytes, delay: float) -> None:
        """Publish one message that nsqd holds for ``delay`` seconds before delivering it."""
        _check_topic(topic)
        if not body:
            raise ValueError("cannot publish an empty message")
        if delay < 0:
            raise ValueError("delay must be >= 0")
        await self._send(commands.dpub(topic, round(delay * 1000), body))

    @property
    def connected(self) -> int:
        """How many pooled connections are open."""
        return sum(1 for pc in self._slots if pc is not None and not pc.conn.closed)

    async def aclose(self) -> None:
        """Close every connection (replies still owed fail with ConnectionClosed)."""
        self._closed = True
        for pc in self._slots:
            if pc is not None:
                pc.conn.close()
        self._nursery.cancel_scope.cancel()

    # -- internals -------------------------------------------------------------------
    def _pick(self) -> int:
        # An idle open connection first; under load, open another pooled connection;
        # when all are open, the one with the fewest replies outstanding.
        best, best_load, unopened = -1, 0, -1
        for index, pc in enumerate(self._slots):
            if pc is None or pc.conn.closed:
                if unopened == -1:
                    unopened = index
            elif best == -1 or len(pc.pending) < best_load:
                best, best_load = index, len(pc.pending)
        if best != -1 and (best_load == 0 or unopened == -1):
            return best
        return unopened

    async def _connection(self, index: int) -> _ProducerConn:
        async with self._locks[index]:
            pc = self._slots[index]
            if pc is not None and not pc.conn.closed:
                return pc
            if self._closed:
                raise ConnectionClosed("producer is closed")
            conn = await open_connection(self.address, self.config)
            pc = _ProducerConn(conn)
            self._slots[index] = pc
            self._nursery.start_soon(self._serve, pc)
            return pc

    async def _serve(self, pc: _ProducerConn) -> None:
        try:
            await pc.conn.serve(pc)
        finally:
            pc.fail_all(pc.conn.close_reason or "connection closed")
            await pc.conn.aclose()

    async def _send(self, command: bytes) -> None:
        if self._closed:
            raise ConnectionClosed("producer is closed")
        index = self._pick()
        pc = self._slots[index]
        if pc is None or pc.conn.closed:
            pc = await self._connection(index)
        # no checkpoint from here to the append: the next _pick sees this command
        reply = _Reply()
        pc.conn.write(command)
        pc.pending.append(reply)
        await reply.done.wait()
        if reply.error is not None:
            raise reply.error


def _check_topic(topic: str) -> None:
    # Checked here because a bad name is a fatal error that would cost the connection.
    if not is_valid_topic_name(topic):
        raise ValueError(f"invalid topic name {topic!r}")


@asynccontextmanager
async def open_producer(
    address: str | tuple[str, int], *, config: Config | None = None, pool_size: int = 1
) -> AsyncIterator[Producer]:
    """A :class:`Producer` for nsqd's TCP ``address`` for the duration of the block.

    ``pool_size`` connections at most, opened as publishes need them. The
    first connection is opened before the block starts, so a wrong address
    fails here rather than at the first publish.
    """
    async with open_service_nursery() as nursery:
        producer = Producer(
            address, nursery=nursery, config=config or Config(), pool_size=pool_size
        )
        try:
            await producer._connection(0)
            yield producer
        finally:
            await producer.aclose()
