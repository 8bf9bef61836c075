"""An agent's QMF v2 side: :class:`AgentV2`.

The sans-I/O :class:`~qmf_async.protocol.AgentProtocolV2` decides what the v2 messages
mean and builds every one sent; this is its asyncio adapter for one
:class:`~qmf_async.agent.Agent`: it binds the agent's v2 addresses on each connection
(``qmf.default.direct`` under its name and aliases, ``qmf.default.topic`` under agent
locate, after making sure the two exchanges exist), turns the requests delivered there
into answers (locate, object and schema queries, method calls, the classic console's
v1 ``S``), names the agent's objects as v2 does and sends their data and events.

Collaborators, given explicitly: the v2 core, the agent's object table (read only),
its :class:`~qmf_async.agent._methods.MethodServer` (which runs the handlers for v1 and
v2 alike), the outbox (the agent's peer runtime: one send queue for v1 and v2, one
content-type rule), the agent's task spawner and its counters.  Nothing here calls
back into the agent.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from ..errors import (
    ArgumentError,
    ConnectionLostError,
    DecodeError,
    NotConnectedError,
    QmfTimeout,
    TransportError,
)
from ..logs import warn_limited
from ..protocol import (
    LOCATE_SUBJECT,
    V2_DIRECT_EXCHANGE,
    V2_TOPIC_EXCHANGE,
    AgentProtocolV2,
    MethodRequested,
    Outgoing,
    V2AgentEvent,
    V2LocateRequested,
    V2MethodRequested,
    V2ObjectQueryRequested,
    V2RequestDropped,
    V2RequestRejected,
    V2SchemaQueryRequested,
    V2SchemaRequestedInV1,
    check_arguments,
    object_name,
    texts_from_schema,
)
from ..transport import Delivery, TransportProtocol
from ..wire import ClassKey, ObjectId, QmfType, SchemaClass, V2Data, V2ObjectId
from ._methods import MethodServer, Outbox, RequestContext, Spawn, current_request
from ._objects import ManagedObject, now_ns

__all__ = ["V2_EXCHANGES", "AgentV2"]

log = logging.getLogger("qmf_async.agent")

#: the exchanges the v2 side receives from
V2_EXCHANGES: Final = frozenset({V2_DIRECT_EXCHANGE, V2_TOPIC_EXCHANGE})


class AgentV2:
    """The QMF v2 side of one agent (see the module docstring).

    :attr:`live` says whether the current connection carries v2; while it does not,
    what the side would send is dropped (counted in ``stats["dropped"]``).
    """

    def __init__(self, core: AgentProtocolV2, objects: Mapping[ObjectId, ManagedObject],
                 methods: MethodServer, outbox: Outbox, spawn: Spawn,
                 stats: dict[str, int], *, aliases: frozenset[str], label: str) -> None:
        self.core = core
        self._objects = objects
        self._methods = methods
        self._outbox = outbox
        self._spawn = spawn
        self._stats = stats
        self._aliases = aliases
        self._label = label
        self._names: dict[str, ManagedObject] = {}  # by v2 object name, rebuilt on a miss
        #: whether the current connection has the v2 bindings
        self.live = False

    @property
    def name(self) -> str:
        """The agent's v2 name, ``vendor:product:instance``."""
        return self.core.name

    # ------------------------------------------------------------------ connection

    async def setup(self, transport: TransportProtocol, endpoint: str) -> None:
        """Per connection: make sure ``qmf.default.direct`` and ``qmf.default.topic``
        exist (RabbitMQ: declared; qpidd has them), then bind ``endpoint`` to the
        first under the agent's name and aliases and to the second under agent
        locate.  A broker that refuses leaves v2 off on this connection
        (:attr:`live` False).

        Raises:
            NotConnectedError: the connection was lost meanwhile.
        """
        self.live = False
        try:
            await transport.declare_exchange(V2_DIRECT_EXCHANGE, "direct")
            await transport.declare_exchange(V2_TOPIC_EXCHANGE, "topic")
            await transport.bind(endpoint, V2_DIRECT_EXCHANGE, self.core.name)
            for alias in sorted(self._aliases):
                await transport.bind(endpoint, V2_DIRECT_EXCHANGE, alias)
            await transport.bind(endpoint, V2_TOPIC_EXCHANGE, LOCATE_SUBJECT)
        except (NotConnectedError, ConnectionLostError):
            raise
        except (TransportError, QmfTimeout) as exc:
            # DEBUG: a bus without the v2 exchanges is a v1-only bus (see ``live``)
            log.debug("agent %s: no QMF v2 on %s: %s", self._label, transport.where, exc)
            return
        self.live = True

    # ------------------------------------------------------------------ sending

    def send(self, out: Outgoing) -> None:
        """Queue a v2 message on the outbox (dropped, counted, while v2 is not live)."""
        if self.live:
            self._outbox.enqueue(out)
        else:
            self._stats["dropped"] += 1

    def send_all(self, sends: Iterable[Outgoing]) -> None:
        """:meth:`send` each of ``sends``."""
        for out in sends:
            self.send(out)

    def heartbeat(self, timestamp: int) -> None:
        """Send the agent heartbeat of time ``timestamp``."""
        self.send(self.core.heartbeat(timestamp))

    def send_data(self, changed: Mapping[ClassKey, Sequence[V2Data]], timestamp: int) -> None:
        """Send the data indications of the ``changed`` objects (as :meth:`data` made
        them, by class), then a heartbeat."""
        core = self.core
        for key, items in changed.items():
            self.send_all(core.data_indication(key, items))
        self.send(core.heartbeat(timestamp))

    def event(self, schema: SchemaClass, timestamp: int, severity: int,
              arguments: Mapping[str, Any]) -> Outgoing:
        """The event indication of ``schema`` with ``arguments`` (not sent: the agent
        sends it once v1 accepted the arguments too).

        Raises:
            ArgumentError: an argument the event class does not have.
        """
        known = {a.name for a in schema.arguments}
        unknown = sorted(set(arguments) - known)
        if unknown:
            raise ArgumentError(f"event {schema.class_key.name} has no argument(s) "
                                f"{', '.join(unknown)}")
        values = {k: self.value(v) for k, v in arguments.items()}
        return self.core.event(schema, timestamp, severity, values)

    # ------------------------------------------------------------------ requests

    def dispatch(self, delivery: Delivery, *, map_bytes: bool) -> None:
        """A message on a v2 exchange (``map_bytes``: the transport carries v2 maps as
        bytes, AMQP 0-9-1): the core makes request events of it, answered here."""
        core = self.core
        events = core.feed(delivery, map_bytes=map_bytes)
        stats = self._stats
        stats["requests"] += 1
        for event in events:
            try:
                self._on_event(core, event, delivery)
            except Exception:
                stats["bad_requests"] += 1
                log.exception("agent %s: failed to handle %s", self._label,
                              type(event).__name__)

    def _on_event(self, core: AgentProtocolV2, event: V2AgentEvent,
                  delivery: Delivery) -> None:
        alias = (delivery.routing_key if delivery.routing_key in self._aliases
                 and delivery.exchange == V2_DIRECT_EXCHANGE else None)
        if isinstance(event, V2MethodRequested):
            self._spawn(self._method(core, event, delivery.routing_key, alias))
        elif isinstance(event, V2ObjectQueryRequested):
            ts = now_ns()
            items = [self.data(obj, ts) for obj in self._select(core, event)]
            self.send_all(core.answer_query(event.reply_to, event.correlation_id, items,
                                            agent=alias))
        elif isinstance(event, V2LocateRequested):
            self.send(core.answer_locate(event.reply_to, event.correlation_id, now_ns()))
        elif isinstance(event, V2SchemaQueryRequested):
            self.send_all(core.answer_schema_query(event, agent=alias))
        elif isinstance(event, V2SchemaRequestedInV1):
            answer = core.answer_schema_v1(event)
            if answer is None:
                log.info("agent %s: schema of unknown class %s asked", self._label,
                         event.class_key)
            else:
                self.send(answer)
        elif isinstance(event, V2RequestRejected):
            self._stats["bad_requests"] += 1
            warn_limited(log, self._stats["bad_requests"], "agent %s: bad QMF v2 %s: %s",
                         self._label, event.opcode, event.error)
            if event.answer is not None:
                self.send(event.answer)
        elif isinstance(event, V2RequestDropped):
            self._stats["bad_requests"] += 1
            log.debug("agent %s: QMF v2 %s dropped: %s", self._label, event.opcode,
                      event.why)

    async def _method(self, core: AgentProtocolV2, event: V2MethodRequested,
                      routing_key: str, alias: str | None = None) -> None:
        """Serve a v2 ``_method_request``: the object by its v2 name, arguments checked
        against the method's schema, the handler run as for v1 (a concurrency slot,
        ``method_timeout``, :data:`current_request` set); the answer is a
        ``_method_response`` or an ``_exception`` with the v1 status and text."""
        current_request.set(RequestContext(0, event.reply_to, event.user_id, routing_key))
        status, text, out = await self._run_method(core, event)
        if status == 0 and out is not None:
            answer = core.answer_method(event.reply_to, event.correlation_id,
                                        {k: self.value(v) for k, v in out.items()},
                                        agent=alias)
        else:
            answer = core.exception(event.reply_to, event.correlation_id, status, text,
                                    agent=alias)
        self.send(answer)

    async def _run_method(self, core: AgentProtocolV2, event: V2MethodRequested
                          ) -> tuple[int, str, Mapping[str, Any] | None]:
        oid = event.object_id
        obj = None
        if self._is_mine(core, oid.agent_name):
            obj = self._find(oid.object_name)
        if obj is None or obj.object_id is None:
            return 1, f"UnknownObject: {oid.object_name}", None
        schema = obj.schema
        method = schema.find_method(event.method)
        if method is None:
            return 2, f"UnknownMethod: {event.method}", None
        args = texts_from_schema(event.arguments, method)
        error = check_arguments(method, args)
        if error is not None:
            return 4, f"InvalidParameter: {error}", None
        for arg in method.in_args:  # a reference to one of ours: its object id
            value = args.get(arg.name)
            if arg.type == QmfType.REF and isinstance(value, Mapping):
                target = self._ref(core, value)
                if target is not None:
                    args[arg.name] = target
        request = MethodRequested(0, event.reply_to, obj.object_id, schema.class_key,
                                  event.method, args, event.user_id)
        return await self._methods.call(request)

    # ------------------------------------------------------------------ objects

    def _is_mine(self, core: AgentProtocolV2, agent_name: str | None) -> bool:
        """Whether an object id's ``_agent_name`` names this agent (absent: yes)."""
        return agent_name is None or agent_name == core.name or agent_name in self._aliases

    @staticmethod
    def object_name(obj: ManagedObject) -> str:
        """The v2 object name of ``obj``: ``package:class:key``, the key being its index
        properties' values joined by ``,`` (its number when the class has none)."""
        schema = obj.schema
        index = [obj[p.name] for p in schema.properties if p.index]
        return object_name(schema.class_key, index, str(obj.number))

    def _find(self, name: str) -> ManagedObject | None:
        """The live object named ``name`` over v2 (None when there is none)."""
        obj = self._names.get(name)
        if obj is None or obj.deleted or obj.object_id not in self._objects \
                or self.object_name(obj) != name:
            self._names = {self.object_name(o): o for o in self._objects.values()
                           if not o.deleted}
            obj = self._names.get(name)
        return obj

    def _select(self, core: AgentProtocolV2,
                event: V2ObjectQueryRequested) -> list[ManagedObject]:
        """The live objects an object query selects (``_where`` is not evaluated)."""
        if event.object_id is not None:
            oid = event.object_id
            if not self._is_mine(core, oid.agent_name):
                return []
            found = self._find(oid.object_name)
            return [found] if found is not None else []
        objects = [o for o in self._objects.values() if not o.deleted]
        if event.schema_id is None:
            return objects
        keys = {s.class_key for s in core.select_schemas(event.schema_id)}
        return [o for o in objects if o.schema.class_key in keys]

    def _ref(self, core: AgentProtocolV2, value: Mapping[str, Any]) -> ObjectId | None:
        """The object id of this agent's object a received v2 object id names."""
        try:
            oid = V2ObjectId.from_map(value)
        except DecodeError:
            return None
        if not self._is_mine(core, oid.agent_name):
            return None
        found = self._find(oid.object_name)
        return found.object_id if found is not None else None

    def value(self, value: Any) -> Any:
        """A value as v2 sends it: a reference (ObjectId) becomes the v2 object id of
        the object it names (``_object_name`` its v1 text form when it is not one of
        this agent's); maps and lists are converted item by item."""
        if isinstance(value, ObjectId):
            target = self._objects.get(value)
            if target is not None:
                return self.core.object_id(self.object_name(target)).to_map()
            return {"_object_name": str(value)}
        if isinstance(value, dict):
            return {k: self.value(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.value(v) for v in value]
        return value

    def data(self, obj: ManagedObject, timestamp: int) -> V2Data:
        """``obj`` as v2 sends it (properties and statistics together in ``_values``)."""
        value = self.value
        values = {name: value(v) for name, v in obj.properties.items()}
        values.update((name, value(v)) for name, v in obj.statistics.items())
        return self.core.data(obj.schema, self.object_name(obj), values,
                              update_ts=timestamp, create_ts=obj.created,
                              delete_ts=obj.deleted)
