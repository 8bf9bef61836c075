"""The Spark pipeline (qmf_async.tools.pipeline, ``qmf pipeline``) on small datasets that the
tests write with pyarrow in the collector's layout (docs/pipeline.md), compared value
by value with what the data was made to give.

One SparkSession (local[2], bound to 127.0.0.1) is shared by the whole module.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import shutil
import subprocess
import sys
import uuid
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ._util import import_example, private_vhost, wait_until
from .conftest import QUICK_JVM

pytestmark = pytest.mark.slow

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
pytest.importorskip("pyspark")
pytest.importorskip("matplotlib")
if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
    pytest.skip("Spark needs Java (17 or later)", allow_module_level=True)

from qmf_async.tools.pipeline import (  # noqa: E402
    build_spark,
    choose_window,
    counter_rates,
    counter_steps,
    event_counts,
    object_lifetimes,
    parse_time,
    read_dataset,
    rolling_windows,
    run_pipeline,
    top_queues,
    window_label,
    window_seconds,
)

ROOT = Path(__file__).resolve().parent.parent
NS = 1_000_000_000
#: the first sample: one minute before midnight, so that the data spans two dates
T0 = parse_time("2024-05-01T23:59:00Z")
PKG = "org.apache.qpid.broker"

SAMPLE_SCHEMA = pa.schema([
    ("broker", pa.string()), ("agent", pa.string()), ("object_id", pa.string()),
    ("boot_sequence", pa.int32()), ("package", pa.string()), ("class_name", pa.string()),
    ("class_hash", pa.string()), ("kind", pa.string()), ("sample_ts", pa.int64()),
    ("create_ts", pa.int64()), ("delete_ts", pa.int64()),
    ("props", pa.map_(pa.string(), pa.string())),
    ("stats_int", pa.map_(pa.string(), pa.int64())),
    ("stats_float", pa.map_(pa.string(), pa.float64())),
    ("stats_text", pa.map_(pa.string(), pa.string())),
    ("received_ts", pa.int64()),
])
EVENT_SCHEMA = pa.schema([
    ("broker", pa.string()), ("agent", pa.string()), ("package", pa.string()),
    ("event_name", pa.string()), ("class_hash", pa.string()), ("timestamp", pa.int64()),
    ("severity", pa.int32()), ("severity_name", pa.string()),
    ("args", pa.map_(pa.string(), pa.string())), ("received_ts", pa.int64()),
])


# ---------------------------------------------------------------- dataset writing

def _date(ns: int) -> str:
    return dt.datetime.fromtimestamp(ns // NS, tz=dt.UTC).strftime("%Y-%m-%d")


def write_table(root: Path, table: str, rows: list[dict[str, Any]], schema: Any,
                ts_key: str, class_key: str, *, parts: int = 2) -> None:
    """Rows into ``root/table/date=.../class=<package>:<class>/part-N.parquet`` (each
    partition split in ``parts`` files, rows in the given order), plus a ``.tmp``
    file of garbage in every partition that a reader must not see."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[(_date(row[ts_key]), f"{row['package']}:{row[class_key]}")].append(row)
    for (date, cls), members in groups.items():
        folder = root / table / f"date={date}" / f"class={cls}"
        folder.mkdir(parents=True, exist_ok=True)
        for i in range(parts):
            chunk = members[i::parts]
            if chunk:
                pq.write_table(pa.Table.from_pylist(chunk, schema=schema),
                               folder / f"part-{i:05d}.parquet")
        garbage = [dict(members[0], **{ts_key: members[0][ts_key] + 1})] * 3
        pq.write_table(pa.Table.from_pylist(garbage, schema=schema),
                       folder / ".part-99999.parquet.tmp")


def sample(object_id: str, t: float, stats: dict[str, int] | None = None, *,
           cls: str = "queue", broker: str = "b1", boot: int = 1, create: float = -3600,
           delete: float | None = None, props: dict[str, str] | None = None,
           kind: str | None = None, received: float = 0.5,
           floats: dict[str, float] | None = None) -> dict[str, Any]:
    """One samples row; times in seconds from T0."""
    kind = kind or ("c" if props is not None else "i")
    return {
        "broker": broker, "agent": f"{boot}.0", "object_id": object_id,
        "boot_sequence": boot, "package": PKG, "class_name": cls,
        "class_hash": "00" * 16, "kind": kind, "sample_ts": T0 + round(t * NS),
        "create_ts": T0 + round(create * NS),
        "delete_ts": 0 if delete is None else T0 + round(delete * NS),
        "props": list((props or {}).items()), "stats_int": list((stats or {}).items()),
        "stats_float": list((floats or {}).items()), "stats_text": [],
        "received_ts": T0 + round((t + received) * NS),
    }


