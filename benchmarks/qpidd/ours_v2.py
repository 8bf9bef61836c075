"""qmf-async's QMF v2 get_objects of the queues from qpidd over AMQP 1.0, best of N.

Through ``Session.connect(url, protocol="1.0", qmf_version=2).get_objects(_class=
"queue")`` when the Session has ``qmf_version`` (``--path session``, the default when
available); with ``--path core``, or when the Session has no v2, the v2 console core
driven directly: ``NativeAmqp10Transport`` + ``ConsoleProtocolV2.send_query``, the
answer's parts gathered into one ``QueryDone`` (objects decoded into
``V2Data``).  ``--path v1``: the Session's QMF v1 query over AMQP 1.0 (``qmf_version=1``
when the Session has it), which qpidd answers even with ``--mgmt-qmf1 no`` (that option
stops only v1 publications).
Prints one JSON line.

    python benchmarks/qpidd/ours_v2.py --port 5673 --qpidd-pid PID [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
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
from qmf_async.console import Session  # noqa: E402
from qmf_async.protocol import ConsoleProtocolV2, QueryDone  # noqa: E402
from qmf_async.transport import Delivery, NativeAmqp10Transport, open_reply_endpoint  # noqa: E402
from qmf_async.wire import V2SchemaId  # noqa: E402


def self_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


class Meter:
    def __init__(self, qpidd_pid: int) -> None:
        self.qpidd_pid = qpidd_pid
        self.figures: dict[str, Any] = {}

    def __enter__(self) -> Meter:
        self.c0, self.q0, self.t0 = self_cpu(), proc_cpu(self.qpidd_pid), time.monotonic()
        return self

    def __exit__(self, *exc: object) -> None:
        self.figures = {"seconds": time.monotonic() - self.t0, "cpu": self_cpu() - self.c0,
                        "qpidd_cpu": proc_cpu(self.qpidd_pid) - self.q0}


async def by_session(opts: argparse.Namespace, version: int) -> list[dict[str, Any]]:
    runs = []
    connect: Any = Session.connect
    extra = {"qmf_version": version} if session_takes("qmf_version") else {}
    async with connect(f"amqp://127.0.0.1:{opts.port}/", protocol="1.0", **extra) as s:
        for _ in range(opts.repeat):
            with Meter(opts.qpidd_pid) as m:
                queues = await s.get_objects(_class="queue", _timeout=300)
            m.figures["objects"] = len(queues)
            runs.append(m.figures)
            del queues
    return runs


async def by_core(opts: argparse.Namespace) -> list[dict[str, Any]]:
    t = NativeAmqp10Transport(f"amqp://127.0.0.1:{opts.port}/")
    await t.connect()
    core = ConsoleProtocolV2()
    answers: dict[str, asyncio.Future[Any]] = {}
    loop = asyncio.get_running_loop()

    def on_delivery(d: Delivery) -> None:
        for ev in core.receive(d.headers, d.value, subject=d.routing_key,
                               correlation_id=d.correlation_id, now=time.monotonic()):
            fut = answers.get(getattr(ev, "request", ""))
            if fut is not None and not fut.done():
                fut.set_result(ev)

    runs = []
    try:
        t.set_dispatcher(on_delivery)
        reply = await open_reply_endpoint(t)
        for _ in range(opts.repeat):
            with Meter(opts.qpidd_pid) as m:
                out = core.send_query(None, schema_id=V2SchemaId("", "queue"))
                fut = answers[out.correlation_id] = loop.create_future()
                await t.publish(out.body, exchange=out.exchange, routing_key=out.key,
                                reply_to=reply, correlation_id=out.correlation_id,
                                headers=out.headers)
                ev = await asyncio.wait_for(fut, 300)
            if not isinstance(ev, QueryDone) or ev.code != 0:
                raise SystemExit(f"the query failed: {ev!r:.300}")
            m.figures["objects"] = len(ev.items)
            runs.append(m.figures)
            del ev, fut
            answers.clear()
    finally:
        await t.close()
    return runs


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--qpidd-pid", type=int, required=True)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--expect", type=int, default=0)
    p.add_argument("--path", choices=["auto", "session", "core", "v1"], default="auto")
    opts = p.parse_args()
    path = opts.path
    if path == "auto":
        path = "session" if session_takes("qmf_version") else "core"
    runs = asyncio.run(by_core(opts) if path == "core" else
                       by_session(opts, 1 if path == "v1" else 2))
    got = min(r["objects"] for r in runs)
    if got < opts.expect:
        print(f"ours_v2: {got} queues, expected >= {opts.expect}", file=sys.stderr)
        return 1
    ru = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps({"client": f"ours_{path}", "path": path, "runs": runs,
                      "max_rss_kb": ru.ru_maxrss, "cpu_user": ru.ru_utime,
                      "cpu_sys": ru.ru_stime}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
