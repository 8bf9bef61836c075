"""``benchmarks/v2_memory.py`` at a small size: it measures what decoded v2 objects
hold, and sharing the map keys holds less than the objects as decoded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_memory_benchmark_small_run() -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "v2_memory.py"),
                           "--objects", "300"], capture_output=True, text=True, timeout=120,
                          env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    sizes = result["bytes"]
    assert result["objects"] == 300
    assert sizes["as decoded"] > sizes["keys shared"] >= sizes["keys and schema ids shared"] > 0
