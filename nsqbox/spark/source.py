"""The ``nsq`` Python data source and its registration."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.errors import AnalysisException, PySparkNotImplementedError
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    SimpleDataSourceStreamReader,
)
from pyspark.sql.types import StructType

from .batch_reader import NSQBatchReader
from .options import OptionError, ReadOptions, WriteOptions, parse_read_options, parse_write_options
from .partitioned import NSQPartitionedStreamReader
from .rows import READ_COLUMNS, BodyColumns
from .stream_reader import NSQStreamReader
from .writer import NSQStreamWriter, NSQWriter

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["NSQDataSource", "register"]


class NSQDataSource(DataSource):
    """``format("nsq")``: read NSQ topics into Spark and publish DataFrames to them.

    Reading (``spark.read`` drains, ``spark.readStream`` streams at least once)
    yields the columns ``id`` (the 16-character message id), ``body`` (binary),
    ``timestamp`` (publish time), ``attempts``, ``topic``, ``channel`` and
    ``nsqd_address``. Writing publishes the ``body`` (or ``value``) column,
    binary or string, to the ``topic`` option or a ``topic`` column.
    ``option("reader", "partitioned")`` streams on the executors through a
    write-ahead log (``walPath``) instead of one process beside the driver.
    See ``docs/spark.md`` for every option.
    """

    @classmethod
    def name(cls) -> str:
        """The short name for ``format()``."""
        return "nsq"

    def schema(self) -> str:
        """The fixed read schema (DDL)."""
        from .rows import READ_SCHEMA_DDL

        return READ_SCHEMA_DDL

    def _read_options(self, schema: StructType) -> ReadOptions:
        options = parse_read_options(self.options)
        if tuple(schema.fieldNames()) != READ_COLUMNS:
            raise OptionError(f"format('nsq') reads the fixed columns {', '.join(READ_COLUMNS)}")
        return options

    def _write_options(
        self, schema: StructType, overwrite: bool
    ) -> tuple[WriteOptions, BodyColumns]:
        if overwrite:
            raise OptionError("NSQ topics cannot be overwritten: use mode('append')")
        options = parse_write_options(self.options)
        fields = [(f.name, f.dataType.typeName()) for f in schema.fields]
        try:
            columns = BodyColumns(fields, options.topic)
        except ValueError as exc:
            raise OptionError(str(exc)) from None
        return options, columns

    def reader(self, schema: StructType) -> DataSourceReader:
        """``spark.read.format("nsq")``: drain up to ``maxMessages`` or until idle."""
        return NSQBatchReader(self._read_options(schema))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """``spark.readStream`` with ``reader`` ``partitioned``: read on the executors.

        With the default ``simple`` reader this says "not implemented", and Spark
        uses :meth:`simpleStreamReader` instead.
        """
        options = self._read_options(schema)
        if options.reader != "partitioned":
            raise PySparkNotImplementedError(
                errorClass="NOT_IMPLEMENTED", messageParameters={"feature": "streamReader"}
            )
        return NSQPartitionedStreamReader(options)

    def simpleStreamReader(self, schema: StructType) -> SimpleDataSourceStreamReader:
        """``spark.readStream.format("nsq")``: at-least-once micro-batches."""
        return NSQStreamReader(self._read_options(schema))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        """``df.write.format("nsq")``: MPUB every partition."""
        return NSQWriter(*self._write_options(schema, overwrite))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        """``df.writeStream.format("nsq")``: MPUB every micro-batch."""
        return NSQStreamWriter(*self._write_options(schema, overwrite))


def register(spark: SparkSession) -> None:
    """Register ``format("nsq")`` with ``spark`` (needed when auto-registration is not).

    Harmless when Spark already registered it by itself: pyspark 4.2 and later
    replace the registration, 4.0 and 4.1 refuse a second one, which is ignored.
    """
    try:
        spark.dataSource.register(NSQDataSource)
    except AnalysisException as exc:
        if exc.getCondition() != "DATA_SOURCE_ALREADY_EXISTS":
            raise
