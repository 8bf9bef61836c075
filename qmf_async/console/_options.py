"""A :class:`~qmf_async.Session`'s settings as one frozen value: :class:`SessionOptions`.

A Session takes them as ``Session(options=...)`` or as keywords (``SessionKeywords``)
and shows each field as an attribute of its own (:class:`Setting`).
"""

from __future__ import annotations

from typing import Any, Generic, Protocol, TypedDict, TypeVar, overload

import attrs

from ..errors import UsageError
from ..frozen import frozen
from ..transport import check_protocol

__all__ = ["SessionKeywords", "SessionOptions", "Setting"]


def _positive(_options: SessionOptions, field: attrs.Attribute[Any], value: Any) -> None:
    if value <= 0:
        raise UsageError(f"{field.name} must be positive")


def _not_negative(_options: SessionOptions, field: attrs.Attribute[Any], value: Any) -> None:
    if value < 0:
        raise UsageError(f"{field.name} must be >= 0")


def _count(_options: SessionOptions, field: attrs.Attribute[Any], value: Any) -> None:
    # the transports' own check, made when the session is built
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise UsageError(f"{field.name} must be an int >= 0, not {value!r}")


def _protocol(_options: SessionOptions, _field: attrs.Attribute[Any], value: str) -> None:
    check_protocol(value)


def _qmf_version(_options: SessionOptions, _field: attrs.Attribute[Any],
                 value: int | None) -> None:
    if value not in (None, 1, 2):
        raise UsageError(f"qmf_version must be 1, 2 or None (automatic), not {value!r}")


def _max_delay(options: SessionOptions, field: attrs.Attribute[Any], value: float) -> None:
    _positive(options, field, value)
    if value < options.reconnect_min_delay:
        raise UsageError(f"reconnect_max_delay ({value}) must be at least "
                         f"reconnect_min_delay ({options.reconnect_min_delay})")


