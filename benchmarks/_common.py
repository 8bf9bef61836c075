"""Helpers shared by the benchmarks: command line, machine facts, child processes,
CPU accounting and the output format (a small table, then one JSON line).

Every benchmark runs its own baseline in the same run and reports ratios to it, so
the figures mean something on any machine; absolute numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run from a checkout without installing
    sys.path.insert(0, str(ROOT))

DEFAULT_URL = os.environ.get("QMF_TEST_URL", "amqp://guest:guest@localhost:5672/")
CLK_TCK = os.sysconf("SC_CLK_TCK")


def parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--url", default=DEFAULT_URL, help="AMQP 0-9-1 broker URL")
    p.add_argument("--quick", action="store_true", help="fewer iterations (a smoke run)")
    # internal: a child process role (responders spawned by the benchmark itself)
    p.add_argument("--role", help=argparse.SUPPRESS)
    p.add_argument("--arg", action="append", default=[], help=argparse.SUPPRESS)
    return p


def import_session() -> Any:
    """``Session``, waiting a little if ``_selector`` is still being written."""
    deadline = time.monotonic() + 600
    while True:
        try:
            from qmf_async.console._session import Session
            return Session
        except ModuleNotFoundError as exc:
            if "_selector" not in str(exc) or time.monotonic() > deadline:
                raise
            print("qmf_async.protocol._selector is missing; retrying in 30 s", file=sys.stderr)
            time.sleep(30)


def _rabbitmq_version() -> str:
    ctl = shutil.which("rabbitmqctl") or next(
        (p for p in ("/usr/sbin/rabbitmqctl", "/usr/lib/rabbitmq/bin/rabbitmqctl")
         if os.path.exists(p)), None)
    if ctl is None:
        return "unknown"
    try:
        out = subprocess.run([ctl, "version"], capture_output=True, text=True, timeout=30)
        return out.stdout.strip().splitlines()[-1] if out.stdout.strip() else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def machine() -> dict[str, Any]:
    def version(dist: str) -> str:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return "?"

    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "python": platform.python_version(),
        "aiormq": version("aiormq"),
        "pamqp": version("pamqp"),
        "rabbitmq": _rabbitmq_version(),
    }


# --------------------------------------------------------------------------- CPU time

def _proc_cpu(pid: int) -> float:
    """CPU seconds a process used so far (all its threads; 0.0 when it is gone).

    Reads the scheduler's nanosecond run time (``/proc/PID/schedstat``, summed over
    ``task/*``), falling back to the tick-based utime + stime of ``/proc/PID/stat``.
    """
    try:
        total = 0
        for task in Path(f"/proc/{pid}/task").iterdir():
            try:
                total += int((task / "schedstat").read_text().split()[0])
            except (OSError, IndexError, ValueError):
                continue
        if total:
            return total / 1e9
    except OSError:
        pass
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK
    except (OSError, IndexError, ValueError):
        return 0.0


def _broker_pids() -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if (entry / "comm").read_text().strip() != "beam.smp":
                continue
            # the RabbitMQ node, not a rabbitmqctl run (also a beam.smp)
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
            if b"rabbit boot" in cmdline:
                pids.append(int(entry.name))
        except OSError:
            continue
    return pids


class CpuMeter:
    """CPU seconds used by this process, a child and the RabbitMQ node over a span."""

    def __init__(self, child_pid: int | None) -> None:
        self.pids = {"client": os.getpid(), "responder": child_pid}
        self.broker = _broker_pids()

    def _sample(self) -> dict[str, float]:
        out = {k: _proc_cpu(p) if p else 0.0 for k, p in self.pids.items()}
        out["rabbitmq"] = sum(_proc_cpu(p) for p in self.broker)
        return out

    def __enter__(self) -> CpuMeter:
        self.start = self._sample()
        return self

    def __exit__(self, *exc: object) -> None:
        end = self._sample()
        self.used = {k: end[k] - self.start[k] for k in end}


# --------------------------------------------------------------------------- children

class Child:
    """A responder process: ``python THIS_FILE --role ROLE --arg ...``.

    The child prints ``READY`` on stdout once it serves; :meth:`stop` ends it
    (SIGTERM to its own pid, then SIGKILL).
    """

    def __init__(self, script: str, role: str, url: str, args: Sequence[str] = ()) -> None:
        cmd = [sys.executable, script, "--role", role, "--url", url]
        for a in args:
            cmd += ["--arg", str(a)]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                     text=True)
        self.role = role

    @property
    def pid(self) -> int:
        return self.proc.pid

    async def ready(self, timeout: float = 60.0) -> None:
        loop = asyncio.get_running_loop()
        assert self.proc.stdout is not None
        line = await asyncio.wait_for(loop.run_in_executor(None, self.proc.stdout.readline),
                                      timeout)
        if line.strip() != "READY":
            self.stop()
            raise RuntimeError(f"{self.role} responder did not start (said {line!r}, "
                               f"exit code {self.proc.poll()})")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def child_ready() -> None:
    print("READY", flush=True)


async def serve_until_terminated() -> None:
    import signal
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()


# --------------------------------------------------------------------------- output

async def raw_reply_channel(url: str, prefix: str) -> tuple[Any, Any, str, Any]:
    """A raw aiormq requester's setup: (connection, channel without publisher confirms,
    its reply queue bound to ``amq.direct`` under its own name, request properties)."""
    import random

    import aiormq
    from pamqp import commands as spec

    conn = await aiormq.connect(url)
    ch = await conn.channel(publisher_confirms=False)
    name = f"{prefix}-{os.getpid()}-{random.randrange(1 << 30)}"
    await ch.queue_declare(name, exclusive=True, auto_delete=True)
    await ch.queue_bind(name, "amq.direct", routing_key=name)
    return conn, ch, name, spec.Basic.Properties(content_type="x-application/qmf",
                                                  reply_to=name)


def summary(times: Sequence[float]) -> dict[str, float]:
    return {"best": min(times), "median": statistics.median(times), "runs": len(times)}


def table(rows: Sequence[Sequence[Any]], header: Sequence[str]) -> str:
    cells = [[str(c) for c in r] for r in [header, *rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in
                       enumerate(zip(cells[0], widths, strict=True)))]
    lines.append("  ".join("-" * w for w in widths))
    for r in cells[1:]:
        lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                               for i, (c, w) in enumerate(zip(r, widths, strict=True))))
    return "\n".join(lines)


def emit_json(result: dict[str, Any]) -> None:
    print(json.dumps(result, sort_keys=True, default=str), flush=True)


# --------------------------------------------------------------------------- queue class

QUEUE_PACKAGE = "org.apache.qpid.broker"
QUEUE_STATS = (
    "msgTotalEnqueues", "msgTotalDequeues", "msgTxnEnqueues", "msgTxnDequeues",
    "msgPersistEnqueues", "msgPersistDequeues", "msgDepth", "byteDepth",
    "byteTotalEnqueues", "byteTotalDequeues", "byteTxnEnqueues", "byteTxnDequeues",
    "bytePersistEnqueues", "bytePersistDequeues", "msgFtdEnqueues", "msgFtdDequeues",
    "byteFtdEnqueues", "byteFtdDequeues", "releases", "acquires",
)


def queue_schema() -> Any:
    """A qpidd-queue-like class: 6 properties (one a map) and 20 uint64 statistics."""
    from qmf_async.agent import Property, Statistic, object_class

    return object_class(
        QUEUE_PACKAGE, "queue",
        properties=[
            Property("vhostRef", "objId", index=True),
            Property("name", "sstr", index=True),
            Property("durable", "bool"),
            Property("autoDelete", "bool"),
            Property("exclusive", "bool"),
            Property("arguments", "map"),
        ],
        statistics=[Statistic(n, "uint64") for n in QUEUE_STATS],
    )


def queue_values(i: int) -> dict[str, Any]:
    """Deterministic values of queue number ``i``: about half the counters are 0,
    the others spread over 40 bits (so most are distinct int objects)."""
    import random as _random

    from qmf_async.wire._values import ObjectId

    rng = _random.Random(i)
    values: dict[str, Any] = {
        "vhostRef": ObjectId.make(sequence=1, broker_bank=1, agent_bank=0, object=2),
        "name": f"bench.queue.{i:06d}",
        "durable": i % 3 == 0,
        "autoDelete": False,
        "exclusive": i % 7 == 0,
        "arguments": {"x-max-length": 10_000 + i % 1000, "qpid.policy_type": "ring"},
    }
    for name in QUEUE_STATS:
        values[name] = 0 if rng.random() < 0.5 else rng.randrange(1, 1 << 40)
    return values
