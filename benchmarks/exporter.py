"""``qmf exporter`` at scale: a qpidd of ``--queues`` queues (10,000 for the figures in
docs/benchmarks.md), traffic on them, and one exporter serving them.

    PYTHONPATH=. .venv/bin/python benchmarks/exporter.py [--queues 10000] [--brokers 1]

Starts ``--brokers`` qpidds (QMF v2, ``--mgmt-pub-interval`` 2 s), creates ``--queues``
queues on each (pipelined 0-10 declares, ``benchmarks/qpidd/make_queues.py``), keeps
``--rate`` messages a second going to them, and runs one ``qmf exporter`` for all.
Measured: the time until every queue is served; ``--scrapes`` scrapes (wall time of the
HTTP GET, bytes, samples); the exporter's CPU per second over ``--seconds`` with the
traffic and, as the baseline of the same run, over as long without it; its resident
memory; and, for the same number of samples, how long prometheus-client's own writer
(``generate_latest``) takes: the ratio is why the object families have a writer of
their own.  Prints one JSON document.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run from a checkout without installing
    sys.path.insert(0, str(ROOT))

from benchmarks.qpidd.broker import create_queues  # noqa: E402
from benchmarks.qpidd.v2 import V2Qpidd  # noqa: E402


def _cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _scrape(url: str) -> tuple[float, str]:
    """(seconds, text) of one scrape as Prometheus makes it (gzip accepted)."""
    started = time.perf_counter()
    request = urllib.request.Request(url, headers={"Accept-Encoding": "gzip"})
    with urllib.request.urlopen(request, timeout=60) as r:
        raw = r.read()
        zipped = r.headers.get("Content-Encoding") == "gzip"
    seconds = time.perf_counter() - started
    return seconds, (gzip.decompress(raw) if zipped else raw).decode()


def _value(body: str, name: str) -> float:
    found = re.search(rf"^{name} (\S+)$", body, re.M)
    return float(found.group(1)) if found else 0.0


def _generic_writer_seconds(body: str) -> float:
    """prometheus-client's writer on the same samples (re-parsed, then written)."""
    from prometheus_client import generate_latest
    from prometheus_client.parser import text_string_to_metric_families
    from prometheus_client.registry import CollectorRegistry

    fams = list(text_string_to_metric_families(body))

    class Again:
        def collect(self) -> Any:
            return iter(fams)

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Again())  # type: ignore[arg-type]
    started = time.perf_counter()
    generate_latest(registry)
    return time.perf_counter() - started


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--queues", type=int, default=10_000, help="queues on each broker")
    p.add_argument("--brokers", type=int, default=1)
    p.add_argument("--rate", type=float, default=1000.0, help="messages a second, each broker")
    p.add_argument("--seconds", type=float, default=20.0, help="each CPU measurement")
    p.add_argument("--scrapes", type=int, default=10)
    p.add_argument("--json", metavar="FILE", help="also write the result as JSON")
    p.add_argument("--no-writer-baseline", dest="writer_baseline", action="store_false",
                   help="skip timing prometheus-client's writer on the same samples "
                        "(seconds of CPU at this size; benchmarks/before_after.py)")
    args = p.parse_args()
    result: dict[str, Any] = {"benchmark": "exporter", "queues": args.queues,
                              "brokers": args.brokers, "rate": args.rate,
                              "nproc": os.cpu_count(), "python": platform.python_version()}
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with tempfile.TemporaryDirectory(prefix="qmf-exporter-bench-") as tmp:
        brokers = []
        traffic: list[subprocess.Popen[bytes]] = []
        exporter = None
        try:
            for i in range(args.brokers):
                broker = V2Qpidd(qmf1=False, pub_interval=2, workdir=Path(tmp) / f"q{i}")
                broker.__enter__()
                brokers.append(broker)
                create_queues(broker.port, args.queues)
            exporter = subprocess.Popen(
                [sys.executable, "-m", "qmf_async.tools.cli", "exporter", "--listen",
                 "127.0.0.1:0", "--snapshot-timeout", "300",
                 *[a for b in brokers for a in ("-b", f"127.0.0.1:{b.port}")]],
                stderr=subprocess.PIPE, env=env)
            assert exporter.stderr is not None
            line = exporter.stderr.readline().decode()
            port = int(re.search(r":(\d+)/metrics", line).group(1))  # type: ignore[union-attr]
            url = f"http://127.0.0.1:{port}/metrics"
            started = time.monotonic()
            want = args.queues * args.brokers
            while True:
                _, body = _scrape(url)
                served = len(re.findall(r"^qpidd_queue_messages\{", body, re.M))
                if served >= want:
                    break
                if time.monotonic() - started > 600:
                    raise RuntimeError(f"only {served} of {want} queues served after 600 s")
                time.sleep(1)
            result["ready_s"] = round(time.monotonic() - started, 2)
            # baseline: no traffic
            cpu0 = _cpu(exporter.pid)
            time.sleep(args.seconds)
            result["idle_cpu_share"] = round((_cpu(exporter.pid) - cpu0) / args.seconds, 4)
            for b in brokers:
                traffic.append(subprocess.Popen(
                    [sys.executable, str(ROOT / "benchmarks" / "qpidd" / "traffic.py"),
                     "--port", str(b.port), "--rate", str(args.rate), "--queues",
                     str(args.queues), "--churn", "0"],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env))
            time.sleep(4)
            _, before = _scrape(url)
            cpu0 = _cpu(exporter.pid)
            time.sleep(args.seconds)
            cpu = _cpu(exporter.pid) - cpu0
            _, after = _scrape(url)
            updates = (_value(after, "qmf_exporter_updates_received_total")
                       - _value(before, "qmf_exporter_updates_received_total"))
            result["busy_cpu_share"] = round(cpu / args.seconds, 4)
            result["updates_per_s"] = round(updates / args.seconds, 1)
            result["cpu_us_per_update"] = round(cpu / updates * 1e6, 1) if updates else None
            result["dropped"] = _value(after, "qmf_exporter_updates_dropped_total")
            times = []
            for _ in range(args.scrapes):
                seconds, body = _scrape(url)
                times.append(seconds)
                time.sleep(0.5)
            samples = sum(1 for ln in body.splitlines() if ln and not ln.startswith("#"))
            generic = _generic_writer_seconds(body) if args.writer_baseline else None
            render_s = _value(body, "qmf_exporter_scrape_duration_seconds")
            result.update({
                "scrape_s_median": round(statistics.median(times), 3),
                "scrape_s_max": round(max(times), 3),
                "render_s": render_s,
                "render_cpu_s": _value(body, "qmf_exporter_scrape_cpu_seconds"),
                "samples": samples, "body_mib": round(len(body) / 2**20, 2),
                "prometheus_client_writer_s": None if generic is None else round(generic, 3),
                "writer_ratio": None if generic is None
                else round(generic / max(1e-9, render_s), 1),
                "rss_mib": round(_rss_mib(exporter.pid), 1),
                "load_average": os.getloadavg(),
                "up": len(re.findall(r"^qpidd_up\{.*\} 1(\.0)?$", body, re.M)),
            })
        finally:
            for t in traffic:
                t.terminate()
                t.wait(20)
            if exporter is not None:
                exporter.terminate()
                exporter.wait(30)
            for b in brokers:
                b.__exit__(None, None, None)
    print(json.dumps(result, indent=2, sort_keys=True))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
