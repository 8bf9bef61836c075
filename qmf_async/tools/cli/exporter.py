"""``qmf exporter``: Prometheus metrics of one or more brokers and every QMF agent on
their buses, served at http://LISTEN/metrics (see docs/prometheus.md).

One session follows the object updates of qpidd's classes (broker, vhost, queue,
exchange, binding, connection, session, subscription, link, bridge, memory; over QMF v2
the broker passes only those) and, with --generic, of any other agent's classes, and
serves the latest values: a scrape asks nothing on the bus.  Lost connections are
re-established in the background (qpidd_up says which are down; a note on stderr says
when a connection is lost and when it is back).  Runs until
SIGINT/SIGTERM or --duration seconds.  Needs the prometheus extra:
``pip install 'qmf-async[prometheus]'``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from typing import Any

from qmf_async import Session

from ._common import (
    EXIT_USAGE,
    ConnectionNotes,
    add_broker_option,
    connection_arguments,
    listen_error,
    note,
    positive_float,
    resolve_urls,
)
from ._help import RAW_DESCRIPTION
from ._render import help_text, setup_logging

__all__ = ["add_parser", "run"]


def _listen(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = "", text
    try:
        number = int(port)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not HOST:PORT: {text!r}") from None
    if not 0 <= number <= 65535:
        raise argparse.ArgumentTypeError(f"no such port: {text!r}")
    return host.strip("[]") or "0.0.0.0", number


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "exporter", help="serve Prometheus metrics of the brokers and their agents",
        description=help_text(__doc__), formatter_class=RAW_DESCRIPTION)
    parser.add_argument("urls", nargs="*", metavar="URL",
                        help="broker URLs or addresses (default: $QMF_URL or "
                             "amqp://guest:guest@localhost:5672/)")
    add_broker_option(parser, multiple=True)
    parser.add_argument("--listen", type=_listen, default=("0.0.0.0", 9469),
                        metavar="HOST:PORT",
                        help="where to serve /metrics (default 0.0.0.0:9469; port 0 picks "
                             "a free one, printed on stderr)")
    parser.add_argument("--web.config.file", dest="web_config_file", default=None,
                        metavar="FILE",
                        help="TLS, client certificates and basic auth of /metrics: the "
                             "web configuration file of Prometheus' exporter-toolkit "
                             "(docs/prometheus.md)")
    parser.add_argument("--queue-include", action="append", default=[], metavar="GLOB",
                        help="export only queues whose name matches (repeatable)")
    parser.add_argument("--queue-exclude", action="append", default=[], metavar="GLOB",
                        help="leave out queues whose name matches (repeatable; the "
                             "consoles' own reply and topic queues are left out too)")
    parser.add_argument("--console-queues", action="store_true",
                        help="export the consoles' own reply and topic queues too")
    parser.add_argument("--connection-include", action="append", default=[], metavar="GLOB",
                        help="export only connections whose address matches (repeatable)")
    parser.add_argument("--connection-exclude", action="append", default=[], metavar="GLOB",
                        help="leave out connections whose address matches (repeatable)")
    parser.add_argument("--max-series", type=int, default=1_000_000, metavar="N",
                        help="samples a scrape writes at most (default 1000000); the rest "
                             "are counted in qmf_exporter_series_cut_total")
    parser.add_argument("--generic", action="store_true",
                        help="export every other agent's classes from their schemas "
                             "(prefix qmf_)")
    parser.add_argument("--package", action="append", default=[], metavar="NAME",
                        help="with --generic: only this package (repeatable); without "
                             "it the broker passes every agent's updates")
    parser.add_argument("--stale-after", type=positive_float, default=300.0, metavar="S",
                        help="drop the series of an agent that left (or of a broker that "
                             "is down) after S seconds (default 300)")
    parser.add_argument("-t", "--timeout", type=positive_float, default=10.0, metavar="S",
                        help="seconds to wait for each first connection (default 10)")
    parser.add_argument("--snapshot-timeout", type=positive_float, default=60.0, metavar="S",
                        help="seconds an object query of a class may take (default 60)")
    parser.add_argument("--tick", type=positive_float, default=1.0, help=argparse.SUPPRESS)
    parser.add_argument("--duration", type=positive_float, default=None, metavar="S",
                        help="stop after S seconds (default: run until interrupted)")
    parser.add_argument("--quiet", action="store_true", help="no notes on stderr")
    parser.add_argument("-v", "--verbose", action="store_true", help="log what happens")
    parser.set_defaults(run=run)


async def run(args: argparse.Namespace) -> int:
    try:
        import prometheus_client  # noqa: F401  (the extra; only checked here)
    except ImportError:
        print("qmf exporter: needs the prometheus extra: pip install 'qmf-async[prometheus]'",
              file=sys.stderr)
        return EXIT_USAGE
    from qmf_async.exporter import (
        CONSOLE_QUEUES,
        Exporter,
        Filters,
        LiveStore,
        WebConfigError,
        load_web_config,
        serve_metrics,
    )

    setup_logging(args.verbose)
    web_config = None
    if args.web_config_file is not None:
        try:
            web_config = load_web_config(args.web_config_file)
        except WebConfigError as exc:
            print(f"qmf exporter: error: --web.config.file {args.web_config_file}: {exc}",
                  file=sys.stderr)
            return EXIT_USAGE
    if args.max_series < 1:
        print("qmf exporter: error: --max-series must be at least 1", file=sys.stderr)
        return EXIT_USAGE
    urls = resolve_urls(args.urls, args.broker)
    excludes = tuple(args.queue_exclude) + (() if args.console_queues else CONSOLE_QUEUES)
    store = LiveStore(filters=Filters(tuple(args.queue_include), excludes,
                                      tuple(args.connection_include),
                                      tuple(args.connection_exclude)),
                      max_series=args.max_series, generic=args.generic,
                      packages=args.package)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    handled: list[signal.Signals] = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
            handled.append(sig)
    # "lost the connection to ..." and "reconnected to ..." on stderr, as qmf events
    session = Session(console=ConnectionNotes("exporter", args.quiet),
                      manage_connections=True, timeout=args.timeout,
                      schema_timeout=max(30.0, args.timeout))
    try:
        async with Exporter(session, store, stale_after=args.stale_after, tick=args.tick,
                            snapshot_timeout=args.snapshot_timeout) as exporter:
            host, port = args.listen
            try:
                server = await serve_metrics(exporter.render, host, port,
                                             pause=exporter.pause, web_config=web_config)
            except OSError as exc:
                raise listen_error(host, port, exc) from exc
            bound = server.address
            if not args.quiet:
                note("exporter", f"serving {server.scheme}://{bound[0]}:{bound[1]}/metrics")
                if web_config is not None and web_config.users and web_config.tls is None:
                    note("exporter", "warning: basic auth without TLS: passwords cross the "
                                     "network in clear (add tls_server_config)")
            try:
                for url in urls:
                    broker = await session.add_broker(url, timeout=args.timeout,
                                                      **connection_arguments(args))
                    if not broker.connected and not args.quiet:
                        why = str(broker.error)
                        if broker.where not in why:
                            why = f"cannot connect to {broker.where}: {why}"
                        note("exporter", f"{why}; retrying in the background")
                if args.duration is not None:
                    loop.call_later(args.duration, stop.set)
                await stop.wait()
            finally:
                await server.close()
    finally:
        for sig in handled:
            loop.remove_signal_handler(sig)
        await session.close()
    return 0
