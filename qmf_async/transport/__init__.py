"""qmf_async.transport: the connection to a broker, in QMF terms.

:class:`TransportProtocol` (``_base.Transport``) is the typed surface the console, the
agent and the role use; :class:`AiormqTransport` is the AMQP 0-9-1 implementation,
:class:`NativeAmqp10Transport` the AMQP 1.0 one, in pure Python (on the sans-I/O
:class:`Amqp10Connection`), and :class:`AutoTransport` picks between them from the
broker's answer (``protocol=``).
``Transport`` is kept as the name of the AMQP 0-9-1 class (the console's default).
Each transport's module (and its client library) is imported on first use only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._auto import (
    PROTOCOLS,
    AutoTransport,
    check_protocol,
    transport_factory,
)
from ._base import (
    AMQP091_CAPABILITIES,
    AMQP10_CAPABILITIES,
    MANAGEMENT_EXCHANGE,
    NO_CAPABILITIES,
    QMF_CONTENT_TYPE,
    REPLY_EXCHANGE,
    Body,
    BrokerAddress,
    Capabilities,
    ConnectionState,
    Delivery,
    TlsOptions,
    TransportFactory,
    broker_url,
    censor_url,
    client_process_properties,
    open_broadcast_endpoint,
    open_reply_endpoint,
    parse_url,
    sasl_mechanism_list,
    url_heartbeat,
    with_heartbeat,
)
from ._base import Transport as TransportProtocol
from ._options import add_connection_arguments, connection_arguments

if TYPE_CHECKING:  # for type checkers; at run time imported on first use (__getattr__)
    from ._aiormq import AiormqTransport
    from ._aiormq_glue import quiet_aiormq_loggers
    from ._amqp10_engine import Amqp10Connection
    from ._amqp10_frames import FrameSizeError
    from ._native import Amqp10ConnectionError, NativeAmqp10Transport

    #: The AMQP 0-9-1 transport under its former name (the console's default factory).
    Transport = AiormqTransport

__all__ = [
    "AMQP10_CAPABILITIES",
    "Amqp10ConnectionError",
    "Amqp10Connection",
    "FrameSizeError",
    "NativeAmqp10Transport",
    "AMQP091_CAPABILITIES",
    "REPLY_EXCHANGE",
    "MANAGEMENT_EXCHANGE",
    "NO_CAPABILITIES",
    "QMF_CONTENT_TYPE",
    "PROTOCOLS",
    "AiormqTransport",
    "AutoTransport",
    "Body",
    "BrokerAddress",
    "Capabilities",
    "ConnectionState",
    "Delivery",
    "TlsOptions",
    "Transport",
    "TransportFactory",
    "TransportProtocol",
    "add_connection_arguments",
    "broker_url",
    "censor_url",
    "check_protocol",
    "client_process_properties",
    "connection_arguments",
    "open_broadcast_endpoint",
    "open_reply_endpoint",
    "parse_url",
    "quiet_aiormq_loggers",
    "sasl_mechanism_list",
    "transport_factory",
    "url_heartbeat",
    "with_heartbeat",
]


def __getattr__(name: str) -> Any:
    # every transport is imported on first use only: a program that speaks AMQP 1.0
    # never loads aiormq, one that speaks AMQP 0-9-1 never loads the AMQP 1.0 engine
    if name in ("AiormqTransport", "Transport"):
        from ._aiormq import AiormqTransport

        return AiormqTransport
    if name == "quiet_aiormq_loggers":
        from ._aiormq_glue import quiet_aiormq_loggers

        return quiet_aiormq_loggers
    if name == "NativeAmqp10Transport":
        from ._native import NativeAmqp10Transport

        return NativeAmqp10Transport
    if name == "Amqp10ConnectionError":
        from ._native import Amqp10ConnectionError

        return Amqp10ConnectionError
    if name == "Amqp10Connection":
        from ._amqp10_engine import Amqp10Connection

        return Amqp10Connection
    if name == "FrameSizeError":
        from ._amqp10_frames import FrameSizeError

        return FrameSizeError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
