"""The connection state of a broker: :class:`BrokerState`, and the changes a
session's :meth:`~qmf_async.Session.broker_states` stream hands out."""

from __future__ import annotations

import enum
from typing import Any

from ..frozen import frozen

__all__ = ["BrokerState", "BrokerStateChange"]


class BrokerState(enum.Enum):
    """Where a broker connection stands.

    ``CONNECTING`` until its first connection is made; ``HANDSHAKING`` once
    connected, while ``B`` and the agent list are asked for (requests can flow);
    ``CONNECTED`` once that is done; ``DISCONNECTED`` when the connection was lost
    or could not be made (the session reconnects with ``manage_connections``);
    ``CLOSED`` when the broker was removed, or its connection lost for good (a
    session that does not manage connections).  ``CLOSED`` is final.
    """

    CONNECTING = "connecting"
    HANDSHAKING = "handshaking"
    CONNECTED = "connected"
    DISCONNECTED = "disconnected"
    CLOSED = "closed"

    @property
    def up(self) -> bool:
        """Whether requests can be sent (``HANDSHAKING`` or ``CONNECTED``)."""
        return self is BrokerState.HANDSHAKING or self is BrokerState.CONNECTED


@frozen(slots=True)
class BrokerStateChange:
    """One change of a broker's :class:`BrokerState`: ``broker`` (a
    :class:`~qmf_async.Broker`) is now in ``state``; ``error`` is why it is not up
    (the connection's error; None when up, or closed by the application)."""

    broker: Any
    state: BrokerState
    error: BaseException | None = None
