"""Console demo: list queues with their statistics, call methods, show events.

Run it against a bus with the management-broker role and the demo agent
(``scripts/demo.sh`` starts all three):

    python examples/console_demo.py --url amqp://guest:guest@localhost:5672/
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time

from qmf_async import MethodError, QmfError, Session

#: exit code when stdout's reader went away (``... | head``): 128 + SIGPIPE, as a shell
#: reports a program that SIGPIPE stopped
EXIT_PIPE = 141


def _table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(str(h).ljust(w) for h, w in zip(header, widths, strict=True)),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(str(c).rjust(w) if i else str(c).ljust(w)
                        for i, (c, w) in enumerate(zip(r, widths, strict=True))) for r in rows]
    return "\n".join(lines)


async def main(url: str, events_wanted: int, timeout: float,
               label: str = "qmf-async-demo-broker") -> int:
    async with Session(agent_interval=1.0) as session:
        broker = await session.add_broker(url, timeout=timeout)
        print(f"connected to {broker.where}; management broker: "
              f"{'yes, id ' + str(broker.broker_id) if broker.has_management else 'none'}")
        agents = await session.wait_for_agents(2 if broker.has_management else 1, timeout=timeout)
        print("agents:", ", ".join(f"{a.broker_bank}.{a.agent_bank} {a.label!r}" for a in agents))
        # other agents may share the bus (the RabbitMQ bridge, a second broker): the
        # demo asks the demo agent only
        demo = next((a for a in session.get_agents() if a.label == label), None)
        if demo is None:
            print(f"no agent labelled {label!r} on the bus", file=sys.stderr)
            return 1

        # live statistics arrive every interval: wait for the first traffic to show
        async with session.object_updates(_class="queue", where="msgTotalEnqueues > 0",
                                          _agent=demo) as ups:
            try:
                first = await ups.get(timeout)
                print(f"first traffic seen on queue {first.name!r}")
            except TimeoutError:
                print("no queue traffic yet")

        queues = await session.get_objects(_class="queue", _package="org.apache.qpid.broker",
                                           _agent=demo, _timeout=timeout)
        rows = [[q.name, q.msgDepth, q.msgTotalEnqueues, q.msgTotalDequeues, q.byteDepth,
                 q.consumerCount] for q in sorted(queues, key=lambda q: q.name)]
        print()
        print(_table(rows, ["queue", "depth", "enqueues", "dequeues", "bytes", "consumers"]))

        busy = await session.get_objects(_class="queue", where="msgDepth > 0 AND name LIKE '%s'",
                                         _agent=demo, _timeout=timeout)
        print(f"\nqueues with messages waiting (where=\"msgDepth > 0 AND name LIKE '%s'\"): "
              f"{', '.join(sorted(q.name for q in busy)) or 'none'}")

        (amqp_broker,) = await session.get_objects(_class="broker", _agent=demo,
                                                   _timeout=timeout)
        echo = await amqp_broker.echo(7, "hello QMF")
        print(f"\nbroker.echo(7, 'hello QMF') -> status {echo.status} {echo.text}: "
              f"sequence={echo.sequence} body={echo.body!r}")

        async with session.events(_agent=demo) as events:
            name = f"demo-{int(time.time())}"
            await amqp_broker.create("queue", name, {"durable": False}, False)
            print(f"broker.create('queue', {name!r}) -> OK")
            try:
                await amqp_broker.create("nosuchtype", "x", {}, False)
            except MethodError as exc:
                # an agent's refusal arrives as a typed error with its status and text
                print(f"broker.create('nosuchtype', 'x') -> refused, as it should be: "
                      f"MethodError {exc.status}: {exc.text}")
            (created,) = await session.get_objects(_class="queue", name=name, _agent=demo,
                                                   _timeout=timeout)
            await created.purge(0)
            print(f"{name}.purge(0) -> OK")
            await amqp_broker.delete("queue", name, {})
            print(f"broker.delete('queue', {name!r}) -> OK")

            print(f"\nevents (up to {events_wanted}):")
            for _ in range(events_wanted):
                try:
                    event = await events.get(min(timeout, 3.0))
                except TimeoutError:
                    print("  (no more events within the timeout)")
                    break
                print(f"  {event}")
    return 0


def run(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="amqp://guest:guest@localhost:5672/")
    parser.add_argument("--events", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=10.0)
    parser.add_argument("--agent-label", default="qmf-async-demo-broker",
                        help="label of the demo agent to ask")
    args = parser.parse_args(argv)
    try:
        return asyncio.run(main(args.url, args.events, args.timeout, args.agent_label))
    except QmfError as exc:
        print(f"console demo failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # the reader left (``... | head``): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_PIPE


if __name__ == "__main__":
    sys.exit(run())
