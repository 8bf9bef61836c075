"""Poll a class N times and print the rate of a counter per object.

    python examples/collect_stats.py --url amqp://guest:guest@localhost:5672/
        [--class queue] [--stat msgTotalEnqueues] [--samples 5] [--interval 2]

Each poll is one ``get_objects``; the rate of an object is the counter's change
divided by the change of the object's own sample time (``get_timestamps()[0]``,
set by its agent), so it is right however late the answers arrive.  An object
that was re-created (another create time) or whose counter went down starts over.
Exits 0, or 1 on an error.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

from qmf_async import ObjectId, QmfError, Session

#: exit code when stdout's reader went away (``... | head``): 128 + SIGPIPE, as a shell
#: reports a program that SIGPIPE stopped
EXIT_PIPE = 141


async def collect(url: str, _class: str, stat: str, samples: int, interval: float,
                  timeout: float) -> int:
    last: dict[ObjectId, tuple[int, int, int]] = {}  # oid -> (sample ns, created ns, value)
    async with Session.connect(url, timeout=timeout) as session:
        for n in range(1, samples + 1):
            objects = await session.get_objects(_class=_class, _timeout=timeout)
            rows = []
            for obj in objects:
                sampled, created, _deleted = obj.get_timestamps()
                value = obj.get(stat)
                if not isinstance(value, int):
                    continue
                oid = obj.get_object_id()
                rate = "-"
                prev = last.get(oid)
                if prev is not None and prev[1] == created and value >= prev[2] \
                        and sampled > prev[0]:
                    rate = f"{(value - prev[2]) * 1e9 / (sampled - prev[0]):.1f}/s"
                last[oid] = (sampled, created, value)
                rows.append((str(obj.get("name") or obj.get_index() or oid), value, rate))
            print(f"sample {n}/{samples}: {len(rows)} {_class} object(s)")
            for name, value, rate in sorted(rows):
                print(f"  {name:<20} {stat}={value:<10} rate={rate}")
            if n < samples:
                await asyncio.sleep(interval)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="amqp://guest:guest@localhost:5672/",
                        help="AMQP 0-9-1 broker URL")
    parser.add_argument("--class", dest="class_", default="queue", help="default: queue")
    parser.add_argument("--stat", default="msgTotalEnqueues",
                        help="counter statistic (default: msgTotalEnqueues)")
    parser.add_argument("--samples", type=int, default=5, help="polls (default 5)")
    parser.add_argument("--interval", type=float, default=2.0,
                        help="seconds between polls (default 2)")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds (default 10)")
    args = parser.parse_args(argv)
    if args.samples < 1 or args.interval < 0:
        parser.error("--samples must be >= 1 and --interval >= 0")
    try:
        return asyncio.run(collect(args.url, args.class_, args.stat, args.samples,
                                   args.interval, args.timeout))
    except QmfError as exc:
        print(f"collect_stats: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # the reader left (``... | head``): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_PIPE


if __name__ == "__main__":
    sys.exit(main())
