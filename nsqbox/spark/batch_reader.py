"""The batch reader: ``spark.read.format("nsq")`` drains a channel.

One partition per nsqd that has the topic; each task subscribes, collects up
to its share of ``maxMessages`` (or until no message came for
``idleTimeout``) and hands the messages to Spark in chunks. A batch read is a
*drain*: each chunk is FINished once Spark has taken all of its rows from the
task, when it asks for the next chunk. A task that fails before that leaves
its chunk unfinished, and nsqd redelivers it; a job that fails after it does
not bring the messages back. Use the streaming reader for at-least-once.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition

from ..client.message import Message
from .fetch import discover_nsqd, node_fetcher
from .options import ReadOptions
from .rows import messages_to_batch

__all__ = ["NSQBatchReader", "NSQPartition"]

#: The most messages one chunk (and RDY) holds; nsqd's default --max-rdy-count.
CHUNK = 2500


class NSQPartition(InputPartition):
    """One task's share: the nsqd it drains and how many messages at most."""

    def __init__(self, address: str, max_messages: int) -> None:
        super().__init__(address)
        self.address = address
        self.max_messages = max_messages

    def __repr__(self) -> str:
        return f"NSQPartition({self.address!r}, max_messages={self.max_messages})"


class NSQBatchReader(DataSourceReader):
    """Plans one partition per nsqd on the driver, drains it in the task."""

    def __init__(self, options: ReadOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        """One partition per nsqd address, ``maxMessages`` split evenly between them."""
        addresses = discover_nsqd(self.options.connection, self.options.topic)
        if not addresses:
            return []
        share, extra = divmod(self.options.max_messages, len(addresses))
        parts = []
        for index, address in enumerate(addresses):
            quota = share + (1 if index < extra else 0)
            if quota:
                parts.append(NSQPartition(address, quota))
        return parts

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Drain one nsqd: record batches of up to ``CHUNK`` messages, each FINished once taken."""
        assert isinstance(partition, NSQPartition)
        options = self.options
        remaining = partition.max_messages
        fetcher = node_fetcher(options, partition.address, min(remaining, CHUNK), connections=1)
        chunk: list[Message] = []
        try:
            fetcher.connect(force=True)
            while remaining > 0:
                chunk = fetcher.take(min(remaining, CHUNK), options.idle_timeout)
                if not chunk:
                    break
                yield messages_to_batch(chunk, options.topic, options.channel)
                # Spark asked for more: it holds every row of the chunk.
                fetcher.finish(chunk)
                remaining -= len(chunk)
                chunk = []
        finally:
            # Spark stopped early (a LIMIT) or the task failed: what it did not take goes back.
            fetcher.requeue(chunk)
            fetcher.close(requeue_buffered=True)
