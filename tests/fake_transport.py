"""A scripted in-memory transport for session tests (no I/O beyond the event loop).

:class:`FakeBus` stands for the AMQP broker and the QMF bus behind it.  Its
:meth:`FakeBus.factory` is passed to ``Session(_transport_factory=...)``; every
connection the session opens is a :class:`FakeTransport`, which conforms to the
typed :class:`qmf_async.transport.TransportProtocol` (mypy checks it: see the end).
Published bodies are recorded (and decoded with :mod:`qmf_async.wire`) and routed to
the scripted responders:

* :class:`ScriptedAgent` answers ``G`` (``g`` records packed in bodies, then ``z``),
  ``M`` (``m``), ``S``/``P``/``Q`` sent to ``agent.<bb>.<ab>``, and can publish
  heartbeats, ``c``/``i`` updates and events on ``console.*`` keys;
* :class:`ManagementBroker` (optional: without one nothing answers ``B``) answers
  ``B`` and ``P``/``Q``/``S`` on ``broker``, and is agent ``1.0``, whose
  ``org.apache.qpid.broker:agent`` objects list the other agents.

Faults: per-agent ``delay`` (per opcode), ``drop`` (lose replies), ``duplicate``,
``silent``; bus-wide :meth:`FakeBus.pause` / :meth:`FakeBus.flush` (deliver queued
replies reordered), :meth:`FakeTransport.lose` (disconnect, calling the ``on_lost``
callbacks), ``fail_connects`` and ``connect_gate`` for reconnect tests, and
:meth:`FakeBus.publish_topic` / :meth:`FakeBus.deliver_raw` for unsolicited or
malformed deliveries.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from qmf_async import (
    ClassKey,
    ClassKind,
    ConnectionLostError,
    NotConnectedError,
    ObjectId,
    QmfTimeout,
    QmfType,
    SchemaArgument,
    SchemaClass,
    SchemaMethod,
    SchemaProperty,
    SchemaStatistic,
    TransportError,
    wire,
)
from qmf_async.transport import (
    Body,
    Capabilities,
    ConnectionState,
    Delivery,
    TransportFactory,
    TransportProtocol,
)

MANAGEMENT = "qpid.management"
DIRECT = "amq.direct"

MethodHandler = Callable[["FakeObject", Mapping[str, Any]], Any]


def now_ns() -> int:
    return time.time_ns()


def class_hash(*parts: Any) -> bytes:
    """A deterministic 16-byte schema hash for test schemas."""
    return hashlib.md5(repr(parts).encode()).digest()


def topic_matches(pattern: str, key: str) -> bool:
    """AMQP topic matching: ``*`` one word, ``#`` zero or more words."""
    p = pattern.split(".")
    k = key.split(".")

    def match(i: int, j: int) -> bool:
        if i == len(p):
            return j == len(k)
        if p[i] == "#":
            return any(match(i + 1, jj) for jj in range(j, len(k) + 1))
        if j == len(k):
            return False
        return (p[i] == "*" or p[i] == k[j]) and match(i + 1, j + 1)

    return match(0, 0)


# --------------------------------------------------------------------------- schemas


def object_schema(package: str, name: str, properties: Sequence[SchemaProperty] = (),
                  statistics: Sequence[SchemaStatistic] = (),
                  methods: Sequence[SchemaMethod] = ()) -> SchemaClass:
    key = ClassKey(package, name, class_hash(package, name, properties, statistics, methods))
    return SchemaClass(ClassKind.OBJECT, key, properties, statistics, methods)


def event_schema(package: str, name: str, arguments: Sequence[SchemaArgument] = ()) -> SchemaClass:
    key = ClassKey(package, name, class_hash("event", package, name, arguments))
    return SchemaClass(ClassKind.EVENT, key, (), (), (), arguments)


#: The management broker's agent list class (a subset of qpidd's).
BROKER_AGENT_SCHEMA = object_schema(
    "org.apache.qpid.broker", "agent",
    properties=[
        SchemaProperty("label", QmfType.SSTR, index=True),
        SchemaProperty("brokerBank", QmfType.UINT32),
        SchemaProperty("agentBank", QmfType.UINT32),
    ],
)


