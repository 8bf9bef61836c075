"""The bridge's command line: ``python -m qmf_async.bridge.rabbitmq`` and
``qmf bridge rabbitmq`` (one argument set, one runner)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import Sequence

from ..agent import Agent
from ..errors import QmfError, UsageError
from ..transport import add_connection_arguments, broker_url, connection_arguments, parse_url
from ._agent import RabbitBridge
from ._http import DEFAULT_API, RabbitApi

__all__ = ["add_arguments", "build_bridge", "main", "run"]

DESCRIPTION = ("Serve a RabbitMQ broker's real vhosts, queues, exchanges, bindings, "
               "connections, channels and consumers over QMF as qpidd's "
               "org.apache.qpid.broker classes, read from its management HTTP API.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The bridge's options on ``parser``."""
    parser.add_argument("-b", "--broker", "--url", dest="url", default=None, metavar="ADDRESS",
                        help="the QMF bus: a URL (amqp://guest:guest@host:5672/) or a "
                             "qpid-tools address; default $QMF_URL")
    parser.add_argument("--api", default=None, metavar="URL",
                        help="RabbitMQ's management API, credentials in the URL "
                             f"(default $QMF_RABBITMQ_API or {DEFAULT_API})")
    parser.add_argument("--interval", type=float, default=5.0, metavar="S",
                        help="seconds between polls of the API, also the publish interval "
                             "(default 5)")
    parser.add_argument("--vhost", default=None, metavar="NAME",
                        help="serve only this vhost, where create/delete act (default: every "
                             "vhost; create/delete act on /)")
    parser.add_argument("--label", default="rabbitmq", help="agent label (default rabbitmq)")
    parser.add_argument("--api-timeout", type=float, default=10.0, metavar="S",
                        help="seconds to wait for one API answer (default 10)")
    parser.add_argument("--access-cache", type=float, default=5.0, metavar="S",
                        help="seconds a caller's RabbitMQ permissions are reused before "
                             "they are read from the API again (default 5; 0: every call)")
    parser.add_argument("--no-attach", dest="attach", action="store_false",
                        help="do not ask a management broker for banks")
    parser.add_argument("-v", "--verbose", action="count", default=0,
                        help="log more (-v info, -vv debug)")
    add_connection_arguments(parser)


def build_bridge(args: argparse.Namespace) -> RabbitBridge:
    """The bridge (not started) for parsed arguments.

    Raises:
        UsageError: no bus address, a malformed URL or a bad interval.
    """
    url = args.url or os.environ.get("QMF_URL")
    if not url:
        raise UsageError("no QMF bus: give -b ADDRESS, or set QMF_URL")
    if args.interval <= 0 or args.api_timeout <= 0:
        raise UsageError("--interval and --api-timeout must be positive")
    if args.access_cache < 0:
        raise UsageError("--access-cache must be >= 0")
    api = RabbitApi(args.api or os.environ.get("QMF_RABBITMQ_API") or DEFAULT_API,
                    timeout=args.api_timeout)
    agent = Agent(broker_url(url), label=args.label, interval=args.interval,
                  attach=args.attach, **connection_arguments(args))
    return RabbitBridge(agent, api, interval=args.interval, vhost=args.vhost,
                        access_cache=args.access_cache)


async def run(args: argparse.Namespace) -> int:
    """Run the bridge until SIGINT/SIGTERM: 0 on a clean stop, 1 when it cannot start.

    Raises:
        UsageError: bad arguments.
    """
    bridge = build_bridge(args)  # bad arguments fail before logging is set up
    level = (logging.WARNING, logging.INFO, logging.DEBUG)[min(args.verbose, 2)]
    if not logging.getLogger().handlers:
        logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("qmf_async").setLevel(level)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    try:
        await bridge.start()
    except QmfError as exc:
        print(f"rabbitmq bridge: cannot start: {exc}", file=sys.stderr)
        await bridge.stop()
        return 1
    try:
        agent = bridge.agent
        state = ("API unavailable, retrying" if bridge.last_error else
                 f"{len(agent.objects('queue'))} queues, {len(agent.objects('exchange'))} "
                 f"exchanges")
        print(f"rabbitmq bridge {agent.label!r} ready: banks {agent.broker_bank}."
              f"{agent.agent_bank} on {parse_url(agent.url).where}, API {bridge.api.where} "
              f"({state}), interval {bridge.interval:g} s", flush=True)
        await stop.wait()
    finally:
        await bridge.stop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(sig)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m qmf_async.bridge.rabbitmq``; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m qmf_async.bridge.rabbitmq",
                                     description=DESCRIPTION)
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return asyncio.run(run(args))
    except UsageError as exc:
        parser.error(str(exc))
    except KeyboardInterrupt:
        return 130
