"""Writers: ``df.write.format("nsq")`` and ``df.writeStream.format("nsq")``.

Each task publishes its partition with MPUB, ``batchSize`` messages (at most
``batchBytes`` of bodies) per command and topic, over one blocking
:class:`~nsqbox.client.blocking.Publisher`. nsqd has no transactions, so
there is nothing to commit or roll back: a task that fails half-way has
published what it published, and Spark's retry publishes it again (at least
once). With several ``nsqd`` addresses, task *i* starts at address
*i mod n* and moves to the next one when a connection fails.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

from ..client.blocking import Publisher
from ..client.errors import ClientError
from .options import WriteOptions
from .rows import BodyColumns

if TYPE_CHECKING:
    from pyspark.sql.datasource import DataSourceStreamArrowWriter as _StreamWriterBase
else:
    try:  # pyspark >= 4.1: Arrow record batches for streaming writes too
        from pyspark.sql.datasource import DataSourceStreamArrowWriter as _StreamWriterBase
    except ImportError:  # pragma: no cover - depends on the installed pyspark
        from pyspark.sql.datasource import DataSourceStreamWriter as _StreamWriterBase

__all__ = ["NSQCommitMessage", "NSQStreamWriter", "NSQWriter", "publish"]

log = logging.getLogger("nsqbox.spark")


@dataclass(frozen=True)
class NSQCommitMessage(WriterCommitMessage):
    """What one task published: messages and MPUB commands."""

    messages: int
    commands: int


class _Publishers:
    """A publisher on one of the nsqd addresses, failing over to the next."""

    def __init__(self, options: WriteOptions, start: int) -> None:
        self._options = options
        self._addresses = options.connection.nsqd
        self._index = start % len(self._addresses)
        self._publisher: Publisher | None = None

    def mpub(self, topic: str, bodies: list[bytes]) -> None:
        error: Exception | None = None
        for _ in range(len(self._addresses)):
            if self._publisher is None:
                address = self._addresses[self._index]
                config = self._options.connection.client_config()
                self._publisher = Publisher(address, config=config)
            try:
                self._publisher.mpub(topic, bodies)
                return
            except (OSError, ClientError) as exc:
                # nsqd may have taken the batch before the connection broke: the retry on
                # the next address can duplicate it (at least once, never lost silently).
                log.warning("MPUB to %s failed: %s", self._addresses[self._index], exc)
                self.close()
                self._index = (self._index + 1) % len(self._addresses)
                error = exc
        assert error is not None
        raise error

    def close(self) -> None:
        if self._publisher is not None:
            self._publisher.close()
            self._publisher = None


def publish(
    options: WriteOptions, items: Iterable[tuple[str, bytes]], start: int = 0
) -> NSQCommitMessage:
    """MPUB ``(topic, body)`` pairs in batches; the count of messages and commands sent."""
    publishers = _Publishers(options, start)
    batches: dict[str, tuple[list[bytes], int]] = {}
    messages = commands = 0

    def flush(topic: str) -> None:
        nonlocal commands
        bodies, _ = batches.pop(topic)
        publishers.mpub(topic, bodies)
        commands += 1

    try:
        for topic, body in items:
            bodies, size = batches.get(topic) or ([], 0)
            if bodies and size + len(body) > options.batch_bytes:
                flush(topic)
                bodies, size = [], 0
            bodies.append(body)
            batches[topic] = (bodies, size + len(body))
            messages += 1
            if len(bodies) >= options.batch_size:
                flush(topic)
        for topic in list(batches):
            flush(topic)
    finally:
        publishers.close()
    return NSQCommitMessage(messages, commands)


def _items(columns: BodyColumns, iterator: Iterator[Any]) -> Iterator[tuple[str, bytes]]:
    """``(topic, body)`` pairs from Arrow record batches or from rows, whichever Spark sends."""
    for element in iterator:
        if isinstance(element, pa.RecordBatch):
            yield from columns.from_batch(element)
        else:
            yield from columns.from_rows([element])


def _partition_id() -> int:
    context = TaskContext.get()
    return context.partitionId() if context is not None else 0


class NSQWriter(DataSourceArrowWriter):
    """``df.write.format("nsq")``: every task publishes its partition."""

    def __init__(self, options: WriteOptions, columns: BodyColumns) -> None:
        self.options = options
        self.columns = columns

    def write(self, iterator: Iterator[pa.RecordBatch]) -> NSQCommitMessage:
        """Publish one partition (runs in the task)."""
        return publish(self.options, _items(self.columns, iterator), _partition_id())

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Nothing to do: every message is on nsqd once its MPUB returned ``OK``."""
        log.info("published %d messages to NSQ", _count(messages))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Nothing to undo: NSQ cannot take back what tasks published."""
        log.warning("write aborted after publishing %d messages to NSQ", _count(messages))


class NSQStreamWriter(_StreamWriterBase):
    """``df.writeStream.format("nsq")``: every micro-batch is published as it comes."""

    def __init__(self, options: WriteOptions, columns: BodyColumns) -> None:
        self.options = options
        self.columns = columns

    def write(self, iterator: Iterator[Any]) -> NSQCommitMessage:
        """Publish one partition of a micro-batch (runs in the task)."""
        return publish(self.options, _items(self.columns, iterator), _partition_id())

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to do: a replayed batch is published again (at least once)."""
        log.debug("batch %d: published %d messages to NSQ", batchId, _count(messages))

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to undo: NSQ cannot take back what tasks published."""
        log.warning("batch %d aborted after %d messages to NSQ", batchId, _count(messages))


def _count(messages: list[WriterCommitMessage | None]) -> int:
    return sum(m.messages for m in messages if isinstance(m, NSQCommitMessage))
