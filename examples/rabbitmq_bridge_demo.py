"""RabbitMQ's own queues over QMF: fill a real queue with aiormq, read it back through
the RabbitMQ bridge (``python -m qmf_async.bridge.rabbitmq``).

Run it on a bus where the bridge runs (``scripts/demo.sh`` starts it):

    python examples/rabbitmq_bridge_demo.py --url amqp://guest:guest@localhost:5672/ \\
        [--queue demo.real] [--count 100] [--bridge-label rabbitmq]

It declares the queue on RabbitMQ itself (a plain AMQP 0-9-1 client, aiormq), publishes
``--count`` messages to it, then asks QMF for the queue as the bridge serves it,
waiting (with a deadline) until the bridge's poll has seen every message in both the
depth and the enqueue counter (RabbitMQ reports the latter a statistics interval
later).  The queue is left in place for ``qmf stat -q`` and ``rabbitmqctl
list_queues``; ``--delete`` deletes it through QMF (the broker object's ``delete``
method, which the bridge turns into an HTTP API call) at the end.  Exits 0, or 1 when
the bridge does not show the messages within ``--timeout``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time

import aiormq

from qmf_async import QmfError, Session

#: exit code when stdout's reader went away (``... | head``): 128 + SIGPIPE, as a shell
#: reports a program that SIGPIPE stopped
EXIT_PIPE = 141


async def fill(url: str, queue: str, count: int) -> None:
    """Declare ``queue`` on RabbitMQ and publish ``count`` messages to it (aiormq)."""
    connection = await aiormq.connect(url)
    try:
        channel = await connection.channel()
        await channel.queue_declare(queue, durable=False)
        for i in range(count):
            await channel.basic_publish(f"message {i}".encode(), routing_key=queue)
    finally:
        await connection.close()


async def main(args: argparse.Namespace) -> int:
    await fill(args.url, args.queue, args.count)
    print(f"published {args.count} messages to RabbitMQ queue {args.queue!r} with aiormq")
    async with Session() as session:
        await session.add_broker(args.url, timeout=args.timeout)
        deadline = time.monotonic() + args.timeout
        agents = [a for a in session.get_agents() if a.label == args.bridge_label]
        while not agents and time.monotonic() < deadline:
            await asyncio.sleep(0.2)  # agents come with the management broker's list
            agents = [a for a in session.get_agents() if a.label == args.bridge_label]
        if not agents:
            print(f"no agent labelled {args.bridge_label!r}: is the RabbitMQ bridge running?",
                  file=sys.stderr)
            return 1
        bridge = agents[0]
        depth = None
        while time.monotonic() < deadline:
            found = await session.get_objects(_class="queue", name=args.queue, _agent=bridge)
            depth = found[0].msgDepth if found else None
            # RabbitMQ counts a queue's publishes a statistics interval after its depth
            if (depth is not None and depth >= args.count
                    and (found[0].msgTotalEnqueues or 0) >= args.count):
                break
            await asyncio.sleep(0.2)
        if depth is None or depth < args.count:
            print(f"the bridge shows {args.queue!r} with depth {depth} after "
                  f"{args.timeout:g} s, not {args.count}", file=sys.stderr)
            return 1
        q = found[0]
        print(f"over QMF, agent {bridge.label!r} (RabbitMQ itself): queue {q.name!r} "
              f"msgDepth={q.msgDepth} msgTotalEnqueues={q.msgTotalEnqueues} "
              f"consumerCount={q.consumerCount}")
        if args.delete:
            (broker,) = await session.get_objects(_class="broker", _agent=bridge)
            await broker.delete("queue", args.queue, {})
            print(f"deleted {args.queue!r} through QMF (broker.delete -> RabbitMQ's API)")
    return 0


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="amqp://guest:guest@localhost:5672/",
                        help="the RabbitMQ broker that hosts the QMF bus")
    parser.add_argument("--queue", default="demo.real", help="the real queue to fill")
    parser.add_argument("--count", type=int, default=100, help="messages to publish")
    parser.add_argument("--bridge-label", default="rabbitmq", help="the bridge's agent label")
    parser.add_argument("--timeout", type=float, default=30.0,
                        help="seconds to wait for the bridge to show the messages")
    parser.add_argument("--delete", action="store_true", help="delete the queue at the end")
    args = parser.parse_args(argv)
    if args.count < 1 or args.timeout <= 0:
        parser.error("--count and --timeout must be positive")
    return args


if __name__ == "__main__":
    try:
        sys.exit(asyncio.run(main(_parse(sys.argv[1:]))))
    except QmfError as exc:
        print(f"rabbitmq_bridge_demo: {exc}", file=sys.stderr)
        sys.exit(1)
    except BrokenPipeError:  # the reader left (``... | head``): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(EXIT_PIPE)
