"""The asyncio QMF agent (v1 and v2): serves schemas, objects, methods and events.

One :class:`Agent` owns one peer runtime (:class:`~qmf_async.runtime.PeerRuntime`:
the broker connection through an injected transport factory, a private endpoint bound
on ``amq.direct`` under its own name, supervision with backoff, and a sender that
drains a bounded outgoing queue, so no request handler ever waits on the network).
The agent binds ``agent.<brokerBank>.<agentBank>`` on ``qpid.management`` and runs a
publisher that sends changed objects and a heartbeat every interval.

The protocol decisions are the sans-I/O :class:`~qmf_async.protocol.AgentProtocol`'s:
it decodes each delivered body into request events and builds every body sent.  This
module is its asyncio adapter: the object table, method handlers in concurrency slots
within ``method_timeout``, the attach wait, the publication timer and the runtime.

QMF v2 (on by default, ``qmf_versions``) goes through
:class:`~qmf_async.protocol.AgentProtocolV2` the same way: the agent also binds
``qmf.default.direct`` under its v2 name and ``qmf.default.topic`` under agent
locate, and its v2 messages (which carry application properties and correlation
ids) go through a second bounded queue and sender of their own.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
import functools
import inspect
import itertools
import logging
import random
import struct
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping, Sequence
from typing import Any

import attrs

from .. import wire as codec
from ..errors import (
    ArgumentError,
    ConnectionLostError,
    DecodeError,
    EncodeError,
    MethodError,
    NotConnectedError,
    QmfError,
    QmfTimeout,
    TransportError,
    UnknownClassError,
    UsageError,
)
from ..logs import warn_limited
from ..protocol import (
    LOCATE_SUBJECT,
    STATUS_TEXT,
    V2_DIRECT_EXCHANGE,
    V2_TOPIC_EXCHANGE,
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
    V2AgentEvent,
    V2LocateRequested,
    V2MethodRequested,
    V2ObjectQueryRequested,
    V2RequestDropped,
    V2RequestRejected,
    V2SchemaQueryRequested,
    V2SchemaRequestedInV1,
    agent_v2_name,
    check_arguments,
    object_name,
    reply_target,
    texts_from_schema,
    validate_arguments,
)
from ..runtime import PeerRuntime, RequestFutures
from ..transport import (
    MANAGEMENT_EXCHANGE,
    QMF_CONTENT_TYPE,
    REPLY_EXCHANGE,
    Delivery,
    TlsOptions,
    TransportFactory,
    TransportProtocol,
)
from ..transport import transport_factory as make_transport_factory
from ..wire import (
    ClassKey,
    ClassKind,
    Message,
    ObjectId,
    QmfType,
    SchemaClass,
    SchemaMethod,
    V2Data,
    V2ObjectId,
)
from ._objects import ManagedObject, RecordSnapshot, encode_records, now_ns, snapshots

__all__ = ["STATUS_TEXT", "Agent", "Authorizer", "MethodHandler", "RequestContext",
           "current_request", "reply_target"]

log = logging.getLogger("qmf_async.agent")
#: a streamed G answer lets the sender publish after every this many bodies
_BODIES_PER_YIELD = 8

MANAGEMENT = MANAGEMENT_EXCHANGE
DIRECT = REPLY_EXCHANGE
_V2_EXCHANGES = frozenset({V2_DIRECT_EXCHANGE, V2_TOPIC_EXCHANGE})

#: ``async def handler(obj, **in_args) -> Mapping[str, Any] | None`` (or a plain function)
MethodHandler = Callable[..., "Awaitable[Mapping[str, Any] | None] | Mapping[str, Any] | None"]
#: ``authorize(user_id, obj, method_name, in_args) -> bool`` (or an awaitable of one):
#: whether the caller may run the method; see :class:`Agent`
Authorizer = Callable[[str | None, ManagedObject, str, Mapping[str, Any]],
                      "bool | Awaitable[bool]"]

@attrs.frozen
class RequestContext:
    """Who is calling: available to method handlers through :data:`current_request`."""

    seq: int
    reply_to: str
    user_id: str | None
    routing_key: str


#: The request a method handler is serving (``current_request.get()`` inside a handler).
current_request: contextvars.ContextVar[RequestContext] = contextvars.ContextVar(
    "qmf_current_request")


class Agent:
    """A QMF agent (v1 and v2) on an AMQP 0-9-1 or 1.0 broker.

    Use as ``async with Agent(url, schemas=[...]) as agent:``; add objects with
    :meth:`add_object` / :meth:`create_object`, register method handlers with
    :meth:`method` and raise events with :meth:`raise_event`.
    """

    def __init__(
        self,
        url: str,
        *,
        label: str = "qmf-async-agent",
        schemas: Iterable[SchemaClass] = (),
        interval: float = 10.0,
        broker_bank: int = 1,
        agent_bank: int | None = None,
        attach: bool = True,
        attach_timeout: float = 2.0,
        boot_sequence: int = 1,
        system_id: uuid.UUID | None = None,
        method_timeout: float = 30.0,
        max_concurrency: int = 64,
        max_outgoing: int = 10_000,
        max_per_body: int = 22,
        max_get_per_body: int = 11,
        reconnect: bool = True,
        tls: TlsOptions | None = None,
        connect_timeout: float = 10.0,
        transport_factory: TransportFactory | None = None,
        protocol: str = "auto",
        sasl_mechanisms: str | Sequence[str] | None = None,
        qmf_versions: Iterable[int] = (1, 2),
        v2_name: str | None = None,
        v2_aliases: Iterable[str] = (),
        authorize: Authorizer | None = None,
    ) -> None:
        """Prepare an agent; nothing is sent before :meth:`start`.

        ``interval`` is the publish and heartbeat interval in seconds.  Without a
        management broker (``attach=False`` or no answer to ``A`` within
        ``attach_timeout``) the agent uses ``broker_bank``/``agent_bank`` (a random
        agent bank when None).  ``transport_factory`` builds the connection
        (default: the AMQP version from the broker's answer, or ``protocol``:
        ``"0-9-1"``, ``"1.0"``); ``tls`` and ``sasl_mechanisms`` as
        :meth:`Session.add_broker <qmf_async.Session.add_broker>` takes them.

        ``qmf_versions`` says which QMF versions the agent speaks: 1 (banks,
        ``qpid.management``), 2 (map messages on ``qmf.default.direct`` and
        ``qmf.default.topic``), or both.  ``v2_name`` is its v2 name,
        ``vendor:product:instance`` (default ``qmf-async:<label>:<system id>``);
        ``v2_aliases`` are further names it answers requests to, naming itself by the
        alias in those answers (the management-broker role answers ``broker``, as
        qpidd's own agent does).

        ``authorize(user_id, obj, method_name, in_args)`` is asked before every method
        handler runs (QMF v1 and v2), once the object, method and arguments are known
        to be valid; ``user_id`` is the request message's user id (None when it has
        none).  ``True`` lets the handler run; ``False`` (or ``PermissionError``)
        answers status 6 (Forbidden, "not authorized: ...") without running it; it
        may return an awaitable (awaited within ``method_timeout``).  Anything else
        (another value, an exception, a timeout) answers status 7 without running
        the handler.  RabbitMQ checks that a message's user id is the user its
        publisher logged in as; qpidd without authentication checks nothing, so
        there the user id is whatever the caller wrote (docs/reliability.md).

        Raises:
            UsageError: a bad interval, bank or limit, a malformed broker address, an
                unknown protocol, QMF version or v2 name.
        """
        if interval <= 0 or method_timeout <= 0 or max_concurrency < 1 or max_outgoing < 1:
            raise UsageError("interval, method_timeout, max_concurrency and max_outgoing "
                             "must be positive")
        if agent_bank is not None and not 0 <= agent_bank < (1 << 28):
            raise UsageError(f"agent bank {agent_bank} does not fit 28 bits")
        if not 0 <= broker_bank < (1 << 20):
            raise UsageError(f"broker bank {broker_bank} does not fit 20 bits")
        versions = frozenset(qmf_versions)
        if not versions or not versions <= {1, 2}:
            raise UsageError(f"qmf_versions must be 1, 2 or both, not {sorted(versions)}")
        self.url = url
        self.label = label
        self.interval = interval
        self.registry = codec.SchemaRegistry()
        #: the QMF versions the agent speaks
        self.qmf_versions = versions
        self._v1 = 1 in versions
        self._protocol = AgentProtocol(
            self.registry, broker_bank=broker_bank,
            agent_bank=agent_bank if agent_bank is not None else random.randrange(100, 1 << 20),
            max_per_body=max_per_body, max_get_per_body=max_get_per_body, label=label)
        self.boot_sequence = boot_sequence
        self.system_id = system_id or uuid.uuid4()
        self._v2: AgentProtocolV2 | None = None
        if 2 in versions:
            name = v2_name or agent_v2_name(label, str(self.system_id))
            self._v2 = AgentProtocolV2(name, self.registry, interval=interval,
                                       epoch=boot_sequence)
        self._v2_out: asyncio.Queue[Outgoing] = asyncio.Queue(max_outgoing)
        self._v2_sender: asyncio.Task[None] | None = None
        self._v2_live = False  # the current connection has the v2 bindings
        self._v2_names: dict[str, ManagedObject] = {}
        self._v2_aliases = frozenset(v2_aliases)
        if "" in self._v2_aliases:
            raise UsageError("a QMF v2 alias must not be empty")
        self.attach = attach
        self.attach_timeout = attach_timeout
        self.method_timeout = method_timeout
        self._event_severity: dict[ClassKey, int] = {}
        self._handlers: dict[tuple[str, str], MethodHandler] = {}
        self._authorize = authorize
        self._plans: dict[tuple[ClassKey, str], _MethodPlan] = {}
        self._objects: dict[ObjectId, ManagedObject] = {}
        self._pending_ids: list[ManagedObject] = []
        self._numbers = itertools.count(1)
        self._slots = _Slots(max_concurrency)
        self._tasks: set[asyncio.Task[Any]] = set()
        self._publisher: asyncio.Task[None] | None = None
        self._correlator: RequestFutures[AttachAnswered] = RequestFutures()
        self._wake = asyncio.Event()
        self._republish_again = False  # an ``x`` came: all objects again at the next interval
        self._running = False
        #: counters: published bodies, dropped outgoing bodies, bad requests
        self.stats = {"published": 0, "dropped": 0, "bad_requests": 0, "requests": 0}
        self._runtime = PeerRuntime(
            url, dispatch=self._dispatch, setup=self._setup,
            transport_factory=transport_factory or make_transport_factory(protocol), tls=tls,
            sasl_mechanisms=sasl_mechanisms,
            name=f"qmf-agent {label}",
            connect_timeout=connect_timeout, max_outgoing=max_outgoing, reconnect=reconnect,
            on_reconnected=self._reconnected, stats=self.stats, what=f"agent {label}",
            log=log)
        severities: Mapping[ClassKey, int] = getattr(schemas, "severities", None) or {}
        for schema in schemas:
            self.add_schema(schema, severity=severities.get(schema.class_key, 6))

    # ------------------------------------------------------------------ names and limits

    @property
    def protocol(self) -> AgentProtocol:
        """The agent's protocol core (banks, routing keys, the bodies it sends)."""
        return self._protocol

    @property
    def protocol_v2(self) -> AgentProtocolV2 | None:
        """The agent's QMF v2 protocol core (None when v2 is off)."""
        return self._v2

    @property
    def v2_name(self) -> str | None:
        """The agent's QMF v2 name, ``vendor:product:instance`` (None when v2 is off)."""
        return self._v2.name if self._v2 is not None else None

    @property
    def v2_live(self) -> bool:
        """Whether the current connection carries QMF v2 (the broker has, or let the
        agent declare, ``qmf.default.direct`` and ``qmf.default.topic``)."""
        return self._v2_live

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
    def max_per_body(self) -> int:
        """At most this many indications in one published body."""
        return self._protocol.max_per_body

    @max_per_body.setter
    def max_per_body(self, value: int) -> None:
        self._protocol.max_per_body = value

    @property
    def max_get_per_body(self) -> int:
        """At most this many records in one body of a ``G`` answer."""
        return self._protocol.max_get_per_body

    @max_get_per_body.setter
    def max_get_per_body(self, value: int) -> None:
        self._protocol.max_get_per_body = value

    # ------------------------------------------------------------------ schema & objects

    def add_schema(self, schema: SchemaClass, *, severity: int = 6) -> None:
        """Serve ``schema`` (``severity`` is the default for an event class)."""
        self.registry.add(schema)
        self._plans.clear()
        if self._v2 is not None:
            self._v2.schema_updated = now_ns()
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
        self._handlers[(class_name, method_name)] = fn
        self._plans.clear()

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> Agent:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    @property
    def reconnect(self) -> bool:
        """Whether the agent reconnects (with backoff) after losing its connection."""
        return self._runtime.reconnect

    @reconnect.setter
    def reconnect(self, value: bool) -> None:
        self._runtime.reconnect = value

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
        """QMF v1 bodies waiting for the sender."""
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
            self._v2_sender = asyncio.create_task(self._v2_send_loop(),
                                                  name="qmf-agent-v2-sender")
            self._send_v2(self._v2.heartbeat(now_ns()))
        self._broadcast_all()

    async def _setup(self, transport: TransportProtocol, endpoint: str) -> None:
        """Per connection, once the endpoint is open: attach, then bind the agent key
        (QMF v1); bind the agent's name and agent locate (QMF v2)."""
        if self._v1:
            if self.attach:
                await self._attach()
            await transport.bind(endpoint, MANAGEMENT, self.agent_key)
        if self._v2 is not None:
            await self._setup_v2(transport, endpoint, self._v2.name)

    async def _setup_v2(self, transport: TransportProtocol, endpoint: str, name: str) -> None:
        """Bind ``qmf.default.direct`` under the agent's name and ``qmf.default.topic``
        under agent locate, declaring the two exchanges first where the transport can
        (RabbitMQ; qpidd has them).  A broker that refuses leaves v2 off on this
        connection (:attr:`v2_live` False).

        Raises:
            NotConnectedError: the connection was lost meanwhile.
        """
        self._v2_live = False
        declare = getattr(transport, "declare_exchange", None)
        try:
            if declare is not None:
                await declare(V2_DIRECT_EXCHANGE, "direct")
                await declare(V2_TOPIC_EXCHANGE, "topic")
            await transport.bind(endpoint, V2_DIRECT_EXCHANGE, name)
            for alias in sorted(self._v2_aliases):
                await transport.bind(endpoint, V2_DIRECT_EXCHANGE, alias)
            await transport.bind(endpoint, V2_TOPIC_EXCHANGE, LOCATE_SUBJECT)
        except (NotConnectedError, ConnectionLostError):
            raise
        except (TransportError, QmfTimeout) as exc:
            # DEBUG: a bus without the v2 exchanges is a v1-only bus (see ``v2_live``)
            log.debug("agent %s: no QMF v2 on %s: %s", self.label, transport.where, exc)
            return
        self._v2_live = True

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
            for obj in old:
                obj._rename_references(renamed)
        log.info("agent %s attached as %d.%d", self.label, self.broker_bank, self.agent_bank)

    @property
    def agent_key(self) -> str:
        """The routing key requests to this agent use: ``agent.<brokerBank>.<agentBank>``."""
        return self._protocol.agent_key

    async def stop(self, timeout: float = 5.0) -> None:
        """Flush what is queued (bounded by ``timeout``), stop the tasks and disconnect.

        Raises:
            Nothing: failures while stopping are logged.
        """
        if not self._running:
            return
        self._running = False
        await self._flush_v2(timeout)
        await self._runtime.flush(timeout)
        tasks = [t for t in (self._publisher, self._v2_sender, *self._tasks) if t is not None]
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

    # ------------------------------------------------------------------ sending

    def _enqueue(self, out: Outgoing) -> None:
        """Queue one QMF v1 body the protocol core built (a full queue drops it,
        counted)."""
        self._runtime.enqueue(out)

    def _put(self, sends: Iterable[Outgoing]) -> None:
        """Queue the QMF v1 bodies the protocol core built."""
        enqueue = self._enqueue
        for out in sends:
            enqueue(out)

    def _send_v2(self, out: Outgoing) -> None:
        """Queue a QMF v2 message for the v2 sender (a full queue drops it, counted)."""
        try:
            self._v2_out.put_nowait(out)
        except asyncio.QueueFull:
            self.stats["dropped"] += 1

    def _send_v2_all(self, sends: Iterable[Outgoing]) -> None:
        for out in sends:
            self._send_v2(out)

    async def _v2_send_loop(self) -> None:
        """Publish the queued v2 messages (with their application properties and
        correlation ids) on the current connection, in order."""
        queue = self._v2_out
        stats = self.stats
        while True:
            out = await queue.get()
            try:
                transport = self._runtime.transport
                if transport is None or not transport.is_open or not self._v2_live:
                    stats["dropped"] += 1
                    continue
                is_v1 = isinstance(out.body, bytes)
                await transport.publish(out.body, exchange=out.exchange,
                                        routing_key=out.key, headers=out.headers,
                                        correlation_id=out.correlation_id,
                                        content_type=QMF_CONTENT_TYPE if is_v1 else None)
                stats["published"] += 1
            except QmfError as exc:
                stats["dropped"] += 1
                log.warning("agent %s: QMF v2 publish to %s/%s failed: %s", self.label,
                            out.exchange, out.key, exc)
            finally:
                queue.task_done()

    async def _flush_v2(self, timeout: float) -> None:
        """Wait (at most ``timeout`` s) until the v2 sender took every queued message."""
        sender = self._v2_sender
        if sender is None or sender.done() or self._v2_out.empty():
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._v2_out.join(), timeout)

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
        """Outgoing a ``G`` answer now: ``g`` records (at most ``max_get_per_body`` a
        body), then the ``z``."""
        self._put(self._protocol.answer_get(seq, reply_to, timestamp, records,
                                            self._encode_records))

    async def _reply_get_streamed(self, reply_to: str, seq: int, timestamp: int,
                                  records: Sequence[RecordSnapshot]) -> None:
        """Outgoing a large ``G`` answer body by body, letting the sender publish meanwhile,
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
                changed.setdefault(obj.schema.class_key, []).append(self._v2_data(obj, ts))
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
            for key, items in changed.items():
                self._send_v2_all(v2.data_indication(key, items))
            self._send_v2(v2.heartbeat(ts))

    def raise_event(self, event: str | ClassKey | SchemaClass, severity: int | None = None, *,
                    package: str | None = None, **arguments: Any) -> None:
        """Publish an event now (``e`` on ``console.event.<bb>.<ab>.<package>.<event>``).

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
            known = {a.name for a in schema.arguments}
            unknown = sorted(set(arguments) - known)
            if unknown:
                raise ArgumentError(f"event {schema.class_key.name} has no argument(s) "
                                    f"{', '.join(unknown)}")
            values = {k: self._v2_value(v) for k, v in arguments.items()}
            self._send_v2(v2.event(schema, ts, sev, values))
        if out is not None:
            self._enqueue(out)

    # ------------------------------------------------------------------ requests

    def _dispatch(self, delivery: Delivery) -> None:
        """A delivered body: the core decodes it (leaving the served schemas as they
        are: a peer's ``s`` is not served) into events, handled here."""
        if self._v2 is not None and delivery.exchange in _V2_EXCHANGES:
            self._dispatch_v2(delivery)
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
                    self._serve_method(event, delivery)
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
            self._serve_method(event, delivery)
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

    # ------------------------------------------------------------------ QMF v2

    def _dispatch_v2(self, delivery: Delivery) -> None:
        """A message on a v2 exchange: the v2 core makes request events of it."""
        core = self._v2
        assert core is not None
        # v2 maps as bytes only where the transport carries them so (AMQP 0-9-1)
        transport = self._runtime.transport
        bytes_ok = transport is not None and transport.capabilities.v2_map_bytes
        events = core.feed(delivery, map_bytes=bytes_ok)
        self.stats["requests"] += 1
        for event in events:
            try:
                self._on_v2_event(core, event, delivery)
            except Exception:
                self.stats["bad_requests"] += 1
                log.exception("agent %s: failed to handle %s", self.label, type(event).__name__)

    def _on_v2_event(self, core: AgentProtocolV2, event: V2AgentEvent,
                     delivery: Delivery) -> None:
        alias = (delivery.routing_key if delivery.routing_key in self._v2_aliases
                 and delivery.exchange == V2_DIRECT_EXCHANGE else None)
        if isinstance(event, V2MethodRequested):
            self._spawn(self._method_v2(core, event, delivery.routing_key, alias))
        elif isinstance(event, V2ObjectQueryRequested):
            ts = now_ns()
            items = [self._v2_data(obj, ts) for obj in self._select_v2(core, event)]
            self._send_v2_all(core.answer_query(event.reply_to, event.correlation_id, items,
                                                agent=alias))
        elif isinstance(event, V2LocateRequested):
            self._send_v2(core.answer_locate(event.reply_to, event.correlation_id, now_ns()))
        elif isinstance(event, V2SchemaQueryRequested):
            self._send_v2_all(core.answer_schema_query(event, agent=alias))
        elif isinstance(event, V2SchemaRequestedInV1):
            answer = core.answer_schema_v1(event)
            if answer is None:
                log.info("agent %s: schema of unknown class %s asked", self.label,
                         event.class_key)
            else:
                self._send_v2(answer)
        elif isinstance(event, V2RequestRejected):
            self.stats["bad_requests"] += 1
            warn_limited(log, self.stats["bad_requests"], "agent %s: bad QMF v2 %s: %s",
                         self.label, event.opcode, event.error)
            if event.answer is not None:
                self._send_v2(event.answer)
        elif isinstance(event, V2RequestDropped):
            self.stats["bad_requests"] += 1
            log.debug("agent %s: QMF v2 %s dropped: %s", self.label, event.opcode, event.why)

    def _v2_is_mine(self, core: AgentProtocolV2, agent_name: str | None) -> bool:
        """Whether an object id's ``_agent_name`` names this agent (absent: yes)."""
        return agent_name is None or agent_name == core.name or agent_name in self._v2_aliases

    def _v2_name(self, obj: ManagedObject) -> str:
        """The v2 object name of ``obj``: ``package:class:key``, the key being its index
        properties' values joined by ``,`` (its number when the class has none)."""
        schema = obj.schema
        index = [obj[p.name] for p in schema.properties if p.index]
        return object_name(schema.class_key, index, str(obj.number))

    def _v2_find(self, name: str) -> ManagedObject | None:
        """The live object named ``name`` over v2 (None when there is none)."""
        obj = self._v2_names.get(name)
        if obj is None or obj.deleted or obj.object_id not in self._objects \
                or self._v2_name(obj) != name:
            self._v2_names = {self._v2_name(o): o for o in self._objects.values()
                              if not o.deleted}
            obj = self._v2_names.get(name)
        return obj

    def _select_v2(self, core: AgentProtocolV2,
                   event: V2ObjectQueryRequested) -> list[ManagedObject]:
        """The live objects an object query selects (``_where`` is not evaluated)."""
        if event.object_id is not None:
            oid = event.object_id
            if not self._v2_is_mine(core, oid.agent_name):
                return []
            found = self._v2_find(oid.object_name)
            return [found] if found is not None else []
        objects = [o for o in self._objects.values() if not o.deleted]
        if event.schema_id is None:
            return objects
        keys = {s.class_key for s in core.select_schemas(event.schema_id)}
        return [o for o in objects if o.schema.class_key in keys]

    def _v2_ref(self, core: AgentProtocolV2, value: Mapping[str, Any]) -> ObjectId | None:
        """The object id of this agent's object a received v2 object id names."""
        try:
            oid = V2ObjectId.from_map(value)
        except DecodeError:
            return None
        if not self._v2_is_mine(core, oid.agent_name):
            return None
        found = self._v2_find(oid.object_name)
        return found.object_id if found is not None else None

    def _v2_value(self, value: Any) -> Any:
        """A value as v2 sends it: a reference (ObjectId) becomes the v2 object id of
        the object it names (``_object_name`` its v1 text form when it is not one of
        this agent's); maps and lists are converted item by item."""
        if isinstance(value, ObjectId):
            core = self._v2
            target = self._objects.get(value)
            if core is not None and target is not None:
                return core.object_id(self._v2_name(target)).to_map()
            return {"_object_name": str(value)}
        if isinstance(value, dict):
            return {k: self._v2_value(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self._v2_value(v) for v in value]
        return value

    def _v2_data(self, obj: ManagedObject, timestamp: int) -> V2Data:
        """``obj`` as v2 sends it (properties and statistics together in ``_values``)."""
        core = self._v2
        assert core is not None
        values = {name: self._v2_value(v) for name, v in obj.properties.items()}
        values.update((name, self._v2_value(v)) for name, v in obj.statistics.items())
        return core.data(obj.schema, self._v2_name(obj), values, update_ts=timestamp,
                         create_ts=obj.created, delete_ts=obj.deleted)

    async def _method_v2(self, core: AgentProtocolV2, event: V2MethodRequested,
                         routing_key: str, alias: str | None = None) -> None:
        """Serve a v2 ``_method_request``: the object by its v2 name, arguments checked
        against the method's schema, the handler run as for v1 (a concurrency slot,
        ``method_timeout``, :data:`current_request` set); the answer is a
        ``_method_response`` or an ``_exception`` with the v1 status and text."""
        current_request.set(RequestContext(0, event.reply_to, event.user_id, routing_key))
        status, text, out = await self._run_method_v2(core, event)
        if status == 0 and out is not None:
            answer = core.answer_method(event.reply_to, event.correlation_id,
                                        {k: self._v2_value(v) for k, v in out.items()},
                                        agent=alias)
        else:
            answer = core.exception(event.reply_to, event.correlation_id, status, text,
                                    agent=alias)
        self._send_v2(answer)

    async def _run_method_v2(self, core: AgentProtocolV2, event: V2MethodRequested
                             ) -> tuple[int, str, Mapping[str, Any] | None]:
        oid = event.object_id
        obj = None
        if self._v2_is_mine(core, oid.agent_name):
            obj = self._v2_find(oid.object_name)
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
                target = self._v2_ref(core, value)
                if target is not None:
                    args[arg.name] = target
        request = MethodRequested(0, event.reply_to, obj.object_id, schema.class_key,
                                  event.method, args, event.user_id)
        await self._slots.take()
        try:
            status, text, _plan, out = await self._run_method(request)
        finally:
            self._slots.give()
        return status, text, out

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

    # ------------------------------------------------------------------ methods

    def _serve_method(self, msg: MethodRequested, delivery: Delivery | None) -> None:
        """Serve an ``M``.

        When a concurrency slot is free the handler is called at once, here, in that
        slot, with :data:`current_request` set: a plain function's answer is encoded
        and queued without a task; an awaitable it returns (a coroutine handler's) is
        awaited in a task that keeps the slot, within ``method_timeout``.  With every
        slot taken, or an authorization hook to ask, the request is served in a task
        (:meth:`_method`).
        """
        reply_to = msg.reply_to
        ctx = _new(RequestContext)
        _set_ctx_seq(ctx, msg.seq)
        _set_ctx_reply_to(ctx, reply_to)
        _set_ctx_user_id(ctx, msg.user_id)
        _set_ctx_routing_key(ctx, delivery.routing_key if delivery is not None else "")
        slots = self._slots
        if self._authorize is not None or not slots.try_take():
            self._spawn(self._method(msg, reply_to, ctx))
            return
        token = current_request.set(ctx)
        held = True
        try:
            obj, plan, error = self._method_target(msg)
            if error is not None:
                self._reply_method(msg.seq, reply_to, *error, None, None)
                return
            assert obj is not None and plan is not None and plan.handler is not None
            assert msg.arguments is not None
            try:
                result = plan.handler(obj, **msg.arguments)
            except Exception as exc:
                self._reply_method(msg.seq, reply_to, *self._handler_error(exc, plan), None,
                                   None)
                return
            if result is not None and type(result) is not dict and inspect.isawaitable(result):
                # the task copies the context (current_request included) and keeps the slot
                task = self._spawn(self._finish_method(msg.seq, reply_to, plan, msg.arguments,
                                                       result))
                task.add_done_callback(functools.partial(_finished, slots, result))
                held = False
                return
            self._reply_method(msg.seq, reply_to, *self._method_output(plan, msg.arguments,
                                                                          result))
        finally:
            if held:
                slots.give()
            current_request.reset(token)

    async def _method(self, msg: MethodRequested, reply_to: str,
                      ctx: RequestContext | None = None) -> None:
        """Serve an ``M`` in a task: wait for a concurrency slot, then run the handler."""
        if ctx is not None:
            current_request.set(ctx)
        await self._slots.take()
        try:
            status, text, plan, out = await self._run_method(msg)
        finally:
            self._slots.give()
        self._reply_method(msg.seq, reply_to, status, text, plan, out)

    async def _finish_method(self, seq: int, reply_to: str, plan: _MethodPlan,
                             args: Mapping[str, Any], awaitable: Awaitable[Any]) -> None:
        """Await what a handler returned (its slot is given back when the task ends)."""
        status, text, plan_, out = await self._awaited(plan, args, awaitable)
        self._reply_method(seq, reply_to, status, text, plan_, out)

    async def _run_method(self, msg: MethodRequested
                          ) -> tuple[int, str, _MethodPlan | None, dict[str, Any] | None]:
        """(status, text, plan, output arguments) of an ``M`` (the plan and output
        arguments only with status 0)."""
        obj, plan, error = self._method_target(msg)
        if error is not None:
            return error[0], error[1], None, None
        assert obj is not None and plan is not None and plan.handler is not None
        assert msg.arguments is not None
        if self._authorize is not None:
            refused = await self._refusal(msg, obj, plan)
            if refused is not None:
                return refused[0], refused[1], None, None
        try:
            result = plan.handler(obj, **msg.arguments)
        except Exception as exc:
            return *self._handler_error(exc, plan), None, None
        if inspect.isawaitable(result):
            return await self._awaited(plan, msg.arguments, result)
        return self._method_output(plan, msg.arguments, result)

    async def _refusal(self, msg: MethodRequested, obj: ManagedObject, plan: _MethodPlan
                       ) -> tuple[int, str] | None:
        """None when the authorization hook lets ``msg.user_id`` call the method, else
        the (status, text) to answer: 6 for a refusal, 7 for a hook that failed."""
        hook = self._authorize
        assert hook is not None and msg.arguments is not None
        user = msg.user_id
        method = f"{plan.schema.class_key.name}.{plan.method.name}"
        who = f"user {user!r}" if user is not None else "a caller without a user id"
        refused = 6, f"not authorized: {who} may not call {method}"
        deadline = asyncio.timeout(self.method_timeout)
        try:
            async with deadline:
                verdict: object = hook(user, obj, plan.method.name, msg.arguments)
                if inspect.isawaitable(verdict):
                    verdict = await verdict
        except PermissionError as exc:
            log.info("agent %s: %s refused to %s: %s", self.label, method, who, exc)
            return refused[0], f"{refused[1]}: {exc}" if str(exc) else refused[1]
        except TimeoutError as exc:
            if deadline.expired():
                log.warning("agent %s: authorization of %s timed out after %ss", self.label,
                            method, self.method_timeout)
                return 7, f"Exception: authorization timed out after {self.method_timeout}s"
            log.error("agent %s: the authorization hook raised", self.label, exc_info=exc)
            return 7, "Exception: the authorization check failed"
        except Exception as exc:
            log.error("agent %s: the authorization hook raised", self.label, exc_info=exc)
            return 7, "Exception: the authorization check failed"
        if verdict is True:
            return None
        if verdict is False:
            log.info("agent %s: %s refused to %s", self.label, method, who)
            return refused
        log.error("agent %s: the authorization hook returned %r, not a bool", self.label,
                  type(verdict).__name__)
        return 7, "Exception: the authorization check failed"

    async def _awaited(self, plan: _MethodPlan, args: Mapping[str, Any],
                       awaitable: Awaitable[Any]
                       ) -> tuple[int, str, _MethodPlan | None, dict[str, Any] | None]:
        """Await a handler's awaitable within ``method_timeout``; as :meth:`_run_method`."""
        deadline = asyncio.timeout(self.method_timeout)
        try:
            async with deadline:
                result = await awaitable
        except TimeoutError as exc:
            if not deadline.expired():  # the handler's own timeout, not ours
                return *self._handler_error(exc, plan), None, None
            log.warning("agent %s: %s.%s timed out after %ss", self.label,
                        plan.schema.class_key.name, plan.method.name, self.method_timeout)
            return 7, f"Exception: method timed out after {self.method_timeout}s", None, None
        except Exception as exc:
            return *self._handler_error(exc, plan), None, None
        return self._method_output(plan, args, result)

    def _method_target(self, msg: MethodRequested
                       ) -> tuple[ManagedObject | None, _MethodPlan | None, tuple[int, str] | None]:
        """(object, plan, None) for a request its handler may serve, else
        (None, None, (status, text)): unknown object, package, class or method, no
        arguments, an argument out of range, no handler."""
        obj = self._objects.get(msg.object_id)
        key = msg.class_key
        if obj is None or obj.deleted:
            return None, None, self._protocol.unknown_object(key)
        schema = obj.schema
        skey = schema.class_key
        if key is not skey and (key.package, key.name) != (skey.package, skey.name):
            return None, None, (4, f"InvalidParameter: object {msg.object_id} is a {skey.name}, "
                                   f"not a {key.name}")
        plan = self._plans.get((skey, msg.method))
        if plan is None or plan.schema is not schema:
            plan = self._plan(schema, msg.method)
            if plan is None:
                return None, None, (2, "UnknownMethod")
        args = msg.arguments
        if args is None:
            return None, None, (4, "InvalidParameter: arguments do not match the method's schema")
        if plan.checked:
            error = validate_arguments(plan.method, args)
            if error is not None:
                return None, None, (4, f"InvalidParameter: {error}")
        if plan.handler is None:
            return None, None, (3, "NotImplemented")
        return obj, plan, None

    def _plan(self, schema: SchemaClass, name: str) -> _MethodPlan | None:
        """The plan of method ``name`` of ``schema`` (cached), None when it has none."""
        method = schema.find_method(name)
        if method is None:
            return None
        plan = _MethodPlan(schema, method, self._handlers.get((schema.class_key.name, name)))
        if len(self._plans) < 4096:
            self._plans[(schema.class_key, name)] = plan
        return plan

    def _method_output(self, plan: _MethodPlan, args: Mapping[str, Any], result: Any
                       ) -> tuple[int, str, _MethodPlan | None, dict[str, Any] | None]:
        out = dict(result or {})
        # IO arguments default to what came in
        for name in plan.io_names:
            if name not in out and name in args:
                out[name] = args[name]
        if len(out) < len(plan.out_names) or not all(n in out for n in plan.out_names):
            missing = [n for n in plan.out_names if n not in out]
            return 7, f"Exception: handler returned no {', '.join(missing)}", None, None
        return 0, "OK", plan, out

    def _handler_error(self, exc: Exception, plan: _MethodPlan) -> tuple[int, str]:
        """The status and text of what a handler raised."""
        if isinstance(exc, TimeoutError):
            return 7, f"Exception: {type(exc).__name__}: {exc}"
        if isinstance(exc, MethodError):
            return exc.status, exc.text
        if isinstance(exc, PermissionError):
            return 6, f"Forbidden: {exc}"
        if isinstance(exc, NotImplementedError):
            return 5, f"FeatureNotImplemented: {exc}"
        if isinstance(exc, (ValueError, TypeError, ArgumentError)):
            return 4, f"InvalidParameter: {exc}"
        # the handler's bug is the caller's status 7
        log.error("agent %s: %s.%s raised", self.label, plan.schema.class_key.name,
                  plan.method.name, exc_info=exc)
        return 7, f"Exception: {type(exc).__name__}: {exc}"

    def _reply_method(self, seq: int, reply_to: str, status: int, text: str,
                      plan: _MethodPlan | None, out: Mapping[str, Any] | None) -> None:
        """Queue the ``m`` answering request ``seq``."""
        core = self._protocol
        if status == 0 and plan is not None and out is not None:
            try:
                write = plan.write
                if write is None:  # compiled on the first answer
                    write = plan.write = self.registry.codec(plan.schema).response_writer(
                        plan.method)
                body = write(seq, out)
            except EncodeError as exc:
                log.error("agent %s: handler of %s returned bad output: %s", self.label,
                          plan.method.name, exc)
                sent = core.method_error(seq, reply_to, 7, f"bad output arguments: {exc}")
            else:
                sent = core.reply(reply_to, body)
        else:
            sent = core.method_error(seq, reply_to, status, text)
        self._enqueue(sent)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task


def _finished(slots: _Slots, awaitable: Awaitable[Any], task: asyncio.Task[None]) -> None:
    """Done-callback of a task awaiting a handler's awaitable: give its slot back; a
    coroutine the task never started (cancelled at once, e.g. by stop()) is closed."""
    slots.give()
    if task.cancelled() and inspect.iscoroutine(awaitable):
        awaitable.close()


class _Slots:
    """How many method handlers may run at once (``max_concurrency``): a counting
    limit like :class:`asyncio.Semaphore`, first come first served, which can also be
    taken synchronously when a slot is free (:meth:`try_take`)."""

    __slots__ = ("_waiters", "free")

    def __init__(self, count: int) -> None:
        self.free = count
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()

    def try_take(self) -> bool:
        """Take a slot if one is free and nobody waits; True when taken."""
        if self.free > 0 and not self._waiters:
            self.free -= 1
            return True
        return False

    async def take(self) -> None:
        """Wait for a slot and take it."""
        if self.try_take():
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        try:
            await fut  # give() hands its slot over by resolving this
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self.give()  # handed a slot, then cancelled: pass it on
            else:
                with contextlib.suppress(ValueError):
                    self._waiters.remove(fut)
            raise

    def give(self) -> None:
        """Give a slot back: to the first waiter, else to the pool."""
        waiters = self._waiters
        while waiters:
            fut = waiters.popleft()
            if not fut.done():
                fut.set_result(None)
                return
        self.free += 1


class _MethodPlan:
    """What serving one method of one served class takes, worked out once (until a
    handler or schema is added): its schema, handler, whether its input arguments have
    limits to check, its IO and output argument names and the writer of its answer
    (compiled on first use)."""

    __slots__ = ("checked", "handler", "io_names", "method", "out_names", "schema", "write")

    def __init__(self, schema: SchemaClass, method: SchemaMethod,
                 handler: MethodHandler | None) -> None:
        self.schema = schema
        self.method = method
        self.handler = handler
        self.checked = any(a.min is not None or a.max is not None or a.maxlen is not None
                           for a in method.in_args)
        in_names = {a.name for a in method.in_args}
        self.out_names = tuple(a.name for a in method.out_args)
        self.io_names = tuple(n for n in self.out_names if n in in_names)
        self.write: Callable[[int, Mapping[str, Any]], bytes] | None = None


_new = object.__new__
_set_ctx_seq, _set_ctx_reply_to, _set_ctx_user_id, _set_ctx_routing_key = (
    RequestContext.__dict__[name].__set__ for name in ("seq", "reply_to", "user_id", "routing_key")
)
assert len(attrs.fields(RequestContext)) == 4  # every field is set by _serve_method
