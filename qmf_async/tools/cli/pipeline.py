"""``qmf pipeline``: Spark jobs over a dataset written by ``qmf collect``.

Reads ``--dataset DIR`` (``samples/`` and ``events/``, Parquet by date and class) and
writes to ``--out DIR`` the Parquet tables rates, windows, top_queues, event_counts and
lifetimes, and ``report.html`` with its plots (open it in a browser).  Spark runs in
local mode (``local[*]``) unless ``--master spark://HOST:PORT`` names a cluster; the
driver binds to ``--bind-host`` (127.0.0.1: give an address the executors reach when
using a cluster).  Times are ISO 8601 (UTC unless an offset is given) or integer
nanoseconds since the epoch; ``--since`` is inclusive, ``--until`` exclusive.

Needs the pipeline extra (``pip install 'qmf-async[pipeline]'``) and Java 17 or later.
"""

from __future__ import annotations

import argparse
import asyncio
import os
from typing import Any

from qmf_async.tools.pipeline import (
    INSTALL_HINT,
    build_spark,
    parse_time,
    run_pipeline,
    window_seconds,
)

from ._common import EXIT_USAGE, ToolError, print_json
from ._help import RAW_DESCRIPTION

__all__ = ["add_parser", "run"]


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "pipeline", help="Spark jobs and an HTML report over a collected dataset",
        description=__doc__, formatter_class=RAW_DESCRIPTION)
    parser.add_argument("--dataset", required=True, metavar="DIR",
                        help="dataset folder written by `qmf collect`")
    parser.add_argument("--out", required=True, metavar="DIR",
                        help="output folder (tables and report.html; replaced)")
    parser.add_argument("--master", default=None, metavar="URL",
                        help="Spark master (default local[*]; spark://HOST:PORT for a "
                             "cluster)")
    parser.add_argument("--remote", default=None, metavar="sc://HOST:PORT",
                        help="run the jobs on a Spark Connect server instead (extra "
                             "connect); the dataset and --out are paths the server sees")
    parser.add_argument("--since", metavar="ISO|NS", help="first time (inclusive)")
    parser.add_argument("--until", metavar="ISO|NS", help="end time (exclusive)")
    parser.add_argument("--top", type=int, default=10, metavar="N",
                        help="queues in the top lists (default 10)")
    parser.add_argument("--console-queues", action="store_true",
                        help="keep the consoles' own reply and topic queues in the top "
                             "lists (left out by default)")
    parser.add_argument("--window", metavar="SIZE", default=None,
                        help="the report's window: 30s, 5m, 1h ... (default: chosen from "
                             "the period and the sample interval)")
    parser.add_argument("--max-gap", type=float, default=300.0, metavar="S",
                        help="no rate across samples further apart than this "
                             "(seconds, default 300)")
    parser.add_argument("--bind-host", default="127.0.0.1", metavar="H",
                        help="address the Spark driver binds to (default 127.0.0.1)")
    parser.add_argument("--driver-memory", metavar="SIZE",
                        help="Spark driver memory, e.g. 4g (default: Spark's)")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="a Spark setting (repeatable), e.g. "
                             "spark.sql.shuffle.partitions=8")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.set_defaults(run=run)


def _time(value: str | None, option: str) -> int | None:
    if value is None:
        return None
    try:
        return parse_time(value)
    except ValueError as exc:
        raise ToolError(f"{option}: {exc}", EXIT_USAGE) from None


def _conf(items: list[str]) -> dict[str, str]:
    conf = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ToolError(f"--conf: expected KEY=VALUE, not {item!r}", EXIT_USAGE)
        conf[key.strip()] = value
    return conf


def _work(args: argparse.Namespace, since: int | None, until: int | None,
          conf: dict[str, str]) -> dict[str, Any]:
    if "://" not in args.dataset and not os.path.isdir(args.dataset):
        raise ToolError(f"no dataset folder {args.dataset!r}", EXIT_USAGE)
    try:
        spark = build_spark(args.master or "local[*]", app_name="qmf-pipeline",
                            bind_host=args.bind_host, driver_memory=args.driver_memory,
                            config=conf, remote=args.remote)
    except (ImportError, ValueError) as exc:
        raise ToolError(f"{exc}", EXIT_USAGE) from None
    try:
        return run_pipeline(spark, args.dataset, args.out, since=since, until=until,
                            top_n=args.top, max_gap=args.max_gap, window=args.window_s,
                            console_queues=args.console_queues)
    finally:
        spark.stop()


async def run(args: argparse.Namespace) -> int:
    since = _time(args.since, "--since")
    until = _time(args.until, "--until")
    if since is not None and until is not None and until <= since:
        raise ToolError("--until must be later than --since", EXIT_USAGE)
    conf = _conf(args.conf)
    if args.remote is not None and args.master is not None:
        raise ToolError("give --master or --remote, not both", EXIT_USAGE)
    if args.top < 1:
        raise ToolError("--top must be at least 1", EXIT_USAGE)
    try:
        args.window_s = window_seconds(args.window) if args.window is not None else None
    except ValueError as exc:
        raise ToolError(f"--window: {exc}", EXIT_USAGE) from None
    try:
        import pyspark  # noqa: F401  (only whether it imports)
    except ImportError:
        raise ToolError(f"the pipeline needs pyspark: {INSTALL_HINT}", EXIT_USAGE) from None
    summary = await asyncio.to_thread(_work, args, since, until, conf)
    if args.json:
        print_json(summary)
        return 0
    print(f"samples {summary['inputs']['samples']:,}, events {summary['inputs']['events']:,}"
          f" ({summary['seconds']:.1f} s)")
    for table, count in summary["rows"].items():
        print(f"  {table:<13} {count:>12,} rows  {summary['paths'][table]}")
    print(f"  resets {summary['resets']:,}, gaps {summary['gaps']:,}, "
          f"restarts {summary.get('restarts', 0):,}")
    interval = summary["sample_interval_seconds"]
    print(f"  samples every {interval:.3g} s (median), " if interval else "  ",
          end="")
    print(f"report windows of {summary['window']} "
          f"({summary['partial_windows']:,} partial in the plots)")
    print(f"report: {summary['paths']['report']}")
    return 0
