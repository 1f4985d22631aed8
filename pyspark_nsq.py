"""Spark's auto-registration hook for nsqbox's ``format("nsq")`` data source.

PySpark (4.0 and later) imports every top-level module whose name starts with
``pyspark_`` and registers its ``DefaultSource`` under ``DefaultSource.name()``,
so installing ``nsqbox[spark]`` is enough for ``spark.read.format("nsq")``.

PYTEST_DONT_REWRITE: this module ships in the same distribution as nsqbox's pytest plugin;
the marker keeps pytest from warning when Spark imported it before the plugin loaded.
"""

from __future__ import annotations

from nsqbox.spark import NSQDataSource as DefaultSource

__all__ = ["DefaultSource"]
