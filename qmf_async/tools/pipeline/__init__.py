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

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # at run time each name is imported on first use (__getattr__)
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


#: each public name -> the module it is imported from on first use (``module:name``
#: when it is renamed here)
_LAZY: dict[str, str] = {
    "EVENT_COLUMNS": "._dataset",
    "SAMPLE_COLUMNS": "._dataset",
    "events_schema": "._dataset",
    "read_dataset": "._dataset",
    "read_table": "._dataset",
    "samples_schema": "._dataset",
    "DEFAULT_MAX_GAP": "._jobs",
    "DEFAULT_WINDOWS": "._jobs",
    "RATE_COLUMNS": "._jobs",
    "SERIES": "._jobs",
    "choose_window": "._jobs",
    "counter_rates": "._jobs",
    "counter_steps": "._jobs",
    "event_counts": "._jobs",
    "gauge_points": "._jobs",
    "is_gauge": "._jobs",
    "object_lifetimes": "._jobs",
    "object_names": "._jobs",
    "rates_from_steps": "._jobs",
    "rolling_windows": "._jobs",
    "statistic_samples": "._jobs",
    "top_queues": "._jobs",
    "window_label": "._jobs",
    "window_seconds": "._jobs",
    "write_report": "._report",
    "TABLES": "._run",
    "run_pipeline": "._run",
    "INSTALL_HINT": "._spark",
    "build_spark": "._spark",
    "parse_time": "._spark",
    "require_pyspark": "._spark",
}


if not TYPE_CHECKING:  # type checkers read the imports above; this is the run time
    from ...lazy import lazy_names

    __getattr__, __dir__ = lazy_names(globals(), _LAZY)
    del lazy_names
