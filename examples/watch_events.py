"""Print QMF events as they arrive.

    python examples/watch_events.py --url amqp://guest:guest@localhost:5672/
        [--count N] [--timeout SECONDS] [--class queueDeclare] [--severity 4]
        [--where "qName LIKE 'work-%'"]

Stops after ``--count`` events, after ``--timeout`` seconds, or on Ctrl-C.  Exits 0,
or 1 when ``--count`` events did not arrive within ``--timeout`` (or on an error).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
import time

from qmf_async import QmfError, Session

#: exit code when stdout's reader went away (``... | head``): 128 + SIGPIPE, as a shell
#: reports a program that SIGPIPE stopped
EXIT_PIPE = 141


async def watch(url: str, count: int | None, timeout: float | None, _class: str | None,
                severity: int | None, where: str | None) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    with contextlib.suppress(NotImplementedError):
        loop.add_signal_handler(signal.SIGINT, stop.set)
    # only events are needed: no object updates on this console's queue
    async with Session.connect(url, rcv_objects=False) as session:
        seen = 0
        deadline = None if timeout is None else time.monotonic() + timeout
        async with session.events(_class=_class, severity=severity, where=where) as events:
            print(f"watching events on {session.brokers[0].where}", flush=True)
            while count is None or seen < count:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    break
                waiter = asyncio.ensure_future(events.get(left))
                stopper = asyncio.ensure_future(stop.wait())
                done, _ = await asyncio.wait({waiter, stopper},
                                             return_when=asyncio.FIRST_COMPLETED)
                stopper.cancel()
                if waiter not in done:
                    waiter.cancel()
                    break  # Ctrl-C
                try:
                    event = waiter.result()
                except TimeoutError:
                    break
                seen += 1
                print(event, flush=True)
    print(f"{seen} event(s)")
    if count is not None and seen < count and not stop.is_set():
        print(f"watch_events: only {seen} of {count} events within {timeout} s",
              file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="amqp://guest:guest@localhost:5672/",
                        help="AMQP 0-9-1 broker URL")
    parser.add_argument("--count", type=int, help="stop after this many events")
    parser.add_argument("--timeout", type=float, help="stop after this many seconds")
    parser.add_argument("--class", dest="class_", help="only events of this class")
    parser.add_argument("--severity", type=int,
                        help="only events this severe or worse (0 emerg .. 7 debug)")
    parser.add_argument("--where", help="JMS selector over the event's arguments")
    args = parser.parse_args(argv)
    try:
        return asyncio.run(watch(args.url, args.count, args.timeout, args.class_,
                                 args.severity, args.where))
    except QmfError as exc:
        print(f"watch_events: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # the reader left (``... | head``): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_PIPE


if __name__ == "__main__":
    sys.exit(main())
