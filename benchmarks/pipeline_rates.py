"""Throughput and memory of the Spark rate job (qmf_async.tools.pipeline.counter_rates).

    python benchmarks/pipeline_rates.py [--rows 10000000] [--objects 10000]
        [--master local[*] | --standalone] [--driver-memory 6g]
        [--executor-memory 5g] [--dir DIR] [--keep] [--pipeline] [--json]

Generates ``--rows`` statistics samples (kind ``i``) of ``--objects`` queues in the
collector's layout (``samples/date=.../class=org.apache.qpid.broker:queue/``, about one
million rows per Parquet file, written with pyarrow in chunks; one properties row per
queue for the names), then times ``counter_rates(samples)`` + writing the rates as
Parquet -- one Spark action, from reading the dataset to the last file written.

Each sample carries four statistics: three counters (msgTotalEnqueues,
msgTotalDequeues, byteTotalEnqueues; every tenth queue resets its enqueue counters
every 500 samples) and one gauge (msgDepth, not a rate), so the job writes about
3 x rows rate rows.  Samples are 10 s apart.

Reported: wall time of the job, samples/s and rate rows/s, the JVM's CPU time, peak
RSS of the Spark JVM and of this Python process while Spark runs (sampled every 0.2 s,
with psutil when installed, else from /proc) and of this process over the whole run
(``resource.getrusage``: the data generation included), and Spark's own peak
execution memory (largest stage) and peak JVM heap from its status store when the
JVM exposes them.

``--standalone`` starts a Spark standalone cluster on 127.0.0.1 (one master, one
worker with every core, ``benchmarks/spark_cluster.py``) and runs the job there
(``--master spark://127.0.0.1:PORT``, executors of ``--executor-memory``); the JVM
figures then are the driver's and the executor's (the worker's children).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import resource
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run from a checkout without installing
    sys.path.insert(0, str(ROOT))
if str(ROOT / "benchmarks") not in sys.path:  # spark_cluster beside this file
    sys.path.insert(0, str(ROOT / "benchmarks"))

NS = 1_000_000_000
T0 = 1_714_521_600 * NS  # 2024-05-01T00:00:00Z
STEP = 10 * NS
PKG = "org.apache.qpid.broker"
STATS = ("msgTotalEnqueues", "msgTotalDequeues", "byteTotalEnqueues", "msgDepth")
CHUNK = 1_000_000


# ------------------------------------------------------------------ data generation

def _schema() -> Any:
    import pyarrow as pa

    return pa.schema([
        ("broker", pa.string()), ("agent", pa.string()), ("object_id", pa.string()),
        ("boot_sequence", pa.int32()), ("package", pa.string()),
        ("class_name", pa.string()), ("class_hash", pa.string()), ("kind", pa.string()),
        ("sample_ts", pa.int64()), ("create_ts", pa.int64()), ("delete_ts", pa.int64()),
        ("props", pa.map_(pa.string(), pa.string())),
        ("stats_int", pa.map_(pa.string(), pa.int64())),
        ("stats_float", pa.map_(pa.string(), pa.float64())),
        ("stats_text", pa.map_(pa.string(), pa.string())),
        ("received_ts", pa.int64()),
    ])


def _empty_maps(n: int, key: Any, item: Any) -> Any:
    import numpy as np
    import pyarrow as pa

    return pa.MapArray.from_arrays(pa.array(np.zeros(n + 1, dtype=np.int32)),
                                   pa.array([], key), pa.array([], item))


def generate(root: Path, rows: int, objects: int) -> dict[str, Any]:
    """Write the dataset; returns what was written."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    schema = _schema()
    samples_per_object = max(1, rows // objects)
    ids = pa.array([f"bench-{j:06d}" for j in range(objects)])
    files = 0
    written = 0
    per_chunk = max(1, CHUNK // objects)  # samples of every object per file
    for k0 in range(0, samples_per_object, per_chunk):
        k1 = min(samples_per_object, k0 + per_chunk)
        k = np.repeat(np.arange(k0, k1, dtype=np.int64), objects)
        j = np.tile(np.arange(objects, dtype=np.int64), k1 - k0)
        n = len(k)
        ts = T0 + k * STEP + (j % 1000) * 1_000_000
        per_s = (j % 97 + 1)
        enq = np.where(j % 10 == 0, (k % 500) * per_s * 10, k * per_s * 10)
        deq = k * per_s * 9
        depth = (k * 7 + j) % 100
        values = np.empty(n * len(STATS), dtype=np.int64)
        values[0::4], values[1::4], values[2::4], values[3::4] = enq, deq, enq * 512, depth
        keys = pa.DictionaryArray.from_arrays(
            pa.array(np.tile(np.arange(len(STATS), dtype=np.int32), n)),
            pa.array(STATS)).dictionary_decode()
        stats = pa.MapArray.from_arrays(
            pa.array(np.arange(0, n * len(STATS) + 1, len(STATS), dtype=np.int32)),
            keys, pa.array(values))
        table = pa.table({
            "broker": pa.repeat(pa.scalar("bench"), n),
            "agent": pa.repeat(pa.scalar("1.0"), n),
            "object_id": pc.take(ids, pa.array(j)),
            "boot_sequence": pa.repeat(pa.scalar(1, pa.int32()), n),
            "package": pa.repeat(pa.scalar(PKG), n),
            "class_name": pa.repeat(pa.scalar("queue"), n),
            "class_hash": pa.repeat(pa.scalar("00" * 16), n),
            "kind": pa.repeat(pa.scalar("i"), n),
            "sample_ts": pa.array(ts),
            "create_ts": pa.repeat(pa.scalar(T0 - 3600 * NS, pa.int64()), n),
            "delete_ts": pa.repeat(pa.scalar(0, pa.int64()), n),
            "props": _empty_maps(n, pa.string(), pa.string()),
            "stats_int": stats,
            "stats_float": _empty_maps(n, pa.string(), pa.float64()),
            "stats_text": _empty_maps(n, pa.string(), pa.string()),
            "received_ts": pa.array(ts + 1_000_000),
        }, schema=schema)
        date = time.strftime("%Y-%m-%d", time.gmtime(int(ts[0]) // NS))
        folder = root / "samples" / f"date={date}" / f"class={PKG}:queue"
        folder.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, folder / f"part-{files:05d}.parquet")
        files += 1
        written += n
    # one properties row per queue: the names
    props = pa.MapArray.from_arrays(
        pa.array(np.arange(0, objects + 1, dtype=np.int32)),
        pa.repeat(pa.scalar("name"), objects), ids)
    table = pa.table({
        "broker": pa.repeat(pa.scalar("bench"), objects),
        "agent": pa.repeat(pa.scalar("1.0"), objects), "object_id": ids,
        "boot_sequence": pa.repeat(pa.scalar(1, pa.int32()), objects),
        "package": pa.repeat(pa.scalar(PKG), objects),
        "class_name": pa.repeat(pa.scalar("queue"), objects),
        "class_hash": pa.repeat(pa.scalar("00" * 16), objects),
        "kind": pa.repeat(pa.scalar("c"), objects),
        "sample_ts": pa.repeat(pa.scalar(T0, pa.int64()), objects),
        "create_ts": pa.repeat(pa.scalar(T0 - 3600 * NS, pa.int64()), objects),
        "delete_ts": pa.repeat(pa.scalar(0, pa.int64()), objects),
        "props": props,
        "stats_int": _empty_maps(objects, pa.string(), pa.int64()),
        "stats_float": _empty_maps(objects, pa.string(), pa.float64()),
        "stats_text": _empty_maps(objects, pa.string(), pa.string()),
        "received_ts": pa.repeat(pa.scalar(T0, pa.int64()), objects),
    }, schema=schema)
    date = time.strftime("%Y-%m-%d", time.gmtime(T0 // NS))
    folder = root / "samples" / f"date={date}" / f"class={PKG}:queue"
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, folder / "part-props.parquet")
    size = sum(f.stat().st_size for f in (root / "samples").rglob("*.parquet"))
    return {"samples": written, "objects": objects, "samples_per_object": samples_per_object,
            "files": files + 1, "bytes": size}


# ------------------------------------------------------------------ memory sampling

def _rss(pid: int) -> int:
    try:
        import psutil

        return int(psutil.Process(pid).memory_info().rss)
    except ImportError:
        pass
    except Exception:
        return 0
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _java_pids() -> list[int]:
    """Spark JVMs started by this process: its java descendants (the local JVM; with
    ``--standalone`` the master, the worker and the executors it launched)."""
    me = os.getpid()
    parent: dict[int, int] = {}
    comm: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            parent[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
            comm[int(entry.name)] = stat.split("(", 1)[1].rsplit(")", 1)[0]
        except (OSError, IndexError, ValueError):
            continue
    pids = []
    for pid in parent:
        up, hops = parent.get(pid, 0), 0
        while up not in (0, 1, me) and hops < 10:
            up, hops = parent.get(up, 0), hops + 1
        if up == me and comm.get(pid) == "java":
            pids.append(pid)
    return pids


class PeakSampler(threading.Thread):
    """Samples the RSS of this process and of its JVM every ``period`` seconds."""

    def __init__(self, period: float = 0.2) -> None:
        super().__init__(daemon=True)
        self.period = period
        self.peak_python = 0
        self.peak_jvm = 0
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.is_set():
            self.peak_python = max(self.peak_python, _rss(os.getpid()))
            jvm = sum(_rss(pid) for pid in _java_pids())
            self.peak_jvm = max(self.peak_jvm, jvm)
            self._stop_event.wait(self.period)

    def stop(self) -> None:
        self._stop_event.set()
        self.join()


def _jvm_cpu() -> float:
    """CPU seconds (user + system) used so far by this process's JVMs."""
    total = 0.0
    for pid in _java_pids():
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, ValueError):
            continue
    return total


def spark_memory(spark: Any) -> dict[str, Any]:
    """Peak execution memory (largest stage) and peak JVM heap from Spark's status
    store, through py4j; empty when this Spark does not expose them."""
    out: dict[str, Any] = {}
    try:
        sc = spark.sparkContext
        store = sc._jsc.sc().statusStore()
        try:
            stages = store.stageList(None)
        except Exception:
            # quantiles, task statuses), no defaults through py4j
            stages = store.stageList(None, False, False, sc._gateway.new_array(
                sc._jvm.double, 0), sc._jvm.java.util.ArrayList())
        peaks = [stages.apply(i).peakExecutionMemory() for i in range(stages.size())]
        out["peak_execution_memory_bytes"] = max(peaks) if peaks else 0
    except Exception as exc:
        out["peak_execution_memory_error"] = type(exc).__name__
    try:
        executors = store.executorList(True)
        heap = 0
        for i in range(executors.size()):
            metrics = executors.apply(i).peakMemoryMetrics()
            if metrics.isDefined():
                heap = max(heap, metrics.get().getMetricValue("JVMHeapMemory"))
        out["peak_jvm_heap_bytes"] = heap
    except Exception as exc:
        out["peak_jvm_heap_error"] = type(exc).__name__
    return out


# ------------------------------------------------------------------ main

def _mib(n: float) -> str:
    return f"{n / 2**20:,.0f} MiB"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=10_000_000, help="samples (default 10M)")
    p.add_argument("--objects", type=int, default=10_000, help="queues (default 10,000)")
    p.add_argument("--master", default="local[*]")
    p.add_argument("--standalone", action="store_true",
                   help="start a standalone cluster on 127.0.0.1 and run the job there")
    p.add_argument("--executor-memory", default="5g",
                   help="executor memory with --standalone (5g)")
    p.add_argument("--driver-memory", default="6g", help="Spark driver memory (6g)")
    p.add_argument("--dir", help="work folder (default: a temporary one)")
    p.add_argument("--keep", action="store_true", help="keep the generated data")
    p.add_argument("--pipeline", action="store_true",
                   help="then also time run_pipeline (every job and the report)")
    p.add_argument("--json", action="store_true", help="also print one JSON line")
    args = p.parse_args()

    from qmf_async.tools.pipeline import build_spark, counter_rates, read_dataset, run_pipeline

    work = Path(args.dir or tempfile.mkdtemp(prefix="qmf-pipeline-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    data, out = work / "data", work / "rates"
    shutil.rmtree(data, ignore_errors=True)
    shutil.rmtree(out, ignore_errors=True)
    result: dict[str, Any] = {"benchmark": "pipeline_rates", "nproc": os.cpu_count(),
                              "python": platform.python_version(), "master": args.master,
                              "driver_memory": args.driver_memory}
    stack = contextlib.ExitStack()
    try:
        started = time.monotonic()
        result["dataset"] = generate(data, args.rows, args.objects)
        result["generate_seconds"] = round(time.monotonic() - started, 2)
        print(f"generated {result['dataset']['samples']:,} samples of "
              f"{args.objects:,} queues in {result['generate_seconds']:.1f} s "
              f"({_mib(result['dataset']['bytes'])} of Parquet)", flush=True)

        config: dict[str, str] = {}
        if args.standalone:
            from spark_cluster import StandaloneCluster

            cluster = StandaloneCluster(work / "cluster", cores=os.cpu_count() or 1,
                                        memory=args.executor_memory).start()
            stack.callback(cluster.stop)
            args.master = result["master"] = cluster.master_url
            result["executor_memory"] = args.executor_memory
            config["spark.executor.memory"] = args.executor_memory
        sampler = PeakSampler()
        sampler.start()
        started = time.monotonic()
        spark = build_spark(args.master, app_name="qmf-pipeline-bench",
                            driver_memory=args.driver_memory, config=config)
        result["spark_start_seconds"] = round(time.monotonic() - started, 2)
        try:
            import pyspark

            result["pyspark"] = pyspark.__version__
            jvm_cpu0 = _jvm_cpu()
            started = time.monotonic()
            samples, _events = read_dataset(spark, str(data))
            counter_rates(samples).write.mode("overwrite").parquet(str(out))
            elapsed = time.monotonic() - started
            result["jvm_cpu_seconds"] = round(_jvm_cpu() - jvm_cpu0, 2)
            result.update(spark_memory(spark))
            peak_jvm, peak_python = sampler.peak_jvm, sampler.peak_python
            if args.pipeline:
                sampler.peak_jvm = sampler.peak_python = 0
                started = time.monotonic()
                summary = run_pipeline(spark, str(data), str(work / "pipeline"))
                result["pipeline_seconds"] = round(time.monotonic() - started, 2)
                result["pipeline_rows"] = summary["rows"]
                result["pipeline_jvm_peak_rss_bytes"] = sampler.peak_jvm
        finally:
            spark.stop()
            sampler.stop()
        import pyarrow.parquet as pq

        out_rows = sum(pq.read_metadata(f).num_rows for f in out.glob("*.parquet"))
        samples_n = result["dataset"]["samples"]
        result.update({
            "job_seconds": round(elapsed, 2),
            "samples_per_second": round(samples_n / elapsed),
            "rate_rows": out_rows,
            "rate_rows_per_second": round(out_rows / elapsed),
            # during Spark (sampled) and over the whole run, generation included
            "python_peak_rss_bytes": peak_python,
            "python_max_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
            "jvm_peak_rss_bytes": peak_jvm,
            "load_average": os.getloadavg(),
        })
        print(f"counter_rates + write: {elapsed:.1f} s for {samples_n:,} samples -> "
              f"{out_rows:,} rate rows")
        print(f"  {result['samples_per_second']:,} samples/s, "
              f"{result['rate_rows_per_second']:,} rate rows/s "
              f"(Spark start {result['spark_start_seconds']:.1f} s, not included)")
        print(f"  JVM CPU time {result['jvm_cpu_seconds']:.1f} s "
              f"({samples_n / max(result['jvm_cpu_seconds'], 1e-9):,.0f} samples per "
              f"CPU second)")
        print(f"  peak RSS: JVM {_mib(result['jvm_peak_rss_bytes'])}, Python "
              f"{_mib(result['python_peak_rss_bytes'])} while Spark ran "
              f"({_mib(result['python_max_rss_bytes'])} with the generation)")
        if "peak_execution_memory_bytes" in result:
            print(f"  Spark peak execution memory (largest stage): "
                  f"{_mib(result['peak_execution_memory_bytes'])}")
        if result.get("peak_jvm_heap_bytes"):
            print(f"  Spark peak JVM heap: {_mib(result['peak_jvm_heap_bytes'])}")
        print(f"  load average {', '.join(f'{x:.1f}' for x in result['load_average'])}"
              f" on {os.cpu_count()} cores")
        if "pipeline_seconds" in result:
            print(f"run_pipeline (every table and the report): "
                  f"{result['pipeline_seconds']:.1f} s, JVM peak RSS "
                  f"{_mib(result['pipeline_jvm_peak_rss_bytes'])}; rows "
                  f"{result['pipeline_rows']}")
        if args.json:
            print(json.dumps(result, sort_keys=True))
    finally:
        stack.close()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