@frozen(slots=True, kw_only=True)
class SessionOptions:
    """The settings of a :class:`~qmf_async.Session` (every time in seconds).

    ``Session(options=SessionOptions(timeout=30.0))`` equals ``Session(timeout=30.0)``;
    ``attrs.evolve(options, timeout=5.0)`` is a copy with one setting changed.

    Attributes:
        rcv_objects: receive the object updates agents publish (callbacks and
            ``object_updates``).
        rcv_events: receive events.
        rcv_heartbeats: receive agent heartbeats.
        user_bindings: bind only what the ``bind_*`` methods ask for.
        manage_connections: a failed or lost connection is retried in the background
            (``add_broker`` then returns at once).
        timeout: the default wait for an answer (method calls, queries, agents).
        broker_timeout: the wait for the management broker's ``B`` when connecting
            (without an answer the bus has no management broker).
        schema_timeout: the wait for a schema.
        agent_interval: the heartbeat interval assumed for an agent that states none.
        min_agent_interval: the least heartbeat interval an agent is aged by (>= 0).
        missed_heartbeats: heartbeats an agent may miss before it is taken as gone.
        topic_max_length: the cap of the topic queue (the broker drops the oldest
            messages past it).
        prefetch: deliveries in flight per receiver (AMQP 0-9-1 prefetch, AMQP 1.0
            link credit; 0: no limit).
        max_held: bodies held while their schema is fetched (past it they are dropped
            and counted in ``held_dropped``).
        completion_timeout: while a console or an update subscription exists, the
            session keeps an object view: per object, the latest properties and
            statistics received, merged into every update it hands out.  An object
            first seen through only one part is held until a query (one ``G`` per
            agent and class) brings the other, for at most this long; failures are
            counted in ``completion_failures`` and the updates then go out with what
            is known.
        max_objects: the objects the view holds at most (least recently updated
            evicted first, counted in ``objects_evicted``); deleted objects and those
            of departed agents leave it.
        max_query_items: the objects one query gathers at most: an answer that grows
            past it fails the query at once with a ``PartialResultError`` carrying
            what arrived.
        forget_deleted_after: over QMF v2, how long (seconds) the v2 id of a deleted
            object stays known after its deletion is received (a method call or an
            ``_objectId`` query on a proxy of it in that time still reaches the
            agent); then it is released (calls raise ``ObjectGoneError``), so that a
            long-running session keeps nothing of objects that are gone.
        reconnect_min_delay: the first delay between reconnection attempts.
        reconnect_max_delay: the longest delay between them (at least the first).
        close_timeout: the bound of closing each broker connection.
        protocol: the AMQP version: ``"auto"`` speaks 0-9-1 and switches to 1.0 when
            the broker answers with another version's header (qpidd), ``"0-9-1"`` or
            ``"1.0"`` force one (1.0 is built in: pure Python).
        qmf_version: the QMF version: None speaks v2 (map messages) on a connection to
            qpidd over AMQP 1.0, where a stock qpidd publishes v2 only, and v1 on a
            0-9-1 bus (RabbitMQ with the management-broker role); ``1`` or ``2`` force
            one.  The API is the same either way (``Broker.qmf_version`` says which is
            spoken); over v2, schemas still come from the v1 ``S``, which qpidd
            answers (it has no v2 schema query).

    Raises:
        UsageError: a non-positive timeout, interval or limit (``prefetch`` and
            ``min_agent_interval`` may be 0), ``reconnect_max_delay`` below
            ``reconnect_min_delay``, an unknown ``protocol`` or ``qmf_version``.
    """

    rcv_objects: bool = True
    rcv_events: bool = True
    rcv_heartbeats: bool = True
    user_bindings: bool = False
    manage_connections: bool = False
    timeout: float = attrs.field(default=10.0, validator=_positive)
    broker_timeout: float = attrs.field(default=2.0, validator=_positive)
    schema_timeout: float = attrs.field(default=5.0, validator=_positive)
    agent_interval: float = attrs.field(default=10.0, validator=_positive)
    min_agent_interval: float = attrs.field(default=0.1, validator=_not_negative)
    missed_heartbeats: int = attrs.field(default=3, validator=_positive)
    topic_max_length: int = attrs.field(default=100_000, validator=_positive)
    prefetch: int = attrs.field(default=1000, validator=_count)
    max_held: int = attrs.field(default=10_000, validator=_positive)
    completion_timeout: float = attrs.field(default=5.0, validator=_positive)
    max_objects: int = attrs.field(default=1_000_000, validator=_positive)
    max_query_items: int = attrs.field(default=1_000_000, validator=_positive)
    forget_deleted_after: float = attrs.field(default=30.0, validator=_not_negative)
    reconnect_min_delay: float = attrs.field(default=0.5, validator=_positive)
    reconnect_max_delay: float = attrs.field(default=30.0, validator=_max_delay)
    close_timeout: float = attrs.field(default=5.0, validator=_positive)
    protocol: str = attrs.field(default="auto", validator=_protocol)
    qmf_version: int | None = attrs.field(default=None, validator=_qmf_version)


class SessionKeywords(TypedDict, total=False):
    """The settings ``Session()`` takes as keyword-only arguments (the flags before
    them are positional too): the fields of :class:`SessionOptions`."""

    timeout: float
    broker_timeout: float
    schema_timeout: float
    agent_interval: float
    min_agent_interval: float
    missed_heartbeats: int
    topic_max_length: int
    prefetch: int
    max_held: int
    completion_timeout: float
    max_objects: int
    max_query_items: int
    forget_deleted_after: float
    reconnect_min_delay: float
    reconnect_max_delay: float
    close_timeout: float
    protocol: str
    qmf_version: int | None


class _HasOptions(Protocol):
    options: SessionOptions


T = TypeVar("T")


class Setting(Generic[T]):
    """A class attribute showing one field of the instance's ``options``; assigning it
    replaces ``options`` with a copy that has the new value.

    Raises (on assignment):
        UsageError: the field rejects the value.
    """

    __slots__ = ("name",)

    def __init__(self) -> None:
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> Setting[T]: ...

    @overload
    def __get__(self, obj: _HasOptions, owner: type | None = None) -> T: ...

    def __get__(self, obj: _HasOptions | None, owner: type | None = None) -> T | Setting[T]:
        if obj is None:
            return self
        value: T = getattr(obj.options, self.name)
        return value

    def __set__(self, obj: _HasOptions, value: T) -> None:
        change: dict[str, Any] = {self.name: value}
        obj.options = attrs.evolve(obj.options, **change)
