"""The classic console callbacks: :class:`Console`, the object a
:class:`~qmf_async.console._session.Session` calls as things happen
(``Session(console=...)``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..wire import ClassKey, SchemaClass
    from ._broker import Broker
    from ._objects import QmfObject
    from ._values import Event, MethodResult, RemoteAgent

__all__ = ["Console"]


class Console:
    """Subclass and override what you need; pass an instance as ``Session(console=...)``.

    Every callback may be a plain method or a coroutine function.  Callbacks run
    in the session's event loop; an exception raised by one is logged and does not
    disturb the session.
    """

    def broker_connected(self, broker: Broker) -> Any:
        """The connection to ``broker`` is up (first time or after a reconnect)."""

    def broker_connection_failed(self, broker: Broker, error: BaseException) -> Any:
        """A connection attempt failed (``manage_connections`` keeps retrying)."""

    def broker_disconnected(self, broker: Broker) -> Any:
        """The connection to ``broker`` was lost."""

    def broker_info(self, broker: Broker) -> Any:
        """The management broker answered ``B`` (``broker.broker_id`` is set)."""

    def new_package(self, name: str) -> Any:
        """A schema package was seen for the first time."""

    def new_class(self, kind: int, class_key: ClassKey) -> Any:
        """A class was seen for the first time (kind 1 object, 2 event)."""

    def new_agent(self, agent: RemoteAgent) -> Any:
        """An agent appeared."""

    def del_agent(self, agent: RemoteAgent) -> Any:
        """An agent left (missed three heartbeat intervals or was deleted)."""

    def object_props(self, broker: Broker, obj: QmfObject) -> Any:
        """An update carrying properties arrived (a ``c``, a v2 object with both
        parts, or the first update of an object whose properties were fetched);
        called before :meth:`object_stats` of the same update."""

    def object_stats(self, broker: Broker, obj: QmfObject) -> Any:
        """An update carrying statistics arrived (an ``i``, or a v2 object with both
        parts, after :meth:`object_props`)."""

    def event(self, broker: Broker, event: Event) -> Any:
        """An event arrived."""

    def heartbeat(self, agent: RemoteAgent, timestamp: int) -> Any:
        """An agent's heartbeat, over v1 or v2 (``timestamp``: ns since the epoch;
        only with ``rcv_heartbeats``)."""

    def method_response(self, broker: Broker, seq: int, response: MethodResult) -> Any:
        """A method response arrived (also delivered to the awaiting caller)."""

    def schema(self, schema: SchemaClass) -> Any:
        """A full schema was received (not part of the classic API)."""
