"""CPU per QMF v2 object update of a Session following every queue of a stock qpidd
(issue 36, item 5), side by side with the transport alone and the protocol core, on
each AMQP 1.0 transport, in one run.

    python benchmarks/v2_updates.py [--queues 2000] [--seconds 6] [--rounds 2]
        [--transports native,proton] [--paths raw,core,session] [--profile DIR]
        [--baseline DIR [--baseline-transports native,proton]] [--quick] [--json FILE]

Starts a fresh stock qpidd (QMF v1 off, ``--mgmt-pub-interval 1``), creates the queues
and keeps every one of them changing: ``benchmarks/qpidd/traffic.py`` sends ``--rate``
(default: one per queue) messages a second round robin over all of them, so qpidd
publishes each queue's statistics every second.  Then, per round, each path on each
transport runs for ``--seconds`` in its own process (``benchmarks/qpidd/v2_subscriber.py``,
``QMF_AMQP10`` picking the transport), interleaved:

- ``raw``: a link bound to ``agent.ind.data.org_apache_qpid_broker.queue.#``, the
  transport alone (its AMQP 1.0 decode of each message; nothing of QMF);
- ``core``: the same link through ``ConsoleProtocolV2`` (``V2Data`` values);
- ``session``: ``Session.connect(url, protocol="1.0")`` and
  ``object_updates(_class="queue")``, each update counted as the user receives it.

``--baseline DIR`` (a checkout of another commit, e.g. ``git worktree add DIR ffb886a``)
adds the same windows run on that tree's ``qmf_async`` (``QMF_BENCH_TREE``), interleaved
with this tree's, on ``--baseline-transports``: before and after in one run.

The figure is the subscriber's own CPU (user + system, ``getrusage``) over the window,
divided by the objects (or updates) it got: CPU, not wall time, since the machine is
shared.  The load average is read at the start and the end.  ``--profile DIR`` runs one
more window of each session path under cProfile (``DIR/session-<transport>.prof``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.qpidd.broker import HERE, QpiddError, create_queues  # noqa: E402
from benchmarks.qpidd.v2 import V2Qpidd, last_json, run_measured  # noqa: E402

QUEUE_KEY = "agent.ind.data.org_apache_qpid_broker.queue.#"


def loadavg() -> list[str]:
    return Path("/proc/loadavg").read_text().split()[:3]


def subscribe(port: int, pid: int, path: str, transport: str, seconds: float,
              settle: float, profile: str = "", tree: str = "") -> dict[str, Any]:
    """One window of ``path`` on ``transport`` in its own process.

    Raises:
        RuntimeError: the subscriber failed.
    """
    cmd = [sys.executable, str(HERE / "v2_subscriber.py"), "--port", str(port),
           "--qpidd-pid", str(pid), "--seconds", str(seconds)]
    if path == "session":
        cmd += ["--via", "session", "--follow", "queue", "--settle", str(settle)]
    else:
        cmd += ["--via", "raw" if path == "raw" else "transport", "--key", QUEUE_KEY]
    if profile:
        cmd += ["--profile", profile]
    env = dict(os.environ, PYTHONPATH=tree or str(ROOT), QMF_AMQP10=transport,
               QMF_BENCH_TREE=tree or str(ROOT))
    return last_json(run_measured(cmd, env=env, timeout=seconds + settle + 120),
                     f"{path} on {transport}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--queues", type=int, default=2000)
    p.add_argument("--seconds", type=float, default=6.0, help="per window")
    p.add_argument("--settle", type=float, default=3.0,
                   help="session: seconds before the window (bindings, completions)")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--rate", type=float, default=0.0,
                   help="traffic messages per second (0: one per queue)")
    p.add_argument("--transports", default="native,proton")
    p.add_argument("--paths", default="raw,core,session")
    p.add_argument("--profile", type=Path, default=None,
                   help="directory for a cProfile of each session path")
    p.add_argument("--baseline", type=Path, default=None,
                   help="a checkout of another commit run side by side (its qmf_async)")
    p.add_argument("--baseline-transports", default="native,proton")
    p.add_argument("--quick", action="store_true",
                   help="a smoke run: 200 queues, 1.5 s windows, one round, native only")
    p.add_argument("--json", type=Path)
    opts = p.parse_args()
    if opts.quick:
        opts.queues, opts.seconds, opts.settle, opts.rounds = 200, 1.5, 2.0, 1
        opts.transports = "native"
    #: the columns: (label, transport, tree)
    columns = [(t, t, "") for t in opts.transports.split(",")]
    if opts.baseline is not None:
        columns += [(f"base {t}", t, str(opts.baseline.resolve()))
                    for t in opts.baseline_transports.split(",")]
    transports = [c[0] for c in columns]
    paths = opts.paths.split(",")
    rate = opts.rate or float(opts.queues)
    summary: dict[str, Any] = {
        "options": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(opts).items()},
        "machine": {"nproc": os.cpu_count(), "python": platform.python_version(),
                    "loadavg_start": loadavg()}}
    results: list[dict[str, Any]] = []
    traffic: subprocess.Popen[str] | None = None
    try:
        with V2Qpidd(qmf1=False, pub_interval=1) as q:
            made = create_queues(q.port, opts.queues)
            print(f"qpidd pid {q.pid} port {q.port}: {made['created']} queues in "
                  f"{made['seconds']:.2f} s", flush=True)
            traffic = subprocess.Popen(
                [sys.executable, str(HERE / "traffic.py"), "--port", str(q.port),
                 "--rate", str(rate), "--queues", str(opts.queues), "--churn", "0"],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                env=dict(os.environ, PYTHONPATH=str(ROOT)))
            time.sleep(3)  # every queue changed once before the first window
            for rnd in range(opts.rounds):
                for path in paths:
                    for impl, transport, tree in columns:
                        r = subscribe(q.port, q.pid, path, transport, opts.seconds,
                                      opts.settle, tree=tree)
                        r.update(path=path, transport=impl, round=rnd,
                                 loadavg=loadavg())
                        results.append(r)
                        per = 1e6 * r["cpu"] / r["objects"] if r["objects"] else float("nan")
                        print(f"round {rnd} {path:8} {impl:11} {r['objects']:6d} objects "
                              f"{r['cpu']:.3f} s CPU  {per:6.1f} us/object  "
                              f"load {' '.join(r['loadavg'])}", flush=True)
            if opts.profile is not None:
                opts.profile.mkdir(parents=True, exist_ok=True)
                for impl, transport, tree in columns:
                    out = opts.profile / f"session-{impl.replace(' ', '-')}.prof"
                    subscribe(q.port, q.pid, "session", transport, opts.seconds, opts.settle,
                              str(out), tree=tree)
                    print(f"profile: {out}", flush=True)
            traffic.terminate()
            out_t, err_t = traffic.communicate(timeout=30)
            if traffic.returncode not in (0, -15):
                raise RuntimeError(f"traffic failed: {err_t.strip()[-500:]}")
            lines = out_t.strip().splitlines()
            summary["traffic"] = json.loads(lines[-1]) if lines else None
    except QpiddError as exc:
        print(f"v2_updates: {exc}", file=sys.stderr)
        return 2
    finally:
        if traffic is not None and traffic.poll() is None:
            traffic.kill()
            traffic.communicate()
    summary["machine"]["loadavg_end"] = loadavg()
    summary["results"] = results
    table: dict[str, dict[str, list[float]]] = {}
    for r in results:
        if r["objects"]:
            table.setdefault(r["path"], {}).setdefault(r["transport"], []).append(
                1e6 * r["cpu"] / r["objects"])
    print(f"\nus of CPU per queue object (best; median), load "
          f"{' '.join(summary['machine']['loadavg_start'])} -> "
          f"{' '.join(summary['machine']['loadavg_end'])}")
    print("path      " + "".join(f"{t:>20}" for t in transports))
    for path in paths:
        cells = []
        for t in transports:
            got = table.get(path, {}).get(t, [])
            cells.append(f"{min(got):8.1f} ({statistics.median(got):6.1f})" if got else "--")
        print(f"{path:10}" + "".join(f"{c:>20}" for c in cells))
    summary["us_per_object"] = {path: {t: min(v) for t, v in by.items()}
                                for path, by in table.items()}
    if opts.json:
        opts.json.write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps({"us_per_object": summary["us_per_object"]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