@attrs.define
class FakeObject:
    """One managed object of a scripted agent (values by name)."""

    schema: SchemaClass
    oid: ObjectId
    props: dict[str, Any]
    stats: dict[str, Any] = attrs.field(factory=dict)
    created: int = attrs.field(factory=now_ns)
    deleted: int = 0

    def prop_tuple(self) -> tuple[Any, ...]:
        return tuple(self.props.get(p.name) for p in self.schema.properties)

    def stat_tuple(self) -> tuple[Any, ...]:
        return tuple(self.stats.get(s.name, 0) for s in self.schema.statistics)

    def record(self, opcode: str, seq: int = 0) -> wire.ObjectRecord:
        return wire.ObjectRecord(
            opcode, seq, self.schema, now_ns(), self.created, self.deleted, self.oid,
            self.prop_tuple() if opcode in "cg" else None,
            self.stat_tuple() if opcode in "ig" else None,
        )


@attrs.define
class Published:
    """One body the session published, with its decoded messages."""

    body: bytes
    exchange: str
    routing_key: str
    reply_to: str | None
    messages: list[Any]
    transport: FakeTransport


# --------------------------------------------------------------------------- transport


class FakeTransport:
    """The :class:`~qmf_async.transport.TransportProtocol` interface over a :class:`FakeBus`."""

    def __init__(self, bus: FakeBus, url: str, *, tls: Any = None, prefetch: int = 0,
                 name: str = "") -> None:
        self.bus = bus
        self.url = url
        self.tls = tls
        self.prefetch = prefetch
        self.name = name
        self.endpoints: dict[str, list[tuple[str, str]]] = {}
        self.endpoint_args: dict[str, dict[str, Any]] = {}
        self._dispatch: Callable[[Delivery], None] | None = None
        self._lost_callbacks: list[Callable[[BaseException], None]] = []
        self._state = "new"
        self.closed_calls = 0
        self.close_timeouts: list[float] = []
        self.management_declared = False
        self.exchanges_declared: dict[str, str] = {}

    # -- lifecycle
    @property
    def state(self) -> ConnectionState:
        return ConnectionState(self._state)

    @property
    def is_open(self) -> bool:
        return self._state == "open"

    @property
    def where(self) -> str:
        return self.url.split("@", 1)[-1]

    #: a test bus: no AMQP version to name; endpoints capped and dead-lettered as on
    #: AMQP 0-9-1, no drain probe, no selectors
    capabilities = Capabilities("", dead_letters=True)
    #: deliveries are handed over at once
    backlog = 0
    local_address: str | None = None

    async def connect(self, timeout: float = 10.0) -> None:
        bus = self.bus
        bus.connect_attempts += 1
        if bus.connect_gate is not None:
            try:
                await asyncio.wait_for(bus.connect_gate.wait(), timeout)
            except TimeoutError:
                raise QmfTimeout(f"fake: no connection to {self.url} within {timeout} s") from None
        if bus.fail_connects > 0:
            bus.fail_connects -= 1
            raise TransportError(f"fake: connection to {self.url} refused")
        self._state = "open"
        bus.transports.append(self)

    async def close(self, timeout: float = 5.0) -> None:
        """Like the real one: idempotent, bounded by ``timeout`` (the bus's
        ``close_delay`` simulates a slow broker), never raises."""
        self.closed_calls += 1
        self.close_timeouts.append(timeout)
        if self._state == "open":
            self._state = "closing"
        delay = min(self.bus.close_delay, timeout)
        await asyncio.sleep(delay)
        if self._state == "closing":
            self._state = "closed"

    def lose(self, cause: BaseException | None = None) -> ConnectionLostError:
        """Drop the connection: later publishes fail, ``on_lost`` callbacks are called."""
        if self._state != "open":
            raise AssertionError("transport is not open")
        self._state = "lost"
        exc = ConnectionLostError(f"fake connection to {self.url} lost: {cause}")
        exc.__cause__ = cause
        for cb in list(self._lost_callbacks):
            cb(exc)
        return exc

    def _check(self) -> None:
        if self._state != "open":
            raise NotConnectedError(f"fake transport is {self._state}")

    # -- topology
    async def declare_management_exchange(self) -> None:
        self._check()
        self.management_declared = True

    async def declare_exchange(self, name: str, kind: str = "topic") -> None:
        self._check()
        self.exchanges_declared[name] = kind

    async def open_endpoint(self, name: str | None = None, *,
                            bindings: Sequence[tuple[str, str]] = (),
                            max_length: int | None = None,
                            dead_letter_exchange: str | None = None,
                            dead_letter_routing_key: str | None = None,
                            no_ack: bool = True) -> str:
        self._check()
        name = name or f"amq.gen-{uuid.uuid4().hex}"
        self.endpoints[name] = [(str(ex), str(k)) for ex, k in bindings]
        self.endpoint_args[name] = dict(max_length=max_length,
                                        dead_letter_exchange=dead_letter_exchange,
                                        dead_letter_routing_key=dead_letter_routing_key,
                                        no_ack=no_ack)
        return name

    async def bind(self, endpoint: str, exchange: str, routing_key: str, *,
                   selector: str | None = None) -> None:
        self._check()
        self.endpoints.setdefault(endpoint, []).append((exchange, routing_key))

    async def unbind(self, endpoint: str, exchange: str, routing_key: str, *,
                     selector: str | None = None) -> None:
        self._check()
        with_key = self.endpoints.get(endpoint, [])
        if (exchange, routing_key) in with_key:
            with_key.remove((exchange, routing_key))

    def set_dispatcher(self, dispatch: Callable[[Delivery], None]) -> None:
        self._dispatch = dispatch

    def on_lost(self, callback: Callable[[BaseException], None]) -> None:
        self._lost_callbacks.append(callback)

    # -- messages
    async def publish(self, body: Body, *, exchange: str, routing_key: str,
                      reply_to: str | None = None, content_type: str | None = "x-application/qmf",
                      headers: Mapping[str, Any] | None = None, user_id: str | None = None,
                      correlation_id: str | None = None) -> None:
        self._check()
        if not isinstance(body, bytes):
            raise TypeError("this fake bus carries QMF v1 bodies (bytes) only")
        try:
            messages = wire.decode(body, self.bus.schemas)
        except wire.DecodeError as exc:  # the session never sends garbage
            raise AssertionError(f"session published an undecodable body: {exc}") from exc
        pub = Published(body, exchange, routing_key, reply_to, messages, self)
        self.bus.published.append(pub)
        self.bus._route(pub)

    def endpoints_for(self, exchange: str, routing_key: str) -> list[str]:
        """Endpoints of this connection bound to ``exchange`` that match ``routing_key``."""
        out = []
        for ep, bindings in self.endpoints.items():
            for ex, pattern in bindings:
                if ex != exchange:
                    continue
                direct = ex == DIRECT
                if pattern == routing_key if direct else topic_matches(pattern, routing_key):
                    out.append(ep)
                    break
        return out

    def deliver(self, body: bytes, *, exchange: str, routing_key: str, endpoint: str,
                reply_to: str | None = None) -> bool:
        """Hand one delivery to the dispatcher now; False when the connection is down."""
        if self._state != "open" or self._dispatch is None:
            return False
        self.bus.delivered += 1
        self._dispatch(Delivery(body, exchange, routing_key, reply_to, "x-application/qmf",
                                {}, None, endpoint))
        return True

    @property
    def topic_endpoint(self) -> str | None:
        for ep, bindings in self.endpoints.items():
            if any(ex == MANAGEMENT for ex, _ in bindings):
                return ep
        return None

    def __repr__(self) -> str:
        return f"<FakeTransport {self.url} {self._state}>"