def event(t: float, name: str, severity: int, sev_name: str, *,
          broker: str = "b1") -> dict[str, Any]:
    return {"broker": broker, "agent": "1.0", "package": PKG, "event_name": name,
            "class_hash": "11" * 16, "timestamp": T0 + round(t * NS), "severity": severity,
            "severity_name": sev_name, "args": [("rhost", "127.0.0.1:5000")],
            "received_ts": T0 + round((t + 0.1) * NS)}


E = "msgTotalEnqueues"
D = "msgTotalDequeues"
DEPTH = "msgDepth"

# counters by queue: (t seconds, enqueues, depth); props rows separately
SAMPLES: list[dict[str, Any]] = [
    # qa: regular 10 s steps and one 7.5 s step; a duplicate (same sample_ts, received
    # later, other values that must NOT win) and rows out of order; renamed: latest wins
    sample("qa", 0, props={"name": "qa-old", "durable": "True"}),
    sample("qa", 30, props={"name": "qa", "durable": "True"}),
    sample("qa", 40, {E: 400, D: 100, DEPTH: 300}),
    sample("qa", 0, {E: 0, D: 0, DEPTH: 0}),
    sample("qa", 20, {E: 250, D: 50, DEPTH: 200}),
    sample("qa", 10, {E: 100, D: 10, DEPTH: 90}),
    sample("qa", 20, {E: 999_999, D: 0, DEPTH: 5}, received=2.0),   # duplicate
    sample("qa", 32.5, {E: 250, D: 70, DEPTH: 180}),
    # qb: a counter reset (went down) between 10 and 20
    sample("qb", 0, props={"name": "qb"}),
    sample("qb", 0, {E: 1000, DEPTH: 10}),
    sample("qb", 10, {E: 1500, DEPTH: 20}),
    sample("qb", 20, {E: 200, DEPTH: 0}),
    sample("qb", 30, {E: 500, DEPTH: 40}),
    # qc: agent restart at 15 s: new boot sequence and create time; the new series
    # starts HIGHER, so only the series key keeps a (wrong) rate 70/s out
    sample("qc", 0, props={"name": "qc"}),
    sample("qc", 0, {E: 100, DEPTH: 5}),
    sample("qc", 10, {E: 300, DEPTH: 7}),
    sample("qc", 20, {E: 1000, DEPTH: 1}, boot=2, create=15),
    sample("qc", 20, props={"name": "qc"}, boot=2, create=15),
    sample("qc", 30, {E: 1100, DEPTH: 2}, boot=2, create=15),
    # qd: a gap of 390 s (> 300) between 10 and 400; crosses midnight
    sample("qd", 0, props={"name": "qd"}),
    sample("qd", 0, {E: 0, DEPTH: 0}),
    sample("qd", 10, {E: 100, DEPTH: 100}),
    sample("qd", 400, {E: 200, DEPTH: 150}),
    sample("qd", 410, {E: 300, DEPTH: 160}),
    # qe: deleted at 15 s; the deletion sample (20 s) ends the series, a late stray
    # sample after it is not part of it
    sample("qe", 0, props={"name": "qe"}, create=-10),
    sample("qe", 0, {E: 0, DEPTH: 0}, create=-10),
    sample("qe", 10, {E: 50, DEPTH: 2}, create=-10),
    sample("qe", 20, {E: 80, DEPTH: 1}, create=-10, delete=15),
    sample("qe", 30, {E: 90, DEPTH: 0}, create=-10),
    # same object id on another broker: another series; named by its own props
    sample("qa", 0, {E: 0, DEPTH: 0}, broker="b2"),
    sample("qa", 10, {E: 10, DEPTH: 3}, broker="b2"),
    sample("qa", 5, props={"name": "qa"}, broker="b2"),
    # an exchange without a name property, with a float gauge
    sample("ex1", 0, {"msgReceives": 0, "bindingCount": 2}, cls="exchange",
           floats={"avgLatency": 1.5}),
    sample("ex1", 8, {"msgReceives": 12, "bindingCount": 3}, cls="exchange",
           floats={"avgLatency": 2.5}),
]


