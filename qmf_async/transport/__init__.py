"""qmf_async.transport: the connection to a broker, in QMF terms.

:class:`TransportProtocol` (``_base.Transport``) is the typed surface the console, the
agent and the role use; :class:`AiormqTransport` is the AMQP 0-9-1 implementation.
``Transport`` is kept as the name of the AMQP 0-9-1 class (the console's default).
"""

from __future__ import annotations

from ._aiormq import AiormqTransport, quiet_aiormq_loggers
from ._base import (
    DIRECT_EXCHANGE,
    MANAGEMENT_EXCHANGE,
    QMF_CONTENT_TYPE,
    BrokerAddress,
    Delivery,
    TlsOptions,
    TransportFactory,
    broker_url,
    censor_url,
    open_broadcast_endpoint,
    open_reply_endpoint,
    parse_url,
)
from ._base import Transport as TransportProtocol

#: The AMQP 0-9-1 transport under its former name (the console's default factory).
Transport = AiormqTransport

__all__ = [
    "DIRECT_EXCHANGE",
    "MANAGEMENT_EXCHANGE",
    "QMF_CONTENT_TYPE",
    "AiormqTransport",
    "BrokerAddress",
    "Delivery",
    "TlsOptions",
    "Transport",
    "TransportFactory",
    "TransportProtocol",
    "broker_url",
    "censor_url",
    "open_broadcast_endpoint",
    "open_reply_endpoint",
    "parse_url",
    "quiet_aiormq_loggers",
]
