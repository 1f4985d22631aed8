"""Rows in and out: the read schema, messages as Arrow record batches, bodies to publish.

Readers hand Spark :class:`pyarrow.RecordBatch` objects, one per micro-batch
or chunk, built column by column (no Python object per cell beyond the bytes
nsqd sent). Writers take the ``body`` (or ``value``) column and the optional
``topic`` column out of Spark's record batches or rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Final

import pyarrow as pa

from ..client.message import Message

__all__ = [
    "ARROW_SCHEMA",
    "READ_COLUMNS",
    "READ_SCHEMA_DDL",
    "BodyColumns",
    "messages_to_batch",
    "publish_items",
]

#: The columns of a read, in order.
READ_COLUMNS: Final = ("id", "body", "timestamp", "attempts", "topic", "channel", "nsqd_address")

#: The read schema as Spark DDL (``DataSource.schema`` may return DDL).
READ_SCHEMA_DDL: Final = (
    "id STRING, body BINARY, timestamp TIMESTAMP, attempts INT, "
    "topic STRING, channel STRING, nsqd_address STRING"
)

#: The same schema as Arrow types; Spark checks that returned batches match it exactly.
ARROW_SCHEMA: Final = pa.schema(
    [
        ("id", pa.string()),
        ("body", pa.binary()),
        ("timestamp", pa.timestamp("us", tz="UTC")),
        ("attempts", pa.int32()),
        ("topic", pa.string()),
        ("channel", pa.string()),
        ("nsqd_address", pa.string()),
    ]
)


def messages_to_batch(messages: Sequence[Message], topic: str, channel: str) -> pa.RecordBatch:
    """One record batch holding ``messages`` (NSQ's nanosecond timestamps become microseconds)."""
    n = len(messages)
    columns = [
        pa.array([m.id.decode("ascii") for m in messages], pa.string()),
        pa.array([m.body for m in messages], pa.binary()),
        pa.array([m.timestamp // 1000 for m in messages], pa.timestamp("us", tz="UTC")),
        pa.array([m.attempts for m in messages], pa.int32()),
        pa.array([topic] * n, pa.string()),
        pa.array([channel] * n, pa.string()),
        pa.array([m.nsqd_address for m in messages], pa.string()),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=ARROW_SCHEMA)


class BodyColumns:
    """Which input columns a writer publishes: ``body`` or ``value``, and ``topic`` if present.

    Built from the DataFrame's column names and Spark type names (``"binary"``,
    ``"string"``) on the driver, so a bad schema fails before any task runs.
    """

    def __init__(self, fields: Sequence[tuple[str, str]], default_topic: str | None) -> None:
        types = {name.lower(): (name, type_name) for name, type_name in fields}
        for candidate in ("body", "value"):
            if candidate in types:
                self.body, body_type = types[candidate]
                break
        else:
            raise ValueError("writing format('nsq') needs a 'body' or 'value' column")
        if body_type not in ("binary", "string"):
            raise ValueError(f"column {self.body!r} must be binary or string, not {body_type}")
        self.topic: str | None = None
        if "topic" in types:
            self.topic, topic_type = types["topic"]
            if topic_type != "string":
                raise ValueError(f"column {self.topic!r} must be a string, not {topic_type}")
        elif default_topic is None:
            raise ValueError("writing format('nsq') needs the 'topic' option or a 'topic' column")
        self.default_topic = default_topic

    def from_batch(self, batch: pa.RecordBatch) -> Iterator[tuple[str, bytes]]:
        """``(topic, body)`` for each row of an Arrow record batch."""
        bodies = batch.column(batch.schema.get_field_index(self.body)).to_pylist()
        if self.topic is None:
            topics: Iterable[Any] = [None] * len(bodies)
        else:
            topics = batch.column(batch.schema.get_field_index(self.topic)).to_pylist()
        return publish_items(zip(topics, bodies, strict=True), self.default_topic)

    def from_rows(self, rows: Iterable[Any]) -> Iterator[tuple[str, bytes]]:
        """``(topic, body)`` for each :class:`pyspark.sql.Row`."""
        body, topic = self.body, self.topic
        pairs = ((row[topic] if topic else None, row[body]) for row in rows)
        return publish_items(pairs, self.default_topic)


def publish_items(
    pairs: Iterable[tuple[str | None, bytes | bytearray | str | None]], default_topic: str | None
) -> Iterator[tuple[str, bytes]]:
    """Normalise ``(topic or None, body)`` pairs: strings become UTF-8, nulls are refused.

    NSQ has no empty messages: a null or empty body raises :class:`ValueError`
    rather than being dropped without a trace.
    """
    for topic, body in pairs:
        if body is None or len(body) == 0:
            raise ValueError("NSQ cannot publish a null or empty body")
        data = body.encode() if isinstance(body, str) else bytes(body)
        name = topic if topic is not None else default_topic
        if name is None:
            raise ValueError("a row has a null topic and no 'topic' option is set")
        yield name, data
