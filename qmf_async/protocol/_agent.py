"""The agent's protocol core (QMF v1).  No I/O.

:class:`AgentProtocol` owns what an agent decides by the protocol alone: a
delivered body is decoded (with the agent's schema registry) into request events
(:meth:`AgentProtocol.receive`), and every body the agent sends is built here as
an :class:`~._envelope.Outgoing` (exchange, routing key, body bytes, reply key):
answers to ``G`` split into bodies of at most ``max_get_per_body`` records then a
``z``, ``m`` answers and errors, ``s``/``p``/``q`` answers, the heartbeat ``h``, the attach
``A``, events ``e`` and the ``c``/``i`` publication, under the routing keys of
the agent's banks.  Time is passed in (``timestamp``, nanoseconds since the
epoch, as the wire carries it).

What needs the application (the object table, method handlers, concurrency,
timers) stays with the asyncio adapter, :class:`qmf_async.agent.Agent`; record
bodies are encoded by a callable it passes in, so its cached encodings serve.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Final, NamedTuple, TypeVar

from .. import names
from ..errors import DecodeError, EncodeError, UsageError
from ..frozen import frozen
from ..names import Status
from ..wire import (
    AttachRequest,
    AttachResponse,
    ClassIndication,
    ClassKey,
    ClassQuery,
    CommandComplete,
    EventIndication,
    GetQuery,
    Heartbeat,
    Message,
    MethodRequest,
    MethodResponse,
    ObjectId,
    PackageIndication,
    PackageQuery,
    QmfType,
    SchemaClass,
    SchemaMethod,
    SchemaRegistry,
    SchemaRequest,
    SchemaResponse,
    decode,
    encode,
)
from ..wire import ConsoleAdded as _ConsoleAddedMessage
from ._envelope import Delivery, Outgoing
from ._events import BodyMalformed

__all__ = [
    "DIRECT",
    "MANAGEMENT",
    "STATUS_TEXT",
    "AgentEvent",
    "AgentProtocol",
    "AttachAnswered",
    "ClassesRequested",
    "ConsoleJoined",
    "GetRequested",
    "GetSelection",
    "MethodRequested",
    "PackagesRequested",
    "RequestDropped",
    "SchemaRequested",
    "reply_target",
    "validate_arguments",
]

log = logging.getLogger("qmf_async.agent")

#: the exchange of QMF v1 requests, indications and broadcasts
MANAGEMENT: Final = names.MANAGEMENT_EXCHANGE
#: the exchange of replies whose reply key names no exchange
DIRECT: Final = names.REPLY_EXCHANGE

#: the text of each ``m``/``z`` status code (a view of :class:`qmf_async.names.Status`)
STATUS_TEXT: Final = {int(s): s.text for s in Status}

_INT_TYPES = frozenset({
    QmfType.UINT8, QmfType.UINT16, QmfType.UINT32, QmfType.UINT64, QmfType.INT8,
    QmfType.INT16, QmfType.INT32, QmfType.INT64, QmfType.ABSTIME, QmfType.DELTATIME})

T = TypeVar("T")


def reply_target(reply_to: str) -> tuple[str, str]:
    """(exchange, routing key) of a reply address: ``K`` (a key of ``amq.direct``, as
    over AMQP 0-9-1) or ``EXCHANGE/K``; ``NODE/`` (an AMQP 1.0 node address, see the
    AMQP 1.0 transport) is ``(NODE, "")``."""
    if "/" in reply_to:
        exchange, _, key = reply_to.partition("/")
        return exchange, key
    return DIRECT, reply_to


def packed(messages: Sequence[Message], per_body: int, alone: str) -> list[list[Message]]:
    """``messages`` in bodies, as qpidd packs replies: consecutive messages of one
    opcode together (at most ``per_body`` a body); those whose opcode is in ``alone``
    each in a body of its own."""
    out: list[list[Message]] = []
    batch: list[Message] = []
    for msg in messages:
        single = msg.OPCODE in alone
        if batch and (single or len(batch) >= per_body or batch[0].OPCODE != msg.OPCODE):
            out.append(batch)
            batch = []
        if single:
            out.append([msg])
        else:
            batch.append(msg)
    if batch:
        out.append(batch)
    return out


def validate_arguments(method: SchemaMethod, args: Mapping[str, Any]) -> str | None:
    """Range and length checks of ``method``'s input arguments: the error text or None."""
    for a in method.in_args:
        v = args.get(a.name)
        if v is None:
            continue
        if a.type in _INT_TYPES or a.type in (QmfType.FLOAT, QmfType.DOUBLE):
            if a.min is not None and v < a.min:
                return f"argument {a.name!r}={v} is below its minimum {a.min}"
            if a.max is not None and v > a.max:
                return f"argument {a.name!r}={v} is above its maximum {a.max}"
        if a.type in (QmfType.SSTR, QmfType.LSTR) and a.maxlen is not None:
            if len(v.encode()) > a.maxlen:
                return f"argument {a.name!r} is longer than {a.maxlen} bytes"
    return None


