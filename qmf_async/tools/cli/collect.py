"""``qmf collect``: write object samples and events of one or more brokers to a
Parquet dataset (samples/ and events/, partitioned by date and class; see
docs/pipeline.md, "Dataset layout") for the Spark jobs of ``qmf pipeline``.

Several URLs share one session; lost connections are re-established in the
background.  Runs until SIGINT/SIGTERM or ``--duration`` seconds, then writes what
it holds and prints its counters (received, written, dropped).  Restarting on the
same DATASET appends: every run writes files of its own run id, never touching
existing ones.  The consoles' own reply and topic queues (its own among them) are left
out unless --console-queues.  Needs pyarrow: ``pip install 'qmf-async[collector]'``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
from pathlib import Path
from typing import Any

import attrs

from qmf_async import QmfTimeout, Session

from ._common import (
    EXIT_ERROR,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    ConnectionNotes,
    ToolError,
    add_broker_option,
    connection_arguments,
    note,
    positive_float,
    print_json,
    resolve_urls,
)
from ._help import RAW_DESCRIPTION
from ._render import setup_logging

__all__ = ["add_parser", "run"]

#: seconds a schema fetch may take at least (qpidd with 10,000 queues needs several)
SCHEMA_TIMEOUT = 30.0


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {text!r}")
    return value


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "collect", help="write samples and events to a Parquet dataset (for qmf pipeline)",
        description=__doc__, formatter_class=RAW_DESCRIPTION)
    parser.add_argument("urls", nargs="*", metavar="URL",
                        help="broker URLs or addresses (default: $QMF_URL or "
                             "amqp://guest:guest@localhost:5672/)")
    add_broker_option(parser, multiple=True)
    parser.add_argument("--out", "-o", required=True, metavar="DATASET",
                        help="dataset root directory (created if missing)")
    parser.add_argument("--batch-rows", type=_positive_int, default=10_000, metavar="N",
                        help="rows per file and partition at most (default 10000)")
    parser.add_argument("--batch-seconds", type=positive_float, default=5.0, metavar="S",
                        help="write a partition's rows after S seconds at the latest "
                             "(default 5)")
    parser.add_argument("--max-buffer", type=_positive_int, default=100_000, metavar="N",
                        help="rows held in memory at most (default 100000)")
    parser.add_argument("--duration", type=positive_float, default=None, metavar="S",
                        help="stop after S seconds (default: run until interrupted)")
    parser.add_argument("--class", dest="class_name", metavar="NAME", default=None,
                        help="only this class: an object class (queue) or an event "
                             "(queueDeclare)")
    parser.add_argument("--package", metavar="NAME", default=None,
                        help="only classes and events of this package")
    parser.add_argument("-t", "--timeout", type=positive_float, default=10.0, metavar="S",
                        help="seconds to wait for each first connection (default 10)")
    parser.add_argument("--connect-timeout", dest="timeout", type=positive_float,
                        help=argparse.SUPPRESS)  # the former name of -t/--timeout
    parser.add_argument("--console-queues", action="store_true",
                        help="also the consoles' own reply and topic queues (left out "
                             "by default, as qmf stat -q leaves them out)")
    parser.add_argument("--no-snapshot", dest="snapshot", action="store_false",
                        help="do not ask the agents for the objects of each class seen "
                             "(their properties: names of objects older than the run); "
                             "on a busy broker with many objects the queries delay its "
                             "publications for a while")
    parser.add_argument("--json", action="store_true",
                        help="print the counters as one JSON document on exit")
    parser.add_argument("--quiet", action="store_true",
                        help="no notes on stderr (connections)")
    parser.add_argument("-v", "--verbose", action="store_true", help="log what happens")
    parser.set_defaults(run=run)


def _note(text: str) -> None:
    note("collect", text)


def _collector_module() -> Any:
    try:
        from qmf_async.tools import collector
        collector.samples_schema()  # imports pyarrow
    except ImportError as exc:
        raise ToolError(f"qmf collect needs pyarrow: pip install 'qmf-async[collector]' "
                        f"({exc.__cause__ or exc})", EXIT_USAGE) from exc
    return collector


def _prepare_out(out: str) -> None:
    """Create the dataset directory now: a bad --out fails at once, not at the first write.

    Raises:
        ToolError: it cannot be created (usage code).
    """
    try:
        Path(out).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ToolError(f"cannot use {out} as the dataset directory: {exc}", EXIT_USAGE) from exc


async def run(args: argparse.Namespace) -> int:
    setup_logging(args.verbose)
    collector_mod = _collector_module()
    urls = resolve_urls(args.urls, args.broker)
    _prepare_out(args.out)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    connection = connection_arguments(args)
    # a qpidd with many objects answers a schema request only after publishing them all:
    # give the schema fetches time, or the QMF v2 data held for them would be dropped
    session = Session(console=ConnectionNotes("collect", args.quiet), manage_connections=True,
                      timeout=args.timeout, schema_timeout=max(SCHEMA_TIMEOUT, args.timeout))
    handled: list[signal.Signals] = []
    try:
        collector = collector_mod.Collector(
            session, args.out, batch_rows=args.batch_rows, batch_seconds=args.batch_seconds,
            max_buffer=args.max_buffer, _class=args.class_name, _package=args.package,
            console_queues=args.console_queues)
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, stop.set)
                handled.append(sig)
        # subscribe before connecting: nothing published after the first connection is missed
        task = asyncio.ensure_future(collector.run(stop))
        snapshot: asyncio.Future[None] | None = None
        try:
            brokers = [await session.add_broker(url, timeout=args.timeout,
                                                **connection)
                       for url in urls]
            down = [b for b in brokers if not b.connected]
            if len(down) == len(brokers) and down[0].error is not None:
                error = down[0].error  # nothing to collect from: say why
                if isinstance(error, QmfTimeout):
                    raise ToolError(f"cannot reach the broker: {error}", EXIT_UNREACHABLE)
                raise error
            if not args.quiet:
                for b in down:
                    _note(f"cannot connect to {b.where} ({b.error}); retrying in the "
                          "background")
                _note(f"collecting from {', '.join(b.where for b in brokers if b.connected)}"
                      f" into {args.out} (run {collector.run_id})")
            if args.duration is not None:
                loop.call_later(args.duration, stop.set)
            # the properties of the objects that exist already (agents send them only
            # when they change): their names, while the collection goes on
            if args.snapshot:
                snapshot = asyncio.ensure_future(collector.snapshot(timeout=args.timeout))
            await asyncio.wait([task], return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.set()
            if snapshot is not None and not snapshot.done():
                snapshot.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await snapshot
            await task  # writes what is buffered
    finally:
        for sig in handled:
            loop.remove_signal_handler(sig)
        await session.close()
    stats = collector.stats
    if args.json:
        print_json({"run_id": collector.run_id, "out": str(args.out),
                    **attrs.asdict(stats)})
    else:
        print(f"received {stats.received}, written {stats.written} rows in {stats.files} "
              f"files, dropped {stats.dropped} (subscriptions {stats.subscription_dropped}, "
              f"lost {stats.lost}); run {collector.run_id} in {args.out}", flush=True)
    if stats.write_errors:
        _note(f"{stats.write_errors} file writes failed ({stats.lost} rows lost)")
        return EXIT_ERROR
    return 0
