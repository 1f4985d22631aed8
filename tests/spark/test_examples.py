"""The pipeline in examples/ runs as documented: Parquet to NSQ, NSQ back to Parquet."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import pytest

pytest.importorskip("pyspark")

from nsqbox.testing import NSQBox

from .conftest import TIMEOUT, channel_stats, create_channel
from .session import ROOT, needs_available_now

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "examples" / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@needs_available_now
@pytest.mark.parametrize("wal", [None, "s3"], ids=["simple", "partitioned-wal-on-s3"])
def test_parquet_to_nsq_to_parquet(
    spark: SparkSession,
    nsqbox: NSQBox,
    topic: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    wal: str | None,
) -> None:
    to_nsq, to_parquet = example("parquet_to_nsq"), example("nsq_to_parquet")
    source = str(tmp_path / "orders.parquet")
    to_nsq.write_sample(spark, source, 200)
    create_channel(nsqbox, topic, "archive")  # so that it gets every message published
    assert (
        to_nsq.publish_parquet(spark, nsqd=nsqbox.nsqd_tcp_address, topic=topic, path=source) == 200
    )

    query = to_parquet.archive_stream(
        spark,
        nsqd=nsqbox.nsqd_tcp_address,
        topic=topic,
        channel="archive",
        output=str(tmp_path / "archive"),
        checkpoint=str(tmp_path / "checkpoint"),
        available_now=True,
        wal=request.getfixturevalue("s3_wal_url") if wal else None,
        nsqd_http=nsqbox.nsqd_http_address,
    )
    assert to_parquet.await_rows(query, TIMEOUT) == 200  # what --available-now prints
    assert query.exception() is None
    archived = spark.read.parquet(str(tmp_path / "archive")).collect()
    orders = sorted(json.loads(row.body)["order_id"] for row in archived)
    assert orders == list(range(200))
    assert {row.day for row in archived} == {archived[0].timestamp.date()}
    stats = channel_stats(nsqbox, topic, "archive")
    assert stats["depth"] == stats["in_flight_count"] == 0
