"""The classic API's cost: getObjects of every queue of a qpidd through ``qmf.console``
on qmf-async, against the asyncio Session and the classic console (Python 2.7) on the
same broker in the same run.

    python benchmarks/classic.py [--queues 10000] [--rounds 3] [--repeat 3] [--json FILE]

One fresh qpidd (QMF v1 and v2 on) gets ``--queues`` queues.  Each client runs in its
own process, once per round (rounds interleave the clients), and reports the best of
``--repeat`` getObjects, its CPU and its peak RSS (the qmf-async clients also the least
CPU of the process over one call, ``cpu``, all its threads):

- ``asyncio``: ``await session.get_objects(_class="queue")`` (qmf_async.Session);
- ``classic``: ``session.getObjects(_class="queue")`` through qmf.console on qmf-async,
  then every object's ``name`` and ``msgDepth`` read once (what a script does);
- ``classic_py27``: the classic console, Python 2.7 (benchmarks/qpidd/classic_get.py).

Goal (issue): classic within 1.2x of asyncio, far below the classic console.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.qpidd.broker import (  # noqa: E402
    HERE,
    Qpidd,
    create_queues,
    python2,
    python2_env,
)

CLIENTS = ("asyncio", "classic", "classic_py27")


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_asyncio(port: int, expect: int, repeat: int) -> dict[str, Any]:
    from qmf_async import Session

    async def main() -> tuple[list[float], list[float]]:
        times, cpu = [], []
        async with Session(timeout=300) as s:
            await s.add_broker(f"127.0.0.1:{port}", timeout=30)
            for _ in range(repeat):
                c0, t0 = time.process_time(), time.perf_counter()
                qs = await s.get_objects(_class="queue", _package="org.apache.qpid.broker",
                                         _timeout=300)
                times.append(time.perf_counter() - t0)
                cpu.append(time.process_time() - c0)
                if len(qs) < expect:
                    raise SystemExit(f"{len(qs)} queues, expected >= {expect}")
                del qs
        return times, cpu

    times, cpu = asyncio.run(main())
    return {"seconds": min(times), "runs": times, "cpu": min(cpu), "cpu_runs": cpu,
            "max_rss_mib": _rss_mib()}


def run_classic(port: int, expect: int, repeat: int) -> dict[str, Any]:
    from qmf.console import Session
    times, reads, cpu = [], [], []
    sess = Session(timeout=300)
    try:
        sess.addBroker(f"127.0.0.1:{port}", timeout=30)
        for _ in range(repeat):
            # process_time: every thread of the process, the classic layer's loop too
            c0, t0 = time.process_time(), time.perf_counter()
            qs = sess.getObjects(_class="queue", _package="org.apache.qpid.broker",
                                 _timeout=300)
            times.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
            t1 = time.perf_counter()
            total = sum(q.msgDepth for q in qs if q.name)
            reads.append(time.perf_counter() - t1)
            if len(qs) < expect or total < 0:
                raise SystemExit(f"{len(qs)} queues, expected >= {expect}")
            del qs
    finally:
        sess.close()
    return {"seconds": min(times), "runs": times, "cpu": min(cpu), "cpu_runs": cpu,
            "read_seconds": min(reads), "max_rss_mib": _rss_mib()}


def run_alternating(port: int, expect: int, repeat: int) -> dict[str, Any]:
    """One classic Session; alternately its asyncio Session's get_objects (timed on the
    loop thread) and the classic getObjects (timed by the caller): the layer's own
    cost on the same connection, the machine's load shared evenly."""
    from qmf.console import Session
    sess = Session(timeout=300)
    raw, classic = [], []
    try:
        sess.addBroker(f"127.0.0.1:{port}", timeout=30)

        async def timed() -> tuple[float, list[Any]]:
            t0 = time.perf_counter()
            qs = await sess.wrapped.get_objects(_class="queue",
                                                _package="org.apache.qpid.broker",
                                                _timeout=300)
            if len(qs) < expect:
                raise SystemExit(f"{len(qs)} queues, expected >= {expect}")
            return time.perf_counter() - t0, qs

        wrap = []
        for _ in range(repeat):
            seconds, found = sess.loop.call(timed(), 600)
            raw.append(seconds)
            t0 = time.perf_counter()  # the layer's own work on an answer: the wrappers
            wrapped = [sess._object_w(o) for o in found]
            wrap.append(time.perf_counter() - t0)
            del wrapped, found
            t0 = time.perf_counter()
            qs = sess.getObjects(_class="queue", _package="org.apache.qpid.broker",
                                 _timeout=300)
            classic.append(time.perf_counter() - t0)
            if len(qs) < expect:
                raise SystemExit(f"{len(qs)} queues, expected >= {expect}")
            del qs
    finally:
        sess.close()
    return {"asyncio_runs": raw, "classic_runs": classic, "wrap_runs": wrap,
            "max_rss_mib": _rss_mib()}