# ---------------------------------------------------------------------- values


@frozen(slots=True)
class GetSelection:
    """What a ``G`` query selects: one object id, or objects of a class (any of
    ``class_name``, ``package``, ``hash`` may be None: no condition)."""

    object_id: ObjectId | None = None
    class_name: str | None = None
    package: str | None = None
    hash: bytes | None = None

    def matches(self, key: ClassKey) -> bool:
        """Whether an object of class ``key`` is selected (the object id aside)."""
        return ((self.class_name is None or key.name == self.class_name)
                and (self.package is None or key.package == self.package)
                and (self.hash is None or key.hash == self.hash))

    @classmethod
    def parse(cls, query: Mapping[str, Any]) -> GetSelection:
        """The selection of a ``G`` query map (``_objectid``, ``_class``, ``_package``,
        ``_hash``, ``_key``).

        Raises:
            ValueError: an object id, class key or hash that does not parse.
            UsageError: likewise, from the codec's parsers.
        """
        oid: ObjectId | None = None
        if "_objectid" in query:
            raw = query["_objectid"]
            if isinstance(raw, ObjectId):
                oid = raw
            elif isinstance(raw, (bytes, bytearray)) and len(raw) == 16:
                oid = ObjectId(bytes(raw))
            else:
                oid = ObjectId.parse(str(raw.decode() if isinstance(raw, bytes) else raw))
        name = query.get("_class")
        package = query.get("_package")
        hsh = query.get("_hash")
        if "_key" in query:
            key = ClassKey.parse(str(query["_key"]))
            name, package, hsh = key.name, key.package, key.hash
        if isinstance(name, bytes):
            name = name.decode()
        if isinstance(package, bytes):
            package = package.decode()
        if isinstance(hsh, str):
            hsh = bytes.fromhex(hsh)
        return cls(oid, name, package, hsh)


# ---------------------------------------------------------------------- events


@frozen(slots=True)
class GetRequested:
    """A ``G``: answer with the objects ``selection`` picks, or, when ``error`` is
    set (the query did not parse), with a ``z`` of code 4 only."""

    seq: int
    reply_to: str
    query: Mapping[str, Any]
    selection: GetSelection | None
    error: str | None = None


class MethodRequested(NamedTuple):
    """An ``M``: call ``method`` of object ``object_id`` (of class ``class_key``)
    with ``arguments`` (None: they did not match the method's schema), sent by
    ``user_id`` (the message's user id as delivered, None when it carried none; what
    it proves depends on the broker).  (A named tuple, not an attrs class: one is
    built for every method call.)"""

    seq: int
    reply_to: str
    object_id: ObjectId
    class_key: ClassKey
    method: str
    arguments: Mapping[str, Any] | None
    user_id: str | None = None


@frozen(slots=True)
class SchemaRequested:
    """An ``S``: answer with :meth:`AgentProtocol.answer_schema`.

    ``from_broker``: the ``S`` came without a reply key, as a management broker
    (qpidd) asks an agent that announced a class; the ``s`` then goes to ``broker``
    (:meth:`AgentProtocol.schema_to_broker`) and ``reply_to`` is empty."""

    seq: int
    reply_to: str
    class_key: ClassKey
    from_broker: bool = False


