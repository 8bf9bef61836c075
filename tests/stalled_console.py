"""A console process for the slow-consumer tests: ``python -m tests.stalled_console URL
MAXSIZE TOPIC_MAX`` connects a Session (``topic_max_length=TOPIC_MAX``: the cap of its
topic queue on AMQP 0-9-1), follows ``org.qmfasync.faults:tick`` events with a
subscription of ``MAXSIZE`` that it never reads, prints ``ready`` once the
subscription's bindings are in place, then answers each line read on stdin:

- ``report``: one JSON line with the process's RSS (kB, from /proc), its peak RSS, the
  subscription's length and ``dropped``, the broker's ``topic_dropped`` (0-9-1 only),
  ``session.malformed``, the asyncio task count and the newest tick number held;
- ``queues``: one JSON line naming the broker queues that hold what it has not read;
- ``query``: asks for the ``org.qmfasync.faults:holder`` objects and prints
  ``answered N SECONDS`` (or ``error NAME TEXT``);
- ``quit``: closes the session and exits.

The test stops the whole process (SIGSTOP) to make a console that reads nothing at all,
not even its socket, and continues it (SIGCONT) to see what it holds afterwards.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

from qmf_async import Session


def _status(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


async def main(url: str, maxsize: int, topic_max: int) -> None:
    """Connect, subscribe, and answer commands until ``quit`` or end of input."""
    loop = asyncio.get_running_loop()
    async with Session(timeout=10.0, topic_max_length=topic_max) as session:
        await session.add_broker(url, timeout=10.0)
        ticks = session.events(_class="tick", maxsize=maxsize)
        await ticks.ready()
        print("ready", flush=True)
        while True:
            line = (await loop.run_in_executor(None, sys.stdin.readline)).strip()
            if line in ("", "quit"):
                return
            if line == "report":
                newest = ticks._items[-1].arguments.get("n") if len(ticks) else None
                broker = session.brokers[0]
                print(json.dumps({
                    "rss_kb": _status("VmRSS"), "peak_kb": _status("VmHWM"),
                    "held": len(ticks), "dropped": ticks.dropped,
                    "topic_dropped": broker.topic_dropped, "malformed": session.malformed,
                    "tasks": len(asyncio.all_tasks()), "newest": newest,
                }), flush=True)
            elif line == "queues":
                # the broker queues that hold what this console has not read: its topic
                # queue (0-9-1), or the subscription queue of each link (1.0), which
                # qpidd names ``<container id>_<link name>``
                broker = session.brokers[0]
                inner = getattr(broker.transport, "_inner", broker.transport)
                # (the AMQP 1.0 transport's link table keys its receivers by handle; each
                # has its name)
                table = getattr(inner, "_links", None)
                receivers = table.receivers if table is not None else {}
                links = {r.key: r.name for r in receivers.values()}
                print(json.dumps({"topic_queue": broker._topic_queue, "links": links}),
                      flush=True)
            elif line == "query":
                started = time.monotonic()
                try:
                    objs = await session.get_objects(_class="holder",
                                                     _package="org.qmfasync.faults",
                                                     _timeout=10.0)
                    print("answered", len(objs), f"{time.monotonic() - started:.3f}",
                          flush=True)
                except Exception as exc:  # reported to the test, which decides
                    print("error", type(exc).__name__, exc, flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
