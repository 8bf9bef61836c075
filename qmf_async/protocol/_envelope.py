"""The envelopes: the one inbound type and the one outgoing type of every core.

A transport hands each received message up as a :class:`Delivery`; the console's and
the agent's cores, QMF v1 and v2 alike, take it in ``feed`` and build every message
they want sent as an :class:`Outgoing`, which they never send themselves: the layer
above hands each to its connection's one send path (``Broker.publish`` in the console,
``PeerRuntime.enqueue`` in the agent and the management-broker role).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from ..frozen import frozen

__all__ = ["Delivery", "Outgoing"]


@frozen
class Delivery:
    """One received message, in QMF terms.

    ``endpoint`` is the name of the endpoint (queue) it came from; ``headers`` is the
    application headers table (empty mapping when absent).  A transport hands up what
    its AMQP version carries: bytes in ``body`` with their ``content_type`` (a QMF v2
    map over AMQP 0-9-1 is ``amqp/map``/``amqp/list`` bytes, which the protocol core
    decodes), or, for an AMQP 1.0 amqp-value section, the value the AMQP library
    decoded in ``value`` (a dict or list) with ``body`` empty.  ``correlation_id`` is
    the message's correlation id (v2 requests carry one).
    """

    body: bytes
    exchange: str
    routing_key: str
    reply_to: str | None
    content_type: str | None
    headers: Mapping[str, Any]
    user_id: str | None
    endpoint: str
    value: Any = None
    correlation_id: Any = None


class Outgoing(NamedTuple):
    """A message to publish.

    ``body`` goes to ``exchange`` under ``key`` (a v1 routing key or a v2 subject): bytes
    for a QMF v1 body, a map or a list for a QMF v2 message, which then carries the
    application properties ``headers``.  ``correlation`` is what the answers carry: the
    v1 sequence number of a console's request, the v2 correlation id, or None.
    ``reply_to`` is the reply key of a request an agent or the role sends; None lets
    the sender fill in its own (a console's reply queue) or expects no answer.

    A named tuple, not an attrs class: one is built for every request and answer, on
    the method-call path.
    """

    exchange: str
    key: str
    body: bytes | dict[str, Any] | list[Any]
    reply_to: str | None = None
    headers: Mapping[str, Any] | None = None
    correlation: int | str | None = None

    @property
    def seq(self) -> int:
        """The v1 sequence number of a console's request (0 when there is none)."""
        correlation = self.correlation
        return correlation if type(correlation) is int else 0

    @property
    def correlation_id(self) -> str | None:
        """The v2 correlation id (None when there is none)."""
        correlation = self.correlation
        return correlation if type(correlation) is str else None
