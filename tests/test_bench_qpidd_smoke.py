"""Smoke run of the qpidd benchmark driver (benchmarks/qpidd_compare.py --quick): a
fresh qpidd, a few queues, each client once; every client's figures are there and
counted something.  Needs the shared qpidd build and a Python 2.7 (the classic console)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.qpidd]

ROOT = Path(__file__).resolve().parent.parent
DRIVER = ROOT / "benchmarks" / "qpidd_compare.py"




def test_driver_quick_run(needs_qpidd: None, tmp_path: Path) -> None:
    out = tmp_path / "qpidd.json"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, str(DRIVER), "--quick", "--json", str(out)],
                          capture_output=True, text=True, timeout=300, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads(out.read_text())
    assert summary["create_queues"]["created"] == summary["options"]["queues"] > 0

    expected = {"classic", "classic_nodelay", "raw_proton", "ours"} - set(summary["unavailable"])
    # the raw proton baseline runs where python-qpid-proton is importable (no extra has it)
    raw = {"raw_proton"} if importlib.util.find_spec("proton") is not None else set()
    assert expected == {"classic", "classic_nodelay", "ours"} | raw
    assert set(summary["runs"]) == expected
    for client in expected:
        for run in summary["runs"][client]:
            assert run["client"] == client
            assert run["max_rss_kb"] > 0 and run["cpu_user"] + run["cpu_sys"] > 0
            for key in ("echo_1", "echo_window"):
                echo = run[key]
                assert {"seconds", "calls", "rate", "cpu", "qpidd_cpu"} <= set(echo)
                assert echo["calls"] > 0 and echo["rate"] > 0 and echo["failed"] == 0
            if client != "raw_proton":
                gets = run["get_objects"]["runs"]
                assert gets and all(g["objects"] >= summary["options"]["queues"] for g in gets)
                assert all(g["seconds"] > 0 and g["qpidd_cpu"] >= 0 for g in gets)
        assert summary["best"][client]["echo_window"]["calls"] > 0
    assert "echo/s, 1 in flight" in proc.stdout