# --------------------------------------------------------------------------- bus


class FakeBus:
    """The broker and the scripted QMF peers behind every :class:`FakeTransport`."""

    def __init__(self, *, seed: int = 1234) -> None:
        self.schemas = wire.SchemaRegistry()
        self.agents: dict[tuple[int, int], ScriptedAgent] = {}
        self.management: ManagementBroker | None = None
        self.transports: list[FakeTransport] = []
        self.published: list[Published] = []
        self.delivered = 0
        self.fail_connects = 0
        self.connect_attempts = 0
        self.connect_gate: asyncio.Event | None = None
        self.close_delay = 0.0
        self.rng = random.Random(seed)
        self._paused = False
        self._queued: list[Callable[[], None]] = []
        self._handles: set[asyncio.TimerHandle | asyncio.Handle] = set()

    # -- construction
    def factory(self, url: str, *, tls: Any = None, prefetch: int = 0,
                name: str = "") -> FakeTransport:
        return FakeTransport(self, url, tls=tls, prefetch=prefetch, name=name)

    def add_agent(self, broker_bank: int, agent_bank: int, *, label: str = "",
                  schemas: Iterable[SchemaClass] = (), **kwargs: Any) -> ScriptedAgent:
        agent = ScriptedAgent(self, broker_bank, agent_bank, label=label or
                              f"agent-{broker_bank}-{agent_bank}", schemas=schemas, **kwargs)
        self.agents[(broker_bank, agent_bank)] = agent
        return agent

    def remove_agent(self, agent: ScriptedAgent) -> None:
        self.agents.pop((agent.broker_bank, agent.agent_bank), None)

    def add_management(self, **kwargs: Any) -> ManagementBroker:
        mgmt = ManagementBroker(self, **kwargs)
        self.management = mgmt
        self.agents[(1, 0)] = mgmt
        return mgmt

    # -- inspection
    @property
    def transport(self) -> FakeTransport:
        """The newest transport (the current connection of a one-broker session)."""
        return self.transports[-1]

    def sent(self, opcode: str | None = None, routing_key: str | None = None) -> list[Any]:
        """Messages the session published (optionally of one opcode / routing key)."""
        return [m for p in self.published for m in p.messages
                if (opcode is None or m.OPCODE == opcode)
                and (routing_key is None or p.routing_key == routing_key)]

    # -- delivery with faults
    def pause(self) -> None:
        """Queue replies instead of delivering them (see :meth:`flush`)."""
        self._paused = True

    @property
    def queued(self) -> int:
        return len(self._queued)

    def flush(self, order: str = "fifo") -> int:
        """Deliver queued replies now: ``fifo``, ``reverse`` or ``shuffle``; unpauses."""
        items, self._queued = self._queued, []
        self._paused = False
        if order == "reverse":
            items.reverse()
        elif order == "shuffle":
            self.rng.shuffle(items)
        for fn in items:
            fn()
        return len(items)

    def _schedule(self, fn: Callable[[], None], delay: float) -> None:
        loop = asyncio.get_running_loop()

        def run() -> None:
            self._handles.discard(handle)
            if self._paused:
                self._queued.append(fn)
            else:
                fn()

        handle: asyncio.TimerHandle | asyncio.Handle
        if delay > 0:
            handle = loop.call_later(delay, run)
        else:
            handle = loop.call_soon(run)
        self._handles.add(handle)

    def reply(self, pub: Published, bodies: Sequence[bytes], *, delay: float = 0.0) -> None:
        """Send ``bodies`` in order to the requester's reply key (``amq.direct``), later
        (one scheduled unit: :meth:`flush` reorders answers, not the bodies of one)."""
        transport, key = pub.transport, pub.reply_to
        if key is None:
            return

        def send() -> None:
            for body in bodies:
                for ep in transport.endpoints_for(DIRECT, key):
                    transport.deliver(body, exchange=DIRECT, routing_key=key, endpoint=ep)

        self._schedule(send, delay)

    def publish_topic(self, messages: Any, routing_key: str, *,
                      schemas: wire.SchemaRegistry | None = None) -> int:
        """Publish unsolicited messages on ``qpid.management`` now; returns the
        number of deliveries."""
        body = messages if isinstance(messages, bytes) else wire.encode(
            messages, schemas or self.schemas)
        count = 0
        for t in list(self.transports):
            for ep in t.endpoints_for(MANAGEMENT, routing_key):
                count += t.deliver(body, exchange=MANAGEMENT, routing_key=routing_key, endpoint=ep)
        return count

    def deliver_raw(self, body: bytes, routing_key: str = "console.obj.1.2.x.y",
                    *, to_reply: bool = False) -> None:
        """Deliver arbitrary bytes (e.g. malformed) to the newest transport."""
        t = self.transport
        if to_reply:
            ep = next(ep for ep, b in t.endpoints.items()
                      if b and b[0][0] == DIRECT and b[0][1] == ep and "reply" in ep)
            t.deliver(body, exchange=DIRECT, routing_key=ep, endpoint=ep)
        else:
            topic = t.topic_endpoint
            assert topic is not None
            t.deliver(body, exchange=MANAGEMENT, routing_key=routing_key, endpoint=topic)

    def cancel_pending(self) -> None:
        for h in list(self._handles):
            h.cancel()
        self._handles.clear()
        self._queued.clear()

    # -- routing of requests
    def _route(self, pub: Published) -> None:
        if pub.exchange != MANAGEMENT:
            return
        key = pub.routing_key
        if key == "broker":
            if self.management is not None:
                self.management.handle_broker(pub)
            return
        if key.startswith("agent."):
            parts = key.split(".")
            try:
                banks = (int(parts[1]), int(parts[2]))
            except (IndexError, ValueError):
                return
            agent = self.agents.get(banks)
            if agent is not None:
                agent.handle(pub)


