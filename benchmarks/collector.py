"""How many samples per second the Parquet collector writes, against the decode rate.

A synthetic stream of qpidd ``queue`` objects (the demo agent's qpidd schema,
``examples/schemas/qpidd-broker.xml``: 7 properties, 47 statistics) is encoded with
``qmf_async.wire`` and packed 22 records per body as the agent packs them.  The
bodies are decoded once into ``QmfObject`` proxies, which are then pushed through
the collector's real path without the network: a session stand-in hands them to
``Collector.run()`` through bounded ``Subscription`` buffers (as ``Session`` does),
the collector batches them and its writer thread converts them to Arrow and
commits Parquet files (fsync + rename) in a temporary directory.

Each round: the decode rate (``wire.decode`` of the same bodies, objects/s), then
the collector rate (rows committed per second, from the first item handed over
to the last file committed).  The ratio collector/decode says whether the
collector keeps up with what a console can decode.  Both clocks are measured in
every round: ``cpu`` is the CPU time of the process (all threads, so the writer
thread counts), ``wall`` elapsed time.  The best round of each is reported.

    python benchmarks/collector.py [--objects 2000] [--rows 200000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from _corpus import machine  # noqa: E402

from qmf_async import ObjectId, QmfObject, QmfType, RemoteAgent, Subscription, wire  # noqa: E402
from qmf_async.agent import load_schema_xml  # noqa: E402
from qmf_async.tools.collector import Collector  # noqa: E402

SCHEMA_PATH = ROOT / "examples" / "schemas" / "qpidd-broker.xml"
PER_BODY = 22  # what the agent (and qpidd) pack into one body


def _value(t: QmfType, n: int, field: int) -> Any:
    """A plausible value of type ``t`` for object ``n``."""
    if t in (QmfType.SSTR, QmfType.LSTR):
        return f"queue-{n}-{field}"
    if t == QmfType.BOOL:
        return (n + field) % 2 == 0
    if t in (QmfType.FLOAT, QmfType.DOUBLE):
        return n * 0.5 + field
    if t == QmfType.REF:
        return ObjectId.make(sequence=1, broker_bank=1, agent_bank=10, object=n)
    if t == QmfType.UUID:
        return uuid.UUID(int=n)
    if t == QmfType.MAP:
        return {"x-queue-limit": n, "owner": "bench"} if field % 2 else {}
    if t in (QmfType.LIST, QmfType.ARRAY):
        return [n, field]
    if t in (QmfType.ABSTIME,):
        return time.time_ns()
    if t in (QmfType.UINT8, QmfType.INT8):
        return (n + field) % 100
    if t in (QmfType.UINT16, QmfType.INT16):
        return (n * 7 + field) % 30_000
    return n * 1_000 + field * 17  # 32/64-bit counters, deltaTime


def build_stream(objects: int) -> tuple[wire.SchemaRegistry, dict[str, list[bytes]]]:
    """Bodies of ``objects`` queues: family ``i`` (statistics), ``c`` (properties)."""
    schemas = load_schema_xml(SCHEMA_PATH)
    queue = schemas.by_name("queue")
    registry = wire.SchemaRegistry(list(schemas))
    now = time.time_ns()
    records: dict[str, list[wire.ObjectRecord]] = {"c": [], "i": []}
    for n in range(objects):
        oid = ObjectId.make(sequence=1, broker_bank=1, agent_bank=10, object=1000 + n)
        props = tuple(None if p.optional and n % 3 == 0 else _value(p.type, n, k)
                      for k, p in enumerate(queue.properties))
        stats = tuple(_value(s.type, n, k) for k, s in enumerate(queue.statistics))
        records["c"].append(wire.ObjectRecord("c", 0, queue, now, now - 10**9, 0, oid,
                                              properties=props))
        records["i"].append(wire.ObjectRecord("i", 0, queue, now, now - 10**9, 0, oid,
                                              statistics=stats))
    bodies = {fam: [wire.encode(recs[i:i + PER_BODY], registry)
                    for i in range(0, len(recs), PER_BODY)]
              for fam, recs in records.items()}
    return registry, bodies


def proxies(registry: wire.SchemaRegistry, bodies: list[bytes]) -> list[QmfObject]:
    """What a session hands its subscribers: one proxy per decoded record."""
    agent = RemoteAgent(None, 1, 10, "bench", "amqp://localhost:5672/%2F")  # type: ignore[arg-type]
    out = []
    for body in bodies:
        for rec in wire.decode(body, registry, lazy=True):  # as Session receives them
            out.append(QmfObject.from_record(None, None, agent, rec))
    return out


def timed(fn: Callable[[], int]) -> tuple[float, float]:
    """(items per CPU second, items per wall second) of one call returning a count."""
    c0, w0 = time.process_time(), time.perf_counter()
    n = fn()
    return n / (time.process_time() - c0), n / (time.perf_counter() - w0)


def decode_round(registry: wire.SchemaRegistry, bodies: list[bytes], rows: int) -> int:
    done = 0
    while done < rows:
        for body in bodies:
            done += len(wire.decode(body, registry))
    return done


class FeedSession:
    """The part of Session the collector uses, fed from a list of proxies."""

    def __init__(self) -> None:
        self.console: Any = None
        self.updates: Subscription[QmfObject] | None = None

    def object_updates(self, **kw: Any) -> Subscription[QmfObject]:
        self.updates = Subscription(kw.get("maxsize", 10_000))
        return self.updates

    def events(self, **kw: Any) -> Subscription[Any]:
        return Subscription(kw.get("maxsize", 10_000))

    def agent_changes(self, **kw: Any) -> Subscription[Any]:
        return Subscription(kw.get("maxsize", 1000))  # no agent comes or goes here


async def collect_round(objs: list[QmfObject], rows: int, out: Path,
                        batch_rows: int) -> tuple[int, int, int]:
    """Feed ``rows`` updates through Collector.run(); (written, dropped, files)."""
    session = FeedSession()
    collector = Collector(session, out, batch_rows=batch_rows, batch_seconds=3600)
    stop = asyncio.Event()
    task = asyncio.ensure_future(collector.run(stop))
    await asyncio.sleep(0)  # run() subscribes in its first step
    sub = session.updates
    assert sub is not None
    put = sub.deliver  # what the session does for each update it hands out
    fed = 0
    room = collector._subscription_size // 2
    while fed < rows:
        # never faster than the collector takes items: measure throughput, not drops
        while len(sub) > room:  # noqa: ASYNC110 - yield to the collector, no event to wait on
            await asyncio.sleep(0)
        for obj in objs[: min(len(objs), rows - fed, room)]:
            put(obj)
            fed += 1
        await asyncio.sleep(0)
    stop.set()
    await task
    s = collector.stats
    return s.written, s.dropped, s.files


def collect_sync(objs: list[QmfObject], rows: int, out: Path, batch_rows: int,
                 result: list[int]) -> int:
    """One collector round in its own event loop; (written, dropped, files) in ``result``."""
    result[:] = asyncio.run(collect_round(objs, rows, out, batch_rows))
    return result[0]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--objects", type=int, default=2000, help="queues in the stream (2000)")
    ap.add_argument("--rows", type=int, default=200_000, help="rows per round (200000)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds; the best is kept (3)")
    ap.add_argument("--batch-rows", type=int, default=10_000, help="collector batch_rows")
    ap.add_argument("--families", default="i,c", help="record families to run (i,c)")
    ap.add_argument("--dir", type=Path, default=None,
                    help="where the files go (default: a temporary directory)")
    ap.add_argument("--json", action="store_true", help="also print one JSON line")
    args = ap.parse_args(argv)

    registry, bodies = build_stream(args.objects)
    print(f"# {machine()}")
    print(f"# pyarrow {__import__('pyarrow').__version__}; {args.objects} queues, "
          f"{args.rows} rows per round, batch_rows {args.batch_rows}, "
          f"best of {args.rounds} rounds")
    print(f"{'family':6} {'clock':5} {'decode obj/s':>13} {'collector rows/s':>17} "
          f"{'ratio':>6} {'bytes/row':>9}")
    results: dict[str, Any] = {}
    base = args.dir or Path(tempfile.mkdtemp(prefix="qmf-collector-bench-"))
    for fam in args.families.split(","):
        objs = proxies(registry, bodies[fam])
        best = {"decode_cpu": 0.0, "decode_wall": 0.0, "collect_cpu": 0.0, "collect_wall": 0.0}
        size_per_row = 0.0
        for r in range(args.rounds):
            d_cpu, d_wall = timed(functools.partial(decode_round, registry, bodies[fam],
                                                    args.rows))
            out = base / f"{fam}-{r}"
            result: list[int] = []
            c_cpu, c_wall = timed(functools.partial(collect_sync, objs, args.rows, out,
                                                    args.batch_rows, result))
            written, dropped, _files = result
            if written != args.rows or dropped:
                sys.exit(f"round {r}: wrote {written} of {args.rows}, dropped {dropped}")
            size = sum(p.stat().st_size for p in out.rglob("*.parquet"))
            size_per_row = size / written
            for key, v in (("decode_cpu", d_cpu), ("decode_wall", d_wall),
                           ("collect_cpu", c_cpu), ("collect_wall", c_wall)):
                best[key] = max(best[key], v)
        for clock in ("cpu", "wall"):
            dec, col = best[f"decode_{clock}"], best[f"collect_{clock}"]
            print(f"{fam:6} {clock:5} {dec:13,.0f} {col:17,.0f} {col / dec:6.2f} "
                  f"{size_per_row:9.0f}")
        results[fam] = {**{k: round(v) for k, v in best.items()},
                        "bytes_per_row": round(size_per_row, 1)}
    if args.dir is None:
        import shutil
        shutil.rmtree(base, ignore_errors=True)
    if args.json:
        print(json.dumps({"benchmark": "collector", "objects": args.objects, "rows": args.rows,
                          "results": results, "pid": os.getpid()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
