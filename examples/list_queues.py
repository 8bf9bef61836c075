"""List the queues on a QMF bus with their depth and counters.

    python examples/list_queues.py --url amqp://guest:guest@localhost:5672/
        [--where "msgDepth > 0"] [--timeout 10]

Prints one line per queue (sorted by name) and exits 0; exits 1 with a message on
stderr when the bus cannot be reached or an agent does not answer in time.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

from qmf_async import QmfError, Session

#: exit code when stdout's reader went away (``... | head``): 128 + SIGPIPE, as a shell
#: reports a program that SIGPIPE stopped
EXIT_PIPE = 141

COLUMNS = ("msgDepth", "msgTotalEnqueues", "msgTotalDequeues", "consumerCount")


async def list_queues(url: str, where: str | None, timeout: float) -> int:
    async with Session.connect(url, timeout=timeout) as session:
        queues = await session.get_objects(_class="queue", where=where, _timeout=timeout)
    names = [q.name for q in queues]
    width = max([len("queue"), *map(len, names)])
    print(f"{'queue':<{width}}  {'depth':>7}  {'enqueues':>9}  {'dequeues':>9}  consumers")
    for q in sorted(queues, key=lambda q: q.name):
        depth, enq, deq, consumers = (q.get(c, "?") for c in COLUMNS)
        print(f"{q.name:<{width}}  {depth:>7}  {enq:>9}  {deq:>9}  {consumers:>9}")
    print(f"{len(queues)} queue(s)")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="amqp://guest:guest@localhost:5672/",
                        help="AMQP 0-9-1 broker URL")
    parser.add_argument("--where", help="JMS selector over queue properties and statistics")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds (default 10)")
    args = parser.parse_args(argv)
    try:
        return asyncio.run(list_queues(args.url, args.where, args.timeout))
    except QmfError as exc:
        print(f"list_queues: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # the reader left (``... | head``): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_PIPE


if __name__ == "__main__":
    sys.exit(main())
