"""QMF v2 on a stock qpidd: get_objects of the queues, ours against the classic tools
and a raw proton v2 query, and v2 decode rates, in one run.

    python benchmarks/qpidd_v2.py [--queues 10000] [--rounds 3] [--repeat 2]
                                  [--quick] [--json FILE]

A fresh qpidd with the stock management settings (QMF v1 off, v2 on; publication
every 10 s) and ``--queues`` queues.  Each client runs in its own process, once per
round, the clients interleaved:

- ``raw_v2``: ``benchmarks/qpidd/raw_v2_query.py`` (proton ``Container``, a
  ``_query_request`` for class ``queue`` to ``qmf.default.direct`` subject ``broker``,
  every partial answer decoded by proton), best of ``--repeat`` in the process;
- ``ours``: ``benchmarks/qpidd/ours_v2.py`` (``Session(qmf_version=2).get_objects``
  when the Session has it, else ``ConsoleProtocolV2`` + ``NativeAmqp10Transport``);
- ``ours_core`` (only when named in ``--clients``): the same script with ``--path
  core``, the v2 console core without the Session;
- ``ours_native``, ``ours_v1_native`` (only when named): ``ours`` and ``ours_v1`` on the
  pure-Python AMQP 1.0 transport (``QMF_AMQP10=native``);
- ``ours_v1``: the same script with ``--path v1``: the Session's QMF v1 query over
  AMQP 1.0, which a stock qpidd answers too (``--mgmt-qmf1 no`` stops only v1
  publications);
- ``classic_console``: ``benchmarks/qpidd/classic_get.py`` (Python 2.7 ``qmf.console``
  ``getObjects``; on qpidd it speaks v2 over AMQP 0-10), best of ``--repeat``;
- ``qpid_stat``: the classic ``qpid-stat -q`` (``classic-tools/run``), one invocation
  per round: wall time and peak RSS of the whole process (``wait4``).

Every measured step reads qpidd's CPU (``/proc/PID/stat``) before and after.  Then
``benchmarks/v2_decode.py`` gives our v2 decode rate on qpidd's captured answers; the
classic console's v2 path is given as the objects per second of its own CPU in its
getObjects (decode and object building, what it does per object).

Goals (issue): at least 2.5x faster than ``qpid-stat -q``, within 1.5x of the raw
query, and at most a third of its memory.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.qpidd.broker import (  # noqa: E402
    CLASSIC_HOME,
    HERE,
    QpiddError,
    create_queues,
    proc_cpu,
    python2,
    python2_env,
)
from benchmarks.qpidd.v2 import V2Qpidd, last_json, run_measured  # noqa: E402

CLIENTS = ("raw_v2", "ours", "ours_v1", "classic_console", "qpid_stat")
#: clients that run only when named in ``--clients``
EXTRA_CLIENTS = ("ours_core", "ours_native", "ours_v1_native")
LABELS = {"raw_v2": "raw proton v2", "ours": "ours v2", "ours_v1": "ours v1 (1.0)",
          "ours_core": "ours v2 core", "classic_console": "classic console",
          "ours_native": "ours v2 (native 1.0)", "ours_v1_native": "ours v1 (native 1.0)",
          "qpid_stat": "qpid-stat -q"}
PREFIX = "bench-q-"
GOALS = {"vs_qpid_stat": 2.5, "vs_raw": 1.5, "memory_vs_qpid_stat": 1 / 3}


def run_client(name: str, port: int, pid: int, opts: argparse.Namespace) -> dict[str, Any]:
    """One client process; its figures: ``runs`` (seconds, cpu, qpidd_cpu, objects per
    call) and ``max_rss_kb``.

    Raises:
        RuntimeError: the client failed.
    """
    env3 = dict(os.environ, PYTHONPATH=str(ROOT))
    common = ["--port", str(port), "--qpidd-pid", str(pid), "--repeat", str(opts.repeat),
              "--expect", str(opts.queues)]
    if name == "qpid_stat":
        q0 = proc_cpu(pid)
        out = run_measured(["bash", str(CLASSIC_HOME / "run"), "qpid-stat", "-q",
                            "-b", f"127.0.0.1:{port}"], timeout=300)
        qpidd_cpu = proc_cpu(pid) - q0
        if out["returncode"] != 0:
            raise RuntimeError(f"qpid-stat failed: {out['stderr'].strip()[-500:]}")
        listed = sum(1 for line in out["stdout"].splitlines()
                     if line.strip().startswith(PREFIX))
        if listed < opts.queues:
            raise RuntimeError(f"qpid-stat listed {listed} queues, expected {opts.queues}")
        return {"client": name, "max_rss_kb": out["max_rss_kb"],
                "runs": [{"seconds": out["seconds"], "cpu": out["cpu"],
                          "qpidd_cpu": qpidd_cpu, "objects": listed}]}
    if name == "classic_console":
        cmd = [python2(), str(HERE / "classic_get.py"), *common]
        env = python2_env()
    elif name == "raw_v2":
        cmd, env = [sys.executable, str(HERE / "raw_v2_query.py"), *common], env3
    else:  # the *_native clients are the same now: the built-in AMQP 1.0 is the only one
        base = name.removesuffix("_native")
        path = {"ours_v1": "v1", "ours_core": "core"}.get(base, opts.ours_path)
        cmd, env = [sys.executable, str(HERE / "ours_v2.py"), *common, "--path", path], env3
    out = run_measured(cmd, env=env, timeout=300 + 60 * opts.repeat)
    result = last_json(out, name)
    result["process_max_rss_kb"] = out["max_rss_kb"]
    return result


def decode_rates(opts: argparse.Namespace) -> dict[str, Any]:
    """``benchmarks/v2_decode.py``'s figures (ours and proton, objects per CPU second).

    Raises:
        RuntimeError: it failed.
    """
    out = run_measured([sys.executable, str(ROOT / "benchmarks" / "v2_decode.py"),
                        "--rounds", str(opts.decode_rounds), "--seconds",
                        str(opts.decode_seconds)],
                       env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=300)
    return last_json(out, "v2_decode")


def summarise(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Per client: the best call (wall), the median call, the peak RSS over its
    processes, and objects per second of its own CPU on the best call."""
    best: dict[str, Any] = {}
    for name, procs in runs.items():
        calls = sorted((c for p in procs for c in p["runs"]), key=lambda c: c["seconds"])
        if not calls:
            continue
        b = dict(calls[0])
        b["median_seconds"] = calls[len(calls) // 2]["seconds"]
        b["calls"] = len(calls)
        b["max_rss_kb"] = max(p["max_rss_kb"] for p in procs)
        b["objects_per_cpu_s"] = b["objects"] / b["cpu"] if b["cpu"] > 0 else None
        b["path"] = procs[0].get("path")
        best[name] = b
    return best


def ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else a / b


def report(summary: dict[str, Any]) -> str:
    b = summary["best"]
    cols = [c for c in (*CLIENTS, *EXTRA_CLIENTS) if c in b]

    def row(label: str, key: str, spec: str, scale: float = 1.0) -> list[str]:
        def cell(v: Any) -> str:
            return "--" if v is None else format(v * scale if scale != 1.0 else v, spec)
        return [label, *(cell(b[c].get(key)) for c in cols)]

    rows = [["", *(LABELS[c] for c in cols)],
            row("get_objects seconds, best", "seconds", ".3f"),
            row("  median", "median_seconds", ".3f"),
            row("  client CPU s (best call)", "cpu", ".3f"),
            row("  qpidd CPU s (best call)", "qpidd_cpu", ".3f"),
            row("  objects", "objects", "d"),
            row("  objects per client CPU s", "objects_per_cpu_s", ",.0f"),
            row("peak RSS MiB", "max_rss_kb", ".0f", 1 / 1024)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    for k, v in summary.get("ratios", {}).items():
        lines.append(f"{k}: {'--' if v is None else format(v, '.3g')}")
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--queues", type=int, default=10000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--repeat", type=int, default=2, help="get_objects per client process")
    p.add_argument("--clients", default=",".join(CLIENTS),
                   help="comma-separated subset of " + ",".join((*CLIENTS, *EXTRA_CLIENTS)))
    p.add_argument("--ours-path", choices=["auto", "session", "core"], default="auto")
    p.add_argument("--decode-rounds", type=int, default=3)
    p.add_argument("--decode-seconds", type=float, default=1.0)
    p.add_argument("--quick", action="store_true",
                   help="a smoke run: 200 queues, 1 round, 1 call, short decode")
    p.add_argument("--json", type=Path)
    opts = p.parse_args()
    if opts.quick:
        opts.queues, opts.rounds, opts.repeat = 200, 1, 1
        opts.decode_rounds, opts.decode_seconds = 1, 0.2
    clients = [c for c in opts.clients.split(",") if c]
    # the raw proton baseline needs python-qpid-proton, which no extra installs
    no_proton = importlib.util.find_spec("proton") is None
    unavailable = [c for c in clients if c == "raw_v2" and no_proton]
    clients = [c for c in clients if c not in unavailable]
    try:
        proton = metadata.version("python-qpid-proton")
    except metadata.PackageNotFoundError:
        proton = "?"
    summary: dict[str, Any] = {
        "options": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(opts).items()},
        "machine": {"nproc": os.cpu_count(), "python": platform.python_version(),
                    "python-qpid-proton": proton,
                    "loadavg_start": Path("/proc/loadavg").read_text().split()[:3]},
        "unavailable": unavailable}
    runs: dict[str, list[dict[str, Any]]] = {c: [] for c in clients}
    try:
        with V2Qpidd(qmf1=False, pub_interval=10) as q:
            made = create_queues(q.port, opts.queues, prefix=PREFIX)
            summary["create_queues"] = made
            print(f"qpidd pid {q.pid} port {q.port} (QMF v1 off): {made['created']} queues "
                  f"in {made['seconds']:.2f} s", flush=True)
            for rnd in range(opts.rounds):
                for c in clients:
                    r = run_client(c, q.port, q.pid, opts)
                    runs[c].append(r)
                    best_s = min(x["seconds"] for x in r["runs"])
                    print(f"round {rnd + 1}: {c} best {best_s:.3f} s, "
                          f"{r['max_rss_kb'] / 1024:.0f} MiB", flush=True)
    except QpiddError as exc:
        print(f"qpidd_v2: {exc}", file=sys.stderr)
        return 2
    summary["decode"] = decode_rates(opts)
    summary["runs"] = runs
    summary["machine"]["loadavg_end"] = Path("/proc/loadavg").read_text().split()[:3]
    b = summary["best"] = summarise(runs)
    ours, raw, stat, cl, v1 = (b.get(k, {}) for k in ("ours", "raw_v2", "qpid_stat",
                                                       "classic_console", "ours_v1"))
    summary["ratios"] = {
        "ours faster than qpid-stat (x)": ratio(stat.get("seconds"), ours.get("seconds")),
        "ours faster than classic console (x)": ratio(cl.get("seconds"), ours.get("seconds")),
        "ours time / raw v2 time": ratio(ours.get("seconds"), raw.get("seconds")),
        "ours RSS / qpid-stat RSS": ratio(ours.get("max_rss_kb"), stat.get("max_rss_kb")),
        "ours RSS / raw v2 RSS": ratio(ours.get("max_rss_kb"), raw.get("max_rss_kb")),
        "ours objects per CPU s / classic console's": ratio(
            ours.get("objects_per_cpu_s"), cl.get("objects_per_cpu_s")),
        "ours v1 faster than qpid-stat (x)": ratio(stat.get("seconds"), v1.get("seconds")),
        "ours v1 RSS / qpid-stat RSS": ratio(v1.get("max_rss_kb"), stat.get("max_rss_kb")),
    }
    summary["goals"] = GOALS
    print(report(summary))
    dec = summary["decode"]["objects_per_cpu_second"]
    print("v2 decode (captured answers), objects per CPU s: " +
          ", ".join(f"{k} {v:,}" for k, v in dec.items()))
    if opts.json:
        opts.json.write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps({"best": b, "ratios": summary["ratios"]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
