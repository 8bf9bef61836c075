"""Smoke runs of the telemetry benchmarks at a tiny size: ``benchmarks/collect_qpidd.py
--quick`` (``qmf collect`` against a stock qpidd with many queues and traffic) and
``benchmarks/pipeline_rates.py --standalone`` (the rate job on a Spark standalone cluster
started on 127.0.0.1).  The figures themselves are in docs/benchmarks.md, "Telemetry at
scale"."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks.qpidd.broker import QPIDD_HOME, QpiddError, python2, qpidd_binary

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
ENV = dict(os.environ, PYTHONPATH=str(ROOT))


def _unavailable(why: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"CI must run the telemetry benchmark smoke tests: {why}")
    pytest.skip(why)


def _run(args: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run([sys.executable, *args], capture_output=True, text=True,
                              timeout=timeout, env=ENV, cwd=ROOT, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{args[0]} did not finish within {timeout}s", pytrace=False)


@pytest.mark.qpidd
def test_collect_benchmark_quick_run(tmp_path: Path) -> None:
    if qpidd_binary() is None:
        _unavailable(f"no qpidd build at {QPIDD_HOME} (../shared/qpidd)")
    try:
        python2()
    except QpiddError as exc:
        _unavailable(str(exc))
    out = tmp_path / "collect.json"
    done = _run([str(ROOT / "benchmarks" / "collect_qpidd.py"), "--quick", "--json",
                 str(out)], timeout=200)
    assert done.returncode == 0, done.stderr[-2000:]
    s: dict[str, Any] = json.loads(out.read_text())
    assert s["queues"] == 200
    assert s["collector"]["dropped"] == 0 and s["collector"]["written"] > 0
    # every queue was named by a properties row, and statistics kept coming
    assert s["props_rows"] >= s["queues"]
    assert s["queue_stat_rows"] >= s["queues"] and s["queue_rows_per_s"] > 0
    assert s["collector_cpu_s"] > 0 and s["rows_per_s"] > 0 and s["lag_p50_s"] >= 0


def test_rate_benchmark_on_a_standalone_cluster(tmp_path: Path) -> None:
    pytest.importorskip("pyspark")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        _unavailable("Spark needs Java (17 or later)")
    done = _run([str(ROOT / "benchmarks" / "pipeline_rates.py"), "--rows", "20000",
                 "--objects", "20", "--standalone", "--executor-memory", "768m",
                 "--driver-memory", "768m", "--dir", str(tmp_path), "--json"], timeout=400)
    assert done.returncode == 0, done.stderr[-2000:]
    s: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    assert s["master"].startswith("spark://127.0.0.1:")
    assert s["dataset"]["samples"] == 20_000
    # three counters a sample, less the first sample of each queue and the resets
    assert 3 * (20_000 - 20) * 0.95 < s["rate_rows"] <= 3 * (20_000 - 20)
    assert s["samples_per_second"] > 0 and s["jvm_cpu_seconds"] > 0
