"""Reading the collector's dataset (DESIGN 5; docs/pipeline.md "Dataset layout").

``DIR/samples/date=YYYY-MM-DD/class=<package>:<class>/part-*.parquet`` and
``DIR/events/date=YYYY-MM-DD/class=<package>:<event>/part-*.parquet``; the partition
columns (``date``, ``class``) come from the paths, files whose names start with ``.``
or ``_`` (the collector's temporary files) are not read.
"""

from __future__ import annotations

import datetime as _dt
import os
from typing import TYPE_CHECKING, Any

from ._spark import parse_time, require_pyspark

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

__all__ = [
    "EVENT_COLUMNS",
    "SAMPLE_COLUMNS",
    "events_schema",
    "read_dataset",
    "read_table",
    "samples_schema",
]

#: column -> Spark SQL type of the samples table (the contract with the collector)
SAMPLE_COLUMNS: dict[str, str] = {
    "broker": "string",
    "agent": "string",
    "object_id": "string",
    "boot_sequence": "int",
    "package": "string",
    "class_name": "string",
    "class_hash": "string",
    "kind": "string",
    "sample_ts": "bigint",
    "create_ts": "bigint",
    "delete_ts": "bigint",
    "props": "map<string,string>",
    "stats_int": "map<string,bigint>",
    "stats_float": "map<string,double>",
    "stats_text": "map<string,string>",
    "received_ts": "bigint",
}

#: column -> Spark SQL type of the events table
EVENT_COLUMNS: dict[str, str] = {
    "broker": "string",
    "agent": "string",
    "package": "string",
    "event_name": "string",
    "class_hash": "string",
    "timestamp": "bigint",
    "severity": "int",
    "severity_name": "string",
    "args": "map<string,string>",
    "received_ts": "bigint",
}

_DAY_NS = 86_400 * 1_000_000_000


def _schema(columns: dict[str, str]) -> StructType:
    from pyspark.sql.types import StructType

    schema = StructType.fromDDL(", ".join(f"`{k}` {v}" for k, v in columns.items()))
    assert isinstance(schema, StructType)
    return schema


def samples_schema() -> StructType:
    """The Spark schema of the samples table (without the partition columns)."""
    require_pyspark()
    return _schema(SAMPLE_COLUMNS)


def events_schema() -> StructType:
    """The Spark schema of the events table (without the partition columns)."""
    require_pyspark()
    return _schema(EVENT_COLUMNS)


def _has_data(path: str) -> bool:
    for _dirpath, dirnames, filenames in os.walk(path):
        dirnames[:] = [d for d in dirnames if not d.startswith((".", "_"))]
        if any(f.endswith(".parquet") and not f.startswith((".", "_")) for f in filenames):
            return True
    return False


def _date_of(ns: int) -> _dt.date:
    return _dt.datetime.fromtimestamp(ns // 1_000_000_000, tz=_dt.UTC).date()


def read_table(spark: SparkSession, path: str, columns: dict[str, str], ts_column: str, *,
               since: int | None = None, until: int | None = None) -> DataFrame:
    """One table of the dataset, conformed to ``columns`` (missing ones are null).

    ``since`` (inclusive) and ``until`` (exclusive) are ns on ``ts_column``; the
    ``date`` partitions are pruned with a margin of one day.  A local path that holds
    no Parquet file gives an empty table (remote paths are passed to Spark as they are).
    """
    from pyspark.sql import functions as F

    local = "://" not in path or path.startswith("file://")
    local_path = path[len("file://"):] if path.startswith("file://") else path
    if local and not _has_data(local_path):
        empty = spark.createDataFrame([], _schema(columns))
        return (empty.withColumn("date", F.lit(None).cast("date"))
                .withColumn("class", F.lit(None).cast("string")))
    df = spark.read.option("basePath", path).parquet(path)
    present = set(df.columns)
    cols = [(F.col(f"`{name}`").cast(kind) if name in present
             else F.lit(None).cast(kind)).alias(name) for name, kind in columns.items()]
    for part in ("date", "class"):
        cols.append(F.col(part) if part in present else F.lit(None).cast(
            "date" if part == "date" else "string").alias(part))
    if "date" in present:
        if since is not None:
            df = df.filter(F.col("date") >= F.lit(_date_of(since - _DAY_NS)))
        if until is not None:
            df = df.filter(F.col("date") <= F.lit(_date_of(until + _DAY_NS)))
    df = df.select(*cols)
    if since is not None:
        df = df.filter(F.col(ts_column) >= F.lit(since))
    if until is not None:
        df = df.filter(F.col(ts_column) < F.lit(until))
    return df


def read_dataset(spark: SparkSession, dataset_dir: str, *, since: Any = None,
                 until: Any = None) -> tuple[DataFrame, DataFrame]:
    """``(samples, events)`` of a dataset directory, filtered to ``[since, until)``.

    Samples are filtered on ``sample_ts``, events on ``timestamp``; the bounds are ns,
    ISO 8601 strings or datetimes (see :func:`parse_time`), None for unbounded.
    """
    require_pyspark()
    since = parse_time(since) if since is not None else None
    until = parse_time(until) if until is not None else None
    root = dataset_dir.rstrip("/")
    samples = read_table(spark, f"{root}/samples", SAMPLE_COLUMNS, "sample_ts",
                         since=since, until=until)
    events = read_table(spark, f"{root}/events", EVENT_COLUMNS, "timestamp",
                        since=since, until=until)
    return samples, events
