"""Rows in and out of the connector: the Arrow batches readers return, the bodies writers send."""

from __future__ import annotations

import pytest

pa = pytest.importorskip("pyarrow")

from nsqbox.client.message import Message  # noqa: E402
from nsqbox.spark.rows import (  # noqa: E402
    ARROW_SCHEMA,
    READ_COLUMNS,
    BodyColumns,
    messages_to_batch,
    publish_items,
)


class _Nobody:
    def _finish(self, message: Message) -> None: ...

    def _requeue(self, message: Message, delay: float | None, backoff: bool) -> None: ...

    def _touch(self, message: Message) -> None: ...


def test_messages_to_batch() -> None:
    messages = [
        Message(b"0123456789abcdef", b"\x00body", 1_700_000_000_123_456_789, 2, _Nobody(), "n:1"),
        Message(b"fedcba9876543210", b"x", 1_700_000_000_000_000_000, 1, _Nobody(), "n:2"),
    ]
    batch = messages_to_batch(messages, "events", "spark")
    assert batch.schema == ARROW_SCHEMA
    assert tuple(batch.schema.names) == READ_COLUMNS
    first = batch.to_pylist()[0]
    assert first["id"] == "0123456789abcdef"
    assert first["body"] == b"\x00body"
    assert batch.column(2).cast(pa.int64()).to_pylist() == [
        1_700_000_000_123_456,
        1_700_000_000_000_000,
    ]
    assert (first["attempts"], first["topic"], first["channel"], first["nsqd_address"]) == (
        2,
        "events",
        "spark",
        "n:1",
    )


def test_body_columns_pick_body_or_value_and_topic() -> None:
    columns = BodyColumns([("ID", "long"), ("Value", "string"), ("topic", "string")], None)
    assert (columns.body, columns.topic) == ("Value", "topic")
    batch = pa.RecordBatch.from_pydict({"ID": [1, 2], "Value": ["a", "é"], "topic": ["t1", None]})
    with pytest.raises(ValueError, match="null topic"):
        list(columns.from_batch(batch))
    columns = BodyColumns([("body", "binary"), ("topic", "string")], "default")
    batch = pa.RecordBatch.from_pydict(
        {"body": [b"a", b"b"], "topic": ["t1", None]},
        schema=pa.schema([("body", pa.binary()), ("topic", pa.string())]),
    )
    assert list(columns.from_batch(batch)) == [("t1", b"a"), ("default", b"b")]
    assert list(columns.from_rows([{"body": b"c", "topic": None}])) == [("default", b"c")]


@pytest.mark.parametrize(
    ("fields", "topic", "message"),
    [
        ([("payload", "binary")], "t", "needs a 'body' or 'value' column"),
        ([("body", "int")], "t", "must be binary or string"),
        ([("body", "binary"), ("topic", "int")], None, "must be a string"),
        ([("body", "binary")], None, "needs the 'topic' option or a 'topic' column"),
    ],
)
def test_body_columns_refuse_bad_schemas(
    fields: list[tuple[str, str]], topic: str | None, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        BodyColumns(fields, topic)


def test_publish_items_encode_strings_and_refuse_empty_bodies() -> None:
    assert list(publish_items([(None, "é"), ("t2", bytearray(b"x"))], "t")) == [
        ("t", "é".encode()),
        ("t2", b"x"),
    ]
    for body in (None, b"", ""):
        with pytest.raises(ValueError, match="null or empty body"):
            list(publish_items([("t", body)], None))
