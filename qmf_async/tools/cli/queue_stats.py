"""``qmf queue-stats``: enqueue and dequeue rates per queue, like qpid-queue-stats.

Every ``--interval`` seconds the queues are read (``get_objects``); a rate is the
change of ``msgTotalEnqueues`` / ``msgTotalDequeues`` divided by the change of the
object's sample timestamp.  The first read is the baseline, so the first report
comes one interval after the start.  A queue that was re-created (another create
time) or whose counters went back starts a new series (no rate in that report).  A
quiet queue, whose agent has not sampled it again (same timestamp, same counters), has
rates of 0 over the tool's own time between the reads.  The consoles' own reply and
topic queues (``qmf_async.names.is_console_queue``) are left out unless
``--console-queues``.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import time
from dataclasses import dataclass
from typing import Any

from qmf_async import QmfObject
from qmf_async.names import is_console_queue

from ._common import EXIT_USAGE, ToolError
from ._help import RAW_DESCRIPTION
from ._render import (
    Column,
    Target,
    add_query_options,
    fmt_count,
    fmt_rate,
    fmt_time,
    help_text,
    open_target,
    out_console,
    print_json_line,
    render_table,
    setup_logging,
)

__all__ = ["add_parser", "run"]

COLUMNS = (
    Column("queue", "Queue"),
    Column("interval", "Sec", lambda v: "-" if v is None else f"{v:.2f}", numeric=True),
    Column("depth", "Depth", fmt_count, numeric=True),
    Column("enqueue_rate", "Enq Rate", fmt_rate, numeric=True),
    Column("dequeue_rate", "Deq Rate", fmt_rate, numeric=True),
)


@dataclass(frozen=True)
class Sample:
    """One reading of a queue's counters."""

    timestamp: int  # ns
    created: int  # ns
    enqueues: int
    dequeues: int
    read_at: int = 0  # ns, the tool's clock when the queue was read


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "queue-stats", help="enqueue/dequeue rates per queue (like qpid-queue-stats)",
        description=help_text(__doc__), formatter_class=RAW_DESCRIPTION)
    add_query_options(parser, json_help="one JSON document per report")
    parser.add_argument("-a", "--broker-address", dest="broker", metavar="ADDRESS",
                        help="the broker, as qpid-queue-stats takes it (same as -b)")
    parser.add_argument("-i", "--interval", type=float, default=10.0, metavar="S",
                        help="seconds between reports (default 10)")
    parser.add_argument("--count", type=int, default=0, metavar="N",
                        help="stop after N reports (default: run until interrupted)")
    parser.add_argument("-f", "--filter", default="", metavar="LIST",
                        help="comma-separated queue names to show (regular expressions, "
                             "matched at the start of the name)")
    parser.add_argument("--console-queues", action="store_true",
                        help="also the consoles' own reply and topic queues (left out "
                             "by default)")
    parser.set_defaults(run=run)


def compile_filter(text: str) -> list[re.Pattern[str]]:
    """``-f`` as patterns.

    Raises:
        ToolError: a pattern is not a regular expression (usage code).
    """
    out = []
    for item in (t.strip() for t in text.split(",")):
        if not item:
            continue
        try:
            out.append(re.compile(item))
        except re.error as exc:
            raise ToolError(f"bad --filter pattern {item!r}: {exc}", EXIT_USAGE) from None
    return out


def rate_row(obj: QmfObject, before: Sample | None, now: Sample) -> dict[str, Any]:
    """One queue's report row (rates None when ``before`` is not of the same series;
    0 when the agent has not sampled the queue again and its counters are unchanged)."""
    agent = obj.get_agent()
    row: dict[str, Any] = {"queue": obj.get("name"), "agent": agent.label if agent else None,
                           "object_id": str(obj.get_object_id()), "depth": obj.get("msgDepth"),
                           "interval": None, "enqueues": None, "dequeues": None,
                           "enqueue_rate": None, "dequeue_rate": None}
    if (before is not None and before.created == now.created
            and now.timestamp == before.timestamp and now.enqueues == before.enqueues
            and now.dequeues == before.dequeues):  # not sampled again: quiet
        waited = (now.read_at - before.read_at) / 1e9
        row.update(interval=waited if waited > 0 else None, enqueues=0, dequeues=0,
                   enqueue_rate=0.0, dequeue_rate=0.0)
        return row
    if (before is None or before.created != now.created or now.timestamp <= before.timestamp
            or now.enqueues < before.enqueues or now.dequeues < before.dequeues):
        return row
    seconds = (now.timestamp - before.timestamp) / 1e9
    enq, deq = now.enqueues - before.enqueues, now.dequeues - before.dequeues
    row.update(interval=seconds, enqueues=enq, dequeues=deq, enqueue_rate=enq / seconds,
               dequeue_rate=deq / seconds)
    return row


async def run(args: argparse.Namespace) -> int:
    setup_logging(args.verbose)
    patterns = compile_filter(args.filter)
    if args.interval <= 0 or args.count < 0:
        raise ToolError("--interval must be positive and --count >= 0", EXIT_USAGE)
    async with open_target(args) as target:
        await _loop(target, args, patterns, args.console_queues)
    return 0


async def _read(target: Target, patterns: list[re.Pattern[str]],
                console_queues: bool = False) -> list[QmfObject]:
    queues = await target.objects("queue", what="queue")
    return [q for q in queues
            if (console_queues or not is_console_queue(str(q.get("name"))))
            and (not patterns or any(p.match(str(q.get("name"))) for p in patterns))]


def _sample(q: QmfObject, read_at: int) -> Sample:
    updated, created, _ = q.get_timestamps()
    return Sample(updated, created, int(q.get("msgTotalEnqueues") or 0),
                  int(q.get("msgTotalDequeues") or 0), read_at)


def _key(q: QmfObject) -> tuple[int, str]:
    return id(q.get_broker()), str(q.get_object_id())


async def _loop(target: Target, args: argparse.Namespace, patterns: list[re.Pattern[str]],
                console_queues: bool = False) -> None:
    first = await _read(target, patterns, console_queues)
    if not first:
        await target.require_class("queue", what="queues")
    previous = {_key(q): _sample(q, time.time_ns()) for q in first}
    loop = asyncio.get_running_loop()
    start = loop.time()
    report = 0
    console = None if args.json else out_console()
    while not args.count or report < args.count:
        report += 1
        await asyncio.sleep(max(0.0, start + report * args.interval - loop.time()))
        queues = await _read(target, patterns, console_queues)
        read_at = time.time_ns()
        current = {_key(q): _sample(q, read_at) for q in queues}
        rows = [rate_row(q, previous.get(_key(q)), current[_key(q)]) for q in queues]
        rows.sort(key=lambda r: (str(r["queue"]), str(r["agent"])))
        previous = current
        now = time.time_ns()
        if console is None:
            print_json_line({"report": report, "time": now, "queues": rows})
        else:
            if report > 1:
                print(flush=True)
            render_table(COLUMNS, rows, title=f"{fmt_time(now)}  queue rates (msg/s)",
                         console=console)
