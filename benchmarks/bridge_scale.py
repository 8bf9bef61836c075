"""The RabbitMQ bridge at scale: 5,000 real queues listed within one poll interval.

    python benchmarks/bridge_scale.py [--queues 5000] [--interval 5] [--amqp URL]
        [--api URL] [--json]

In a fresh vhost (made and deleted through the management API) the benchmark declares
``--queues`` queues with aiormq, then runs the bridge on that vhost (the QMF bus is
the same vhost) and times:

* ``poll``: one full poll, i.e. reading every list of the API page by page with only
  the mapped columns, mapping, and applying it to the agent (the first poll creates
  every object; ``repoll`` is a second poll where nothing changed, the steady state);
* ``console``: a console's ``get_objects(_class="queue")`` answered by the bridge.

Baseline: the same queue list read raw (one ``GET /api/queues/<vhost>`` without
columns or pages, the API's full answer) in the same run.  Target: ``poll`` and
``repoll`` under ``--interval``.  The last line is one JSON document.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run from a checkout without installing
    sys.path.insert(0, str(ROOT))

import aiormq  # noqa: E402

from qmf_async import Session  # noqa: E402
from qmf_async.agent import Agent  # noqa: E402
from qmf_async.agent.broker import ManagementBroker  # noqa: E402
from qmf_async.bridge.rabbitmq import RabbitApi, RabbitBridge  # noqa: E402

PACKAGE = "org.apache.qpid.broker"


def _args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--queues", type=int, default=5000, help="queues to declare (default 5000)")
    p.add_argument("--interval", type=float, default=5.0,
                   help="the poll interval the poll must fit in (default 5 s)")
    p.add_argument("--amqp", default="amqp://guest:guest@localhost:5672/",
                   help="the broker (its vhost is replaced by a fresh one)")
    p.add_argument("--api", default="http://guest:guest@localhost:15672/",
                   help="RabbitMQ's management API")
    p.add_argument("--json", action="store_true", help="only the JSON line")
    args = p.parse_args(argv)
    if args.queues < 1 or args.interval <= 0:
        p.error("--queues and --interval must be positive")
    return args


async def _declare(url: str, count: int) -> None:
    conn = await aiormq.connect(url)
    try:
        channels = [await conn.channel() for _ in range(8)]
        names = [f"scale-{i:05d}" for i in range(count)]
        for start in range(0, count, 400):
            await asyncio.gather(*(channels[i % 8].queue_declare(n, durable=False)
                                   for i, n in enumerate(names[start:start + 400])))
    finally:
        await conn.close()


async def run(args: argparse.Namespace) -> dict[str, Any]:
    api = RabbitApi(args.api, timeout=60.0)
    vhost = f"qmf-bridge-scale-{uuid.uuid4().hex[:8]}"
    v = quote(vhost, safe="")
    await api.request("PUT", f"vhosts/{v}")
    bridge: RabbitBridge | None = None
    session: Session | None = None
    role: ManagementBroker | None = None
    try:
        await api.request("PUT", f"permissions/{v}/{quote(api.user, safe='')}",
                          body={"configure": ".*", "write": ".*", "read": ".*"})
        parts = urlsplit(args.amqp)
        url = urlunsplit(parts._replace(path="/" + v))
        started = time.monotonic()
        await _declare(url, args.queues)
        declare_s = time.monotonic() - started

        started = time.monotonic()
        raw = await api.get(f"queues/{v}")
        raw_s = time.monotonic() - started

        # the bus has a management broker (banks, labels), as a RabbitMQ bus should
        role = ManagementBroker(url, interval=args.interval)
        await role.start()
        agent = Agent(url, label="bridge-scale", interval=args.interval,
                      max_outgoing=100_000)
        # polls are driven by hand below: a long interval keeps the loop out of the way
        bridge = RabbitBridge(agent, RabbitApi(args.api, timeout=60.0), interval=3600,
                              vhost=vhost)
        await agent.start()
        started = time.monotonic()
        ok = await bridge.poll_once()
        poll_s = time.monotonic() - started
        if not ok:
            raise SystemExit(f"bridge_scale: the poll failed: {bridge.last_error}")
        listed = len(agent.objects("queue"))
        started = time.monotonic()
        await bridge.poll_once()
        repoll_s = time.monotonic() - started

        session = Session(timeout=60.0, broker_timeout=2.0)
        await session.add_broker(url, timeout=10.0)
        (remote,) = await session.wait_for_agents(label="bridge-scale", timeout=10.0)
        started = time.monotonic()
        seen = await session.get_objects(_class="queue", _package=PACKAGE, _agent=remote)
        console_s = time.monotonic() - started
        return {"benchmark": "bridge_scale", "queues": args.queues, "listed": listed,
                "seen_by_console": len(seen), "raw_api_seconds": round(raw_s, 3),
                "raw_api_items": len(raw), "poll_seconds": round(poll_s, 3),
                "repoll_seconds": round(repoll_s, 3), "console_seconds": round(console_s, 3),
                "declare_seconds": round(declare_s, 3), "interval": args.interval,
                "within_interval": poll_s < args.interval and repoll_s < args.interval}
    finally:
        if session is not None:
            await session.close()
        if bridge is not None:
            await bridge.stop()
        if role is not None:
            await role.stop()
        await api.request("DELETE", f"vhosts/{v}")
        await api.close()


def main(argv: list[str]) -> int:
    args = _args(argv)
    result = asyncio.run(run(args))
    if not args.json:
        for key in ("queues", "listed", "seen_by_console", "raw_api_seconds", "poll_seconds",
                    "repoll_seconds", "console_seconds", "declare_seconds"):
            print(f"{key:>18}: {result[key]}")
        print(f"{'target':>18}: poll and repoll under {args.interval:g} s: "
              f"{'met' if result['within_interval'] else 'NOT met'}")
    print(json.dumps(result))
    return 0 if result["within_interval"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