# --------------------------------------------------------------------------- agents


class ScriptedAgent:
    """A QMF agent answering requests addressed to ``agent.<bb>.<ab>``.

    Faults: ``delay`` (seconds, or a mapping opcode -> seconds for the request
    opcode answered), ``drop`` (number of replies to lose, or a predicate on the
    request message), ``duplicate`` (send every reply body twice), ``silent``
    (answer nothing), ``g_error`` ((code, text) of the ``z`` ending a ``G``),
    ``pack`` (``g`` records per body), ``z_packed`` (the ``z`` in the last ``g`` body).
    """

    def __init__(self, bus: FakeBus, broker_bank: int, agent_bank: int, *, label: str,
                 schemas: Iterable[SchemaClass] = (), pack: int = 10,
                 delay: float | Mapping[str, float] = 0.0, silent: bool = False,
                 duplicate: bool = False, z_packed: bool = False) -> None:
        self.bus = bus
        self.broker_bank = broker_bank
        self.agent_bank = agent_bank
        self.label = label
        self.schemas: dict[ClassKey, SchemaClass] = {}
        for s in schemas:
            self.add_schema(s)
        self.objects: list[FakeObject] = []
        self.pack = pack
        self.delay = delay
        self.silent = silent
        self.duplicate = duplicate
        self.z_packed = z_packed
        self.drop: int | Callable[[Any], bool] = 0
        self.g_error: tuple[int, str] | None = None
        self.methods: dict[str, MethodHandler] = {}
        self.requests: list[Any] = []
        self._next_object = 1

    @property
    def key(self) -> str:
        return f"agent.{self.broker_bank}.{self.agent_bank}"

    def add_schema(self, schema: SchemaClass) -> SchemaClass:
        self.schemas[schema.class_key] = schema
        self.bus.schemas.add(schema)
        return schema

    def add_object(self, schema: SchemaClass, props: Mapping[str, Any],
                   stats: Mapping[str, Any] | None = None) -> FakeObject:
        if schema.class_key not in self.schemas:
            self.add_schema(schema)
        oid = ObjectId.make(sequence=1, broker_bank=self.broker_bank,
                            agent_bank=self.agent_bank, object=self._next_object)
        self._next_object += 1
        obj = FakeObject(schema, oid, dict(props), dict(stats or {}))
        self.objects.append(obj)
        return obj

    # -- unsolicited
    def heartbeat(self) -> int:
        return self.bus.publish_topic(wire.Heartbeat(now_ns()),
                                      f"console.heartbeat.{self.broker_bank}.{self.agent_bank}")

    def publish(self, obj: FakeObject, opcode: str) -> int:
        """Publish a ``c`` or ``i`` (or ``g``-less ``c``+``i`` with opcode ``"ci"``)."""
        k = obj.schema.class_key
        msgs = [obj.record(op) for op in opcode]
        return self.bus.publish_topic(
            msgs, f"console.obj.{self.broker_bank}.{self.agent_bank}.{k.package}.{k.name}")

    def event(self, schema: SchemaClass, arguments: Mapping[str, Any], severity: int = 6) -> int:
        if schema.class_key not in self.schemas:
            self.add_schema(schema)
        k = schema.class_key
        msg = wire.EventIndication(0, schema, now_ns(), severity, dict(arguments))
        return self.bus.publish_topic(
            msg, f"console.event.{self.broker_bank}.{self.agent_bank}.{k.package}.{k.name}")

    # -- requests
    def _delay_for(self, opcode: str) -> float:
        d = self.delay
        if isinstance(d, Mapping):
            return float(d.get(opcode, 0.0))
        return float(d)

    def _dropped(self, msg: Any) -> bool:
        if callable(self.drop):
            return bool(self.drop(msg))
        if self.drop > 0:
            self.drop -= 1
            return True
        return False

    def send(self, pub: Published, bodies: list[bytes], request: Any) -> None:
        if self._dropped(request):
            return
        delay = self._delay_for(request.OPCODE)
        # a duplicate is the whole answer again (g.. z g.. z), as a redelivery would be
        self.bus.reply(pub, bodies * 2 if self.duplicate else bodies, delay=delay)

    def handle(self, pub: Published) -> None:
        for msg in pub.messages:
            self.requests.append(msg)
            if self.silent:
                continue
            op = msg.OPCODE
            if op == "G":
                self.send(pub, self.answer_get(msg), msg)
            elif op == "M":
                self.send(pub, [self.answer_method(msg)], msg)
            elif op == "S":
                self.send(pub, [self.answer_schema(msg)], msg)
            elif op == "P":
                self.send(pub, [self.answer_packages(msg)], msg)
            elif op == "Q":
                self.send(pub, [self.answer_classes(msg)], msg)

    def _registry(self) -> wire.SchemaRegistry:
        return self.bus.schemas

    def all_objects(self) -> list[FakeObject]:
        return self.objects

    def select(self, query: Mapping[str, Any]) -> list[FakeObject]:
        found = []
        oid_text = query.get("_objectid")
        if oid_text is not None:
            want = ObjectId.parse(str(oid_text))
            return [obj for obj in self.all_objects() if obj.oid == want]
        for obj in self.all_objects():
            k = obj.schema.class_key
            if "_class" in query and k.name != query["_class"]:
                continue
            if "_package" in query and k.package != query["_package"]:
                continue
            found.append(obj)
        return found

    def answer_get(self, msg: wire.GetQuery) -> list[bytes]:
        seq = msg.seq
        records = [o.record("g", seq) for o in self.select(msg.query)]
        reg = self._registry()
        bodies = [wire.encode(records[i:i + self.pack], reg)
                  for i in range(0, len(records), max(1, self.pack))]
        code, text = self.g_error or (0, "OK")
        z = wire.encode(wire.CommandComplete(seq, code, text))
        if self.z_packed and bodies:
            bodies[-1] += z  # the z in the same body as the last records
        else:
            bodies.append(z)
        return bodies

    def answer_method(self, msg: wire.MethodRequest) -> bytes:
        seq = msg.seq
        obj = next((o for o in self.all_objects() if o.oid == msg.object_id), None)
        if obj is None:
            return wire.encode(wire.MethodResponse(seq, 1, "no such object"))
        handler = self.methods.get(msg.method)
        if handler is None:
            return wire.encode(wire.MethodResponse(seq, 2, f"no method {msg.method}"))
        method = obj.schema.method(msg.method)
        try:
            out = handler(obj, dict(msg.arguments or {}))
        except Exception as exc:  # reported as status 7 like qpidd
            return wire.encode(wire.MethodResponse(seq, 7, str(exc)))
        if isinstance(out, tuple):
            status, text = out
            return wire.encode(wire.MethodResponse(seq, status, text))
        out_args = {a.name: out.get(a.name, _zero(a.type)) for a in method.out_args}
        return wire.encode(wire.MethodResponse(seq, 0, "OK", out_args), self._registry(),
                           methods={seq: (obj.schema, method)})

    def answer_schema(self, msg: wire.SchemaRequest) -> bytes:
        schema = self.schemas.get(msg.class_key)
        if schema is None:
            return wire.encode(wire.CommandComplete(msg.seq, 9, "unknown class"))
        return wire.encode(wire.SchemaResponse(msg.seq, schema))

    def answer_packages(self, msg: wire.PackageQuery) -> bytes:
        pkgs = sorted({k.package for k in self.schemas})
        return wire.encode([*(wire.PackageIndication(msg.seq, p) for p in pkgs),
                            wire.CommandComplete(msg.seq)])

    def answer_classes(self, msg: wire.ClassQuery) -> bytes:
        found = [s for k, s in self.schemas.items() if k.package == msg.package]
        return wire.encode([*(wire.ClassIndication(msg.seq, s.kind, s.class_key) for s in found),
                            wire.CommandComplete(msg.seq)])


