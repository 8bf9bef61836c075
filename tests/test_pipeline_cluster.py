"""``qmf pipeline`` on a real Spark standalone cluster: a master and a worker started
from the installed pyspark (``benchmarks/spark_cluster.py``, 127.0.0.1, ephemeral
ports, stopped at the end), the job run with ``--master spark://127.0.0.1:PORT``, and
every table it writes compared row by row with the same job in local mode.

The dataset is the rate benchmark's generator at a small size (queues whose counters
grow, every tenth one resetting), so this is also the smoke test of
``benchmarks/pipeline_rates.py`` with ``--standalone``; the local-mode tables are the
run's shared reference (``rates_local`` in conftest, on the run's SparkSession).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pq = pytest.importorskip("pyarrow.parquet")
pytest.importorskip("pyspark")
pytest.importorskip("matplotlib")
if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
    pytest.skip("Spark needs Java (17 or later)", allow_module_level=True)

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from spark_cluster import StandaloneCluster  # noqa: E402

pytestmark = pytest.mark.slow

ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
TABLES = ("rates", "windows", "top_queues", "event_counts", "lifetimes")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    with StandaloneCluster(tmp_path_factory.mktemp("spark-cluster"), cores=2,
                           memory="1g") as c:
        yield c


def _pipeline(dataset: Path, out: Path, master: str) -> dict[str, Any]:
    args = [sys.executable, "-m", "qmf_async.tools.cli", "pipeline", "--dataset",
            str(dataset), "--out", str(out), "--master", master, "--json",
            "--conf", "spark.executor.memory=768m"]
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=600, env=ENV,
                              check=False)
    except subprocess.TimeoutExpired:
        pytest.fail(f"qmf pipeline --master {master} did not finish within 600 s",
                    pytrace=False)
    assert done.returncode == 0, done.stderr[-3000:]
    summary: dict[str, Any] = json.loads(done.stdout)
    return summary


def _rows(path: Path) -> list[tuple[Any, ...]]:
    """The table's rows, sorted, floats rounded (sums may be added in another order)."""
    table = pq.read_table(path)
    out = []
    for row in table.to_pylist():
        out.append(tuple(
            (k, round(v, 9) if isinstance(v, float) and math.isfinite(v) else v)
            for k, v in sorted(row.items())))
    return sorted(out, key=repr)


def test_cluster_gives_the_same_tables_as_local_mode(
        rates_local: tuple[Path, Path, dict[str, Any]], cluster: StandaloneCluster,
        tmp_path: Path) -> None:
    dataset, local_out, local = rates_local  # the same job in local mode (conftest)
    assert cluster.master_url.startswith("spark://127.0.0.1:")
    remote = _pipeline(dataset, tmp_path / "cluster", cluster.master_url)
    # the job ran on the cluster: the master logged an application, the worker an executor
    worker_log = (cluster.directory / "worker.log").read_text(errors="replace")
    assert "Asked to launch executor" in worker_log
    assert local["rows"]["rates"] > 0 and local["resets"] > 0
    for key in ("rows", "inputs", "resets", "gaps", "missing", "restarts", "window",
                "first_ts", "last_ts"):
        assert remote[key] == local[key], key
    for table in TABLES:
        assert _rows(tmp_path / "cluster" / table) == _rows(local_out / table), table
    assert Path(remote["paths"]["report"]).is_file()
