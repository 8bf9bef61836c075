"""The Spark jobs: DataFrames in, DataFrames out (docs/pipeline.md).

All timestamps are integer nanoseconds since the epoch (UTC), as in the dataset.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from ...names import CONSOLE_QUEUES
from ._spark import require_pyspark

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

__all__ = [
    "DEFAULT_MAX_GAP",
    "DEFAULT_WINDOWS",
    "NICE_WINDOWS",
    "SERIES",
    "choose_window",
    "counter_rates",
    "counter_steps",
    "event_counts",
    "gauge_points",
    "is_gauge",
    "object_lifetimes",
    "object_names",
    "rates_from_steps",
    "rolling_windows",
    "statistic_samples",
    "top_queues",
    "names_regex",
    "window_label",
    "window_seconds",
]

NS = 1_000_000_000
#: a step longer than this (seconds) gives no rate
DEFAULT_MAX_GAP = 300.0
#: label -> window duration of :func:`rolling_windows`
DEFAULT_WINDOWS: Mapping[str, str] = {"1m": "1 minute", "5m": "5 minutes", "1h": "1 hour"}
#: the columns that make one series of samples: an agent restart (new boot sequence)
#: or a re-created object (new create time) starts a new one
SERIES = ("broker", "object_id", "create_ts", "boot_sequence")
#: statistics that are levels, not counters, when no list is given (see is_gauge)
GAUGE_SUFFIXES = ("Depth", "Count", "High", "Low")
GAUGE_NAMES = frozenset({"unackedMessages"})

#: window sizes (seconds) the report chooses from
NICE_WINDOWS = (5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21_600, 43_200,
                86_400)
#: a report chooses its window so that it has at most this many per series
MAX_WINDOWS = 720
#: ... and at least this many samples in a full window
MIN_SAMPLES_PER_WINDOW = 3
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86_400}


def window_seconds(text: str) -> int:
    """A window size written ``30s``, ``5m``, ``1h``, ``1d`` or plain seconds, in seconds.

    Raises:
        ValueError: not a positive whole number of seconds.
    """
    raw = str(text).strip().lower()
    unit = _UNITS.get(raw[-1:], None) if raw else None
    number = raw[:-1] if unit is not None else raw
    try:
        value = float(number) * (unit or 1)
    except ValueError:
        value = 0.0
    if value < 1 or value != int(value):
        raise ValueError(f"window {text!r}: give a whole number of seconds, minutes, "
                         "hours or days (30s, 5m, 1h, 1d)")
    return int(value)


def window_label(seconds: int) -> str:
    """``30s``, ``5m``, ``1h``, ``1d``: the shortest exact spelling of a window size."""
    for unit, size in (("d", 86_400), ("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def choose_window(span_ns: int, interval_ns: int) -> int:
    """The report's window (seconds): the smallest of :data:`NICE_WINDOWS` that holds at
    least :data:`MIN_SAMPLES_PER_WINDOW` sample intervals and gives at most
    :data:`MAX_WINDOWS` windows over ``span_ns``; the largest when none does."""
    for size in NICE_WINDOWS:
        if size * NS < MIN_SAMPLES_PER_WINDOW * interval_ns:
            continue
        if span_ns <= MAX_WINDOWS * size * NS:
            return size
    return NICE_WINDOWS[-1]


RATE_COLUMNS = ("broker", "object_id", "package", "class_name", "name", "statistic", "ts",
                "dt_seconds", "delta", "rate")


def is_gauge(statistic: Column, gauges: Iterable[str] | None = None) -> Column:
    """A boolean column: is ``statistic`` (a name) a gauge (a level, not a counter)?

    With ``gauges`` given: exactly those names.  Without: names ending in ``Depth``,
    ``Count``, ``High`` or ``Low`` (msgDepth, byteDepth, consumerCount, queueCount ...)
    and ``unackedMessages``.
    """
    require_pyspark()
    from pyspark.sql import functions as F

    if gauges is not None:
        return statistic.isin(list(gauges))
    cond = statistic.isin(sorted(GAUGE_NAMES))
    for suffix in GAUGE_SUFFIXES:
        cond = cond | statistic.endswith(suffix)
    return F.coalesce(cond, F.lit(False))


def object_names(samples: DataFrame) -> DataFrame:
    """``broker, object_id, name``: property ``name`` of the latest properties of an
    object (the sample with the greatest ``sample_ts`` whose ``props`` is not empty),
    else the object id."""
    require_pyspark()
    from pyspark.sql import functions as F

    if "props" not in samples.columns:
        raise ValueError("object_names needs the samples with their props column "
                         "(pass names= along with cleaned statistics samples)")
    with_props = samples.filter(F.col("props").isNotNull() & (F.size("props") > 0))
    latest = with_props.groupBy("broker", "object_id").agg(
        F.max_by(F.col("props").getItem("name"), F.col("sample_ts")).alias("prop_name"))
    return latest.select("broker", "object_id",
                         F.coalesce("prop_name", "object_id").alias("name"))


def _with_names(df: DataFrame, names: DataFrame) -> DataFrame:
    require_pyspark()
    from pyspark.sql import functions as F

    joined = df.join(F.broadcast(names), ["broker", "object_id"], "left")
    return joined.withColumn("name", F.coalesce(F.col("name"), F.col("object_id")))


def statistic_samples(samples: DataFrame) -> DataFrame:
    """The statistics samples (kind ``i``) cleaned for rates, one row per sample.

    * duplicates (same series and ``sample_ts``) are dropped, the first received kept;
    * a series ends at its first sample that carries a delete time: later samples of
      the same series are dropped;
    * adds ``prev_ts`` and ``prev_stats`` (``stats_int``): the previous sample of the
      same series in ``sample_ts`` order (null for the first one).

    A DataFrame that already is a result of this function (it has ``prev_stats``) is
    returned as it is, so that the jobs below can share one cleaned (and persisted)
    table; they all accept either the raw samples or this.
    """
    require_pyspark()
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    if "prev_stats" in samples.columns:
        return samples
    series = list(SERIES)
    ordered = Window.partitionBy(*series).orderBy("sample_ts", "received_ts")
    whole = Window.partitionBy(*series)
    stats = samples.filter(F.col("kind") == "i").select(
        *series, "package", "class_name", "sample_ts", "delete_ts", "received_ts",
        "stats_int", "stats_float")
    marked = (
        stats
        .withColumn("_before", F.lag("sample_ts").over(ordered))
        .withColumn("_end", F.min(F.when(F.col("delete_ts") > 0, F.col("sample_ts")))
                    .over(whole))
    )
    kept = marked.filter(
        (F.col("_before").isNull() | (F.col("_before") != F.col("sample_ts")))
        & (F.col("_end").isNull() | (F.col("sample_ts") <= F.col("_end")))
    ).drop("_before", "_end")
    return (kept
            .withColumn("prev_ts", F.lag("sample_ts").over(ordered))
            .withColumn("prev_stats", F.lag("stats_int").over(ordered)))


def counter_steps(samples: DataFrame, *, max_gap: float = DEFAULT_MAX_GAP,
                  gauges: Iterable[str] | None = None,
                  statistics: Iterable[str] | None = None) -> DataFrame:
    """Every step between consecutive samples of a series, per counter, with its status.

    Columns: the series (broker, object_id, create_ts, boot_sequence), package,
    class_name, statistic, ts (the end of the step), prev_ts, dt_seconds, delta,
    rate and status: ``ok`` (rate set), ``reset`` (the counter went down: no rate; the
    next step starts from the new value), ``gap`` (``dt_seconds > max_gap``: no
    rate) or ``missing`` (the statistic was not in the previous sample).  Counters are
    the ``stats_int`` entries that are not gauges (see :func:`is_gauge`); ``statistics``
    restricts them to those names.
    """
    require_pyspark()
    from pyspark.sql import functions as F

    base = statistic_samples(samples).filter(F.col("prev_ts").isNotNull())
    exploded = base.select(
        *SERIES, "package", "class_name", "prev_ts", "prev_stats",
        F.col("sample_ts").alias("ts"),
        F.explode("stats_int").alias("statistic", "value"))
    exploded = exploded.filter(~is_gauge(F.col("statistic"), gauges))
    if statistics is not None:
        exploded = exploded.filter(F.col("statistic").isin(list(statistics)))
    prev_value = F.element_at(F.col("prev_stats"), F.col("statistic"))
    dt_ns = F.col("ts") - F.col("prev_ts")
    steps = (
        exploded
        .withColumn("prev_value", prev_value)
        .withColumn("dt_seconds", dt_ns.cast("double") / F.lit(float(NS)))
        .withColumn("delta", F.col("value") - F.col("prev_value"))
        .withColumn("status", F.when(F.col("prev_value").isNull(), F.lit("missing"))
                    .when(F.col("delta") < 0, F.lit("reset"))
                    .when(F.col("dt_seconds") > F.lit(float(max_gap)), F.lit("gap"))
                    .otherwise(F.lit("ok")))
    )
    rate = F.when((F.col("status") == "ok") & (dt_ns > 0),
                  F.col("delta").cast("double") * F.lit(float(NS)) / dt_ns.cast("double"))
    return steps.select(
        *SERIES, "package", "class_name", "statistic", "ts", "prev_ts", "dt_seconds",
        "delta", rate.alias("rate"), "status")


def counter_rates(samples: DataFrame, *, max_gap: float = DEFAULT_MAX_GAP,
                  gauges: Iterable[str] | None = None,
                  statistics: Iterable[str] | None = None,
                  names: DataFrame | None = None) -> DataFrame:
    """Counter rates per object and statistic: delta / sample-time delta (per second).

    Between consecutive samples (kind ``i``, ``stats_int``) of one series (broker,
    object_id, create_ts, boot_sequence) in ``sample_ts`` order, after dropping
    duplicates and the samples after a deletion (see :func:`statistic_samples`).  No
    rate for a reset (the counter went down), a gap longer than ``max_gap`` seconds, or
    the first sample of a series.  Gauges (see :func:`is_gauge`) are left out.

    Columns: broker, object_id, package, class_name, name, statistic, ts (end of the
    step, ns), dt_seconds, delta, rate.
    """
    steps = counter_steps(samples, max_gap=max_gap, gauges=gauges, statistics=statistics)
    if names is None:
        names = object_names(samples)
    return rates_from_steps(steps, names)


def rates_from_steps(steps: DataFrame, names: DataFrame) -> DataFrame:
    """The rows of :func:`counter_rates` from :func:`counter_steps` and
    :func:`object_names` (the ``ok`` steps, with the object's name)."""
    require_pyspark()
    from pyspark.sql import functions as F

    ok = steps.filter(F.col("status") == "ok")
    return _with_names(ok, names).select(*RATE_COLUMNS)


def gauge_points(samples: DataFrame, *, gauges: Iterable[str] | None = None) -> DataFrame:
    """Gauge values of the statistics samples (duplicates dropped, as for rates).

    Columns: broker, object_id, package, class_name, metric, ts, value (double), from
    the ``stats_int`` entries that are gauges (:func:`is_gauge`) and every
    ``stats_float`` entry (only those named in ``gauges`` when it is given).
    """
    require_pyspark()
    from pyspark.sql import functions as F

    clean = statistic_samples(samples)
    keys: list[Column | str] = ["broker", "object_id", "package", "class_name",
                                F.col("sample_ts").alias("ts")]
    ints = clean.select(*keys, F.explode("stats_int").alias("metric", "value"))
    floats = clean.select(*keys, F.explode("stats_float").alias("metric", "value"))
    ints = ints.filter(is_gauge(F.col("metric"), gauges))
    if gauges is not None:
        floats = floats.filter(F.col("metric").isin(list(gauges)))
    return ints.withColumn("value", F.col("value").cast("double")).unionByName(floats)


def _ts_to_timestamp(col: str) -> Column:
    require_pyspark()
    from pyspark.sql import functions as F

    return F.timestamp_micros(F.floor(F.col(col) / F.lit(1000)).cast("bigint"))


def _timestamp_to_ns(col: Column) -> Column:
    require_pyspark()
    from pyspark.sql import functions as F

    return F.unix_micros(col) * F.lit(1000)


def rolling_windows(samples: DataFrame, rates: DataFrame | None = None, *,
                    windows: Mapping[str, str] = DEFAULT_WINDOWS,
                    slide: Mapping[str, str] | None = None,
                    gauges: Iterable[str] | None = None,
                    names: DataFrame | None = None,
                    max_gap: float = DEFAULT_MAX_GAP,
                    interval_ns: int = 0) -> DataFrame:
    """Gauges and counter rates aggregated in event-time windows (Spark ``window``).

    For every object, metric and window size (``windows``: label -> duration, default
    1 minute, 5 minutes and 1 hour; tumbling unless ``slide`` gives label -> slide):
    the number of points, their average, minimum and maximum.  A gauge point is a
    sample's value (at ``sample_ts``); a rate point is a row of :func:`counter_rates`
    (at the end of its step).  ``rates`` is computed when not given.

    ``coverage`` is the part of the window (0 to 1) inside the time the series was
    observed: from its first point to its last, widened by ``interval_ns`` (the sample
    interval) at both ends; ``partial`` means more than half a sample interval of the
    window is not covered: the first and last windows of a series, usually, whose
    average stands for less than the whole window.

    Columns: broker, object_id, package, class_name, name, kind (``gauge``/``rate``),
    metric, window (the label), window_start, window_end (ns), count, avg, min, max,
    coverage, partial.
    """
    require_pyspark()
    from pyspark.sql import functions as F

    if names is None:
        names = object_names(samples)
    if rates is None:
        rates = counter_rates(samples, names=names, gauges=gauges, max_gap=max_gap)
    cols = ["broker", "object_id", "package", "class_name", "kind", "metric", "ts", "value"]
    gauge_df = gauge_points(samples, gauges=gauges).withColumn("kind", F.lit("gauge"))
    rate_df = rates.select("broker", "object_id", "package", "class_name",
                           F.lit("rate").alias("kind"), F.col("statistic").alias("metric"),
                           "ts", F.col("rate").alias("value"))
    from pyspark.sql import Window

    metric_series = Window.partitionBy("broker", "object_id", "kind", "metric")
    points = (gauge_df.select(*cols).unionByName(rate_df.select(*cols))
              .withColumn("event_time", _ts_to_timestamp("ts"))
              .withColumn("_first", F.min("ts").over(metric_series))
              .withColumn("_last", F.max("ts").over(metric_series)))
    parts = []
    for label, duration in windows.items():
        step = (slide or {}).get(label)
        win = (F.window("event_time", duration, step) if step
               else F.window("event_time", duration))
        agg = points.groupBy("broker", "object_id", "package", "class_name", "kind",
                             "metric", win.alias("w")).agg(
            F.count(F.lit(1)).alias("count"), F.avg("value").alias("avg"),
            F.min("value").alias("min"), F.max("value").alias("max"),
            F.first("_first").alias("_first"), F.first("_last").alias("_last"))
        start = _timestamp_to_ns(F.col("w.start"))
        end = _timestamp_to_ns(F.col("w.end"))
        covered = (F.least(end, F.col("_last") + F.lit(interval_ns))
                   - F.greatest(start, F.col("_first") - F.lit(interval_ns)))
        coverage = F.least(F.lit(1.0), F.greatest(
            F.lit(0.0), covered.cast("double") / (end - start).cast("double")))
        parts.append(agg.select(
            "broker", "object_id", "package", "class_name", "kind", "metric",
            F.lit(label).alias("window"), start.alias("window_start"),
            end.alias("window_end"), "count", "avg", "min", "max",
            coverage.alias("coverage"),
            # less than half a sample interval missing is the sampling's phase, not a
            # part of the window without data
            (coverage < F.lit(1.0) - F.lit(interval_ns / 2.0)
             / (end - start).cast("double")).alias("partial")))
    result = parts[0]
    for part in parts[1:]:
        result = result.unionByName(part)
    return _with_names(result, names).select(
        "broker", "object_id", "package", "class_name", "name", "kind", "metric", "window",
        "window_start", "window_end", "count", "avg", "min", "max", "coverage", "partial")


def names_regex(patterns: Sequence[str]) -> str:
    """One Java/Python regular expression matching a whole name that matches one of
    the ``fnmatch`` ``patterns`` (for Spark's ``rlike``)."""
    return "^(?:" + "|".join(fnmatch.translate(p) for p in patterns) + ")"


def top_queues(samples: DataFrame, rates: DataFrame | None = None, *, n: int = 10,
               queue_class: str = "queue", enqueue_statistic: str = "msgTotalEnqueues",
               depth_statistic: str = "msgDepth", names: DataFrame | None = None,
               max_gap: float = DEFAULT_MAX_GAP,
               exclude: Sequence[str] = CONSOLE_QUEUES) -> DataFrame:
    """The ``n`` queues with the highest enqueue rate and the ``n`` with the largest depth
    growth over the period.

    Queues whose name matches an ``exclude`` pattern (``fnmatch``) are left out: by
    default the consoles' own reply and topic queues
    (``qmf_async.names.CONSOLE_QUEUES``, as ``qmf exporter`` leaves them out), which
    carry the bus's own traffic and would otherwise crowd the lists; ``()`` keeps them.

    * ``enqueue_rate``: total ``msgTotalEnqueues`` delta of the rate steps divided by
      their total time (messages/s over the time the queue was observed with rates);
    * ``depth_growth``: the last ``msgDepth`` minus the first one (by ``sample_ts``)
      of the object over the period, in messages; only queues that grew (a queue that
      shrank or stayed level is not in this list).

    Ties are broken by name then object id.  Columns: metric, rank (1 = highest),
    broker, object_id, name, value, delta (messages), seconds, first_ts, last_ts.
    """
    require_pyspark()
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    if names is None:
        names = object_names(samples)
    if rates is None:
        rates = counter_rates(samples, names=names, statistics=[enqueue_statistic],
                              max_gap=max_gap)
    enq = (rates.filter((F.col("class_name") == queue_class)
                        & (F.col("statistic") == enqueue_statistic))
           .groupBy("broker", "object_id")
           .agg(F.sum("delta").alias("delta"), F.sum("dt_seconds").alias("seconds"),
                F.min(F.col("ts") - F.round(F.col("dt_seconds") * F.lit(float(NS)))
                      .cast("bigint")).alias("first_ts"),
                F.max("ts").alias("last_ts"))
           .filter(F.col("seconds") > 0)
           .select("broker", "object_id", F.lit("enqueue_rate").alias("metric"),
                   (F.col("delta").cast("double") / F.col("seconds")).alias("value"),
                   "delta", "seconds", "first_ts", "last_ts"))
    clean = statistic_samples(samples).filter(F.col("class_name") == queue_class)
    depth = F.element_at(F.col("stats_int"), F.lit(depth_statistic))
    depths = (clean.select("broker", "object_id", "sample_ts", depth.alias("depth"))
              .filter(F.col("depth").isNotNull())
              .groupBy("broker", "object_id")
              .agg(F.min_by("depth", "sample_ts").alias("first"),
                   F.max_by("depth", "sample_ts").alias("last"),
                   F.min("sample_ts").alias("first_ts"), F.max("sample_ts").alias("last_ts"))
              .select("broker", "object_id", F.lit("depth_growth").alias("metric"),
                      (F.col("last") - F.col("first")).cast("double").alias("value"),
                      (F.col("last") - F.col("first")).alias("delta"),
                      ((F.col("last_ts") - F.col("first_ts")).cast("double")
                       / F.lit(float(NS))).alias("seconds"),
                      "first_ts", "last_ts")
              .filter(F.col("delta") > 0))
    both = _with_names(enq.unionByName(depths), names)
    if exclude:
        both = both.filter(F.col("name").isNull()
                           | ~F.col("name").rlike(names_regex(tuple(exclude))))
    ranking = Window.partitionBy("metric").orderBy(
        F.col("value").desc(), F.col("name").asc(), F.col("object_id").asc(),
        F.col("broker").asc())
    return (both.withColumn("rank", F.row_number().over(ranking))
            .filter(F.col("rank") <= n)
            .select("metric", "rank", "broker", "object_id", "name", "value", "delta",
                    "seconds", "first_ts", "last_ts"))


def event_counts(events: DataFrame, *, window: str = "1 minute") -> DataFrame:
    """Events per time window (default one minute), class and severity.

    Columns: window_start, window_end (ns), package, event_name, severity,
    severity_name, count.
    """
    require_pyspark()
    from pyspark.sql import functions as F

    win = F.window(_ts_to_timestamp("timestamp"), window).alias("w")
    counts = events.groupBy(win, "package", "event_name", "severity", "severity_name").agg(
        F.count(F.lit(1)).alias("count"))
    return counts.select(_timestamp_to_ns(F.col("w.start")).alias("window_start"),
                         _timestamp_to_ns(F.col("w.end")).alias("window_end"),
                         "package", "event_name", "severity", "severity_name", "count")


def object_lifetimes(samples: DataFrame, *, names: DataFrame | None = None) -> DataFrame:
    """One row per object incarnation (broker, object_id, create_ts).

    Columns: broker, object_id, package, class_name, name, created (create_ts, ns),
    deleted (the delete time, null while live), duration_seconds (deleted - created,
    null while live), first_seen, last_seen (sample_ts, ns), samples (rows seen).
    """
    require_pyspark()
    from pyspark.sql import functions as F

    if names is None:
        names = object_names(samples)
    deleted = F.max(F.when(F.col("delete_ts") > 0, F.col("delete_ts")))
    life = samples.groupBy("broker", "object_id", "create_ts").agg(
        F.first("package", ignorenulls=True).alias("package"),
        F.first("class_name", ignorenulls=True).alias("class_name"),
        deleted.alias("deleted"),
        F.min("sample_ts").alias("first_seen"), F.max("sample_ts").alias("last_seen"),
        F.count(F.lit(1)).alias("samples"))
    duration = F.when(F.col("deleted").isNotNull() & (F.col("create_ts") > 0),
                      (F.col("deleted") - F.col("create_ts")).cast("double") / F.lit(float(NS)))
    return _with_names(life, names).select(
        "broker", "object_id", "package", "class_name", "name",
        F.col("create_ts").alias("created"), "deleted", duration.alias("duration_seconds"),
        "first_seen", "last_seen", "samples")
