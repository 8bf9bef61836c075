"""The benchmarks that need no broker, at a small size: they run to the end and print
their figures (a benchmark that reads a renamed attribute of the library fails here,
not when someone measures)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

RUNS = {
    "memory": ["--quick", "--count", "2000"],
    "collector": ["--objects", "100", "--rows", "1000", "--rounds", "1", "--json"],
    "v2_convert": ["--rounds", "1", "--seconds", "0.1", "--objects", "200"],
    "decode": ["--rounds", "1", "--seconds", "0.1"],
    "encode": ["--rounds", "1", "--seconds", "0.1"],
}


@pytest.mark.parametrize("name", sorted(RUNS))
def test_an_offline_benchmark_runs(name: str) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / f"{name}.py"),
                           *RUNS[name]], capture_output=True, text=True, timeout=300,
                          env=env, cwd=ROOT, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()
    assert lines, "the benchmark printed nothing"
    if name in ("memory", "collector"):  # their last line is the JSON record
        result = json.loads(lines[-1])
        assert result["benchmark"] == name
        if name == "memory":
            assert result["objects"] == 2000
            assert 0 < result["ours"]["total_bytes_per_object"] \
                < result["dict_design"]["total_bytes_per_object"]
        else:
            assert all(r["collect_cpu"] > 0 for r in result["results"].values())
