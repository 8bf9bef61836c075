"""The RabbitMQ bridge: RabbitMQ's own objects served over QMF as qpidd's classes.

    python -m qmf_async.bridge.rabbitmq -b amqp://guest:guest@localhost:5672/ \\
        --api http://guest:guest@localhost:15672/ [--interval 5] [--vhost NAME]

>>> from qmf_async.bridge.rabbitmq import RabbitBridge, RabbitApi   # doctest: +SKIP

See docs/bridge.md for what is mapped from where.
"""

from __future__ import annotations

import sys

from ._access import Permissions, UserAccess
from ._agent import PACKAGE, RabbitBridge, exchange_arguments, load_schemas, queue_arguments
from ._cli import add_arguments, build_bridge, main, run
from ._http import ApiAuthError, ApiError, ApiUnavailableError, RabbitApi, api_base
from ._mapping import Mapped, RawState, diff_events, map_state

__all__ = ["PACKAGE", "RabbitBridge", "RabbitApi", "ApiError", "ApiAuthError",
           "ApiUnavailableError", "load_schemas", "queue_arguments", "exchange_arguments",
           "api_base", "Mapped", "RawState", "map_state", "diff_events", "add_arguments",
           "build_bridge", "run", "main", "Permissions", "UserAccess"]

if __name__ == "__main__":
    sys.exit(main())
