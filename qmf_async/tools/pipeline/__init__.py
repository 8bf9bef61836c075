"""Spark jobs over the collector's dataset: counter rates, windows, top queues, events,
lifetimes, and a static HTML report (DESIGN 5, docs/pipeline.md).

Needs the ``pipeline`` extra (``pip install 'qmf-async[pipeline]'``: pyspark, pyarrow,
matplotlib; Spark needs Java 17 or later).  This package imports without it; the
functions raise ImportError saying what to install.

    spark = build_spark()                       # local[*], driver on 127.0.0.1
    summary = run_pipeline(spark, "data/", "out/", since="2024-05-01T00:00:00Z")
    rates = counter_rates(spark.read.parquet(...))
"""

from __future__ import annotations

from ._dataset import (
    EVENT_COLUMNS,
    SAMPLE_COLUMNS,
    events_schema,
    read_dataset,
    read_table,
    samples_schema,
)
from ._jobs import (
    DEFAULT_MAX_GAP,
    DEFAULT_WINDOWS,
    RATE_COLUMNS,
    SERIES,
    choose_window,
    counter_rates,
    counter_steps,
    event_counts,
    gauge_points,
    is_gauge,
    object_lifetimes,
    object_names,
    rates_from_steps,
    rolling_windows,
    statistic_samples,
    top_queues,
    window_label,
    window_seconds,
)
from ._report import write_report
from ._run import TABLES, run_pipeline
from ._spark import INSTALL_HINT, build_spark, parse_time, require_pyspark

__all__ = [
    "DEFAULT_MAX_GAP",
    "DEFAULT_WINDOWS",
    "EVENT_COLUMNS",
    "INSTALL_HINT",
    "RATE_COLUMNS",
    "SAMPLE_COLUMNS",
    "SERIES",
    "TABLES",
    "build_spark",
    "choose_window",
    "counter_rates",
    "counter_steps",
    "event_counts",
    "events_schema",
    "gauge_points",
    "is_gauge",
    "object_lifetimes",
    "object_names",
    "parse_time",
    "rates_from_steps",
    "read_dataset",
    "read_table",
    "require_pyspark",
    "rolling_windows",
    "run_pipeline",
    "samples_schema",
    "statistic_samples",
    "top_queues",
    "window_label",
    "window_seconds",
    "write_report",
]
