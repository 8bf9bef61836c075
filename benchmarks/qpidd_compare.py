"""qpidd baselines for the AMQP 1.0 console: the classic ``qmf.console`` over AMQP
0-10 (Python 2.7), a raw proton request/reply client and -- once
``qmf_async.transport._native`` exists -- ours over AMQP 1.0, all against one fresh
qpidd (QMF v1 on, publication every 10 s) in the same run.

    python benchmarks/qpidd_compare.py [--queues 10000] [--seconds 5] [--rounds 3]
                                       [--quick] [--json FILE]

Each client runs in its own process, once per round (rounds interleave the clients):
get_objects of the queues (best of ``--repeat`` in each process; the raw client has
no get_objects), then the broker object's ``echo`` for ``--seconds`` with 1 call in
flight and with ``--window`` in flight.  Every step reads qpidd's CPU time
(``/proc/PID/stat`` utime+stime) before and after, and every client reports its own
max RSS and CPU.  The table shows the best over rounds; the JSON holds every run.
Goals (issue): get_objects >= 2.5x faster than the classic console with our CPU for
the answer below qpidd's; echo rates >= 0.9x the raw client.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.qpidd.broker import (  # noqa: E402
    HERE,
    QPIDD_HOME,
    Qpidd,
    QpiddError,
    create_queues,
    python2,
    python2_env,
)

CLIENTS = ("classic", "classic_nodelay", "raw_proton", "ours")
LABELS = {"classic": "classic 0-10", "classic_nodelay": "classic+nodelay",
          "raw_proton": "raw proton", "ours": "ours 1.0"}
GET_GOAL, ECHO_GOAL = 2.5, 0.9


def machine() -> dict[str, Any]:
    cpu = "?"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    try:
        proton = metadata.version("python-qpid-proton")
    except metadata.PackageNotFoundError:
        proton = "?"
    py2 = subprocess.run([python2(), "-c", "import platform; print(platform.python_version())"],
                         capture_output=True, text=True, timeout=30).stdout.strip()
    return {"nproc": os.cpu_count(), "cpu": cpu, "python": platform.python_version(),
            "python2": py2, "python-qpid-proton": proton, "qpidd": str(QPIDD_HOME),
            "loadavg_start": Path("/proc/loadavg").read_text().split()[:3]}


def client_command(name: str, q: Qpidd, opts: argparse.Namespace) -> tuple[list[str], Any]:
    common = ["--port", str(q.port), "--qpidd-pid", str(q.pid),
              "--seconds", str(opts.seconds), "--window", str(opts.window)]
    gets = ["--expect", str(opts.queues), "--repeat", str(opts.repeat)]
    if name in ("classic", "classic_nodelay"):
        nodelay = ["--nodelay"] if name == "classic_nodelay" else []
        return ([python2(), str(HERE / "classic_console.py"), *common, *gets, *nodelay],
                python2_env())
    if name == "raw_proton":
        return [sys.executable, str(HERE / "raw_proton.py"), *common], None
    return [sys.executable, str(HERE / "ours.py"), *common, *gets], None


def run_client(name: str, q: Qpidd, opts: argparse.Namespace) -> dict[str, Any] | None:
    """One client process; its JSON, or None when it says ``unavailable``.

    Raises:
        RuntimeError: the client failed or printed no JSON.
    """
    cmd, env = client_command(name, q, opts)
    budget = 600 + 10 * opts.seconds + 30 * opts.repeat
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=budget)
    lines = out.stdout.strip().splitlines()
    if out.returncode == 0 and lines and lines[-1] == "unavailable":
        return None
    if out.returncode != 0 or not lines:
        raise RuntimeError(f"{name} failed ({out.returncode}): {out.stderr.strip()[-800:]}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def best(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Best figures of one client over its rounds."""
    out: dict[str, Any] = {"max_rss_kb": max(r["max_rss_kb"] for r in runs)}
    gets = [g for r in runs if "get_objects" in r for g in r["get_objects"]["runs"]]
    if gets:
        out["get_objects"] = min(gets, key=lambda g: g["seconds"])
        out["get_objects"]["n"] = len(gets)
    for key in ("echo_1", "echo_window"):
        e = max((r[key] for r in runs), key=lambda e: e["rate"])
        out[key] = dict(e, qpidd_cpu_per_call=e["qpidd_cpu"] / max(e["calls"], 1),
                        cpu_per_call=e["cpu"] / max(e["calls"], 1))
    return out


def ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b in (None, 0) else a / b


def fmt(v: Any, spec: str = ".3g") -> str:
    return "--" if v is None else format(v, spec)


