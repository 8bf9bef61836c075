"""Smoke runs of the QMF v2 benchmarks at a tiny size: ``benchmarks/qpidd_v2.py --quick``
(get_objects over v2: ours, a raw proton query, the classic console and qpid-stat),
``benchmarks/v2_filter.py --quick`` (indications with and without server-side
filtering), ``benchmarks/default_path.py --quick`` (the default Session's fast
path against v2, v1 and the classic console) and ``benchmarks/v2_updates.py --quick``
(CPU per v2 object update: the transport, the core, the Session).  Needs the shared
qpidd build and a Python 2.7 (the classic tools)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.qpidd]

ROOT = Path(__file__).resolve().parent.parent



def run(script: str, out: Path) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), "--quick",
                           "--json", str(out)], capture_output=True, text=True, timeout=170,
                          env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary: dict[str, Any] = json.loads(out.read_text())
    return summary


def test_get_objects_v2_quick_run(needs_qpidd: None, tmp_path: Path) -> None:
    s = run("qpidd_v2.py", tmp_path / "v2.json")
    queues = s["options"]["queues"]
    assert s["create_queues"]["created"] == queues > 0
    # the raw proton baseline runs where python-qpid-proton is importable (no extra has it)
    raw = {"raw_v2"} if importlib.util.find_spec("proton") is not None else set()
    assert set(s["best"]) == {"ours", "ours_v1", "classic_console", "qpid_stat"} | raw
    assert s["unavailable"] == sorted({"raw_v2"} - raw)
    for name, best in s["best"].items():
        assert best["objects"] >= queues, name
        assert best["seconds"] > 0 and best["cpu"] > 0 and best["max_rss_kb"] > 0, name
    assert s["runs"]["classic_console"][0]["qmf_v2_broker"] is True
    assert all(v is not None for k, v in s["ratios"].items() if raw or "raw" not in k)
    decode = s["decode"]["objects_per_cpu_second"]
    assert decode and all(v > 0 for v in decode.values())


def test_default_path_quick_run(needs_qpidd: None, tmp_path: Path) -> None:
    s = run("default_path.py", tmp_path / "default.json")
    assert s["queues"] == 200  # --quick
    assert set(s["results"]) == {"default", "v2", "v1", "classic_py27"}
    (default,), (v2,), (v1,) = s["results"]["default"], s["results"]["v2"], s["results"]["v1"]
    # the default session answered over v1 without falling back; v2 and v1 forced
    # never take the fast path
    assert default["fast_path_queries"] == 1 and default["fallbacks"] == 0
    assert v2["fast_path_queries"] == 0 and v1["fast_path_queries"] == 0
    assert all(best > 0 for best in s["best"].values())


def test_filter_quick_run(needs_qpidd: None, tmp_path: Path) -> None:
    s = run("v2_filter.py", tmp_path / "filter.json")
    r = {x["name"]: x for x in s["results"]}
    qpidd_agent, fake = s["qpidd_agent"], "bench.org:fake:1"
    assert r["all"]["messages"] > 0 and r["all"]["objects"] > 0
    assert {qpidd_agent, fake} <= set(r["all"]["by_agent"])
    # a selector on qmf.agent: only that agent's messages arrive
    assert set(r["fake_agent_selector"]["by_agent"]) == {fake}
    assert set(r["qpidd_agent_selector"]["by_agent"]) == {qpidd_agent}
    # selectors on qmf.content, binding keys on the subject
    assert set(r["data_selector"]["by_content"]) == {"_data"}
    assert set(r["events_selector"]["by_content"]) == {"_event"}
    assert r["events_key"]["events"] > 0 and r["events_key"]["objects"] == 0
    assert all(k.startswith("agent.ind.data.org_apache_qpid_broker.exchange")
               for k in r["class_key"]["by_subject"])
    assert all(k.startswith("agent.ind.event.org_apache_qpid_broker.queueDeclare")
               for k in r["event_class_key"]["by_subject"])
    for name in ("class_key", "fake_agent_selector", "events_key", "event_class_key"):
        assert r[name]["bytes"] < r["all"]["bytes"], name
    assert all(x.get("malformed", 0) == 0 for x in s["results"])
    # the same through the Session's subscriptions (it speaks v2 to qpidd)
    sessions = {k: v for k, v in r.items() if k.startswith("session:")}
    assert len(sessions) == 4
    assert all(v["qmf_version"] == [2] for v in sessions.values())
    events = r["session: events()"]
    assert events["events"] > 0 and events["objects"] == 0
    assert r["session: object_updates(_class='exchange')"]["bytes"] < r["all"]["bytes"]


def test_updates_quick_run(needs_qpidd: None, tmp_path: Path) -> None:
    s = run("v2_updates.py", tmp_path / "updates.json")
    paths = {r["path"] for r in s["results"]}
    assert paths == {"raw", "core", "session"}
    # every path got qpidd's queue objects, and a figure per object
    assert all(r["objects"] > 0 and r["cpu"] > 0 for r in s["results"])
    assert set(s["us_per_object"]) == paths