def S(t: float) -> int:
    return T0 + round(t * NS)


# (broker, object_id, statistic, end ts) -> (delta, dt seconds); name; rate = delta/dt
EXPECTED_RATES: dict[tuple[str, str, str, int], tuple[int, float]] = {
    ("b1", "qa", E, S(10)): (100, 10), ("b1", "qa", E, S(20)): (150, 10),
    ("b1", "qa", E, S(32.5)): (0, 12.5), ("b1", "qa", E, S(40)): (150, 7.5),
    ("b1", "qa", D, S(10)): (10, 10), ("b1", "qa", D, S(20)): (40, 10),
    ("b1", "qa", D, S(32.5)): (20, 12.5), ("b1", "qa", D, S(40)): (30, 7.5),
    ("b1", "qb", E, S(10)): (500, 10), ("b1", "qb", E, S(30)): (300, 10),
    ("b1", "qc", E, S(10)): (200, 10), ("b1", "qc", E, S(30)): (100, 10),
    ("b1", "qd", E, S(10)): (100, 10), ("b1", "qd", E, S(410)): (100, 10),
    ("b1", "qe", E, S(10)): (50, 10), ("b1", "qe", E, S(20)): (30, 10),
    ("b2", "qa", E, S(10)): (10, 10),
    ("b1", "ex1", "msgReceives", S(8)): (12, 8),
}
EXPECTED_NAMES = {("b1", "qa"): "qa", ("b1", "qb"): "qb", ("b1", "qc"): "qc",
                  ("b1", "qd"): "qd", ("b1", "qe"): "qe", ("b2", "qa"): "qa",
                  ("b1", "ex1"): "ex1"}

EVENTS = [
    event(1, "queueDeclare", 6, "info"), event(2, "queueDeclare", 6, "info"),
    event(30, "bind", 6, "info"), event(59.999, "clientConnect", 6, "info"),
    event(60, "queueDelete", 4, "warn"), event(61, "queueDelete", 4, "warn"),
    event(125, "queueDeclare", 6, "info", broker="b2"),
    event(10, "clientConnectFail", 3, "error"),
]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("dataset")
    write_table(root, "samples", SAMPLES, SAMPLE_SCHEMA, "sample_ts", "class_name")
    write_table(root, "events", EVENTS, EVENT_SCHEMA, "timestamp", "event_name")
    return root


@pytest.fixture(scope="module")
def samples(spark: Any, dataset: Path) -> Any:
    return read_dataset(spark, str(dataset))[0]


@pytest.fixture(scope="module")
def events(spark: Any, dataset: Path) -> Any:
    return read_dataset(spark, str(dataset))[1]


def rows(df: Any) -> list[dict[str, Any]]:
    return [r.asDict() for r in df.collect()]


# ---------------------------------------------------------------- the tests

def test_parse_time() -> None:
    assert parse_time("2024-05-01T23:59:00Z") == T0
    assert parse_time("2024-05-01T23:59:00") == T0  # no offset: UTC
    assert parse_time("2024-05-02T01:59:00+02:00") == T0
    assert parse_time(str(T0)) == T0 == parse_time(T0)
    assert parse_time(dt.datetime(2024, 5, 1, 23, 59, tzinfo=dt.UTC)) == T0
    for bad in ("yesterday", "", True, 1.5):
        with pytest.raises(ValueError):
            parse_time(bad)


