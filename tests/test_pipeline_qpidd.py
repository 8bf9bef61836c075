"""Ground truth on a genuine qpidd: known traffic in, ``qmf collect`` + ``qmf pipeline``
out, rates compared with the truth.

A plain AMQP 1.0 client (``benchmarks/qpidd/known_traffic.py``) sends 300
messages a second to one queue and receives 100 a second from it, paced by the clock,
noting the time of every message.  ``qmf collect`` (QMF v2, the stock qpidd default,
statistics published every second) records the broker for ~40 s; qpidd is restarted
after ~18 s (same port, so the client and the collector reconnect).  Then ``qmf
pipeline``'s job (on the run's shared local[2] SparkSession) computes the rates.  In
the middle of each half (the ramp edges and the restart left out) the enqueue and
dequeue rates must be within 10% of the rates the client achieved and of the nominal
ones; the restart must start a new series (counted in ``restarts``), never a negative
or a huge rate across it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .qpidd import ROOT, Qpidd, QpiddError, qpidd_home

pq = pytest.importorskip("pyarrow.parquet")
pytest.importorskip("pyspark")
if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
    pytest.skip("Spark needs Java (17 or later)", allow_module_level=True)

from benchmarks.qpidd.known_traffic import Traffic  # noqa: E402

pytestmark = [pytest.mark.qpidd, pytest.mark.slow]

QUEUE = "truth"
RATE_IN, RATE_OUT = 300.0, 100.0
RUN_S = 40.0
RESTART_AT_S = 18.0
#: seconds left out at both ends of each half (ramp up, restart, end of the run)
EDGE_S = 4.0
TOLERANCE = 0.10
NS = 1_000_000_000
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


@pytest.fixture(scope="module")
def truth_run(tmp_path_factory: pytest.TempPathFactory, spark: Any
              ) -> Iterator[dict[str, Any]]:
    """Traffic, collection (with a qpidd restart) and the pipeline, once per module.

    The pipeline is ``qmf pipeline``'s job run on the run's shared SparkSession (the
    command itself is tested in test_pipeline.py)."""
    from qmf_async.tools.pipeline import run_pipeline

    if qpidd_home() is None:
        pytest.skip("qpidd not found (../shared/qpidd or $QPIDD_HOME)")
    root = tmp_path_factory.mktemp("truth")
    try:
        broker = Qpidd.start(qmf1=False, directory=root / "qpidd", pub_interval=1)
    except QpiddError as exc:
        pytest.skip(f"qpidd failed to start: {exc}")
    dataset, out = root / "dataset", root / "out"
    traffic = Traffic(broker.address, QUEUE, RATE_IN, RATE_OUT)
    try:
        collect = subprocess.Popen(
            [sys.executable, "-m", "qmf_async.tools.cli", "collect", broker.url,
             "--out", str(dataset), "--duration", str(RUN_S), "--batch-seconds", "2",
             "--class", "queue", "--json", "--quiet"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
        traffic.start()
        started = time.time()
        deadline = time.monotonic() + RESTART_AT_S
        while time.monotonic() < deadline and collect.poll() is None:
            time.sleep(0.1)
        assert collect.poll() is None, collect.communicate()
        down = time.time()
        broker.restart()
        up = time.time()
        try:
            stdout, stderr = collect.communicate(timeout=RUN_S + 60)
        except subprocess.TimeoutExpired:
            collect.kill()
            pytest.fail("qmf collect did not end after --duration", pytrace=False)
        traffic.stop()
        ended = time.time()
    finally:
        if traffic.error is None:
            try:
                traffic.stop()
            except Exception:
                pass
        broker.stop()
    assert collect.returncode == 0, stderr
    counters = json.loads(stdout)
    summary = run_pipeline(spark, str(dataset), str(out))
    yield {"counters": counters, "summary": summary, "traffic": traffic,
           "started": started, "down": down, "up": up, "ended": ended,
           "dataset": dataset, "out": out}


def _steps(out: Path, statistic: str) -> list[dict[str, Any]]:
    table = pq.read_table(out / "rates")
    rows = [r for r in table.to_pylist() if r["name"] == QUEUE and r["statistic"] == statistic]
    return sorted(rows, key=lambda r: r["ts"])


def test_collector_kept_everything(truth_run: dict[str, Any]) -> None:
    counters = truth_run["counters"]
    assert counters["dropped"] == 0 and counters["write_errors"] == 0
    assert counters["written"] == counters["received"] > 0
    assert truth_run["traffic"].reconnects >= 1  # the restart really cut the client off


@pytest.mark.parametrize(("statistic", "nominal", "which"), [
    ("msgTotalEnqueues", RATE_IN, "sent"),
    ("msgTotalDequeues", RATE_OUT, "received"),
])
@pytest.mark.parametrize("half", ["before restart", "after restart"])
def test_steady_rates_match_the_truth(truth_run: dict[str, Any], statistic: str,
                                      nominal: float, which: str, half: str) -> None:
    run, traffic = truth_run, truth_run["traffic"]
    start, end = ((run["started"], run["down"]) if half == "before restart"
                  else (run["up"], run["ended"]))
    lo, hi = (start + EDGE_S) * NS, (end - EDGE_S) * NS
    steps = [s for s in _steps(run["out"], statistic)
             if s["ts"] - s["dt_seconds"] * NS >= lo and s["ts"] <= hi]
    assert len(steps) >= 6, f"too few steps in the middle of the run {half}: {len(steps)}"
    seconds = sum(s["dt_seconds"] for s in steps)
    measured = sum(s["delta"] for s in steps) / seconds
    first = (steps[0]["ts"] - steps[0]["dt_seconds"] * NS) / NS
    last = steps[-1]["ts"] / NS
    times = traffic.sent if which == "sent" else traffic.received
    achieved = traffic.count(times, first, last) / (last - first)
    assert abs(achieved / nominal - 1) < TOLERANCE, (achieved, nominal)  # the client kept up
    assert abs(measured / achieved - 1) < TOLERANCE, (measured, achieved)
    assert abs(measured / nominal - 1) < TOLERANCE, (measured, nominal)
    for s in steps:  # every step, not only the mean, against what the client did in it
        # (the client's own pace wavers when the machine is busy, e.g. right after the
        # Spark tests, and it catches up in the next step: the truth of a step is what
        # it sent or received in that step, not the nominal rate)
        t0, t1 = (s["ts"] - s["dt_seconds"] * NS) / NS, s["ts"] / NS
        truth = traffic.count(times, t0, t1) / (t1 - t0)
        assert abs(s["rate"] / truth - 1) < TOLERANCE, (s, truth, nominal)


@pytest.mark.parametrize("statistic", ["msgTotalEnqueues", "msgTotalDequeues"])
def test_restart_starts_a_new_series(truth_run: dict[str, Any], statistic: str) -> None:
    run = truth_run
    summary = run["summary"]
    assert summary["restarts"] >= 1  # the queue's counters started again: counted
    # ... and it is our queue that restarted: two incarnations (create times) of it
    rows = pq.read_table(run["dataset"] / "samples").to_pylist()
    ids = {r["object_id"] for r in rows if dict(r["props"]).get("name") == QUEUE}
    assert len({r["create_ts"] for r in rows if r["object_id"] in ids}) == 2
    steps = _steps(run["out"], statistic)
    assert steps and all(s["delta"] >= 0 and s["rate"] >= 0 for s in steps)
    # no step spans the restart: the last one before ends before it went down, the
    # first one after starts after it came back
    down, up = run["down"] * NS, run["up"] * NS
    assert not [s for s in steps if s["ts"] - s["dt_seconds"] * NS < down and s["ts"] > up]
    assert [s for s in steps if s["ts"] <= down] and [s for s in steps if s["ts"] > up]
    # and no rate beyond twice the truth anywhere (a reset read as a delta would be)
    nominal = RATE_IN if statistic == "msgTotalEnqueues" else RATE_OUT
    assert max(s["rate"] for s in steps) < 2 * nominal
