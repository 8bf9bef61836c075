"""The asyncio QMF agent (v1 and v2): serves schemas, objects, methods and events.

One :class:`Agent` owns one peer runtime (:class:`~qmf_async.runtime.PeerRuntime`:
the broker connection through an injected transport factory, a private endpoint bound
on ``amq.direct`` under its own name, supervision with backoff, and one sender that
drains one bounded outgoing queue, so no request handler ever waits on the network).
Everything the agent sends, QMF v1 and v2, goes through that queue, published under
one content-type rule (the runtime's).

The agent is composed of parts with explicit collaborators, none of which calls back
into it:

- the sans-I/O :class:`~qmf_async.protocol.AgentProtocol` decides what QMF v1 bodies
  mean and builds every body sent;
- a :class:`~qmf_async.agent._methods.MethodServer` runs the method handlers (for v1
  and v2) in concurrency slots within ``method_timeout``;
- an :class:`~qmf_async.agent._v2.AgentV2` (when QMF v2 is on, the default) binds the
  v2 addresses and answers v2 requests through
  :class:`~qmf_async.protocol.AgentProtocolV2`.

This module keeps the object table, the QMF v1 requests (``G``, ``P``, ``Q``, ``S``,
``x``), the attach to a management broker, the publication timer and the lifecycle.
The settings are one frozen :class:`~qmf_async.agent.AgentOptions`.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import random
import struct
import uuid
from collections.abc import Callable, Coroutine, Iterable, Sequence
from typing import Any, Final, Unpack

import attrs

from .. import wire as codec
from ..errors import ArgumentError, EncodeError, QmfError, QmfTimeout, UnknownClassError
from ..logs import warn_limited
from ..protocol import (
    STATUS_TEXT,
    AgentEvent,
    AgentProtocol,
    AgentProtocolV2,
    AttachAnswered,
    BodyMalformed,
    ClassesRequested,
    ConsoleJoined,
    GetRequested,
    GetSelection,
    MethodRequested,
    Outgoing,
    PackagesRequested,
    RequestDropped,
    SchemaRequested,
    agent_v2_name,
    reply_target,
)
from ..runtime import PeerRuntime, RequestFutures
from ..transport import MANAGEMENT_EXCHANGE, Delivery, TransportProtocol
from ..transport import transport_factory as make_transport_factory
from ..wire import ClassKey, ClassKind, Message, ObjectId, SchemaClass, V2Data
from ._methods import MethodHandler, MethodServer, RequestContext, current_request
from ._objects import (
    ManagedObject,
    RecordSnapshot,
    encode_records,
    now_ns,
    rename_references,
    snapshots,
)
from ._options import AgentKeywords, AgentOptions, Authorizer
from ._v2 import V2_EXCHANGES, AgentV2
from ._xml import XmlSchemas

__all__ = ["STATUS_TEXT", "Agent", "AgentOptions", "Authorizer", "MethodHandler",
           "RequestContext", "current_request", "reply_target"]

log = logging.getLogger("qmf_async.agent")
#: a streamed G answer lets the sender publish after every this many bodies
_BODIES_PER_YIELD = 8

MANAGEMENT = MANAGEMENT_EXCHANGE

_DEFAULTS: Final = AgentOptions()
_KEYWORDS: Final = frozenset(AgentKeywords.__annotations__)


class Agent:
    """A QMF agent (v1 and v2) on an AMQP 0-9-1 or 1.0 broker.

    Use as ``async with Agent(url, schemas=[...]) as agent:``; add objects with
    :meth:`add_object` / :meth:`create_object`, register method handlers with
    :meth:`method` and raise events with :meth:`raise_event`.
    """

    def __init__(self, url: str, *, schemas: Iterable[SchemaClass] = (),
                 options: AgentOptions | None = None,
                 **settings: Unpack[AgentKeywords]) -> None:
        """Prepare an agent serving ``schemas``; nothing is sent before :meth:`start`.

        The settings are an :class:`AgentOptions` (``options``), or its fields as
        keywords (``Agent(url, label="batch", interval=5)``), or both (the keywords
        then change those fields of ``options``).  Without a management broker
        (``attach=False`` or no answer to ``A`` within ``attach_timeout``) the agent
        uses ``broker_bank``/``agent_bank`` (a random agent bank when None).  The
        severities of :func:`load_schema_xml` event classes are their default.

        Raises:
            UsageError: a setting out of range (see :class:`AgentOptions`) or a
                malformed broker address.
            TypeError: an unknown keyword.
        """
        unknown = settings.keys() - _KEYWORDS
        if unknown:
            raise TypeError(f"Agent() got unexpected keyword argument(s): "
                            f"{', '.join(sorted(unknown))}")
        base = options if options is not None else _DEFAULTS
        opts = attrs.evolve(base, **settings) if settings else base
        #: the settings, as given (the attributes below say what the agent made of them)
        self.options: AgentOptions = opts
        self.url = url
        self.registry = codec.SchemaRegistry()
        #: the system id sent in ``A`` (``options.system_id``, or a random one)
        self.system_id = opts.system_id or uuid.uuid4()
        #: counters: published bodies, dropped outgoing bodies, bad requests
        self.stats = {"published": 0, "dropped": 0, "bad_requests": 0, "requests": 0}
        self._v1 = 1 in opts.qmf_versions
        agent_bank = opts.agent_bank
        self._protocol = AgentProtocol(
            self.registry, broker_bank=opts.broker_bank,
            agent_bank=agent_bank if agent_bank is not None else random.randrange(100, 1 << 20),
            max_per_body=opts.max_per_body, max_get_per_body=opts.max_get_per_body,
            label=opts.label)
        self._event_severity: dict[ClassKey, int] = {}
        self._objects: dict[ObjectId, ManagedObject] = {}
        self._numbers = itertools.count(1)
        self._tasks: set[asyncio.Task[Any]] = set()
        self._publisher: asyncio.Task[None] | None = None
        self._correlator: RequestFutures[AttachAnswered] = RequestFutures()
        self._wake = asyncio.Event()
        self._republish_again = False  # an ``x`` came: all objects again at the next interval
        self._running = False
        self._runtime = PeerRuntime(
            url, dispatch=self._dispatch, setup=self._setup,
            transport_factory=opts.transport_factory or make_transport_factory(opts.protocol),
            tls=opts.tls, sasl_mechanisms=opts.sasl_mechanisms,
            name=f"qmf-agent {opts.label}", connect_timeout=opts.connect_timeout,
            max_outgoing=opts.max_outgoing, reconnect=opts.reconnect,
            on_reconnected=self._reconnected, stats=self.stats, what=f"agent {opts.label}",
            log=log)
        self._methods = MethodServer(
            self._protocol, self._objects, self._runtime, self._spawn,
            method_timeout=opts.method_timeout, max_concurrency=opts.max_concurrency,
            authorize=opts.authorize, label=opts.label)
        self._v2: AgentV2 | None = None
        if 2 in opts.qmf_versions:
            core = AgentProtocolV2(opts.v2_name or agent_v2_name(opts.label, str(self.system_id)),
                                   self.registry, interval=opts.interval,
                                   epoch=opts.boot_sequence)
            self._v2 = AgentV2(core, self._objects, self._methods, self._runtime, self._spawn,
                               self.stats, aliases=opts.v2_aliases, label=opts.label)
        severities = schemas.severities if isinstance(schemas, XmlSchemas) else {}
        for schema in schemas:
            self.add_schema(schema, severity=severities.get(schema.class_key, 6))

    # ------------------------------------------------------------------ settings

    @property
    def label(self) -> str:
        """The agent's label (``options.label``)."""
        return self.options.label

    @property
    def interval(self) -> float:
        """The publication and heartbeat interval (``options.interval``)."""
        return self.options.interval

    @property
    def attach(self) -> bool:
        """Whether the agent asks a management broker for banks (``options.attach``)."""
        return self.options.attach

    @property
    def attach_timeout(self) -> float:
        """How long the agent waits for a management broker (``options.attach_timeout``)."""
        return self.options.attach_timeout

    @property
    def method_timeout(self) -> float:
        """The bound of a coroutine handler (``options.method_timeout``)."""
        return self.options.method_timeout

    @property
    def boot_sequence(self) -> int:
        """The agent's boot sequence (``options.boot_sequence``)."""
        return self.options.boot_sequence

    @property
    def qmf_versions(self) -> frozenset[int]:
        """The QMF versions the agent speaks (``options.qmf_versions``)."""
        return self.options.qmf_versions

    @property
    def reconnect(self) -> bool:
        """Whether the agent reconnects (with backoff) after losing its connection."""
        return self._runtime.reconnect

    @reconnect.setter
    def reconnect(self, value: bool) -> None:
        self.options = attrs.evolve(self.options, reconnect=value)
        self._runtime.reconnect = value

    @property
    def max_per_body(self) -> int:
        """At most this many indications in one published body."""
        return self._protocol.max_per_body

    @max_per_body.setter
    def max_per_body(self, value: int) -> None:
        self.options = attrs.evolve(self.options, max_per_body=value)
        self._protocol.max_per_body = value

    @property
    def max_get_per_body(self) -> int:
        """At most this many records in one body of a ``G`` answer."""
        return self._protocol.max_get_per_body

    @max_get_per_body.setter
    def max_get_per_body(self, value: int) -> None:
        self.options = attrs.evolve(self.options, max_get_per_body=value)
        self._protocol.max_get_per_body = value

    # ------------------------------------------------------------------ names

    @property
    def protocol(self) -> AgentProtocol:
        """The agent's protocol core (banks, routing keys, the bodies it sends)."""
        return self._protocol

    @property
    def protocol_v2(self) -> AgentProtocolV2 | None:
        """The agent's QMF v2 protocol core (None when v2 is off)."""
        return self._v2.core if self._v2 is not None else None

    @property
    def v2_name(self) -> str | None:
        """The agent's QMF v2 name, ``vendor:product:instance`` (None when v2 is off)."""
        return self._v2.name if self._v2 is not None else None

    @property
    def v2_live(self) -> bool:
        """Whether the current connection carries QMF v2 (the broker has, or let the
        agent declare, ``qmf.default.direct`` and ``qmf.default.topic``)."""
        return self._v2 is not None and self._v2.live

    @property
    def broker_bank(self) -> int:
        """The broker bank of the agent's name (assigned by a management broker)."""
        return self._protocol.broker_bank

    @property
    def agent_bank(self) -> int:
        """The agent bank of the agent's name (assigned by a management broker)."""
        return self._protocol.agent_bank

    @property
    def attached(self) -> bool:
        """Whether a management broker assigned the current banks."""
        return self._protocol.attached

    @attached.setter
    def attached(self, value: bool) -> None:
        self._protocol.attached = value

    @property
    def agent_key(self) -> str:
        """The routing key requests to this agent use: ``agent.<brokerBank>.<agentBank>``."""
        return self._protocol.agent_key

    # ------------------------------------------------------------------ schema & objects

    def add_schema(self, schema: SchemaClass, *, severity: int = 6) -> None:
        """Serve ``schema`` (``severity`` is the default for an event class)."""
        self.registry.add(schema)
        self._methods.schemas_changed()
        if self._v2 is not None:
            self._v2.core.schema_updated = now_ns()
        if schema.kind == ClassKind.EVENT:
            self._event_severity[schema.class_key] = severity
        if self._running:
            self._broadcast_schema(schema)

    def _schema_for(self, name: str | ClassKey | SchemaClass, kind: ClassKind,
                    package: str | None = None) -> SchemaClass:
        if isinstance(name, SchemaClass):
            return name
        if isinstance(name, ClassKey):
            found = self.registry.get(name)
            if found is None:
                raise UnknownClassError(f"no schema {name}")
            return found
        matches = [s for s in self.registry.find(name, package) if s.kind == kind]
        if not matches:
            raise UnknownClassError(f"no {kind.name.lower()} class {name!r}")
        return matches[-1]

    def create_object(self, class_name: str | ClassKey | SchemaClass, *, package: str | None = None,
                      persistent: bool = False, **values: Any) -> ManagedObject:
        """Create, add and return an object of a served class.

        Raises:
            UnknownClassError: no such class.
            ArgumentError: unknown element names or missing mandatory properties.
        """
        schema = self._schema_for(class_name, ClassKind.OBJECT, package)
        return self.add_object(ManagedObject(schema, values, persistent=persistent))

    def add_object(self, obj: ManagedObject) -> ManagedObject:
        """Add an object; it is published at the next interval.

        Raises:
            UnknownClassError: its class is not served by this agent.
        """
        if obj.schema.class_key not in self.registry:
            raise UnknownClassError(f"{obj.schema.class_key} is not served by this agent")
        obj.number = next(self._numbers)
        self._assign_id(obj)
        return obj

    def _assign_id(self, obj: ManagedObject) -> None:
        obj.object_id = ObjectId.make(sequence=0 if obj.persistent else self.boot_sequence & 0xFFF,
                                      broker_bank=self.broker_bank, agent_bank=self.agent_bank,
                                      object=obj.number)
        self._objects[obj.object_id] = obj

    def delete_object(self, obj: ManagedObject) -> None:
        """Mark ``obj`` deleted; it is published once more, with its delete time."""
        if not obj.deleted:
            obj.deleted = now_ns()
            obj.props_changed = obj.stats_changed = True

    def objects(self, class_name: str | None = None) -> list[ManagedObject]:
        """Live objects (of ``class_name`` when given)."""
        return [o for o in self._objects.values() if not o.deleted
                and (class_name is None or o.schema.class_key.name == class_name)]

    def find_object(self, object_id: ObjectId) -> ManagedObject | None:
        """The object of ``object_id`` (None when the agent has none)."""
        return self._objects.get(object_id)

    def method(self, class_name: str, method_name: str) -> Callable[[MethodHandler], MethodHandler]:
        """Decorator registering the handler of ``class_name.method_name``.

        The handler is called as ``handler(obj, **in_args)`` and returns the output
        arguments (a mapping) or None.  Raising :class:`MethodError` returns its
        status; ``PermissionError`` returns FORBIDDEN (6), ``NotImplementedError``
        FEATURE_NOT_IMPLEMENTED (5), ``ValueError``/``TypeError`` INVALID_PARAMETER (4)
        and anything else EXCEPTION (7).  ``method_timeout`` bounds coroutine
        handlers; a plain function runs in the event loop and must not block (run
        blocking work with ``asyncio.to_thread`` inside an async handler).
        """
        def register(fn: MethodHandler) -> MethodHandler:
            self.set_method_handler(class_name, method_name, fn)
            return fn
        return register

    def set_method_handler(self, class_name: str, method_name: str, fn: MethodHandler) -> None:
        """Register ``fn`` for ``class_name.method_name`` (see :meth:`method`)."""
        self._methods.set_handler(class_name, method_name, fn)

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> Agent:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    @property
    def _transport(self) -> TransportProtocol | None:
        """The current connection (None while disconnected)."""
        return self._runtime.transport

    @property
    def _queue(self) -> str | None:
        """The agent's endpoint (its reply key)."""
        return self._runtime.endpoint

    @property
    def _outgoing(self) -> asyncio.Queue[Outgoing]:
        """What waits for the sender (QMF v1 and v2)."""
        return self._runtime.outgoing

    async def start(self) -> None:
        """Connect, attach (when a management broker answers), bind and start publishing.

        Raises:
            TransportError: the broker cannot be reached.
            QmfTimeout: connecting timed out.
        """
        if self._running:
            return
        self._runtime.begin_dispatch()
        await self._runtime.connect()
        self._running = True
        self._runtime.run()
        self._publisher = asyncio.create_task(self._publish_loop(), name="qmf-agent-publisher")
        if self._v2 is not None:
            self._v2.heartbeat(now_ns())
        self._broadcast_all()

    async def _setup(self, transport: TransportProtocol, endpoint: str) -> None:
        """Per connection, once the endpoint is open: attach, then bind the agent key
        (QMF v1); bind the agent's v2 addresses (QMF v2)."""
        if self._v1:
            if self.attach:
                await self._attach()
            await transport.bind(endpoint, MANAGEMENT, self.agent_key)
        if self._v2 is not None:
            await self._v2.setup(transport, endpoint)

    async def _attach(self) -> None:
        endpoint = self._runtime.endpoint
        assert endpoint is not None
        correlator = self._correlator
        seq = correlator.next_seq()
        correlator.expect(seq)
        request = self._protocol.attach_request(seq, self.label, self.system_id, endpoint)
        try:
            await self._runtime.publish_now(request)
            (answer,) = await correlator.wait(seq, self.attach_timeout)
        except QmfTimeout:
            log.info("agent %s: no management broker answered; using banks %d.%d",
                     self.label, self.broker_bank, self.agent_bank)
            return
        finally:
            correlator.forget(seq)
        if self._protocol.attached_as(answer):
            old = list(self._objects.values())
            self._objects.clear()
            renamed: dict[ObjectId, ObjectId] = {}
            for obj in old:
                before = obj.object_id
                self._assign_id(obj)
                if before is not None and obj.object_id is not None:
                    renamed[before] = obj.object_id
            rename_references(old, renamed)
        log.info("agent %s attached as %d.%d", self.label, self.broker_bank, self.agent_bank)

    async def stop(self, timeout: float = 5.0) -> None:
        """Flush what is queued (bounded by ``timeout``), stop the tasks and disconnect.

        Raises:
            Nothing: failures while stopping are logged.
        """
        if not self._running:
            return
        self._running = False
        await self._runtime.flush(timeout)
        tasks = [t for t in (self._publisher, *self._tasks) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks.clear()
        self._correlator.fail_all(QmfError(f"agent {self.label} stopped"))
        await self._runtime.stop(timeout, flush=0.0)

    def _reconnected(self) -> None:
        """After a reconnection: publish everything again and re-announce the schemas."""
        self.republish()
        self._broadcast_all()

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # ------------------------------------------------------------------ sending (QMF v1)

    def _enqueue(self, out: Outgoing) -> None:
        """Queue one QMF v1 body the protocol core built on the runtime's one queue (a
        full queue drops it, counted)."""
        self._runtime.enqueue(out)

    def _put(self, sends: Iterable[Outgoing]) -> None:
        """Queue the QMF v1 bodies the protocol core built."""
        enqueue = self._enqueue
        for out in sends:
            enqueue(out)

    def _encode_records(self, records: Sequence[RecordSnapshot], seq: int,
                        timestamp: int) -> bytes | None:
        """One body of ``c``/``i``/``g`` records (see :func:`encode_records`); None
        (logged) when a value does not encode."""
        try:
            return encode_records(self.registry, records, seq, timestamp)
        except (EncodeError, UnknownClassError, struct.error, OverflowError,
                UnicodeEncodeError) as exc:
            log.error("agent %s: cannot encode %s: %s", self.label,
                      "".join(r[0] for r in records), exc)
            return None

    def _reply_get(self, reply_to: str, seq: int, timestamp: int,
                   records: Sequence[RecordSnapshot]) -> None:
        """Queue a ``G`` answer now: ``g`` records (at most ``max_get_per_body`` a
        body), then the ``z``."""
        self._put(self._protocol.answer_get(seq, reply_to, timestamp, records,
                                            self._encode_records))

    async def _reply_get_streamed(self, reply_to: str, seq: int, timestamp: int,
                                  records: Sequence[RecordSnapshot]) -> None:
        """Queue a large ``G`` answer body by body, letting the sender publish meanwhile,
        so the console decodes the first objects while later ones are being encoded."""
        enqueue = self._enqueue
        bodies = self._protocol.answer_get(seq, reply_to, timestamp, records,
                                           self._encode_records)
        for k, out in enumerate(bodies):
            enqueue(out)
            if k % _BODIES_PER_YIELD == 0:  # the first body leaves at once, then every few
                await asyncio.sleep(0)
        await asyncio.sleep(0)

    def _broadcast_schema(self, schema: SchemaClass, announce_package: bool = True) -> None:
        if not self._v1:
            return
        self._put(self._protocol.schema_broadcast(schema, announce_package,
                                                  self._announce_reply_to()))

    def _broadcast_all(self) -> None:
        if not self._v1:
            return
        self._put(self._protocol.broadcast_all(self._announce_reply_to()))

    def _announce_reply_to(self) -> str | None:
        """The reply key schema announcements carry: the agent's endpoint once a
        management broker attached it (so qpidd asks for and keeps the schemas)."""
        return self._runtime.endpoint if self.attached else None

    # ------------------------------------------------------------------ publishing

    async def _publish_loop(self) -> None:
        while True:
            woken = False
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.interval)
                woken = True
            self._wake.clear()
            if not woken and self._republish_again:
                # the second publication after an ``x``: a console that learns of this
                # agent only from the management broker's next publication (qpid-tool
                # on qpidd) dropped what the first one brought
                self._republish_again = False
                for obj in self._objects.values():
                    obj.props_changed = obj.stats_changed = True
            try:
                self.publish_now()
            except Exception:  # keep publishing whatever one object did
                log.exception("agent %s: publishing failed", self.label)

    def republish(self) -> None:
        """Mark every object changed and publish at once (what ``x`` asks for)."""
        for obj in self._objects.values():
            obj.props_changed = obj.stats_changed = True
        self._wake.set()

    def publish_now(self) -> None:
        """Publish changed objects and a heartbeat now: ``c``/``i`` records and ``h``
        (QMF v1), data indications and a heartbeat (QMF v2)."""
        ts = now_ns()
        v1 = self._v1
        v2 = self._v2
        by_class: dict[ClassKey, list[RecordSnapshot]] = {}
        changed: dict[ClassKey, list[V2Data]] = {}
        for oid, obj in list(self._objects.items()):
            if v2 is not None and (obj.deleted or obj.props_changed or obj.stats_changed):
                changed.setdefault(obj.schema.class_key, []).append(v2.data(obj, ts))
            if not v1:
                if obj.deleted:
                    del self._objects[oid]
                obj.props_changed = obj.stats_changed = False
                continue
            records = by_class.setdefault(obj.schema.class_key, [])
            has_stats = bool(obj.schema.statistics)  # as qpidd: no empty ``i`` records
            if obj.deleted:
                records += snapshots("ci" if has_stats else "c", (obj,), self.registry)
                del self._objects[oid]
                continue
            ops = ("c" if obj.props_changed else "") + ("i" if obj.stats_changed and has_stats
                                                       else "")
            if ops:
                records += snapshots(ops, (obj,), self.registry)
            obj.props_changed = obj.stats_changed = False
        if v1:
            self._put(self._protocol.publication(by_class, ts, self._encode_records))
        if v2 is not None:
            v2.send_data(changed, ts)

    def raise_event(self, event: str | ClassKey | SchemaClass, severity: int | None = None, *,
                    package: str | None = None, **arguments: Any) -> None:
        """Publish an event now (``e`` on ``console.event.<bb>.<ab>.<package>.<event>``
        over QMF v1, an event indication over v2).

        Raises:
            UnknownClassError: no such event class.
            ArgumentError: missing, unknown or mistyped arguments, or a bad severity.
        """
        schema = self._schema_for(event, ClassKind.EVENT, package)
        sev = self._event_severity.get(schema.class_key, 6) if severity is None else severity
        if not 0 <= sev <= 7:
            raise ArgumentError(f"severity {sev} is not 0 (emerg) .. 7 (debug)")
        ts = now_ns()
        out: Outgoing | None = None
        if self._v1:
            try:
                out = self._protocol.event(schema, ts, sev, arguments)
            except EncodeError as exc:
                raise ArgumentError(f"event {schema.class_key.name}: {exc}") from exc
        v2 = self._v2
        if v2 is not None:
            v2.send(v2.event(schema, ts, sev, arguments))
        if out is not None:
            self._enqueue(out)

    # ------------------------------------------------------------------ requests

    def _dispatch(self, delivery: Delivery) -> None:
        """A delivered body: the v2 side takes what came on a v2 exchange; the v1 core
        decodes the rest (leaving the served schemas as they are: a peer's ``s`` is
        not served) into events, handled here."""
        v2 = self._v2
        if v2 is not None and delivery.exchange in V2_EXCHANGES:
            # v2 maps as bytes only where the transport carries them so (AMQP 0-9-1)
            transport = self._runtime.transport
            v2.dispatch(delivery, map_bytes=transport is not None
                        and transport.capabilities.v2_map_bytes)
            return
        if not self._v1:
            self.stats["bad_requests"] += 1
            log.debug("agent %s: QMF v1 message on %s/%s ignored (v1 is off)", self.label,
                      delivery.exchange, delivery.routing_key)
            return
        core = self._protocol
        before = core.messages_in
        events = core.feed(delivery)
        self.stats["requests"] += core.messages_in - before
        for event in events:
            try:
                if type(event) is MethodRequested:  # the hot path
                    self._methods.serve(event, delivery.routing_key)
                else:
                    self._on_event(event, delivery)
            except Exception:
                self.stats["bad_requests"] += 1
                log.exception("agent %s: failed to handle %s", self.label,
                              type(event).__name__)

    def _handle(self, msg: Message, reply_to: str | None,
                delivery: Delivery | None = None) -> None:
        """Handle one decoded message (as if delivered with ``reply_to``)."""
        event = self._protocol.interpret(msg, reply_to,
                                         delivery.user_id if delivery is not None else None)
        if event is not None:
            self._on_event(event, delivery)

    def _on_event(self, event: AgentEvent, delivery: Delivery | None) -> None:
        if type(event) is MethodRequested:  # the hot path
            self._methods.serve(event, delivery.routing_key if delivery is not None else "")
            return
        core = self._protocol
        if isinstance(event, AttachAnswered):
            self._correlator.feed(event.seq, event)
        elif isinstance(event, ConsoleJoined):
            self.republish()
            self._republish_again = True
        elif isinstance(event, GetRequested):
            self._serve_get(event)
        elif isinstance(event, PackagesRequested):
            self._put(core.answer_packages(event.seq, event.reply_to))
        elif isinstance(event, ClassesRequested):
            self._put(core.answer_classes(event.seq, event.reply_to, event.package))
        elif isinstance(event, SchemaRequested):
            if event.from_broker:
                endpoint = self._runtime.endpoint
                if endpoint is not None:
                    self._put(core.schema_to_broker(event.seq, event.class_key, endpoint))
            else:
                self._put(core.answer_schema(event.seq, event.reply_to, event.class_key))
        elif isinstance(event, BodyMalformed):
            self.stats["bad_requests"] += 1
            warn_limited(log, self.stats["bad_requests"], "agent %s: malformed message on "
                         "%s dropped: %s", self.label, event.routing_key, event.error)
        elif isinstance(event, RequestDropped):
            self.stats["bad_requests"] += 1
            n = self.stats["bad_requests"]
            if event.why == "unexpected message":
                warn_limited(log, n, "agent %s: unexpected %r message ignored", self.label,
                             event.opcode)
            else:
                warn_limited(log, n, "agent %s: %r %s dropped", self.label, event.opcode,
                             event.why)

    def _serve_get(self, event: GetRequested) -> None:
        """Answer a ``G``: the matching objects' ``g`` records (taken now, as a
        snapshot), then the ``z``; a large answer is streamed from a task."""
        if event.selection is None:
            self._enqueue(self._protocol.complete(event.seq, event.reply_to, 4,
                                                  event.error or "invalid query"))
            return
        selected = self._select(event.selection)
        ts = now_ns()
        records = snapshots("g", selected, self.registry)
        if len(records) < 4 * self.max_get_per_body:
            self._reply_get(event.reply_to, event.seq, ts, records)
        else:
            self._spawn(self._reply_get_streamed(event.reply_to, event.seq, ts, records))

    def _select(self, selection: GetSelection) -> list[ManagedObject]:
        """The live objects ``selection`` picks."""
        objects: Iterable[ManagedObject] = self._objects.values()
        if selection.object_id is not None:
            found = self._objects.get(selection.object_id)
            objects = [found] if found is not None else []
        matches = selection.matches
        return [o for o in objects if not o.deleted and matches(o.schema.class_key)]
