"""The values the sans-I/O AMQP 1.0 client takes and gives: link termini (:class:`Source`,
:class:`Target`) and the events of :class:`~qmf_async.transport._amqp10_engine.Amqp10Connection`
(no I/O)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from ..errors import DecodeError
from ..frozen import frozen
from ..wire import Described, Symbol
from ._amqp10_frames import ErrorCondition

__all__ = [
    "DELIVERY_STATES",
    "Attached",
    "Closed",
    "CreditGranted",
    "Detached",
    "Event",
    "Lost",
    "MessageReceived",
    "Opened",
    "SessionBegun",
    "SessionEnded",
    "Settled",
    "Source",
    "Target",
    "terminus_address",
]

_SOURCE, _TARGET = 0x28, 0x29

#: the delivery states (part 3, 3.4) by descriptor code: the names :class:`Settled`
#: gives, and the outcomes ``Amqp10Connection.settle`` sends (the one table of them)
DELIVERY_STATES: Final = {0x23: "received", 0x24: "accepted", 0x25: "rejected",
                          0x26: "released", 0x27: "modified"}


@frozen
class Source:
    """A link source (part 3, 3.5.3): ``address``, ``filter`` (symbol keys to described
    filters, e.g. the legacy binding filters), ``dynamic`` (the peer makes the node and
    names it in its attach) and its ``dynamic_node_properties``."""

    address: str | None = None
    filter: Mapping[str, Any] | None = None
    dynamic: bool = False
    dynamic_node_properties: Mapping[str, Any] | None = None
    expiry_policy: str | None = None
    distribution_mode: str | None = None

    def encode(self) -> Described:
        filters = None if not self.filter else {Symbol(k): v for k, v in self.filter.items()}
        props = None if not self.dynamic_node_properties else {
            Symbol(k): v for k, v in self.dynamic_node_properties.items()}
        fields: list[Any] = [self.address, None,
                             Symbol(self.expiry_policy) if self.expiry_policy else None,
                             None, True if self.dynamic else None, props,
                             Symbol(self.distribution_mode) if self.distribution_mode
                             else None, filters]
        while fields and fields[-1] is None:
            fields.pop()
        return Described(_SOURCE, fields)


@frozen
class Target:
    """A link target (part 3, 3.5.4): ``address``, or ``dynamic``."""

    address: str | None = None
    dynamic: bool = False

    def encode(self) -> Described:
        fields: list[Any] = [self.address]
        if self.dynamic:
            fields += [None, None, None, True]
        return Described(_TARGET, fields)


def terminus_address(value: Any) -> tuple[bool, str | None]:
    """(present, address) of a received source or target (present False: null)."""
    if value is None:
        return False, None
    if not isinstance(value, Described) or not isinstance(value.value, list):
        raise DecodeError(f"malformed AMQP 1.0 terminus: {value!r:.80}")
    fields = value.value
    address = fields[0] if fields and isinstance(fields[0], str) else None
    return True, address


# ---------------------------------------------------------------------------- events

@frozen
class Opened:
    """The peer's ``open``: its container id, properties, max-frame-size and idle
    time-out (seconds, 0: none)."""

    container_id: str
    properties: Mapping[str, Any]
    max_frame_size: int
    idle_timeout: float


@frozen
class SessionBegun:
    """The peer's ``begin`` of our session."""


@frozen
class Attached:
    """The peer's ``attach`` of our link ``handle``: ``present`` False when the peer
    attached a null terminus (it detaches with an error next); ``address`` the address
    of its source (a receiving link; a dynamic node's name) or target (a sending link)."""

    handle: int
    name: str
    present: bool
    address: str | None


@frozen
class Detached:
    """The peer detached link ``handle`` (``error`` its reason, if any)."""

    handle: int
    name: str
    error: ErrorCondition | None


@frozen
class CreditGranted:
    """The peer's flow on sending link ``handle``: ``credit`` deliveries may be sent."""

    handle: int
    credit: int


@frozen
class MessageReceived:
    """A whole delivery on receiving link ``handle`` (its frames joined): ``payload``
    is the encoded message; an unsettled one waits for :meth:`Amqp10Connection.settle`."""

    handle: int
    delivery_id: int
    payload: bytes
    settled: bool


@frozen
class Settled:
    """The peer settled our unsettled delivery ``delivery_id`` with ``outcome``."""

    delivery_id: int
    outcome: str | None


@frozen
class SessionEnded:
    """The peer ended the session."""

    error: ErrorCondition | None


@frozen
class Closed:
    """The peer closed the connection (``error`` its reason)."""

    error: ErrorCondition | None


@frozen
class Lost:
    """The peer was silent for twice our idle time-out."""

    reason: str


Event = (Opened | SessionBegun | Attached | Detached | CreditGranted | MessageReceived
         | Settled | SessionEnded | Closed | Lost)
