"""The values a console hands its users beside the object proxies: object ids
scoped to their broker, what an update changed, remote agents, method results and
events (the proxies themselves are in ``_objects``)."""

from __future__ import annotations

import enum
import time
from collections.abc import Mapping
from typing import Any

import attrs

from ..frozen import frozen
from ..wire import SEVERITY_NAMES, ClassKey, ObjectId, SchemaClass
from ._links import BrokerLink

__all__ = ["BrokerObjectId", "Change", "Event", "MethodResult", "RemoteAgent",
           "broker_object_id"]

_new = object.__new__

class BrokerObjectId(ObjectId):
    """An object id as a session hands it out (``QmfObject.get_object_id()``, and the
    references among an object's properties): the 16 bytes of an :class:`ObjectId`
    and the ``broker`` connection the object was received on.

    Two brokers number their objects alike (two qpidds give their queue ``orders``
    the same id), so the broker is part of the identity: ids of two brokers never
    compare equal, and sets and dicts keep them apart.  A plain :class:`ObjectId`
    (parsed from text, or built by hand) names the id on any broker: it compares
    equal to the id of those bytes of every broker; the hash is the bytes' hash, so
    it also finds such an id in a dict or set (the first one held when several
    brokers have it: key by the session's own ids to keep brokers apart).
    Text form and ``repr`` are those of the 16 bytes.
    """

    __slots__ = ("broker",)

    broker: BrokerLink

    def __init__(self, raw: bytes, broker: BrokerLink) -> None:
        """The id of the 16 bytes ``raw`` on ``broker``.

        Raises:
            UsageError: ``raw`` is not 16 bytes.
        """
        super().__init__(raw)
        _set_broker(self, broker)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, BrokerObjectId):
            return self.raw == other.raw and self.broker is other.broker
        if isinstance(other, ObjectId):
            return self.raw == other.raw
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    def __hash__(self) -> int:
        return hash(self.raw)

    def __reduce__(self) -> tuple[Any, ...]:
        # pickled (copied to another process) without its connection: a plain id
        return (ObjectId, (self.raw,))

    def __copy__(self) -> BrokerObjectId:
        return self

    def __deepcopy__(self, memo: Any) -> BrokerObjectId:
        return self


_set_raw = ObjectId.__dict__["raw"].__set__  # slot descriptors: past the frozen __setattr__
_set_broker = BrokerObjectId.__dict__["broker"].__set__


def broker_object_id(raw: bytes, broker: BrokerLink) -> BrokerObjectId:
    """The id of 16 wire bytes known to be valid, on ``broker`` (no checks)."""
    oid: BrokerObjectId = _new(BrokerObjectId)
    _set_raw(oid, raw)
    _set_broker(oid, broker)
    return oid


class Change(enum.Flag):
    """What an object update carried (:meth:`QmfObject.get_changes`).

    ``PROPERTIES`` (a ``c`` record), ``STATISTICS`` (an ``i`` record), both (a query
    answer, ``g``), plus ``DELETED`` when the record says the object was deleted.
    Whatever it carried, the proxy answers every element the session has received
    for the object.
    """

    NONE = 0
    PROPERTIES = enum.auto()
    STATISTICS = enum.auto()
    DELETED = enum.auto()


@frozen(slots=True)
class RemoteAgent:
    """A remote agent as a console sees it: its broker and banks, and its label.

    Two agents are equal (and hash alike) when they are the same banks on the same
    broker connection: the agents of two brokers (two qpidds' own agents, both
    ``1.0``) are never confused in sets, dicts or ``_agent=`` filters.

    An agent reached over QMF v2 has its v2 ``name`` (``vendor:product:instance``;
    qpidd's is ``apache.org:qpidd:<uuid>``) and banks its connection gives it:
    ``1.0`` for qpidd's own agent, ``0.N`` for the others.
    """

    broker: BrokerLink = attrs.field(repr=False)
    broker_bank: int
    agent_bank: int
    label: str = attrs.field(default="", eq=False)
    broker_url: str = attrs.field(default="", eq=False)
    name: str = attrs.field(default="", eq=False)

    @property
    def key(self) -> str:
        """Routing key of requests to this agent: ``agent.<brokerBank>.<agentBank>``."""
        return f"agent.{self.broker_bank}.{self.agent_bank}"

    @property
    def qmf_version(self) -> int:
        """The QMF version the console speaks with this agent (1 or 2)."""
        return 2 if self.name else 1

    def __str__(self) -> str:
        return f"RemoteAgent({self.broker_bank}.{self.agent_bank} {self.label or '?'})"


class MethodResult:
    """The outcome of a method call: ``status``, ``text`` and output arguments
    (``out_args``, also readable as attributes)."""

    __slots__ = ("out_args", "status", "text")

    def __init__(self, status: int, text: str, out_args: Mapping[str, Any]) -> None:
        self.status = status
        self.text = text
        self.out_args = dict(out_args)

    def __getattr__(self, name: str) -> Any:
        try:
            return object.__getattribute__(self, "out_args")[name]
        except KeyError:
            raise AttributeError(f"method result has no output argument {name!r}") from None

    def __repr__(self) -> str:
        return f"MethodResult(status={self.status}, text={self.text!r}, out_args={self.out_args!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MethodResult):
            return NotImplemented
        return (self.status, self.text, self.out_args) == (other.status, other.text, other.out_args)

    __hash__ = None  # type: ignore[assignment]


@frozen(slots=True, repr=False)
class Event:
    """An event received from an agent."""

    class_key: ClassKey
    timestamp: int
    severity: int
    arguments: Mapping[str, Any]
    agent: RemoteAgent | None = attrs.field(default=None, eq=False)
    schema: SchemaClass | None = attrs.field(default=None, eq=False, repr=False)

    @property
    def severity_name(self) -> str:
        """emerg, alert, crit, error, warn, notice, info or debug."""
        return SEVERITY_NAMES[self.severity] if 0 <= self.severity < 8 else str(self.severity)

    def get_class_key(self) -> ClassKey:
        return self.class_key

    def get_arguments(self) -> dict[str, Any]:
        return dict(self.arguments)

    def get_severity(self) -> int:
        return self.severity

    def get_timestamp(self) -> int:
        return self.timestamp

    def __str__(self) -> str:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.timestamp / 1e9))
        args = " ".join(f"{k}={v}" for k, v in self.arguments.items())
        return (f"{when} {self.severity_name.upper()[:4]} {self.class_key.package}:"
                f"{self.class_key.name} {args}").rstrip()

    __repr__ = __str__