@frozen(slots=True)
class PackagesRequested:
    """A ``P``: answer with :meth:`AgentProtocol.answer_packages`."""

    seq: int
    reply_to: str


@frozen(slots=True)
class ClassesRequested:
    """A ``Q``: answer with :meth:`AgentProtocol.answer_classes`."""

    seq: int
    reply_to: str
    package: str


@frozen(slots=True)
class ConsoleJoined:
    """An ``x``: a console was added; publish every object again."""


@frozen(slots=True)
class AttachAnswered:
    """The management broker's ``a`` to the attach ``A`` of sequence ``seq``."""

    seq: int
    broker_bank: int
    agent_bank: int


@frozen(slots=True)
class RequestDropped:
    """A message the agent does not answer: a request without a reply key or an
    opcode an agent does not serve."""

    opcode: str
    why: str


#: any event of the agent core
AgentEvent = (GetRequested | MethodRequested | SchemaRequested | PackagesRequested
              | ClassesRequested | ConsoleJoined | AttachAnswered | RequestDropped
              | BodyMalformed)


# ---------------------------------------------------------------------- the core


class AgentProtocol:
    """The protocol decisions of one QMF v1 agent.

    ``registry`` holds the served schemas (decoding never adds to it).  The banks
    name the agent (``agent.<bb>.<ab>`` requests, ``console.*.<bb>.<ab>``
    broadcasts); :meth:`attached` takes the ones a management broker assigns.
    ``max_per_body`` bounds the indications of one ``c``/``i``/``p``/``q`` body,
    ``max_get_per_body`` the records of one ``G`` answer body.
    """

    def __init__(self, registry: SchemaRegistry, *, broker_bank: int = 1, agent_bank: int = 0,
                 max_per_body: int = 22, max_get_per_body: int = 11, label: str = "") -> None:
        """Raises: UsageError: a bank that does not fit, or a body limit below 1."""
        if max_per_body < 1 or max_get_per_body < 1:
            raise UsageError("max_per_body and max_get_per_body must be positive")
        self.registry = registry
        self.label = label
        #: messages decoded from delivered bodies so far
        self.messages_in = 0
        self.max_per_body = max_per_body
        self.max_get_per_body = max_get_per_body
        self.broker_bank = broker_bank
        self.agent_bank = agent_bank
        self.set_banks(broker_bank, agent_bank)
        #: whether a management broker assigned the current banks
        self.attached = False

    # ------------------------------------------------------------------ names

    def set_banks(self, broker_bank: int, agent_bank: int) -> None:
        """Name the agent ``broker_bank.agent_bank``.

        Raises:
            UsageError: a bank that does not fit (20 and 28 bits).
        """
        if not 0 <= agent_bank < (1 << 28):
            raise UsageError(f"agent bank {agent_bank} does not fit 28 bits")
        if not 0 <= broker_bank < (1 << 20):
            raise UsageError(f"broker bank {broker_bank} does not fit 20 bits")
        self.broker_bank, self.agent_bank = broker_bank, agent_bank

    @property
    def agent_key(self) -> str:
        """The routing key requests to this agent use: ``agent.<brokerBank>.<agentBank>``."""
        return names.agent_key(self.broker_bank, self.agent_bank)

    @property
    def heartbeat_key(self) -> str:
        """``console.heartbeat.<brokerBank>.<agentBank>``."""
        return f"{names.HEARTBEAT_KEY_PREFIX}{self.broker_bank}.{self.agent_bank}"

    def object_key(self, key: ClassKey) -> str:
        """``console.obj.<bb>.<ab>.<package>.<class>``: where ``c``/``i`` of ``key`` go."""
        return (f"{names.OBJECT_KEY_PREFIX}{self.broker_bank}.{self.agent_bank}."
                f"{key.package}.{key.name}")

    def event_key(self, key: ClassKey) -> str:
        """``console.event.<bb>.<ab>.<package>.<event>``: where events of ``key`` go."""
        return (f"{names.EVENT_KEY_PREFIX}{self.broker_bank}.{self.agent_bank}."
                f"{key.package}.{key.name}")

    # ------------------------------------------------------------------ bodies in

    def feed(self, delivery: Delivery) -> list[AgentEvent]:
        """One delivery: :meth:`receive` of its body, routing key, reply key and user."""
        return self.receive(delivery.body, delivery.routing_key, delivery.reply_to,
                            delivery.user_id)

    def receive(self, body: bytes, routing_key: str, reply_to: str | None,
                user_id: str | None = None) -> list[AgentEvent]:
        """The events of a delivered body (one per message it carries that asks
        something; ``z`` and ``h`` ask nothing); a body that does not decode is
        one :class:`BodyMalformed`.  ``user_id`` is the delivery's user id, passed on
        in :class:`MethodRequested`."""
        try:
            messages = decode(body, self.registry)
        except DecodeError as exc:
            return [BodyMalformed(routing_key, exc)]
        self.messages_in += len(messages)
        if len(messages) == 1:  # the usual body: one request
            event = self.interpret(messages[0], reply_to, user_id)
            return [] if event is None else [event]
        out: list[AgentEvent] = []
        for msg in messages:
            event = self.interpret(msg, reply_to, user_id)
            if event is not None:
                out.append(event)
        return out

    def interpret(self, msg: Message, reply_to: str | None,
                  user_id: str | None = None) -> AgentEvent | None:
        """The event of one decoded message (None: nothing to do)."""
        if type(msg) is MethodRequest and reply_to is not None:  # the hot path
            return MethodRequested(msg.seq, reply_to, msg.object_id, msg.class_key, msg.method,
                                   msg.arguments, user_id)
        if isinstance(msg, AttachResponse):
            return AttachAnswered(msg.seq, msg.broker_bank, msg.agent_bank)
        if isinstance(msg, _ConsoleAddedMessage):
            return ConsoleJoined()
        if isinstance(msg, (CommandComplete, Heartbeat)):
            return None
        if reply_to is None and isinstance(msg, SchemaRequest):
            # qpidd asks for the schema of a class the agent announced, without a
            # reply key: the answer goes to its ``broker`` key
            return SchemaRequested(msg.seq, "", msg.class_key, from_broker=True)
        if reply_to is None:
            return RequestDropped(msg.OPCODE, "request without reply-to")
        if isinstance(msg, GetQuery):
            query = msg.query
            if not query:
                return None  # as qpidd: an empty query gets no answer
            try:
                selection = GetSelection.parse(query)
            except (UsageError, ValueError) as exc:
                return GetRequested(msg.seq, reply_to, query, None, f"invalid query: {exc}")
            return GetRequested(msg.seq, reply_to, query, selection)
        if isinstance(msg, MethodRequest):
            return MethodRequested(msg.seq, reply_to, msg.object_id, msg.class_key, msg.method,
                                   msg.arguments, user_id)
        if isinstance(msg, PackageQuery):
            return PackagesRequested(msg.seq, reply_to)
        if isinstance(msg, ClassQuery):
            return ClassesRequested(msg.seq, reply_to, msg.package)
        if isinstance(msg, SchemaRequest):
            return SchemaRequested(msg.seq, reply_to, msg.class_key)
        return RequestDropped(msg.OPCODE, "unexpected message")

    # ------------------------------------------------------------------ bodies out

    def reply(self, reply_to: str, body: bytes) -> Outgoing:
        """``body`` sent to the reply key ``reply_to`` (``K`` or ``EXCHANGE/K``)."""
        exchange, key = reply_target(reply_to)
        return Outgoing(exchange, key, body)

    def complete(self, seq: int, reply_to: str, code: int = 0, text: str = "OK") -> Outgoing:
        """The ``z`` ending request ``seq`` with ``code``."""
        return self.reply(reply_to, encode(CommandComplete(seq, code, text)))

    def method_error(self, seq: int, reply_to: str, status: int, text: str) -> Outgoing:
        """The ``m`` answering request ``seq`` with a status and no output arguments."""
        return self.reply(reply_to, encode(MethodResponse(seq, status, text)))

    def unknown_object(self, key: ClassKey) -> tuple[int, str]:
        """(status, text) of an ``M`` to an object the agent does not have: unknown
        package (8), unknown class (9), else unknown object (1)."""
        if key.package not in self.registry.packages():
            return Status.UNKNOWN_PACKAGE, f"{Status.UNKNOWN_PACKAGE.text}: {key.package}"
        if not self.registry.find(key.name, key.package):
            return (Status.UNKNOWN_CLASS,
                    f"{Status.UNKNOWN_CLASS.text}: {key.package}:{key.name}")
        return Status.UNKNOWN_OBJECT, Status.UNKNOWN_OBJECT.text

    def answer_get(self, seq: int, reply_to: str, timestamp: int, records: Sequence[T],
                   encode_records: Callable[[Sequence[T], int, int], bytes | None]
                   ) -> Iterator[Outgoing]:
        """The bodies answering ``G`` ``seq``, built as they are taken: ``records``
        in slices of at most ``max_get_per_body``, each encoded by
        ``encode_records(slice, seq, timestamp)`` (a None is a body that did not
        encode: skipped), then the ``z``."""
        exchange, key = reply_target(reply_to)
        per_body = self.max_get_per_body
        for i in range(0, len(records), per_body):
            body = encode_records(records[i:i + per_body], seq, timestamp)
            if body is not None:
                yield Outgoing(exchange, key, body)
        yield Outgoing(exchange, key, encode(CommandComplete(seq)))

    def answer_packages(self, seq: int, reply_to: str) -> list[Outgoing]:
        """The ``p`` indications (packed) and the ``z`` answering ``P`` ``seq``."""
        replies: list[Message] = [PackageIndication(seq, p) for p in self.registry.packages()]
        return self._replies(reply_to, [*replies, CommandComplete(seq)], self.max_per_body)

    def answer_classes(self, seq: int, reply_to: str, package: str) -> list[Outgoing]:
        """The ``q`` indications (packed) and the ``z`` answering ``Q`` ``seq``."""
        replies: list[Message] = [ClassIndication(seq, s.kind, s.class_key)
                                  for s in self.registry.classes(package)]
        return self._replies(reply_to, [*replies, CommandComplete(seq)], self.max_per_body)

    def answer_schema(self, seq: int, reply_to: str, key: ClassKey) -> list[Outgoing]:
        """The ``s`` answering ``S`` ``seq``, or a ``z`` of code 1 for an unknown class."""
        schema = self.registry.get(key)
        if schema is None:
            return self._replies(reply_to, [CommandComplete(seq, 1, "Schema not found")], 1)
        return self._replies(reply_to, [SchemaResponse(seq, schema)], 1)

    def schema_to_broker(self, seq: int, key: ClassKey, reply_to: str) -> list[Outgoing]:
        """The ``s`` answering a management broker's ``S`` ``seq``: to ``broker`` on
        ``qpid.management`` with the agent's reply key ``reply_to`` (qpidd handles
        only requests that carry one, and takes the schema when ``seq`` is the one it
        asked with); nothing for a class the agent does not serve."""
        schema = self.registry.get(key)
        if schema is None:
            log.warning("agent %s: the management broker asked for unknown class %s",
                        self.label, key)
            return []
        answer = self._to(MANAGEMENT, names.BROKER_KEY, [SchemaResponse(seq, schema)])
        return [out._replace(reply_to=reply_to) for out in answer]

    def attach_request(self, seq: int, label: str, system_id: uuid.UUID,
                       reply_to: str) -> Outgoing:
        """The ``A`` asking the management broker for banks (the current ones when
        attached before, so it may give them back)."""
        request = AttachRequest(seq, label, system_id,
                                self.broker_bank if self.attached else 0,
                                self.agent_bank if self.attached else 0)
        return Outgoing(MANAGEMENT, names.BROKER_KEY, encode(request), reply_to)

    def attached_as(self, answer: AttachAnswered) -> bool:
        """Take the banks of an ``a``; True when they differ from the current ones
        (object ids must then be assigned again).

        Raises:
            UsageError: banks that do not fit.
        """
        changed = (answer.broker_bank, answer.agent_bank) != (self.broker_bank, self.agent_bank)
        if changed:
            self.set_banks(answer.broker_bank, answer.agent_bank)
        self.attached = True
        return changed

    def heartbeat(self, timestamp: int) -> Outgoing:
        """The ``h`` of time ``timestamp``."""
        return Outgoing(MANAGEMENT, self.heartbeat_key, encode(Heartbeat(timestamp)))

    def publication(self, by_class: Mapping[ClassKey, Sequence[T]], timestamp: int,
                    encode_records: Callable[[Sequence[T], int, int], bytes | None]
                    ) -> list[Outgoing]:
        """One round of publication: each class's ``c``/``i`` records in bodies of
        at most ``max_per_body`` (encoded by ``encode_records(slice, 0, timestamp)``,
        None: skipped) under its ``console.obj`` key, then the heartbeat."""
        out: list[Outgoing] = []
        per_body = self.max_per_body
        for key, records in by_class.items():
            rkey = self.object_key(key)
            for i in range(0, len(records), per_body):
                body = encode_records(records[i:i + per_body], 0, timestamp)
                if body is not None:
                    out.append(Outgoing(MANAGEMENT, rkey, body))
        out.append(self.heartbeat(timestamp))
        return out

    def event(self, schema: SchemaClass, timestamp: int, severity: int,
              arguments: Mapping[str, Any]) -> Outgoing:
        """The ``e`` of an event of class ``schema``.

        Raises:
            EncodeError: missing, unknown or mistyped arguments.
        """
        msg = EventIndication(0, schema, timestamp, severity, dict(arguments))
        return Outgoing(MANAGEMENT, self.event_key(schema.class_key),
                        encode(msg, self.registry))

    def schema_broadcast(self, schema: SchemaClass, announce_package: bool = True,
                         reply_to: str | None = None) -> list[Outgoing]:
        """The ``p`` (when ``announce_package``) and ``q`` announcing ``schema``.

        With the agent's reply key ``reply_to`` a management broker learns the class
        too: qpidd takes ``p``/``q`` on ``schema.*`` that carry a reply key as the
        agent's announcement, asks it for the schema (an ``S`` without reply key,
        see :meth:`schema_to_broker`) and then serves it to consoles."""
        key = schema.class_key
        out = []
        if announce_package:
            out += self._to(MANAGEMENT, names.SCHEMA_PACKAGE_KEY,
                            [PackageIndication(0, key.package)])
        out += self._to(MANAGEMENT, names.SCHEMA_CLASS_KEY,
                        [ClassIndication(0, schema.kind, key)])
        if reply_to is not None:
            out = [o._replace(reply_to=reply_to) for o in out]
        return out

    def broadcast_all(self, reply_to: str | None = None) -> list[Outgoing]:
        """Every served schema announced (each package once; ``reply_to`` as for
        :meth:`schema_broadcast`)."""
        announced: set[str] = set()
        out: list[Outgoing] = []
        for schema in self.registry:
            package = schema.class_key.package
            out += self.schema_broadcast(schema, package not in announced, reply_to)
            announced.add(package)
        return out

    # ------------------------------------------------------------------ helpers

    def _to(self, exchange: str, key: str, messages: Sequence[Message]) -> list[Outgoing]:
        """``messages`` as one body (none when they do not encode: logged)."""
        try:
            body = encode(messages, self.registry)
        except EncodeError as exc:
            log.error("agent %s: cannot encode %s: %s", self.label,
                      "".join(m.OPCODE for m in messages), exc)
            return []
        return [Outgoing(exchange, key, body)]

    def _replies(self, reply_to: str, messages: Sequence[Message],
                 per_body: int) -> list[Outgoing]:
        """Replies packed into bodies (:func:`packed`; ``z`` and ``m`` alone)."""
        exchange, key = reply_target(reply_to)
        out: list[Outgoing] = []
        for batch in packed(messages, per_body, "zm"):
            out += self._to(exchange, key, batch)
        return out

