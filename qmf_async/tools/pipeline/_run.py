"""``run_pipeline``: dataset in, Parquet tables and the HTML report out."""

from __future__ import annotations

import os
import time
from collections import defaultdict
from typing import TYPE_CHECKING, Any

from ... import SEVERITY_NAMES
from ...names import CONSOLE_QUEUES
from ._dataset import read_dataset
from ._jobs import (
    DEFAULT_MAX_GAP,
    DEFAULT_WINDOWS,
    choose_window,
    counter_steps,
    event_counts,
    object_lifetimes,
    object_names,
    rates_from_steps,
    rolling_windows,
    statistic_samples,
    top_queues,
    window_label,
)
from ._report import PlotSeries, write_report
from ._spark import parse_time, require_pyspark

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["TABLES", "run_pipeline"]

#: the tables written by run_pipeline, in order
TABLES = ("rates", "windows", "top_queues", "event_counts", "lifetimes")

_EVENT_BUCKETS = (60, 300, 3600, 86_400)
_MAX_POINTS = 720
#: QMF severity names, most severe first (the order of the event plot)
_SEVERITIES = tuple(SEVERITY_NAMES)
NS = 1_000_000_000


def _series(rows: list[Any], key: str) -> dict[str, list[tuple[int, float]]]:
    series: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for row in rows:
        series[row[key]].append((row["window_start"], row["avg"]))
    return {label: sorted(points) for label, points in series.items()}


def _labels(rows: list[Any]) -> dict[tuple[str, str], str]:
    """(broker, object_id) -> a plot label: the name, with the broker when names repeat."""
    names = [row["name"] for row in rows]
    return {(row["broker"], row["object_id"]):
            row["name"] if names.count(row["name"]) == 1 else f"{row['name']} ({row['broker']})"
            for row in rows}


def _collect_plot_series(spark: SparkSession, windows_path: str, top: list[Any],
                         metric: str, kind: str, statistic: str, label: str
                         ) -> dict[str, PlotSeries]:
    """label -> the windows of one top queue: (window start, average, partial)."""
    from pyspark.sql import functions as F

    chosen = [row for row in top if row["metric"] == metric]
    if not chosen:
        return {}
    labels = _labels(chosen)
    cond = F.lit(False)
    for broker, object_id in labels:
        cond = cond | ((F.col("broker") == broker) & (F.col("object_id") == object_id))
    rows = (spark.read.parquet(windows_path)
            .filter((F.col("kind") == kind) & (F.col("metric") == statistic)
                    & (F.col("window") == label) & cond)
            .select("broker", "object_id", "window_start", "avg", "partial").collect())
    by_label: dict[str, list[tuple[int, float, bool]]] = defaultdict(list)
    for r in rows:
        by_label[labels[(r["broker"], r["object_id"])]].append(
            (r["window_start"], r["avg"], bool(r["partial"])))
    # keep the order of the ranking in the legend
    return {lab: sorted(by_label[lab]) for lab in labels.values() if lab in by_label}


def _parquet_rows(path: str) -> int:
    """Rows of a Parquet folder written by Spark, from the file footers (no Spark job)."""
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    total = 0
    for dirpath, dirnames, filenames in os.walk(path):
        dirnames[:] = [d for d in dirnames if not d.startswith((".", "_"))]
        for filename in filenames:
            if filename.endswith(".parquet") and not filename.startswith((".", "_")):
                total += pq.read_metadata(os.path.join(dirpath, filename)).num_rows
    return total


