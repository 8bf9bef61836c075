"""qmf-async's console over AMQP 1.0 against qpidd: get_objects of the queues (best of
N) and the broker object's echo method, 1 and W in flight, in QMF v1 (``--qmf-version
1``, the default here, as the raw client speaks; the Session's own default on qpidd
over 1.0 is v2).  Prints one JSON line, or
``unavailable`` (exit 0) while the AMQP 1.0 transport is not in the package.

    python benchmarks/qpidd/ours.py --port 5673 --qpidd-pid PID
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import resource
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.qpidd.broker import proc_cpu, session_takes  # noqa: E402

PACKAGE = "org.apache.qpid.broker"
BODY = "qmf-bench-echo"
TRANSPORT = "qmf_async.transport._native"


def available() -> bool:
    """True when the AMQP 1.0 transport module exists."""
    try:
        return importlib.util.find_spec(TRANSPORT) is not None
    except ModuleNotFoundError:
        return False


def self_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


class Meter:
    """Wall, own CPU and qpidd CPU across a block."""

    def __init__(self, qpidd_pid: int) -> None:
        self.qpidd_pid = qpidd_pid
        self.figures: dict[str, Any] = {}

    def __enter__(self) -> Meter:
        self.c0, self.q0, self.t0 = self_cpu(), proc_cpu(self.qpidd_pid), time.monotonic()
        return self

    def __exit__(self, *exc: object) -> None:
        self.figures = {"seconds": time.monotonic() - self.t0, "cpu": self_cpu() - self.c0,
                        "qpidd_cpu": proc_cpu(self.qpidd_pid) - self.q0}


async def echo_run(broker: Any, window: int, seconds: float, qpidd_pid: int
                   ) -> dict[str, Any]:
    """``window`` workers calling echo in a loop until ``seconds`` have passed."""
    end = time.monotonic() + seconds
    counts = {"calls": 0, "failed": 0}
    next_seq = iter(range(1, 1 << 31))

    async def worker() -> None:
        while time.monotonic() < end:
            seq = next(next_seq)
            result = await broker.echo(seq, BODY)
            counts["calls"] += 1
            if result.status != 0:
                counts["failed"] += 1

    with Meter(qpidd_pid) as m:
        await asyncio.wait_for(asyncio.gather(*(worker() for _ in range(window))),
                               seconds + 120)
    figures = m.figures
    figures.update(counts, rate=counts["calls"] / figures["seconds"], window=window)
    return figures


async def run(opts: argparse.Namespace) -> dict[str, Any]:
    from qmf_async.console import Session

    out: dict[str, Any] = {"client": "ours"}
    t0 = time.monotonic()
    extra: dict[str, Any] = {}
    if session_takes("qmf_version"):
        extra["qmf_version"] = opts.qmf_version  # v1 by default, as the raw client
    async with Session.connect(f"amqp://127.0.0.1:{opts.port}/", protocol="1.0",
                               **extra) as s:
        out["connect_seconds"] = time.monotonic() - t0
        runs = []
        for _ in range(opts.repeat):
            with Meter(opts.qpidd_pid) as m:
                queues = await s.get_objects(_class="queue", _package=PACKAGE, _timeout=300)
            m.figures["objects"] = len(queues)
            runs.append(m.figures)
            del queues
        got = min(r["objects"] for r in runs)
        if got < opts.expect:
            raise SystemExit(f"get_objects returned {got} queues, expected >= {opts.expect}")
        out["get_objects"] = {"runs": runs, "best": min(runs, key=lambda r: r["seconds"])}
        broker = (await s.get_objects(_class="broker", _package=PACKAGE))[0]
        out["echo_1"] = await echo_run(broker, 1, opts.seconds, opts.qpidd_pid)
        out["echo_window"] = await echo_run(broker, opts.window, opts.seconds, opts.qpidd_pid)
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--qpidd-pid", type=int, required=True)
    p.add_argument("--expect", type=int, default=10000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--window", type=int, default=1000)
    p.add_argument("--qmf-version", type=int, choices=[1, 2], default=1,
                   help="QMF version of the Session (default 1: the raw client's v1 calls)")
    opts = p.parse_args()
    if not available():
        print("unavailable")
        return 0
    out = asyncio.run(run(opts))
    ru = resource.getrusage(resource.RUSAGE_SELF)
    out.update(max_rss_kb=ru.ru_maxrss, cpu_user=ru.ru_utime, cpu_sys=ru.ru_stime)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
