"""Spark's auto-registration hook for nsqbox's ``format("nsq")`` data source.

PySpark (4.0 and later) imports every top-level module whose name starts with
``pyspark_`` and registers its ``DefaultSource`` under ``DefaultSource.name()``,
so installing ``nsqbox[spark]`` is enough for ``spark.read.format("nsq")``.
"""

from __future__ import annotations

from nsqbox.spark import NSQDataSource as DefaultSource

__all__ = ["DefaultSource"]