def test_without_pyspark_the_error_says_what_to_install(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyspark", None)
    with pytest.raises(ImportError, match=re.escape("pip install 'qmf-async[pipeline]'")):
        build_spark()


def test_session_is_local_and_bound_to_loopback(spark: Any) -> None:
    conf = spark.sparkContext.getConf()
    assert conf.get("spark.driver.bindAddress") == "127.0.0.1"
    assert conf.get("spark.driver.host") == "127.0.0.1"
    assert conf.get("spark.ui.enabled") == "false"
    assert conf.get("spark.jars.packages", "") == ""
    assert spark.sparkContext.master == "local[2]"
    assert spark.conf.get("spark.sql.shuffle.partitions") == "4"


def test_reads_the_layout_and_ignores_temporary_files(samples: Any, events: Any) -> None:
    assert samples.count() == len(SAMPLES)
    assert events.count() == len(EVENTS)
    got = {(r["date"].isoformat(), r["class"]) for r in samples.select("date", "class")
           .distinct().collect()}
    assert got == {("2024-05-01", f"{PKG}:queue"), ("2024-05-02", f"{PKG}:queue"),
                   ("2024-05-01", f"{PKG}:exchange")}
    assert dict(samples.dtypes)["boot_sequence"] == "int"
    assert dict(samples.dtypes)["stats_int"] == "map<string,bigint>"


def test_counter_rates_value_by_value(samples: Any) -> None:
    got = rows(counter_rates(samples))
    assert got and set(got[0]) == {"broker", "object_id", "package", "class_name", "name",
                                   "statistic", "ts", "dt_seconds", "delta", "rate"}
    by_key = {(r["broker"], r["object_id"], r["statistic"], r["ts"]): r for r in got}
    assert len(by_key) == len(got), "one rate per step"
    assert set(by_key) == set(EXPECTED_RATES)
    for key, (delta, seconds) in EXPECTED_RATES.items():
        r = by_key[key]
        assert r["delta"] == delta, key
        assert r["dt_seconds"] == pytest.approx(seconds, abs=1e-9), key
        assert r["rate"] == pytest.approx(delta / seconds, rel=0, abs=1e-9), key
        assert r["name"] == EXPECTED_NAMES[key[:2]], key
        assert r["package"] == PKG
        assert r["class_name"] == ("exchange" if key[1] == "ex1" else "queue")
    assert all(r["rate"] >= 0 for r in got)
    assert all(r["statistic"] not in {DEPTH, "bindingCount"} for r in got), "gauges"


def test_steps_without_rate_are_marked(samples: Any) -> None:
    steps = rows(counter_steps(samples, statistics=[E]))
    status = {(r["object_id"], r["broker"], r["ts"]): r["status"] for r in steps}
    assert status[("qb", "b1", S(20))] == "reset"
    assert status[("qd", "b1", S(400))] == "gap"
    # the restart: no step between the two series of qc
    assert ("qc", "b1", S(20)) not in status
    # nothing after the deletion of qe
    assert ("qe", "b1", S(30)) not in status
    assert sum(1 for s in status.values() if s == "ok") == 13


def test_max_gap_is_configurable(samples: Any) -> None:
    got = {(r["object_id"], r["ts"]): r["rate"]
           for r in rows(counter_rates(samples, statistics=[E], max_gap=400))}
    assert got[("qd", S(400))] == pytest.approx(100 / 390, abs=1e-9)
    tight = {(r["object_id"], r["ts"])
             for r in rows(counter_rates(samples, statistics=[E], max_gap=9))}
    # only the 7.5 s and 8 s steps are short enough
    assert tight == {("qa", S(40))}


def test_since_until_filter(spark: Any, dataset: Path) -> None:
    samples, events = read_dataset(spark, str(dataset), since=S(10), until=S(35))
    got = {(r["broker"], r["object_id"], r["ts"]): r["rate"]
           for r in rows(counter_rates(samples, statistics=[E]))}
    assert got == {("b1", "qa", S(20)): 15.0, ("b1", "qa", S(32.5)): 0.0,
                   ("b1", "qb", S(30)): 30.0, ("b1", "qc", S(30)): 10.0,
                   ("b1", "qe", S(20)): 3.0}
    assert events.count() == 2  # 30 s and the error at 10 s
    # ISO strings and the date pruning (the next day's partition) give the same
    late, _ = read_dataset(spark, str(dataset), since="2024-05-02T00:00:00Z")
    assert {r["sample_ts"] for r in late.collect()} == {S(400), S(410)}


def _bucket(ts: int, seconds: int) -> int:
    size = seconds * NS
    return ts - ts % size


def test_rolling_windows_match_a_reference(samples: Any) -> None:
    got = rows(rolling_windows(samples))
    cols = {"broker", "object_id", "package", "class_name", "name", "kind", "metric",
            "window", "window_start", "window_end", "count", "avg", "min", "max",
            "coverage", "partial"}
    assert set(got[0]) == cols
    # reference: gauges from the samples (duplicates and post-deletion dropped),
    # rates from EXPECTED_RATES
    points: list[tuple[str, str, str, str, int, float]] = []
    seen = set()
    for s in SAMPLES:
        if s["kind"] != "i":
            continue
        key = (s["broker"], s["object_id"], s["create_ts"], s["sample_ts"])
        if key in seen:
            continue
        if s["object_id"] == "qe" and s["sample_ts"] > S(20):
            continue
        seen.add(key)
        for metric, value in s["stats_int"]:
            if metric in (DEPTH, "bindingCount"):
                points.append((s["broker"], s["object_id"], "gauge", metric,
                               s["sample_ts"], float(value)))
        for metric, value in s["stats_float"]:
            points.append((s["broker"], s["object_id"], "gauge", metric, s["sample_ts"],
                           value))
    for (broker, oid, stat, ts), (delta, seconds) in EXPECTED_RATES.items():
        points.append((broker, oid, "rate", stat, ts, delta / seconds))
    expected: dict[tuple[Any, ...], list[float]] = defaultdict(list)
    for label, seconds in (("1m", 60), ("5m", 300), ("1h", 3600)):
        for broker, oid, kind, metric, ts, value in points:
            expected[(broker, oid, kind, metric, label, _bucket(ts, seconds))].append(value)
    got_map = {(r["broker"], r["object_id"], r["kind"], r["metric"], r["window"],
                r["window_start"]): r for r in got}
    assert set(got_map) == set(expected)
    # the time each series was observed: its first point to its last
    observed: dict[tuple[str, str, str, str], list[int]] = defaultdict(list)
    for broker, oid, kind, metric, ts, _value in points:
        observed[(broker, oid, kind, metric)].append(ts)
    for key, values in expected.items():
        r = got_map[key]
        size = {"1m": 60, "5m": 300, "1h": 3600}[key[4]] * NS
        assert r["window_end"] - r["window_start"] == size
        seen = observed[key[:4]]
        covered = min(r["window_end"], max(seen)) - max(r["window_start"], min(seen))
        coverage = min(1.0, max(0.0, covered / size))
        assert r["coverage"] == pytest.approx(coverage, abs=1e-9), key
        assert r["partial"] == (coverage < 1.0), key
        assert r["count"] == len(values), key
        assert r["avg"] == pytest.approx(sum(values) / len(values), abs=1e-9), key
        assert r["min"] == pytest.approx(min(values), abs=1e-9), key
        assert r["max"] == pytest.approx(max(values), abs=1e-9), key
        assert r["name"] == EXPECTED_NAMES[key[:2]]
    # spot check by hand: qa's depth in the minute 23:59 is 0, 90, 200, 180, 300
    qa = got_map[("b1", "qa", "gauge", DEPTH, "1m", T0)]
    assert (qa["count"], qa["min"], qa["max"]) == (5, 0.0, 300.0)
    assert qa["avg"] == pytest.approx(154.0, abs=1e-9)
    # qa was sampled from 0 to 40 s: 40 of the minute's 60 s
    assert qa["partial"] and qa["coverage"] == pytest.approx(40 / 60)


def test_windows_widened_by_the_sample_interval(samples: Any) -> None:
    got = rows(rolling_windows(samples, windows={"10s": "10 seconds"}, interval_ns=10 * NS))
    qa = {r["window_start"]: r for r in got
          if (r["broker"], r["object_id"], r["kind"], r["metric"]) == ("b1", "qa", "gauge",
                                                                        DEPTH)}
    # samples at 0, 10, 20, 32.5, 40 s; widened by 10 s: observed from -10 to 50 s
    assert sorted(qa) == [S(0), S(10), S(20), S(30), S(40)]
    assert all(not r["partial"] and r["coverage"] == 1.0 for r in qa.values())
    # qd: sampled at 0 and 10 s, then 400 and 410 s: the windows between are missing,
    # not partial; those at either end of the series are whole with the interval
    qd = {r["window_start"]: r["partial"] for r in got
          if (r["object_id"], r["kind"], r["metric"]) == ("qd", "gauge", DEPTH)}
    assert qd == {S(0): False, S(10): False, S(400): False, S(410): False}


def test_choose_window() -> None:
    # 60 s of samples every 2 s: at least 3 samples per window -> 10 s windows
    assert choose_window(60 * NS, 2 * NS) == 10
    # a day of samples every 10 s: at most 720 windows -> 2 minutes
    assert choose_window(86_400 * NS, 10 * NS) == 120
    assert choose_window(0, 0) == 5
    # a sample a minute: 3 minutes at least -> 5 minutes
    assert choose_window(3600 * NS, 60 * NS) == 300
    # a year: the largest window
    assert choose_window(365 * 86_400 * NS, NS) == 86_400


@pytest.mark.parametrize("text, seconds, label", [
    ("30s", 30, "30s"), ("5m", 300, "5m"), ("1h", 3600, "1h"), ("1d", 86_400, "1d"),
    ("90", 90, "90s"), ("120", 120, "2m"), ("1.5m", 90, "90s")])
def test_window_sizes(text: str, seconds: int, label: str) -> None:
    assert window_seconds(text) == seconds
    assert window_label(seconds) == label


@pytest.mark.parametrize("text", ["0", "-5m", "1.5s", "m", "", "soon"])
def test_bad_window_sizes(text: str) -> None:
    with pytest.raises(ValueError, match="whole number"):
        window_seconds(text)


def test_top_queues(samples: Any) -> None:
    got = rows(top_queues(samples, n=3))
    enq = [(r["rank"], r["broker"], r["name"], r["value"]) for r in got
           if r["metric"] == "enqueue_rate"]
    # qb (500+300)/20 = 40, qc (200+100)/20 = 15, qa 400/40 = 10 ties with qd
    # 200/20 = 10: the name decides
    assert [(a, b, c) for a, b, c, _ in enq] == [(1, "b1", "qb"), (2, "b1", "qc"),
                                                (3, "b1", "qa")]
    assert [v for *_, v in enq] == pytest.approx([40.0, 15.0, 10.0], abs=1e-9)
    depth = [(r["rank"], r["broker"], r["name"], r["value"], r["delta"]) for r in got
             if r["metric"] == "depth_growth"]
    # last - first depth: qa 300, qd 160, qb 30, b2/qa 3, qe 1, qc -3; exchanges no
    assert depth == [(1, "b1", "qa", 300.0, 300), (2, "b1", "qd", 160.0, 160),
                     (3, "b1", "qb", 30.0, 30)]
    qa = next(r for r in got if r["metric"] == "depth_growth" and r["rank"] == 1)
    assert (qa["first_ts"], qa["last_ts"], qa["seconds"]) == (T0, S(40), 40.0)
    everything = rows(top_queues(samples, n=100))
    assert len([r for r in everything if r["metric"] == "enqueue_rate"]) == 6
    assert {r["name"] for r in everything} == {"qa", "qb", "qc", "qd", "qe"}
    # growth means growth: qc (-3) is not among the growing queues
    grew = {(r["broker"], r["name"]): r["delta"] for r in everything
            if r["metric"] == "depth_growth"}
    assert grew == {("b1", "qa"): 300, ("b1", "qd"): 160, ("b1", "qb"): 30,
                    ("b2", "qa"): 3, ("b1", "qe"): 1}


def test_top_queues_leave_the_console_queues_out(spark: Any, samples: Any) -> None:
    from pyspark.sql import functions as F

    from qmf_async.exporter import CONSOLE_QUEUES
    from qmf_async.tools.pipeline._jobs import names_regex

    kept = rows(top_queues(samples, n=100, exclude=("qb", "q[cd]")))
    assert {r["name"] for r in kept} == {"qa", "qe"}
    # the default patterns, as Spark's rlike reads them (Java regular expressions)
    names = ["orders", "qmf-async console-1a_qmf-reply-2b-3", "x_qmf-topic2-9-1",
             "qmfc-v2-ui-host.1", "reply-1234", "my-reply-queue", "topic-x", "topical"]
    frame = spark.createDataFrame([(n,) for n in names], ["name"])
    left = {r["name"] for r in frame.filter(
        ~F.col("name").rlike(names_regex(CONSOLE_QUEUES))).collect()}
    assert left == {"orders", "my-reply-queue", "topical"}


def test_event_counts_per_minute(events: Any) -> None:
    got = {(r["window_start"], r["event_name"], r["severity"], r["severity_name"]):
           r["count"] for r in rows(event_counts(events))}
    assert got == {
        (T0, "queueDeclare", 6, "info"): 2, (T0, "bind", 6, "info"): 1,
        (T0, "clientConnect", 6, "info"): 1, (T0, "clientConnectFail", 3, "error"): 1,
        (S(60), "queueDelete", 4, "warn"): 2, (S(120), "queueDeclare", 6, "info"): 1,
    }


def test_object_lifetimes(samples: Any) -> None:
    got = {(r["broker"], r["object_id"], r["created"]): r
           for r in rows(object_lifetimes(samples))}
    assert len(got) == 8  # qc twice (restart), qa on two brokers
    qe = got[("b1", "qe", S(-10))]
    assert (qe["deleted"], qe["duration_seconds"], qe["name"]) == (S(15), 25.0, "qe")
    assert (qe["first_seen"], qe["last_seen"]) == (S(0), S(30))
    old, new = got[("b1", "qc", S(-3600))], got[("b1", "qc", S(15))]
    assert old["deleted"] is None and old["duration_seconds"] is None
    assert (old["last_seen"], new["first_seen"], new["samples"]) == (S(10), S(20), 3)
    assert got[("b1", "ex1", S(-3600))]["class_name"] == "exchange"


def _html_images(report: Path) -> list[str]:
    return re.findall(r'<img src="([^"]+)"', report.read_text(encoding="utf-8"))


def test_legend_names_keep_head_and_tail() -> None:
    from qmf_async.tools.pipeline._report import _short
    assert _short("orders") == "orders"
    name = "qmf-async console-a8e6e93c172f_qmf-topic2-ce99242e899b49b4-10"
    short = _short(name)
    assert len(short) == 40 and "\u2026" in short
    head, tail = short.split("\u2026")
    assert name.startswith(head) and name.endswith(tail) and tail.endswith("b4-10")
    # two generated names that differ only at the end stay apart
    assert _short(name[:-2] + "-9") != short


def test_run_pipeline_end_to_end(spark: Any, dataset: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    summary = run_pipeline(spark, str(dataset), str(out), top_n=3)
    assert summary["inputs"] == {"samples": len(SAMPLES), "events": len(EVENTS)}
    assert summary["rows"]["rates"] == len(EXPECTED_RATES)
    assert summary["rows"]["top_queues"] == 6
    assert summary["rows"]["lifetimes"] == 8
    assert summary["rows"]["event_counts"] == 6
    assert summary["rows"]["windows"] > 0
    assert summary["resets"] == 1 and summary["gaps"] == 1
    for table in ("rates", "windows", "top_queues", "event_counts", "lifetimes"):
        path = Path(summary["paths"][table])
        assert path == out / table and list(path.glob("*.parquet")), table
        assert spark.read.parquet(str(path)).count() == summary["rows"][table]
    rates = {(r["broker"], r["object_id"], r["statistic"], r["ts"]): r["rate"]
             for r in spark.read.parquet(str(out / "rates")).collect()}
    assert rates == pytest.approx({k: d / s for k, (d, s) in EXPECTED_RATES.items()},
                                  abs=1e-9)
    report = out / "report.html"
    assert Path(summary["paths"]["report"]) == report and report.exists()
    images = _html_images(report)
    assert len(images) == 3 and len(summary["plots"]) == 3
    for image in images:
        png = out / image
        assert png.exists() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", image
        assert str(png) in summary["plots"]
    text = report.read_text(encoding="utf-8")
    assert "qb" in text and "Top queues by enqueue rate" in text
    # a second run into the same folder replaces the tables
    again = run_pipeline(spark, str(dataset), str(out), since=S(400), top_n=3)
    assert again["rows"]["rates"] == 1
    assert again["inputs"]["events"] == 0


def test_run_pipeline_on_an_empty_dataset(spark: Any, tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    summary = run_pipeline(spark, str(tmp_path / "data"), str(tmp_path / "out"))
    assert summary["inputs"] == {"samples": 0, "events": 0}
    assert all(n == 0 for n in summary["rows"].values())
    assert len(_html_images(tmp_path / "out" / "report.html")) == 3


def test_qmf_pipeline_command(dataset: Path, tmp_path: Path) -> None:
    out = tmp_path / "cli-out"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
    proc = subprocess.run(
        [sys.executable, "-m", "qmf_async.tools.cli", "pipeline", "--dataset", str(dataset),
         "--out", str(out), "--master", "local[2]", "--top", "2",
         "--conf", "spark.driver.extraJavaOptions=" + QUICK_JVM[
             "spark.driver.extraJavaOptions"],
         "--since", "2024-05-01T23:59:00Z", "--until", str(S(3600)),
         "--bind-host", "127.0.0.1"],
        capture_output=True, text=True, timeout=300, env=env, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (out / "report.html").exists()
    assert "report.html" in proc.stdout
    assert spark_rows(out / "top_queues") == 4


def spark_rows(path: Path) -> int:
    return pq.read_table(str(path)).num_rows


def test_qmf_pipeline_command_rejects_a_bad_time(dataset: Path, tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run(
        [sys.executable, "-m", "qmf_async.tools.cli", "pipeline", "--dataset", str(dataset),
         "--out", str(tmp_path / "x"), "--since", "yesterday-ish"],
        capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 2
    assert "yesterday-ish" in proc.stderr



# ---------------------------------------------------------------- end to end: collector

def _import_demo() -> Any:
    return import_example("demo_agent")


@pytest.fixture(scope="module")
def bus_url(amqp_url: str) -> Iterator[str]:
    """``amqp_url`` on a temporary vhost of this module (deleted afterwards), or
    ``amqp_url`` itself when rabbitmqctl cannot make one."""
    with private_vhost(amqp_url, "qmf-pipeline-test") as url:
        yield url


@pytest.mark.integration
async def test_collect_from_the_demo_agent_then_rates(bus_url: str, spark: Any,
                                                     tmp_path: Path) -> None:
    import asyncio

    from qmf_async import Session
    from qmf_async.agent.broker import ManagementBroker
    from qmf_async.tools.collector import Collector

    interval = 0.2
    demo = _import_demo()
    data = tmp_path / "dataset"
    role = ManagementBroker(bus_url, broker_id=uuid.uuid4(), interval=interval,
                            agent_timeout=3.0, label=f"pipeline-test-role-{uuid.uuid4().hex[:8]}")
    await role.start()
    try:
        agent, model = demo.build_demo_agent(
            bus_url, interval=interval, queues=1, seed=5, attach_timeout=1.0,
            label=f"pipeline-test-demo-{uuid.uuid4().hex[:8]}")
        await model.start()
        try:
            session = Session(manage_connections=True, agent_interval=0.3, timeout=5.0)
            collector = Collector(session, data, batch_rows=500, batch_seconds=0.3)
            stop = asyncio.Event()
            task = asyncio.ensure_future(collector.run(stop))
            try:
                await session.add_broker(bus_url, timeout=5.0)
                # a few intervals of statistics of the demo's queues
                await wait_until(lambda: collector.received >= 60, timeout=20,
                                 interval=0.1, message="60 updates collected")
                await asyncio.sleep(8 * interval)
            finally:
                stop.set()
                await asyncio.wait_for(task, 15)
                await session.close()
            banks = f"{agent.broker_bank}.{agent.agent_bank}"
        finally:
            await model.stop()
    finally:
        await role.stop(2.0)
    assert collector.stats.written > 0

    samples, _events = read_dataset(spark, str(data))
    samples = samples.filter(samples.agent == banks)  # only our demo agent's objects
    rates = rows(counter_rates(samples, statistics=[E]))
    queues = {r["name"]: r for r in rates if r["class_name"] == "queue"}
    assert rates and all(r["rate"] >= 0 for r in rates)
    assert all(r["dt_seconds"] > 0 for r in rates)
    moving = {r["name"] for r in rates if r["class_name"] == "queue" and r["rate"] > 0}
    assert moving, f"no queue with a positive enqueue rate: {sorted(queues)}"
    top = rows(top_queues(samples, n=3))
    best = next(r for r in top if r["metric"] == "enqueue_rate" and r["rank"] == 1)
    assert best["value"] > 0 and best["name"] in moving
    summary = run_pipeline(spark, str(data), str(tmp_path / "out"))
    assert summary["rows"]["rates"] > 0 and (tmp_path / "out" / "report.html").exists()