def run_pipeline(spark: SparkSession, dataset_dir: str, out_dir: str, *,
                 since: Any = None, until: Any = None, top_n: int = 10,
                 max_gap: float = DEFAULT_MAX_GAP, window: int | None = None,
                 console_queues: bool = False) -> dict[str, Any]:
    """Run every job on a dataset and write the tables and the report.

    Reads ``dataset_dir`` (the collector's layout), keeps samples whose ``sample_ts``
    and events whose ``timestamp`` is in ``[since, until)`` (ns, ISO 8601 or datetime;
    None: unbounded), and writes under ``out_dir`` (replacing earlier output): the
    Parquet tables ``rates``, ``windows``, ``top_queues``, ``event_counts`` and
    ``lifetimes`` and ``report.html`` with its PNG plots in ``plots/``.  ``out_dir``
    must be a local path of the driver (and, on a cluster, shared with the executors).
    The report's window is ``window`` seconds, or chosen from the period and the sample
    interval (:func:`~qmf_async.tools.pipeline.choose_window`); the ``windows`` table
    holds it besides 1 minute, 5 minutes and 1 hour.  The top lists leave the consoles'
    own reply and topic queues out unless ``console_queues``.

    Returns a summary: ``rows`` (table -> rows), ``paths`` (table or ``report`` ->
    path), ``plots`` (PNG paths), ``inputs`` (samples/events rows in the period),
    ``resets``/``gaps`` (counter steps without a rate), ``restarts`` (series that
    began again for an object seen before: its agent restarted or it was created
    again; counted, never turned into a rate), ``first_ts``/``last_ts``,
    ``sample_interval_seconds`` (the median time between samples of a series),
    ``window``/``window_seconds``, ``partial_windows`` (plotted windows not fully
    covered), ``seconds`` (wall time).

    Raises:
        ValueError: ``window`` is not a positive number of seconds.
    """
    if window is not None and (not isinstance(window, int) or window < 1):
        raise ValueError(f"window must be a positive number of seconds, not {window!r}")
    require_pyspark()
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    started = time.monotonic()
    since_ns = parse_time(since) if since is not None else None
    until_ns = parse_time(until) if until is not None else None
    out_dir = os.path.abspath(out_dir)
    os.makedirs(out_dir, exist_ok=True)
    paths = {name: os.path.join(out_dir, name) for name in TABLES}

    samples, events = read_dataset(spark, dataset_dir, since=since_ns, until=until_ns)
    names = object_names(samples).persist()
    clean = statistic_samples(samples).persist(StorageLevel.MEMORY_AND_DISK)
    steps = counter_steps(clean, max_gap=max_gap)
    rates = rates_from_steps(steps, names).persist(StorageLevel.MEMORY_AND_DISK)
    persisted: list[DataFrame] = [names, clean, rates]
    try:
        rates.write.mode("overwrite").parquet(paths["rates"])
        status = {row["status"]: row["count"]
                  for row in steps.groupBy("status").count().collect()}
        # an object whose counters started again from zero in a new series: its agent
        # restarted (new boot sequence) or it was created again (new create time)
        restarts_row = (clean.groupBy("broker", "object_id")
                        .agg(F.countDistinct("boot_sequence", "create_ts").alias("n"))
                        .agg(F.sum(F.col("n") - 1).alias("r")).first())
        restarts = int(restarts_row["r"] or 0) if restarts_row is not None else 0
        s_stats = samples.agg(F.count(F.lit(1)).alias("n"), F.min("sample_ts").alias("lo"),
                              F.max("sample_ts").alias("hi")).first()
        e_stats = events.agg(F.count(F.lit(1)).alias("n"), F.min("timestamp").alias("lo"),
                             F.max("timestamp").alias("hi")).first()
        assert s_stats is not None and e_stats is not None  # an aggregate has one row
        median = rates.agg(F.percentile_approx("dt_seconds", 0.5).alias("m")).first()
        interval_s = float(median["m"]) if median and median["m"] is not None else None
        lows: list[int] = [v for v in (s_stats["lo"], e_stats["lo"]) if v is not None]
        highs: list[int] = [v for v in (s_stats["hi"], e_stats["hi"]) if v is not None]
        first_ts = min(lows) if lows else None
        last_ts = max(highs) if highs else None
        span = last_ts - first_ts if first_ts is not None and last_ts is not None else 0
        interval_ns = int((interval_s or 0.0) * NS)
        size = window or choose_window(span, interval_ns)
        label = window_label(size)
        sizes = dict(DEFAULT_WINDOWS)
        sizes.setdefault(label, f"{size} seconds")
        rolling_windows(clean, rates, names=names, windows=sizes,
                        interval_ns=interval_ns).write.mode("overwrite").parquet(
            paths["windows"])
        top_queues(clean, rates, n=top_n, names=names,
                   exclude=() if console_queues else CONSOLE_QUEUES).coalesce(1).write.mode(
            "overwrite").parquet(paths["top_queues"])
        event_counts(events).coalesce(1).write.mode("overwrite").parquet(
            paths["event_counts"])
        object_lifetimes(samples, names=names).write.mode("overwrite").parquet(
            paths["lifetimes"])
    finally:
        for df in persisted:
            df.unpersist()

    rows = {name: _parquet_rows(path) for name, path in paths.items()}

    top = spark.read.parquet(paths["top_queues"]).orderBy("metric", "rank").collect()
    rate_series = _collect_plot_series(spark, paths["windows"], top, "enqueue_rate", "rate",
                                       "msgTotalEnqueues", label)
    depth_series = _collect_plot_series(spark, paths["windows"], top, "depth_growth",
                                        "gauge", "msgDepth", label)
    bucket_s = next((b for b in _EVENT_BUCKETS if span / (b * NS) <= _MAX_POINTS),
                    _EVENT_BUCKETS[-1])
    bucket_ns = bucket_s * NS
    per_bucket = (spark.read.parquet(paths["event_counts"])
                  .groupBy((F.floor(F.col("window_start") / F.lit(bucket_ns))
                            * F.lit(bucket_ns)).cast("bigint").alias("window_start"),
                           F.coalesce("severity_name", F.col("severity").cast("string"))
                           .alias("severity_name"))
                  .agg(F.sum("count").alias("avg"))
                  .collect())
    by_severity = _series([r.asDict() for r in per_bucket], "severity_name")
    event_series = {name: by_severity[name] for name in sorted(
        by_severity, key=lambda n: (_SEVERITIES.index(n) if n in _SEVERITIES else 99, n))}
    lifetime_rows = [r.asDict() for r in (
        spark.read.parquet(paths["lifetimes"])
        .groupBy("package", "class_name")
        .agg(F.count(F.lit(1)).alias("objects"), F.count("deleted").alias("deleted"),
             F.avg("duration_seconds").alias("mean_duration"),
             F.max("duration_seconds").alias("max_duration"))
        .orderBy("package", "class_name").collect())]

    summary: dict[str, Any] = {
        "dataset": dataset_dir,
        "out_dir": out_dir,
        "since": since_ns,
        "until": until_ns,
        "first_ts": first_ts,
        "last_ts": last_ts,
        "inputs": {"samples": s_stats["n"], "events": e_stats["n"]},
        "rows": rows,
        "resets": status.get("reset", 0),
        "gaps": status.get("gap", 0),
        "missing": status.get("missing", 0),
        "restarts": restarts,
        "max_gap_seconds": max_gap,
        "sample_interval_seconds": interval_s,
        "window": label,
        "window_seconds": size,
        "partial_windows": sum(1 for series in (rate_series, depth_series)
                               for points in series.values() for p in points if p[2]),
        "paths": dict(paths),
    }
    report, plots = write_report(
        out_dir, summary=summary, top_rows=[r.asDict() for r in top],
        rate_series=rate_series, depth_series=depth_series, event_series=event_series,
        lifetime_rows=lifetime_rows, window_label=label, window_s=size,
        event_bucket_s=bucket_s)
    summary["paths"]["report"] = report
    summary["plots"] = plots
    summary["seconds"] = round(time.monotonic() - started, 3)
    return summary