def client(name: str, port: int, pid: int, expect: int, repeat: int) -> dict[str, Any]:
    """Run one client in its own process; its JSON result."""
    if name == "classic_py27":
        cmd = [python2(), str(HERE / "classic_get.py"), "--port", str(port),
               "--qpidd-pid", str(pid), "--expect", str(expect), "--repeat", str(repeat)]
        done = subprocess.run(cmd, env=python2_env(), capture_output=True, text=True,
                              timeout=1800, check=False)
    else:
        cmd = [sys.executable, __file__, "--client", name, "--port", str(port),
               "--expect", str(expect), "--repeat", str(repeat)]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{name} failed: {done.stderr.strip()[-800:]}")
    out: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    if name == "classic_py27":
        out = {"seconds": min(r["seconds"] for r in out["runs"]),
               "runs": [r["seconds"] for r in out["runs"]],
               "max_rss_mib": out["max_rss_kb"] / 1024}
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--queues", type=int, default=10_000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--json", type=Path)
    p.add_argument("--skip-py27", action="store_true", help="leave the classic console out")
    p.add_argument("--alternate", type=int, default=6,
                   help="pairs of alternating calls on one connection (0: none)")
    p.add_argument("--client", choices=("asyncio", "classic", "alternate"),
                   help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, help=argparse.SUPPRESS)
    p.add_argument("--expect", type=int, default=0, help=argparse.SUPPRESS)
    opts = p.parse_args()
    if opts.client:
        run = {"asyncio": run_asyncio, "classic": run_classic,
               "alternate": run_alternating}[opts.client]
        print(json.dumps(run(opts.port, opts.expect, opts.repeat)))
        return
    clients = [c for c in CLIENTS if not (opts.skip_py27 and c == "classic_py27")]
    results: dict[str, list[dict[str, Any]]] = {c: [] for c in clients}
    with Qpidd(qmf2=True) as q:
        made = create_queues(q.port, opts.queues)
        print(f"qpidd {q.port}: {made['created']} queues in {made['seconds']:.1f} s",
              flush=True)
        expect = opts.queues
        for r in range(opts.rounds):
            for c in clients:
                res = client(c, q.port, q.pid, expect, opts.repeat)
                results[c].append(res)
                print(f"round {r + 1} {c:13s} {res['seconds']:.3f} s "
                      f"rss {res['max_rss_mib']:.0f} MiB", flush=True)
        alt: dict[str, Any] | None = None
        if opts.alternate:
            cmd = [sys.executable, __file__, "--client", "alternate", "--port", str(q.port),
                   "--expect", str(expect), "--repeat", str(opts.alternate)]
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=3600,
                                  check=False)
            if done.returncode != 0:
                raise SystemExit(f"alternate failed: {done.stderr.strip()[-800:]}")
            alt = json.loads(done.stdout.strip().splitlines()[-1])
    best = {c: min(x["seconds"] for x in results[c]) for c in clients}
    rss = {c: max(x["max_rss_mib"] for x in results[c]) for c in clients}
    print(f"\n{opts.queues} queues, best of {opts.rounds} rounds x {opts.repeat}:")
    print("| client | getObjects s | vs asyncio | peak RSS MiB |")
    print("|---|---:|---:|---:|")
    for c in clients:
        print(f"| {c} | {best[c]:.3f} | {best[c] / best['asyncio']:.2f}x | {rss[c]:.0f} |")
    reads = min(x["read_seconds"] for x in results["classic"])
    print(f"\nclassic: reading name and msgDepth of every object once: {reads:.3f} s")
    if alt is not None:
        import statistics
        a, c = alt["asyncio_runs"], alt["classic_runs"]
        ratios = [y / x for x, y in zip(a, c, strict=True)]
        print(f"\nalternating on one connection, {len(a)} pairs: asyncio median "
              f"{statistics.median(a):.3f} s (best {min(a):.3f}), classic median "
              f"{statistics.median(c):.3f} s (best {min(c):.3f}); classic/asyncio per pair: "
              f"median {statistics.median(ratios):.2f}x, "
              f"range {min(ratios):.2f}-{max(ratios):.2f}x; wrapping an answer's objects: "
              f"median {statistics.median(alt['wrap_runs']) * 1000:.1f} ms")
    if opts.json:
        opts.json.write_text(json.dumps({"queues": opts.queues, "results": results,
                                         "alternating": alt}, indent=1))


if __name__ == "__main__":
    main()