def report(summary: dict[str, Any]) -> str:
    """The table: one column per client that ran, then ours/classic and ours/raw."""
    b = summary["best"]
    cols = [c for c in CLIENTS if c in b or c == "ours"]
    cl, raw, ours = b.get("classic"), b.get("raw_proton"), b.get("ours")

    def get(c: dict[str, Any] | None, k: str) -> Any:
        return None if c is None or "get_objects" not in c else c["get_objects"][k]

    def echo(c: dict[str, Any] | None, run: str, k: str) -> Any:
        return None if c is None else c[run][k]

    def each(f: Any, spec: str = ".3g") -> list[str]:
        return [fmt(f(b.get(c)), spec) for c in cols]

    rows: list[list[str]] = [
        ["get_objects seconds (best)", *each(lambda c: get(c, "seconds")),
         fmt(ratio(get(cl, "seconds"), get(ours, "seconds")), ".3g") +
         (" x faster" if ours is not None else ""), ""],
        ["  client CPU s", *each(lambda c: get(c, "cpu")), "", ""],
        ["  qpidd CPU s", *each(lambda c: get(c, "qpidd_cpu")), "", ""]]
    for run, label in (("echo_1", "echo/s, 1 in flight"),
                       ("echo_window", f"echo/s, {summary['options']['window']} in flight")):
        rows.append([label, *each(lambda c, r=run: echo(c, r, "rate"), ".0f"),
                     fmt(ratio(echo(ours, run, "rate"), echo(cl, run, "rate"))),
                     fmt(ratio(echo(ours, run, "rate"), echo(raw, run, "rate")))])
        rows.append(["  qpidd CPU us/call",
                     *each(lambda c, r=run: None if c is None
                           else 1e6 * c[r]["qpidd_cpu_per_call"], ".0f"), "", ""])
        rows.append(["  client CPU us/call",
                     *each(lambda c, r=run: None if c is None
                           else 1e6 * c[r]["cpu_per_call"], ".0f"), "", ""])
    rows.append(["max RSS MiB", *each(lambda c: None if c is None
                                      else c["max_rss_kb"] / 1024, ".0f"), "", ""])
    header = ["", *(LABELS[c] for c in cols), "ours/classic", "ours/raw"]
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
             for r in [header, *rows]]
    if ours is None:
        lines.append("ours: unavailable (qmf_async.transport._native is not there)")
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--queues", type=int, default=10000)
    p.add_argument("--seconds", type=float, default=5.0, help="per echo run")
    p.add_argument("--window", type=int, default=1000, help="calls in flight")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--repeat", type=int, default=3, help="get_objects per client process")
    p.add_argument("--quick", action="store_true", help="a smoke run: 200 queues, 1 s, 1 round")
    p.add_argument("--json", type=Path, help="write the results here")
    p.add_argument("--clients", default=",".join(CLIENTS),
                   help="comma-separated subset of " + ",".join(CLIENTS))
    opts = p.parse_args()
    if opts.quick:
        opts.queues, opts.seconds, opts.rounds, opts.repeat = 200, 1.0, 1, 1
    clients = [c for c in opts.clients.split(",") if c]

    summary: dict[str, Any] = {"machine": machine(), "options": {
        k: (str(v) if isinstance(v, Path) else v) for k, v in vars(opts).items()}}
    runs: dict[str, list[dict[str, Any]]] = {c: [] for c in clients}
    try:
        with Qpidd(pub_interval=10) as q:
            c0 = q.cpu()
            made = create_queues(q.port, opts.queues)
            made["qpidd_cpu"] = q.cpu() - c0
            summary["create_queues"] = made
            print(f"qpidd pid {q.pid} port {q.port}: {made['created']} queues in "
                  f"{made['seconds']:.2f} s ({made['method']}), qpidd CPU "
                  f"{made['qpidd_cpu']:.2f} s", flush=True)
            for rnd in range(opts.rounds):
                for c in clients:
                    t0 = time.monotonic()
                    r = run_client(c, q, opts)
                    if r is None:
                        runs.pop(c, None)
                        clients = [x for x in clients if x != c]
                        print(f"round {rnd + 1}: {c} unavailable", flush=True)
                        continue
                    runs[c].append(r)
                    print(f"round {rnd + 1}: {c} done in {time.monotonic() - t0:.1f} s",
                          flush=True)
            summary["qpidd_cpu_total"] = q.cpu() - c0
    except QpiddError as exc:
        print(f"qpidd_compare: {exc}", file=sys.stderr)
        return 2
    summary["runs"] = runs
    summary["machine"]["loadavg_end"] = Path("/proc/loadavg").read_text().split()[:3]
    summary["best"] = {c: best(r) for c, r in runs.items() if r}
    summary["unavailable"] = [c for c in CLIENTS if c not in summary["best"]]
    b = summary["best"]
    if "ours" in b and "classic" in b:
        g_ours, g_cl = b["ours"]["get_objects"], b["classic"]["get_objects"]
        summary["goals"] = {
            "get_objects_speedup": g_cl["seconds"] / g_ours["seconds"],
            "get_objects_speedup_goal": GET_GOAL,
            "our_cpu_below_qpidd": g_ours["cpu"] < g_ours["qpidd_cpu"]}
    if "ours" in b and "raw_proton" in b:
        summary.setdefault("goals", {}).update({
            f"{k}_vs_raw": b["ours"][k]["rate"] / b["raw_proton"][k]["rate"]
            for k in ("echo_1", "echo_window")}, echo_goal=ECHO_GOAL)
    print(report(summary))
    if opts.json:
        opts.json.write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps({k: summary[k] for k in ("best", "unavailable", "create_queues")
                      if k in summary}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
