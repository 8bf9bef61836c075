"""Resident memory of a long-running console under queue churn on a stock qpidd.

    python benchmarks/churn_memory.py [--queues 3000] [--rounds 4]
                                      [--mode session|exporter] [--forget-after 5]

A fresh qpidd with the stock management settings (QMF v2 only, publications every
second).  ``session``: a Session following ``object_updates(_class="queue")``;
``exporter``: a Session feeding ``qmf exporter``'s store (``--stale-after 10``).  Each
round declares and deletes ``--queues`` temporary queues (dynamic receivers of a plain
AMQP 1.0 client, in a process of its own: ``tests/queue_churn.py``), waits until the
console saw them all deleted and ``--forget-after`` (the session's
``forget_deleted_after``) has passed, and reads the process's VmRSS.  The last line is
JSON: the RSS after each round and the growth per queue from the first round to the
last (the first round is the warm-up).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from qmf_async import Session  # noqa: E402
from qmf_async.exporter import Exporter, LiveStore  # noqa: E402
from tests.qpidd import Qpidd  # noqa: E402


def _rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


async def _churn(address: str, count: int) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.queue_churn", address, str(count), cwd=ROOT,
        stdout=asyncio.subprocess.DEVNULL)
    if await proc.wait() != 0:
        raise SystemExit("the churn client failed")


async def _run(args: argparse.Namespace) -> dict[str, object]:
    broker = Qpidd.start(qmf1=False, pub_interval=1)
    rss: list[int] = []
    try:
        async with Session(manage_connections=True,
                           forget_deleted_after=args.forget_after) as session:
            seen = {"deleted": 0}
            exporter: Exporter | None = None
            follower: asyncio.Task[None] | None = None
            counted: Callable[[], int]
            if args.mode == "exporter":
                store = LiveStore()
                exporter = Exporter(session, store, tick=1.0, stale_after=10.0)
                await exporter.start()
                await session.add_broker(broker.url, timeout=10)
                exporter.check_brokers()
                key = (broker.address, "queue_deleted")

                def counted() -> int:
                    return store.lifecycle.get(key, 0)
            else:
                await session.add_broker(broker.url, timeout=10)
                updates = session.object_updates(_class="queue", maxsize=100_000)

                async def follow() -> None:
                    async for obj in updates:
                        if obj.is_deleted():
                            seen["deleted"] += 1

                follower = asyncio.create_task(follow())

                def counted() -> int:
                    return seen["deleted"]
            await asyncio.sleep(2)
            for n in range(1, args.rounds + 1):
                await _churn(broker.address, args.queues)
                for _ in range(600):  # 120 s at most
                    if counted() >= n * args.queues:
                        break
                    await asyncio.sleep(0.2)
                await asyncio.sleep(args.forget_after + 2)
                gc.collect()
                rss.append(_rss())
                print(f"round {n}: {counted()} deleted, VmRSS {rss[-1]}", file=sys.stderr)
            if exporter is not None:
                await exporter.stop()
            if follower is not None:
                follower.cancel()
    finally:
        broker.stop()
    queues = args.queues * (args.rounds - 1)
    return {"mode": args.mode, "queues_per_round": args.queues, "rss": rss,
            "bytes_per_queue": (rss[-1] - rss[0]) / queues if queues else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queues", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--mode", choices=("session", "exporter"), default="session")
    parser.add_argument("--forget-after", type=float, default=5.0)
    print(json.dumps(asyncio.run(_run(parser.parse_args()))))


if __name__ == "__main__":
    main()
