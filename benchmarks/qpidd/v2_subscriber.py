"""One QMF v2 indication subscription on qpidd's ``qmf.default.topic`` over AMQP 1.0,
held for ``--seconds``: what a console following some agents or classes receives.
``QMF_BENCH_TREE`` names another checkout whose ``qmf_async`` runs instead of this
one's (a baseline, side by side in one run).  ``--via raw`` counts what the transport
hands up and does nothing more (its own AMQP 1.0 decode: the floor under every QMF
path); ``--profile FILE`` runs cProfile over the window.

The AMQP 1.0 transport (the built-in one) binds one
link with the topic binding ``--key`` and, when given, the
selector ``--selector`` (``apache.org:selector-filter:string``, applied by qpidd).  Every
delivery goes through ``ConsoleProtocolV2.receive`` as in a console.  Counted over the
window (which starts once the link is attached): messages (by ``qmf.content`` and by
``qmf.agent``), objects and events in them, bytes read from the socket (AMQP frames
included), this process's CPU and qpidd's.  With ``--via session`` the same window
through the Session's ``object_updates``/``events`` subscriptions (``--follow``):
objects and events they yield.  Prints one JSON line.

    python benchmarks/qpidd/v2_subscriber.py --port 5673 --qpidd-pid PID \\
        --key 'agent.ind.#' [--selector "qmf.content = '_event'"] [--seconds 10]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import resource
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent.parent
#: the tree whose qmf_async runs (QMF_BENCH_TREE: another checkout, e.g. a baseline)
TREE = os.environ.get("QMF_BENCH_TREE") or str(ROOT)
if TREE not in sys.path:
    sys.path.insert(0, TREE)

from benchmarks.qpidd.broker import proc_cpu  # noqa: E402
from qmf_async.protocol import ConsoleProtocolV2  # noqa: E402

try:  # a baseline tree from before the one event vocabulary (--baseline)
    from qmf_async.protocol import V2DataIndicated as ObjectUpdate  # type: ignore[attr-defined]
    from qmf_async.protocol import V2EventIndicated as EventReceived  # type: ignore[attr-defined]
except ImportError:
    from qmf_async.protocol import EventReceived, ObjectUpdate
from qmf_async.transport import Delivery, NativeAmqp10Transport  # noqa: E402

TOPIC = "qmf.default.topic"
SOCKET_BYTES = [0]


def count_socket_bytes() -> None:
    """Count every byte the process's asyncio streams read (the transport's socket)."""
    original = asyncio.StreamReader.read

    async def read(self: asyncio.StreamReader, n: int = -1) -> bytes:
        data = await original(self, n)
        SOCKET_BYTES[0] += len(data)
        return data

    asyncio.StreamReader.read = read  # type: ignore[method-assign]


@contextlib.contextmanager
def profiled(path: str) -> Iterator[None]:
    """cProfile over the window when ``path`` is given (stats dumped there)."""
    if not path:
        yield
        return
    import cProfile

    prof = cProfile.Profile()
    prof.enable()
    try:
        yield
    finally:
        prof.disable()
        prof.dump_stats(path)


def self_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


async def run(opts: argparse.Namespace) -> dict[str, Any]:
    t = NativeAmqp10Transport(f"amqp://127.0.0.1:{opts.port}/", prefetch=opts.prefetch)
    await t.connect()
    core = ConsoleProtocolV2()
    counting = False
    raw = opts.via == "raw"
    contents: collections.Counter[str] = collections.Counter()
    agents: collections.Counter[str] = collections.Counter()
    subjects: collections.Counter[str] = collections.Counter()
    figures = {"messages": 0, "objects": 0, "events": 0}

    def on_delivery(d: Delivery) -> None:
        if not counting:
            return
        figures["messages"] += 1
        if raw:  # the transport alone: its AMQP 1.0 decode, no QMF
            if isinstance(d.value, list):
                figures["objects"] += len(d.value)
            return
        headers = d.headers or {}
        contents[str(headers.get("qmf.content", headers.get("qmf.opcode", "?")))] += 1
        agents[str(headers.get("qmf.agent", "?"))] += 1
        subjects[".".join(d.routing_key.split(".")[:5])] += 1
        for ev in core.receive(headers, d.value, subject=d.routing_key,
                               correlation_id=d.correlation_id, now=time.monotonic()):
            if isinstance(ev, ObjectUpdate):
                figures["objects"] += len(ev.items)
            elif isinstance(ev, EventReceived):
                figures["events"] += 1

    t.set_dispatcher(on_delivery)
    try:
        endpoint = await t.open_endpoint()
        await t.bind(endpoint, TOPIC, opts.key, selector=opts.selector or None)
        b0, c0, q0, t0 = SOCKET_BYTES[0], self_cpu(), proc_cpu(opts.qpidd_pid), time.monotonic()
        counting = True
        with profiled(opts.profile):
            await asyncio.sleep(opts.seconds)
        counting = False
        out: dict[str, Any] = {
            "key": opts.key, "selector": opts.selector, "seconds": time.monotonic() - t0,
            "bytes": SOCKET_BYTES[0] - b0, "cpu": self_cpu() - c0,
            "qpidd_cpu": proc_cpu(opts.qpidd_pid) - q0, **figures,
            "by_content": dict(contents), "by_agent": dict(agents),
            "by_subject": dict(subjects.most_common(12)),
            "malformed": core.malformed + t.malformed}
    finally:
        await t.close()
    return out


#: what ``--follow`` subscribes to through the Session: (objects filter, events filter);
#: None: not followed, {}: everything
FOLLOW: dict[str, tuple[dict[str, str] | None, dict[str, str] | None]] = {
    "all": ({}, {}),
    "objects": ({}, None),
    "queue": ({"_class": "queue", "_package": "org.apache.qpid.broker"}, None),
    "class": ({"_class": "exchange", "_package": "org.apache.qpid.broker"}, None),
    "events": (None, {}),
    "event_class": (None, {"_class": "queueDeclare", "_package": "org.apache.qpid.broker"}),
}


async def run_session(opts: argparse.Namespace) -> dict[str, Any]:
    """The same window through ``Session`` subscriptions (``object_updates`` and
    ``events``), which ask qpidd for what they follow over v2."""
    from qmf_async.console import Session

    objects_filter, events_filter = FOLLOW[opts.follow]
    figures = {"objects": 0, "events": 0}
    counting = False

    async def drain(sub: Any, key: str) -> None:
        async for _ in sub:
            if counting:
                figures[key] += 1

    async with Session.connect(f"amqp://127.0.0.1:{opts.port}/", protocol="1.0") as s:
        subs = []
        if objects_filter is not None:
            subs.append((s.object_updates(**objects_filter), "objects"))
        if events_filter is not None:
            subs.append((s.events(**events_filter), "events"))
        tasks = [asyncio.create_task(drain(sub, key)) for sub, key in subs]
        await asyncio.sleep(opts.settle)  # the bindings are made in the background
        b0, c0, q0, t0 = SOCKET_BYTES[0], self_cpu(), proc_cpu(opts.qpidd_pid), time.monotonic()
        counting = True
        with profiled(opts.profile):
            await asyncio.sleep(opts.seconds)
        counting = False
        out: dict[str, Any] = {
            "follow": opts.follow, "objects_filter": objects_filter,
            "events_filter": events_filter, "seconds": time.monotonic() - t0,
            "bytes": SOCKET_BYTES[0] - b0, "cpu": self_cpu() - c0,
            "qpidd_cpu": proc_cpu(opts.qpidd_pid) - q0, **figures,
            "dropped": sum(sub.dropped for sub, _ in subs),
            "qmf_version": [b.qmf_version for b in s.brokers]}
        for sub, _ in subs:
            sub.close()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--qpidd-pid", type=int, required=True)
    p.add_argument("--key", default="agent.ind.#")
    p.add_argument("--selector", default="")
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--prefetch", type=int, default=1000)
    p.add_argument("--via", choices=["raw", "transport", "session"], default="transport",
                   help="raw: the transport alone (its AMQP 1.0 decode); transport: and "
                        "ConsoleProtocolV2; session: Session subscriptions")
    p.add_argument("--profile", default="", help="cProfile the window into this file")
    p.add_argument("--follow", choices=sorted(FOLLOW), default="all",
                   help="with --via session: what the subscriptions follow")
    p.add_argument("--settle", type=float, default=2.0,
                   help="with --via session: seconds for the bindings before the window")
    opts = p.parse_args()
    count_socket_bytes()
    out = asyncio.run(run(opts) if opts.via != "session" else run_session(opts))
    out["max_rss_kb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    shapes = getattr(sys.modules.get("qmf_async.wire._amqp10"), "_SHAPES", None)
    if shapes is not None:  # the decoder's learned map shapes (where the tree has them)
        out["map_shapes"] = {"shapes": shapes.shapes, "hits": shapes.hits,
                             "misses": shapes.misses}
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
