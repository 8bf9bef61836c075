"""The default Session's get_objects on a stock qpidd, against the paths it chooses
between and the classic console, in one run.

    python benchmarks/default_path.py [--queues 10000] [--rounds 3] [--repeat 3]
                                      [--skip-py27] [--qmf1] [--quick] [--json FILE]
                                      [--clients default,v2] [--baseline DIR]

One fresh qpidd with the stock management settings (QMF v1 publications off, v2 on;
``--qmf1``: both on) gets ``--queues`` queues.  Each client runs in its own process,
once per round (the rounds interleave the clients), and reports the best of ``--repeat``
``get_objects(_class="queue")``, with the CPU qpidd spent on it (``/proc``):

- ``default``: ``Session()``: v2 for what qpidd publishes, its queries over v1 with the
  identities v2 gives (the fast path);
- ``v2``: ``Session(qmf_version=2)``: every query over v2 (the default before the fast
  path);
- ``v1``: ``Session(qmf_version=1)``: everything over v1;
- ``classic_py27``: the classic console (Python 2.7, AMQP 0-10; QMF v2 on this qpidd).

Each Session client also reports its own CPU for the best call.  ``--baseline DIR``
(a checkout of another commit) runs the chosen Session clients on that tree's
``qmf_async`` too, interleaved: before and after in one run.

Goals (issue): ``default`` at most 0.2 s for 10,000 queues here (0.3 s when done), at
least 20 times faster than the classic console.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
#: the tree whose qmf_async runs (QMF_BENCH_TREE: another checkout, for --baseline)
TREE = os.environ.get("QMF_BENCH_TREE") or str(ROOT)
if TREE not in sys.path:
    sys.path.insert(0, TREE)

from benchmarks.qpidd.broker import (  # noqa: E402
    HERE,
    create_queues,
    proc_cpu,
    python2,
    python2_env,
)
from benchmarks.qpidd.v2 import V2Qpidd  # noqa: E402

CLIENTS = ("default", "v2", "v1", "classic_py27")
_VERSION = {"default": None, "v2": 2, "v1": 1}


def _self_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def run_session(name: str, port: int, pid: int, expect: int, repeat: int) -> dict[str, Any]:
    from qmf_async import Session

    async def main() -> tuple[list[float], list[float], int, int]:
        times, cpu, mine = [], [], []
        async with Session(timeout=300, qmf_version=_VERSION[name],
                           rcv_objects=False, rcv_events=False) as s:
            broker = await s.add_broker(f"127.0.0.1:{port}", timeout=30)
            for _ in range(repeat):
                c0 = proc_cpu(pid)
                m0 = _self_cpu()
                t0 = time.perf_counter()
                qs = await s.get_objects(_class="queue", _timeout=300)
                times.append(time.perf_counter() - t0)
                mine.append(_self_cpu() - m0)
                cpu.append(proc_cpu(pid) - c0)
                if len(qs) < expect:
                    raise SystemExit(f"{len(qs)} queues, expected >= {expect}")
                del qs
            route = broker._route
            fast = route.queries if route is not None else 0
            fallbacks = route.fallbacks if route is not None else 0
        return times, cpu, fast, fallbacks, mine

    times, cpu, fast, fallbacks, mine = asyncio.run(main())
    best = times.index(min(times))
    return {"seconds": times[best], "runs": times, "qpidd_cpu": cpu[best],
            "client_cpu": min(mine), "client_cpu_runs": mine,
            "fast_path_queries": fast, "fallbacks": fallbacks,
            "max_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def client(name: str, port: int, pid: int, expect: int, repeat: int,
           tree: str = "") -> dict[str, Any]:
    """Run one client in its own process (on ``tree``'s qmf_async when given); its JSON
    result."""
    if name == "classic_py27":
        cmd = [python2(), str(HERE / "classic_get.py"), "--port", str(port),
               "--qpidd-pid", str(pid), "--expect", str(expect), "--repeat", str(repeat)]
        done = subprocess.run(cmd, env=python2_env(), capture_output=True, text=True,
                              timeout=1800, check=False)
    else:
        cmd = [sys.executable, __file__, "--client", name, "--port", str(port),
               "--pid", str(pid), "--expect", str(expect), "--repeat", str(repeat)]
        env = dict(os.environ, QMF_BENCH_TREE=tree or str(ROOT))
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, check=False,
                              env=env)
    if done.returncode != 0:
        raise SystemExit(f"{name} failed: {done.stderr.strip()[-800:]}")
    out: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    if name == "classic_py27":
        runs = out["runs"]
        best = min(runs, key=lambda r: r["seconds"])
        out = {"seconds": best["seconds"], "runs": [r["seconds"] for r in runs],
               "qpidd_cpu": best.get("qpidd_cpu"), "max_rss_mib": out["max_rss_kb"] / 1024}
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--queues", type=int, default=10_000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--json", type=Path)
    p.add_argument("--skip-py27", action="store_true", help="leave the classic console out")
    p.add_argument("--clients", default=",".join(CLIENTS),
                   help="comma-separated subset of " + ", ".join(CLIENTS))
    p.add_argument("--baseline", type=Path, default=None,
                   help="a checkout of another commit: its Session clients run too, "
                        "interleaved (labelled 'base ...')")
    p.add_argument("--qmf1", action="store_true", help="a qpidd with QMF v1 publications on")
    p.add_argument("--quick", action="store_true",
                   help="200 queues, one round of one query (a smoke run)")
    p.add_argument("--client", choices=tuple(_VERSION), help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, help=argparse.SUPPRESS)
    p.add_argument("--pid", type=int, help=argparse.SUPPRESS)
    p.add_argument("--expect", type=int, default=0, help=argparse.SUPPRESS)
    opts = p.parse_args()
    if opts.client:
        print(json.dumps(run_session(opts.client, opts.port, opts.pid, opts.expect,
                                     opts.repeat)))
        return
    if opts.quick:
        opts.queues, opts.rounds, opts.repeat = 200, 1, 1
    chosen = opts.clients.split(",")
    runs = [(c, c, "") for c in CLIENTS
            if c in chosen and not (opts.skip_py27 and c == "classic_py27")]
    if opts.baseline is not None:
        runs += [(f"base {c}", c, str(opts.baseline.resolve())) for _, c, _ in list(runs)
                 if c != "classic_py27"]
    clients = [label for label, _, _ in runs]
    results: dict[str, list[dict[str, Any]]] = {c: [] for c in clients}
    with V2Qpidd(qmf1=opts.qmf1) as q:
        made = create_queues(q.port, opts.queues)
        kind = "qpidd with QMF v1 on" if opts.qmf1 else "stock qpidd"
        print(f"{kind} {q.port}: {made['created']} queues in {made['seconds']:.1f} s",
              flush=True)
        for r in range(opts.rounds):
            for c, name, tree in runs:
                res = client(name, q.port, q.pid, opts.queues, opts.repeat, tree)
                results[c].append(res)
                print(f"round {r + 1} {c:18s} {res['seconds']:.3f} s "
                      f"client cpu {res.get('client_cpu') or 0:.3f} s "
                      f"qpidd cpu {res.get('qpidd_cpu') or 0:.3f} s", flush=True)
    best = {c: min(x["seconds"] for x in results[c]) for c in clients}
    print(f"\n{opts.queues} queues on a {kind}, best of {opts.rounds} rounds x "
          f"{opts.repeat}:")
    first = clients[0]
    print(f"| client | get_objects s | vs {first} | client CPU s (best) | qpidd CPU s |")
    print("|---|---:|---:|---:|---:|")
    for c in clients:
        run = min(results[c], key=lambda x: x["seconds"])
        mine = min((x.get("client_cpu") or 0 for x in results[c]), default=0)
        print(f"| {c} | {best[c]:.3f} | {best[c] / best[first]:.1f}x | {mine:.3f} | "
              f"{run.get('qpidd_cpu') or 0:.3f} |")
    if opts.json:
        opts.json.write_text(json.dumps({"queues": opts.queues, "qmf1": opts.qmf1,
                                         "results": results,
                                         "best": best}, indent=2))


if __name__ == "__main__":
    main()
