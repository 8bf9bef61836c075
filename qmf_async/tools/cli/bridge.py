"""``qmf bridge rabbitmq``: serve a RabbitMQ broker's own objects over QMF.

Reads RabbitMQ's management HTTP API every --interval and publishes its vhosts, queues,
exchanges, bindings, connections, channels (as sessions) and consumers (as
subscriptions) as qpidd's org.apache.qpid.broker classes, so qmf stat, qmf config, the
shell, the dashboard and the collector see the real broker.  Same as
``python -m qmf_async.bridge.rabbitmq``.
"""

from __future__ import annotations

import argparse
import importlib.util
from typing import Any

from ._help import RAW_DESCRIPTION
from ._render import help_text

__all__ = ["add_parser", "run"]


def add_parser(subparsers: Any) -> None:
    """Add ``qmf bridge``.

    Raises:
        ModuleNotFoundError: aiohttp (the ``bridge`` extra) is not installed; nothing
            was added.
    """
    if importlib.util.find_spec("aiohttp") is None:
        raise ModuleNotFoundError("No module named 'aiohttp'", name="aiohttp")
    parser = subparsers.add_parser(
        "bridge", help="serve another broker's own objects over QMF (rabbitmq)",
        description=help_text(__doc__), formatter_class=RAW_DESCRIPTION)
    kinds = parser.add_subparsers(dest="bridge", metavar="KIND")
    kinds.required = True
    rabbit = kinds.add_parser("rabbitmq", help="RabbitMQ, through its management HTTP API",
                              description=help_text(__doc__),
                              formatter_class=RAW_DESCRIPTION)
    from qmf_async.bridge.rabbitmq import add_arguments

    add_arguments(rabbit)
    rabbit.set_defaults(run=run)


async def run(args: argparse.Namespace) -> int:
    from qmf_async.bridge.rabbitmq import run as run_bridge

    return await run_bridge(args)
