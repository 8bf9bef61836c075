"""Does ``qmf collect`` keep up with a qpidd of 10,000 queues?

    PYTHONPATH=. .venv/bin/python benchmarks/collect_qpidd.py [--queues 10000]
        [--pub-interval 2] [--rate 2500] [--seconds 60] [--json FILE] [--quick]

Starts a fresh qpidd with the stock management settings (QMF v1 off, v2 on) and
``--mgmt-pub-interval`` 2 s, creates ``--queues`` queues (pipelined 0-10 declares,
``benchmarks/qpidd/make_queues.py``), and keeps ``--rate`` messages a second going to
them in turn (``benchmarks/qpidd/traffic.py``, python-qpid-proton), so that about
``rate x interval`` queues change statistics in every publication.  Then ``qmf
collect`` runs ``--seconds`` in its own process (measured from outside: CPU, peak RSS)
and the dataset it wrote is read back with pyarrow:

- rows written and rows/s, and its counters (``dropped`` must be 0);
- queue statistics rows a second, from the first queue row to the last;
- when the first queue row came (a QMF v2 session holds the data of a class until
  its schema arrives, and a busy qpidd answers the schema request late);
- the lag from qpidd's sample time to the collector taking the update
  (``received_ts - sample_ts``, median and 99th percentile): a collector that falls
  behind shows a lag that grows over the run (first and last ten seconds of queue
  rows compared);
- the CPU of the collector and of qpidd (and the load average).

``--quick``: 200 queues, 100 msg/s, 8 s (the smoke test, tests/test_bench_collect.py).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run from a checkout without installing
    sys.path.insert(0, str(ROOT))

from benchmarks.qpidd.broker import create_queues  # noqa: E402
from benchmarks.qpidd.v2 import V2Qpidd, run_measured  # noqa: E402

NS = 1_000_000_000


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def read_back(dataset: Path, start_ns: int) -> dict[str, Any]:
    """Rows, queue updates per publication and the lag, from the Parquet files
    (``start_ns``: when the collector was started)."""
    import pyarrow.dataset as ds

    samples = ds.dataset(dataset / "samples", format="parquet", partitioning="hive")
    table = samples.to_table(columns=["class_name", "kind", "sample_ts", "received_ts"])
    rows = table.to_pylist()
    queue_i = [r for r in rows if r["class_name"] == "queue" and r["kind"] == "i"]
    lags = [(r["received_ts"] - r["sample_ts"]) / NS for r in queue_i]
    out: dict[str, Any] = {"rows": len(rows), "queue_stat_rows": len(queue_i),
                           "props_rows": sum(1 for r in rows if r["kind"] == "c")}
    if queue_i:
        t0 = min(r["received_ts"] for r in queue_i)
        t1 = max(r["received_ts"] for r in queue_i)
        early = [(r["received_ts"] - r["sample_ts"]) / NS for r in queue_i
                 if r["received_ts"] < t0 + 10 * NS]
        late = [(r["received_ts"] - r["sample_ts"]) / NS for r in queue_i
                if r["received_ts"] > t1 - 10 * NS]
        out.update({
            "first_queue_row_after_s": round((t0 - start_ns) / NS, 2),
            "lag_p50_s": round(_percentile(lags, 0.5), 3),
            "lag_p99_s": round(_percentile(lags, 0.99), 3),
            "lag_max_s": round(max(lags), 3),
            "lag_p99_first_10s": round(_percentile(early, 0.99), 3),
            "lag_p99_last_10s": round(_percentile(late, 0.99), 3),
            # from the first queue row to the last
            "queue_rows_per_s": round(len(queue_i) / max((t1 - t0) / NS, 1e-9), 1),
        })
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--queues", type=int, default=10_000)
    p.add_argument("--pub-interval", type=int, default=2)
    p.add_argument("--rate", type=float, default=2500.0, help="messages a second")
    p.add_argument("--seconds", type=float, default=60.0, help="collector run")
    p.add_argument("--json", metavar="FILE", help="also write the result as JSON")
    p.add_argument("--quick", action="store_true", help="200 queues, 100 msg/s, 8 s")
    p.add_argument("--keep", metavar="DIR", help="write the dataset to DIR and keep it")
    p.add_argument("--no-snapshot", action="store_true",
                   help="run qmf collect --no-snapshot (no queries for existing objects)")
    args = p.parse_args()
    if args.quick:
        args.queues, args.rate, args.seconds = 200, 100.0, 8.0

    result: dict[str, Any] = {"benchmark": "collect_qpidd", "queues": args.queues,
                              "pub_interval": args.pub_interval, "rate": args.rate,
                              "seconds": args.seconds, "nproc": os.cpu_count(),
                              "snapshot": not args.no_snapshot,
                              "python": platform.python_version()}
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with tempfile.TemporaryDirectory(prefix="qmf-collect-bench-") as tmp, \
            V2Qpidd(qmf1=False, pub_interval=args.pub_interval,
                    workdir=Path(tmp) / "qpidd") as broker:
        made = create_queues(broker.port, args.queues)
        result["create_seconds"] = made.get("seconds")
        traffic = subprocess.Popen(
            [sys.executable, str(ROOT / "benchmarks" / "qpidd" / "traffic.py"),
             "--port", str(broker.port), "--rate", str(args.rate), "--queues",
             str(args.queues), "--churn", "0"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
        try:
            time.sleep(2 * args.pub_interval)  # traffic under way before measuring
            qpidd_cpu0 = broker.cpu()
            load0 = os.getloadavg()
            dataset = Path(args.keep) if args.keep else Path(tmp) / "dataset"
            start_ns = time.time_ns()
            run = run_measured(
                [sys.executable, "-m", "qmf_async.tools.cli", "collect", broker.url,
                 "--out", str(dataset), "--duration", str(args.seconds), "--json",
                 "--quiet", *(["--no-snapshot"] if args.no_snapshot else [])],
                env=env, timeout=args.seconds + 120)
            qpidd_cpu = broker.cpu() - qpidd_cpu0
        finally:
            traffic.terminate()
            try:
                traffic.wait(20)
            except subprocess.TimeoutExpired:
                traffic.kill()
                traffic.wait(20)
        if run["returncode"] != 0:
            raise RuntimeError(f"qmf collect failed: {run['stderr'][-800:]}")
        counters = json.loads(run["stdout"])
        back = read_back(dataset, start_ns)
    result.update({
        "collector": {k: counters[k] for k in ("received", "written", "dropped",
                                               "subscription_dropped", "lost", "files")},
        "collector_cpu_s": round(run["cpu"], 2),
        "collector_cpu_share": round(run["cpu"] / run["seconds"], 3),
        "collector_max_rss_mib": round(run["max_rss_kb"] / 1024, 1),
        "wall_s": round(run["seconds"], 2),
        "rows_per_s": round(counters["written"] / args.seconds, 1),
        "qpidd_cpu_s": round(qpidd_cpu, 2),
        "load_average": [load0, os.getloadavg()],
        **back,
    })
    print(json.dumps(result, indent=2, sort_keys=True))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
