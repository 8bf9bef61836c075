"""``qmf pipeline --remote sc://...``: the jobs on a Spark Connect server started from
the installed pyspark (``benchmarks/spark_cluster.py``'s ``ConnectServer``, 127.0.0.1,
stopped at the end), every table compared row by row with the same job in local mode.
Needs the ``connect`` extra (the Spark Connect client's packages)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyarrow.parquet")
pytest.importorskip("pyspark")
pytest.importorskip("matplotlib")
if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
    pytest.skip("Spark needs Java (17 or later)", allow_module_level=True)

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from spark_cluster import ConnectServer  # noqa: E402

from .test_pipeline_cluster import TABLES, _rows  # noqa: E402

pytestmark = pytest.mark.slow

ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def _connect_client_missing() -> str | None:
    try:
        from pyspark.sql.connect.utils import check_dependencies

        check_dependencies()
    except ImportError as exc:
        return f"the Spark Connect client needs the connect extra ({exc})"
    return None


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConnectServer]:
    why = _connect_client_missing()
    if why is not None:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the Spark Connect test: {why}")
        pytest.skip(why)
    with ConnectServer(tmp_path_factory.mktemp("spark-connect")) as s:
        yield s


def _pipeline(dataset: Path, out: Path, *where: str) -> dict[str, Any]:
    args = [sys.executable, "-m", "qmf_async.tools.cli", "pipeline", "--dataset",
            str(dataset), "--out", str(out), "--json", *where]
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=600, env=ENV,
                              check=False)
    except subprocess.TimeoutExpired:
        pytest.fail(f"qmf pipeline {' '.join(where)} did not finish within 600 s",
                    pytrace=False)
    assert done.returncode == 0, done.stderr[-3000:]
    summary: dict[str, Any] = json.loads(done.stdout)
    return summary


def test_spark_connect_gives_the_same_tables_as_local_mode(
        rates_local: tuple[Path, Path, dict[str, Any]], server: ConnectServer,
        tmp_path: Path) -> None:
    dataset, local_out, local = rates_local  # the same job in local mode (conftest)
    remote = _pipeline(dataset, tmp_path / "connect", "--remote", server.url)
    # the jobs ran in the server: it logged the session of the client
    log = (server.directory / "connect.log").read_text(errors="replace")
    assert "SparkConnectService" in log
    assert local["rows"]["rates"] > 0 and local["resets"] > 0
    for key in ("rows", "inputs", "resets", "gaps", "missing", "restarts", "window",
                "first_ts", "last_ts"):
        assert remote[key] == local[key], key
    for table in TABLES:
        assert _rows(tmp_path / "connect" / table) == _rows(local_out / table), table
    assert Path(remote["paths"]["report"]).is_file()


def test_remote_and_master_together_are_a_usage_error(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "qmf_async.tools.cli", "pipeline", "--dataset", str(tmp_path),
         "--out", str(tmp_path / "o"), "--master", "local[2]", "--remote", "sc://x:1"],
        capture_output=True, text=True, timeout=120, env=ENV, check=False)
    assert done.returncode == 2 and "--master or --remote" in done.stderr, done.stderr
    bad = subprocess.run(
        [sys.executable, "-m", "qmf_async.tools.cli", "pipeline", "--dataset", str(tmp_path),
         "--out", str(tmp_path / "o"), "--remote", "http://x:1"],
        capture_output=True, text=True, timeout=120, env=ENV, check=False)
    assert bad.returncode == 2 and "sc://" in bad.stderr, bad.stderr
