"""``qmf stat -q`` against the classic ``qpid-stat -q`` on a qpidd with many queues, in
the same run: the whole command, as an operator types it, measured from outside.

    python benchmarks/qpidd/stat_q.py [--queues 10000] [--rounds 3]
                                      [--modes stock,v1] [--quick] [--json FILE]

For each mode a fresh qpidd (``stock``: QMF v1 off, the default; ``v1``: QMF v1 on;
publication every 10 s) gets ``--queues`` queues; then, once per round and interleaved:

- ``qpid_stat``: ``classic-tools/run qpid-stat -q -b HOST`` (Python 2.7, QMF v2 over
  AMQP 0-10);
- ``qmf_stat``: ``python -m qmf_async stat -q -b HOST -t 300`` (its default: QMF v1
  over AMQP 1.0, which qpidd answers with v1 on or off; ``-t`` only so that a slow
  answer on a busy machine is measured rather than cut at the default 10 s);
- ``qmf_stat_v2``: the same with ``--qmf-version 2``.

Each is a new process printing the whole table to a pipe (both list every queue: ``-L``
counts only with ``-S``); wall time, peak RSS (``wait4``) and CPU of the process, and
qpidd's CPU meanwhile.  Every run must list all the queues.  Best and median per tool,
and ratios against qpid-stat measured in the same run.  Goal (issue): ours at least 2x
faster.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.qpidd.broker import CLASSIC_HOME, QpiddError, create_queues, proc_cpu  # noqa: E402
from benchmarks.qpidd.v2 import V2Qpidd, run_measured  # noqa: E402

TOOLS = ("qpid_stat", "qmf_stat", "qmf_stat_v2")
LABELS = {"qpid_stat": "qpid-stat -q", "qmf_stat": "qmf stat -q",
          "qmf_stat_v2": "qmf stat -q --qmf-version 2"}
MODES = ("stock", "v1")
PREFIX = "bench-q-"
GOAL_X = 2.0


def command(tool: str, port: int) -> tuple[list[str], dict[str, str] | None]:
    address = f"127.0.0.1:{port}"
    if tool == "qpid_stat":
        return ["bash", str(CLASSIC_HOME / "run"), "qpid-stat", "-q", "-b", address], None
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("QMF_URL", None)
    # -t: the wait for the answers; a v2 answer of 10,000 queues can take qpidd over the
    # default 10 s on a busy machine
    argv = [sys.executable, "-m", "qmf_async", "stat", "-q", "-b", address, "-t", "300"]
    if tool == "qmf_stat_v2":
        argv += ["--qmf-version", "2"]
    return argv, env


def run_tool(tool: str, port: int, pid: int, queues: int) -> dict[str, Any]:
    """One invocation: seconds, cpu, max_rss_kb, qpidd_cpu, listed.

    Raises:
        RuntimeError: it failed or listed fewer queues than there are.
    """
    argv, env = command(tool, port)
    q0 = proc_cpu(pid)
    out = run_measured(argv, env=env, timeout=600)
    qpidd_cpu = proc_cpu(pid) - q0
    if out["returncode"] != 0:
        raise RuntimeError(f"{tool} failed ({out['returncode']}): {out['stderr'][-500:]}")
    listed = sum(1 for line in out["stdout"].splitlines()
                 if line.strip().startswith(PREFIX))
    if listed < queues:
        raise RuntimeError(f"{tool} listed {listed} queues, expected {queues}")
    return {"seconds": out["seconds"], "cpu": out["cpu"], "max_rss_kb": out["max_rss_kb"],
            "qpidd_cpu": qpidd_cpu, "listed": listed}


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    by_time = sorted(runs, key=lambda r: r["seconds"])
    return {"seconds": by_time[0]["seconds"],
            "median_seconds": by_time[len(by_time) // 2]["seconds"],
            "cpu": by_time[0]["cpu"], "qpidd_cpu": by_time[0]["qpidd_cpu"],
            "max_rss_kb": max(r["max_rss_kb"] for r in runs), "listed": by_time[0]["listed"],
            "runs": len(runs)}


def run_mode(mode: str, opts: argparse.Namespace, tools: list[str]) -> dict[str, Any]:
    """One fresh qpidd: its queues, every tool ``--rounds`` times, the figures.

    Raises:
        QpiddError: qpidd or the queue maker failed.
        RuntimeError: a tool failed.
    """
    with V2Qpidd(qmf1=mode == "v1", pub_interval=10) as q:
        made = create_queues(q.port, opts.queues, prefix=PREFIX)
        print(f"[{mode}] qpidd pid {q.pid} port {q.port}: {made['created']} queues in "
              f"{made['seconds']:.2f} s", flush=True)
        runs: dict[str, list[dict[str, Any]]] = {t: [] for t in tools}
        for rnd in range(opts.rounds):
            for tool in tools:
                r = run_tool(tool, q.port, q.pid, opts.queues)
                runs[tool].append(r)
                print(f"[{mode}] round {rnd + 1}: {tool} {r['seconds']:.3f} s, "
                      f"{r['max_rss_kb'] / 1024:.0f} MiB", flush=True)
    best = {t: summarise(r) for t, r in runs.items()}
    ratios: dict[str, float | None] = {}
    stat = best.get("qpid_stat")
    for t in tools:
        if t == "qpid_stat" or stat is None:
            continue
        ratios[f"{t} faster than qpid-stat (x)"] = stat["seconds"] / best[t]["seconds"]
        ratios[f"{t} RSS / qpid-stat RSS"] = best[t]["max_rss_kb"] / stat["max_rss_kb"]
    return {"create_queues": made, "runs": runs, "best": best, "ratios": ratios}


def report(mode: str, result: dict[str, Any]) -> str:
    best = result["best"]
    cols = [t for t in TOOLS if t in best]
    rows = [[f"[{mode}]", *(LABELS[t] for t in cols)]]
    for label, key, fmt in (("seconds, best", "seconds", "{:.3f}"),
                            ("  median", "median_seconds", "{:.3f}"),
                            ("  tool CPU s", "cpu", "{:.3f}"),
                            ("  qpidd CPU s", "qpidd_cpu", "{:.3f}"),
                            ("peak RSS MiB", "max_rss_kb", "{:.0f}")):
        scale = 1 / 1024 if key == "max_rss_kb" else 1.0
        rows.append([label, *(fmt.format(best[t][key] * scale) for t in cols)])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
             for r in rows]
    lines += [f"{k}: {v:.2f}" for k, v in result["ratios"].items() if v is not None]
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--queues", type=int, default=10000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--modes", default=",".join(MODES), help="stock,v1 or one of them")
    p.add_argument("--tools", default=",".join(TOOLS), help="subset of " + ",".join(TOOLS))
    p.add_argument("--quick", action="store_true", help="a smoke run: 50 queues, 1 round")
    p.add_argument("--json", type=Path)
    opts = p.parse_args()
    if opts.quick:
        opts.queues, opts.rounds = 50, 1
    modes = [m for m in opts.modes.split(",") if m]
    tools = [t for t in opts.tools.split(",") if t]
    bad = [m for m in modes if m not in MODES] + [t for t in tools if t not in TOOLS]
    if bad:
        p.error(f"unknown mode or tool: {', '.join(bad)}")
    summary: dict[str, Any] = {
        "options": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(opts).items()},
        "machine": {"nproc": os.cpu_count(), "python": platform.python_version(),
                    "loadavg_start": Path("/proc/loadavg").read_text().split()[:3]},
        "goal_x": GOAL_X, "modes": {}}
    try:
        for mode in modes:
            summary["modes"][mode] = run_mode(mode, opts, tools)
    except (QpiddError, RuntimeError) as exc:
        print(f"stat_q: {exc}", file=sys.stderr)
        return 2
    summary["machine"]["loadavg_end"] = Path("/proc/loadavg").read_text().split()[:3]
    for mode, result in summary["modes"].items():
        print(report(mode, result))
    if opts.json:
        opts.json.write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps({m: {"best": r["best"], "ratios": r["ratios"]}
                      for m, r in summary["modes"].items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