def _zero(t: QmfType) -> Any:
    if t in (QmfType.SSTR, QmfType.LSTR):
        return ""
    if t == QmfType.BOOL:
        return False
    if t in (QmfType.FLOAT, QmfType.DOUBLE):
        return 0.0
    if t == QmfType.MAP:
        return {}
    return 0


class ManagementBroker(ScriptedAgent):
    """The management broker role: ``B``/``b`` and P/Q/S on ``broker``, and agent
    ``1.0`` whose ``org.apache.qpid.broker:agent`` objects list the bus's agents."""

    def __init__(self, bus: FakeBus, *, broker_id: uuid.UUID | None = None,
                 **kwargs: Any) -> None:
        kwargs.setdefault("label", "broker")
        super().__init__(bus, 1, 0, **kwargs)
        self.broker_id = broker_id or uuid.uuid4()
        self.answer_b = True
        self.add_schema(BROKER_AGENT_SCHEMA)
        self.hidden: set[tuple[int, int]] = set()

    def all_objects(self) -> list[FakeObject]:
        listed = [self.agent_object(agent) for banks, agent in sorted(self.bus.agents.items())
                  if banks not in self.hidden]
        return listed + self.objects

    def agent_object(self, agent: ScriptedAgent, *, deleted: bool = False) -> FakeObject:
        oid = ObjectId.make(sequence=1, broker_bank=1, agent_bank=0,
                            object=1000 + agent.agent_bank)
        return FakeObject(BROKER_AGENT_SCHEMA, oid,
                          {"label": agent.label, "brokerBank": agent.broker_bank,
                           "agentBank": agent.agent_bank},
                          deleted=now_ns() if deleted else 0)

    def announce(self, agent: ScriptedAgent, *, deleted: bool = False) -> int:
        """Publish the ``c`` of ``agent``'s agent object (deleted: the agent left)."""
        k = BROKER_AGENT_SCHEMA.class_key
        rec = self.agent_object(agent, deleted=deleted).record("c")
        return self.bus.publish_topic(rec, f"console.obj.1.0.{k.package}.{k.name}")

    def schemas_of_bus(self) -> dict[ClassKey, SchemaClass]:
        out: dict[ClassKey, SchemaClass] = {}
        for agent in self.bus.agents.values():
            out.update(agent.schemas)
        return out

    def handle_broker(self, pub: Published) -> None:
        for msg in pub.messages:
            self.requests.append(msg)
            op = msg.OPCODE
            if self.silent:
                continue
            if op == "B":
                if self.answer_b:
                    self.send(pub, [wire.encode(wire.BrokerResponse(self.broker_id, msg.seq))],
                              msg)
            elif op in "PQS":
                saved = self.schemas
                self.schemas = self.schemas_of_bus()
                try:
                    answers: dict[str, Callable[[Any], bytes]] = {
                        "P": self.answer_packages, "Q": self.answer_classes,
                        "S": self.answer_schema}
                    body = answers[op](msg)
                finally:
                    self.schemas = saved
                self.send(pub, [body], msg)


if TYPE_CHECKING:
    # mypy checks that the fake is a Transport and its bus's factory a TransportFactory
    def _conforms(bus: FakeBus) -> tuple[TransportProtocol, TransportFactory]:
        return bus.factory("amqp://guest:guest@fake:5672/"), bus.factory
