"""The command of the management-broker role: ``python -m qmf_async.agent.broker``.

Kept apart from the role (:mod:`qmf_async.agent._role`) so the role is a library
component with no argument parsing, signal handling or printing in it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
import uuid
from collections.abc import Sequence

from ..errors import QmfError, UsageError
from ..transport import add_connection_arguments, broker_url, connection_arguments, parse_url
from ._role import ManagementBroker

__all__ = ["main"]


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m qmf_async.agent.broker",
        description="Run the QMF v1 management-broker role on an AMQP 0-9-1 broker: "
                    "broker id, agent banks, schema directory, agent discovery.")
    p.add_argument("-b", "--broker", "--url", dest="url", default=None, metavar="ADDRESS",
                   help="the broker: a URL (amqp://guest:guest@host:5672/) or a qpid-tools "
                        "address (host:port, user/password@host:port); default $QMF_URL")
    p.add_argument("--interval", type=float, default=10.0,
                   help="publish interval in seconds (default 10)")
    p.add_argument("--agent-timeout", type=float, default=None,
                   help="age out agents silent this long (default 3 x interval)")
    p.add_argument("--broker-id", type=uuid.UUID, default=None,
                   help="broker id (default: derived from the URL without credentials)")
    p.add_argument("--broker-bank", type=int, default=1, help="broker bank (default 1)")
    p.add_argument("--first-agent-bank", type=int, default=10,
                   help="first agent bank assigned (default 10)")
    p.add_argument("-v", "--verbose", action="count", default=0,
                   help="log more (-v info, -vv debug)")
    add_connection_arguments(p)
    args = p.parse_args(argv)
    args.url = args.url or os.environ.get("QMF_URL")
    if not args.url:
        p.error("no broker: give -b ADDRESS, or set QMF_URL")
    try:
        args.url = broker_url(args.url)
        args.connection = connection_arguments(args)
    except UsageError as exc:
        p.error(str(exc))
    return args


async def _run(args: argparse.Namespace) -> int:
    mb = ManagementBroker(args.url, broker_id=args.broker_id, broker_bank=args.broker_bank,
                          interval=args.interval, agent_timeout=args.agent_timeout,
                          first_agent_bank=args.first_agent_bank, **args.connection)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    try:
        await mb.start()
    except QmfError as exc:
        print(f"management broker: cannot start: {exc}", file=sys.stderr)
        return 1
    try:
        print(f"qmf-async management broker ready: id {mb.broker_id}, broker bank "
              f"{mb.broker_bank}, on {parse_url(broker_url(args.url)).where}", flush=True)
        await stop.wait()
    finally:
        await mb.stop()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Command line entry point; returns the exit status."""
    args = _parse_args(argv)
    level = (logging.WARNING, logging.INFO, logging.DEBUG)[min(args.verbose, 2)]
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return asyncio.run(_run(args))
    except UsageError as exc:
        print(f"management broker: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
