"""Smoke run of ``benchmarks/qpidd/stat_q.py --quick``: ``qmf stat -q`` and the classic
``qpid-stat -q`` on a qpidd with a few queues, in both qpidd modes (stock and QMF v1
on).  Needs the shared qpidd build and a Python 2.7 (the classic tools)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.qpidd]

ROOT = Path(__file__).resolve().parent.parent



def test_stat_q_quick_run(needs_qpidd: None, tmp_path: Path) -> None:
    out = tmp_path / "stat_q.json"
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "qpidd" / "stat_q.py"),
                           "--quick", "--json", str(out)], capture_output=True, text=True,
                          timeout=170, env=dict(os.environ, PYTHONPATH=str(ROOT)), cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    s = json.loads(out.read_text())
    queues = s["options"]["queues"]
    assert set(s["modes"]) == {"stock", "v1"}
    for mode, result in s["modes"].items():
        assert result["create_queues"]["created"] == queues > 0, mode
        assert set(result["best"]) == {"qpid_stat", "qmf_stat", "qmf_stat_v2"}, mode
        for tool, best in result["best"].items():
            # every tool listed every queue, measured from outside its process
            assert best["listed"] == queues, (mode, tool)
            assert best["seconds"] > 0 and best["cpu"] > 0 and best["max_rss_kb"] > 0
        assert len(result["ratios"]) == 4 and all(v > 0 for v in result["ratios"].values())
