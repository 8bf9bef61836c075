"""The agent's protocol core for QMF v2 (map messages).  No I/O.

:class:`AgentProtocolV2` holds what a v2 agent decides by the protocol alone: a
received message (application properties, decoded body, reply address, correlation
id) becomes a request event (:meth:`AgentProtocolV2.receive`), and every message the
agent sends is built here as an :class:`~._envelope.Outgoing`: answers to agent locate, object and
schema queries (split into parts of at most ``max_per_message`` items, every part but
the last marked ``partial``, as qpidd does), method answers and ``_exception``
answers, heartbeats, data indications and event indications.  Time is passed in
(``timestamp``, nanoseconds since the epoch).

Addressing, as qpidd and the classic consoles use it:

- requests come on ``qmf.default.direct`` under the agent's name
  (``vendor:product:instance``), agent locate on ``qmf.default.topic`` under
  ``console.request.agent_locate``;
- answers go to the request's reply address: ``EXCHANGE/KEY`` (what an AMQP 1.0
  peer sees, e.g. ``qmf.default.direct/<queue>``) or a bare key, a reply key on
  ``amq.direct`` (AMQP 0-9-1);
- heartbeats go to ``qmf.default.topic`` under
  ``agent.ind.heartbeat.<vendor>.<product>.<instance>``, data indications under
  ``agent.ind.data.<package>.<class>.<vendor>.<product>.<instance>`` and events under
  ``agent.ind.event.<package>.<event>.<severity>.<vendor>.<product>.<instance>`` (the
  severity by name, ``emerg`` .. ``debug``; every dot inside a name is written ``_``).

The classic console asks an agent for a schema with a QMF v1 ``S`` on
``qmf.default.direct`` under the agent's name; :meth:`AgentProtocolV2.receive` turns
it into :class:`V2SchemaRequestedInV1` and :meth:`AgentProtocolV2.answer_schema_v1`
answers with the v1 ``s``, carrying the agent's name in ``qmf.agent`` (the classic
console needs it to go on with what waited for the schema).

A query's ``_where`` predicate is not evaluated (as qpidd): every object the schema
or object id selects is returned.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from ..errors import DecodeError, EncodeError, UsageError
from ..frozen import frozen
from ..names import LOCATE_SUBJECT, V2_DIRECT_EXCHANGE, V2_TOPIC_EXCHANGE, keyify
from ..wire import (
    V2_BODY_CONTENT_TYPES,
    Access,
    ClassKey,
    ClassKind,
    QmfType,
    SchemaClass,
    SchemaMethod,
    SchemaRegistry,
    SchemaRequest,
    SchemaResponse,
    V2AgentHeartbeat,
    V2AgentLocateResponse,
    V2Data,
    V2DataIndication,
    V2Event,
    V2EventIndication,
    V2Exception,
    V2MethodRequest,
    V2MethodResponse,
    V2ObjectId,
    V2QueryRequest,
    V2QueryResponse,
    V2SchemaId,
    decode,
    decode_v2,
    decode_v2_body,
    encode,
    encode_v2,
)
from ._agent import reply_target, validate_arguments
from ._console_v2 import _text_or_none as _text
from ._envelope import Delivery, Outgoing

__all__ = [
    "LOCATE_SUBJECT",
    "SEVERITY_NAMES",
    "V2_DIRECT_EXCHANGE",
    "V2_TOPIC_EXCHANGE",
    "AgentProtocolV2",
    "V2AgentEvent",
    "V2LocateRequested",
    "V2MethodRequested",
    "V2ObjectQueryRequested",
    "V2RequestDropped",
    "V2RequestRejected",
    "V2SchemaQueryRequested",
    "V2SchemaRequestedInV1",
    "check_arguments",
    "keyify",
    "object_name",
    "v2_schema_id",
    "v2_schema_map",
]

#: severity names in event subjects, by severity (0 emerg .. 7 debug)
SEVERITY_NAMES: Final = ("emerg", "alert", "crit", "error", "warn", "note", "info", "debug")
#: ``error_code`` of the ``_exception`` answering a malformed request
_MALFORMED_CODE: Final = 4
_QMF_CONTENT_TYPE: Final = "x-application/qmf"

_V2_TYPES: Final = {
    QmfType.BOOL: "TYPE_BOOL", QmfType.SSTR: "TYPE_STRING", QmfType.LSTR: "TYPE_STRING",
    QmfType.FLOAT: "TYPE_FLOAT", QmfType.DOUBLE: "TYPE_FLOAT", QmfType.UUID: "TYPE_UUID",
    QmfType.MAP: "TYPE_MAP", QmfType.OBJECT: "TYPE_MAP", QmfType.REF: "TYPE_MAP",
    QmfType.LIST: "TYPE_LIST", QmfType.ARRAY: "TYPE_LIST",
}
_ACCESS: Final = {Access.RO: "RO", Access.RC: "RC", Access.RW: "RW"}


def v2_schema_id(schema: SchemaClass) -> V2SchemaId:
    """The v2 schema id of ``schema``: package, class, ``_data``/``_event`` and the
    v1 schema hash as a uuid (so a console can ask for the schema by it)."""
    key = schema.class_key
    return V2SchemaId(key.package, key.name,
                      "_event" if schema.kind == ClassKind.EVENT else "_data",
                      uuid.UUID(bytes=key.hash))


def _element_map(name: str, qtype: QmfType, *, access: Access | None = None,
                 direction: str | None = None, unit: str | None = None,
                 desc: str | None = None, index: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {"_name": name, "_type": _V2_TYPES.get(qtype, "TYPE_INT")}
    if access is not None:
        out["_access"] = _ACCESS.get(access, "RO")
    if unit:
        out["_unit"] = unit
    if direction is not None:
        out["_dir"] = direction
    if desc:
        out["_desc"] = desc
    if index:
        out["_index"] = True
    if qtype == QmfType.REF:
        out["_subtype"] = "reference"
    return out


def v2_schema_map(schema: SchemaClass) -> dict[str, Any]:
    """The v2 schema map of ``schema``, as QMF v2 agents send it: ``_schema_id``,
    ``_properties`` (an object class's properties then statistics, or an event
    class's arguments) and ``_methods`` (each ``_name`` and ``_arguments``, with
    ``_dir``); an event class also has ``_default_severity`` (6)."""
    props: list[dict[str, Any]] = []
    for p in schema.properties:
        props.append(_element_map(p.name, p.type, access=p.access, unit=p.unit,
                                  desc=p.desc, index=p.index))
    for s in schema.statistics:
        props.append(_element_map(s.name, s.type, unit=s.unit, desc=s.desc))
    for a in schema.arguments:
        props.append(_element_map(a.name, a.type, unit=a.unit, desc=a.desc))
    methods = [{"_name": m.name, **({"_desc": m.desc} if m.desc else {}),
                "_arguments": [_element_map(a.name, a.type, direction=a.direction or "I",
                                            unit=a.unit, desc=a.desc) for a in m.arguments]}
               for m in schema.methods]
    out: dict[str, Any] = {"_schema_id": v2_schema_id(schema).to_map(),
                           "_properties": props, "_methods": methods}
    if schema.kind == ClassKind.EVENT:
        out["_default_severity"] = 6
    return out


# ---------------------------------------------------------------------- values


@frozen(slots=True)
class V2LocateRequested:
    """An agent locate request: answer with :meth:`AgentProtocolV2.answer_locate`."""

    reply_to: str
    correlation_id: str | None


@frozen(slots=True)
class V2ObjectQueryRequested:
    """A ``_query_request`` for objects: those of ``object_id`` (its object name) or,
    without one, of the classes ``schema_id`` names (None: every object); answer
    with :meth:`AgentProtocolV2.answer_query`."""

    reply_to: str
    correlation_id: str | None
    schema_id: V2SchemaId | None
    object_id: V2ObjectId | None
    where: Any = None


@frozen(slots=True)
class V2SchemaQueryRequested:
    """A ``_query_request`` for ``SCHEMA_ID`` or ``SCHEMA``: answer with
    :meth:`AgentProtocolV2.answer_schema_query`."""

    reply_to: str
    correlation_id: str | None
    what: str
    schema_id: V2SchemaId | None


@frozen(slots=True)
class V2MethodRequested:
    """A ``_method_request``: call ``method`` of the object named ``object_id`` with
    ``arguments`` (as received); answer with :meth:`AgentProtocolV2.answer_method` or
    :meth:`AgentProtocolV2.exception`."""

    reply_to: str
    correlation_id: str | None
    object_id: V2ObjectId
    method: str
    arguments: Mapping[str, Any]
    user_id: str | None = None


@frozen(slots=True)
class V2SchemaRequestedInV1:
    """A schema requested in QMF v1: a v1 ``S`` sent to the agent's v2 address (as the
    classic console asks); answer with :meth:`AgentProtocolV2.answer_schema_v1`."""

    reply_to: str
    seq: int
    class_key: ClassKey


@frozen(slots=True)
class V2RequestRejected:
    """A request that cannot be served (malformed, or a query target the agent does
    not serve): ``answer`` is the ``_exception`` to send (None without a reply
    address)."""

    opcode: str | None
    error: str
    answer: Outgoing | None


@frozen(slots=True)
class V2RequestDropped:
    """A message the agent does not answer (an indication, or an opcode agents do
    not serve)."""

    opcode: str | None
    why: str


#: any event of the v2 agent core
V2AgentEvent = (V2LocateRequested | V2ObjectQueryRequested | V2SchemaQueryRequested
                | V2MethodRequested | V2SchemaRequestedInV1 | V2RequestRejected
                | V2RequestDropped)


def _cid(value: Any) -> str | None:
    """A received correlation id as text (v2 correlation ids are strings)."""
    if value is None:
        return None
    text = _text(value)
    return text if text is not None else str(value)


# ---------------------------------------------------------------------- the core


class AgentProtocolV2:
    """The QMF v2 protocol decisions of one agent.

    ``name`` is ``vendor:product:instance`` (the instance may hold colons);
    ``registry`` holds the served schemas; ``interval`` (seconds) and ``epoch`` go
    in every heartbeat and locate answer, with ``schema_updated`` (ns; set it when
    the served schemas change).  ``max_per_message`` bounds the items of one query
    answer part and of one data indication (qpidd: 100).
    """

    def __init__(self, name: str, registry: SchemaRegistry, *, interval: float = 10.0,
                 epoch: int = 1, max_per_message: int = 100) -> None:
        """Raises: UsageError: a name that is not ``vendor:product:instance`` or a
        ``max_per_message`` below 1."""
        parts = self.check_name(name).split(":", 2)
        if max_per_message < 1:
            raise UsageError("max_per_message must be at least 1")
        self.name = name
        self.vendor, self.product, self.instance = parts
        self.registry = registry
        self.interval = interval
        self.epoch = epoch
        self.max_per_message = max_per_message
        #: when the served schemas last changed (ns since the epoch; 0: never)
        self.schema_updated = 0
        #: messages received so far
        self.messages_in = 0
        self._suffix = ".".join(keyify(p) for p in parts)

    # ------------------------------------------------------------------ names

    @staticmethod
    def check_name(name: str) -> str:
        """``name`` when it is a QMF v2 agent name, ``vendor:product:instance``.

        Raises:
            UsageError: it is not.
        """
        parts = name.split(":", 2) if isinstance(name, str) else []
        if len(parts) != 3 or not all(parts):
            raise UsageError(f"a QMF v2 agent name is vendor:product:instance, not {name!r}")
        return name

    @property
    def heartbeat_subject(self) -> str:
        """``agent.ind.heartbeat.<vendor>.<product>.<instance>``."""
        return f"agent.ind.heartbeat.{self._suffix}"

    def data_subject(self, key: ClassKey) -> str:
        """``agent.ind.data.<package>.<class>.<vendor>.<product>.<instance>``."""
        return f"agent.ind.data.{keyify(key.package)}.{keyify(key.name)}.{self._suffix}"

    def event_subject(self, key: ClassKey, severity: int) -> str:
        """``agent.ind.event.<package>.<event>.<severity>.<vendor>.<product>.<instance>``."""
        sev = SEVERITY_NAMES[severity] if 0 <= severity < len(SEVERITY_NAMES) else "info"
        return (f"agent.ind.event.{keyify(key.package)}.{keyify(key.name)}.{sev}."
                f"{self._suffix}")

    def object_id(self, object_name: str) -> V2ObjectId:
        """The v2 id of this agent's object ``object_name``."""
        return V2ObjectId(object_name, self.name, self.epoch)

    def values(self, timestamp: int) -> dict[str, Any]:
        """The agent's ``_values`` (heartbeats and locate answers)."""
        return {"_vendor": self.vendor, "_product": self.product,
                "_instance": self.instance, "_name": self.name, "_timestamp": timestamp,
                "_heartbeat_interval": max(1, round(self.interval)), "_epoch": self.epoch,
                "_schema_updated": self.schema_updated}

    # ------------------------------------------------------------------ receive

    def feed(self, delivery: Delivery, *, map_bytes: bool = True) -> list[V2AgentEvent]:
        """One delivery: :meth:`receive` of its headers, value or bytes, reply key,
        correlation id and user.  ``map_bytes``: whether the connection carries v2
        maps as bytes (AMQP 0-9-1); when not, bytes are never taken as a map."""
        return self.receive(delivery.headers, delivery.value, body=delivery.body,
                            content_type=delivery.content_type if map_bytes else None,
                            reply_to=delivery.reply_to,
                            correlation_id=delivery.correlation_id, user_id=delivery.user_id)

    def receive(self, headers: Mapping[str, Any] | None, value: Any, *, body: bytes = b"",
                content_type: str | None = None, reply_to: str | None = None,
                correlation_id: Any = None, user_id: str | None = None
                ) -> list[V2AgentEvent]:
        """The events of one received message; never raises on what a peer sent.

        ``value`` is the map or list body of a v2 message as the AMQP library decoded
        it (an AMQP 1.0 amqp-value); ``body`` bytes of ``content_type``
        ``amqp/map``/``amqp/list`` (AMQP 0-9-1) are decoded here; other ``body``
        bytes are taken as QMF v1 (only ``S`` is served).
        """
        self.messages_in += 1
        props: Mapping[str, Any] = headers if isinstance(headers, Mapping) else {}
        cid = _cid(correlation_id)
        opcode = _text(props.get("qmf.opcode"))
        if opcode is None:
            if value is None and body and content_type not in V2_BODY_CONTENT_TYPES:
                return self._receive_v1(body, reply_to)
            return [V2RequestDropped(None, "no qmf.opcode")]
        if opcode == "_agent_locate_request":
            # the classic console sends a list (a predicate, empty for everyone), the
            # project's a map: every agent answers (predicates are not evaluated)
            if reply_to is None:
                return [V2RequestDropped(opcode, "request without reply-to")]
            return [V2LocateRequested(reply_to, cid)]
        if opcode not in ("_query_request", "_method_request"):
            return [V2RequestDropped(opcode, "not a request an agent serves")]
        if reply_to is None:
            return [V2RequestDropped(opcode, "request without reply-to")]
        try:
            if value is None and content_type in V2_BODY_CONTENT_TYPES:
                value = decode_v2_body(content_type, body)
            msg = decode_v2(props, value, correlation_id=cid)
        except DecodeError as exc:
            return [self._rejected(opcode, reply_to, cid, str(exc))]
        except (TypeError, ValueError, KeyError, AttributeError) as exc:
            return [self._rejected(opcode, reply_to, cid,
                                   f"malformed QMF v2 {opcode}: {type(exc).__name__}: {exc}")]
        if isinstance(msg, V2MethodRequest):
            return [V2MethodRequested(reply_to, cid, msg.object_id, msg.method_name,
                                      msg.arguments, user_id)]
        assert isinstance(msg, V2QueryRequest)
        what = msg.what.upper()
        if what == "OBJECT":
            return [V2ObjectQueryRequested(reply_to, cid, msg.schema_id, msg.object_id,
                                           msg.where)]
        if what in ("SCHEMA_ID", "SCHEMA"):
            return [V2SchemaQueryRequested(reply_to, cid, what, msg.schema_id)]
        return [self._rejected(opcode, reply_to, cid,
                               f"query target {msg.what!r} is not served (OBJECT, "
                               "SCHEMA_ID and SCHEMA are)")]

    def _receive_v1(self, body: bytes, reply_to: str | None) -> list[V2AgentEvent]:
        try:
            messages = decode(body, self.registry)
        except DecodeError as exc:
            return [V2RequestDropped(None, f"malformed QMF v1 body: {exc}")]
        out: list[V2AgentEvent] = []
        for msg in messages:
            if isinstance(msg, SchemaRequest) and reply_to is not None:
                out.append(V2SchemaRequestedInV1(reply_to, msg.seq, msg.class_key))
            else:
                out.append(V2RequestDropped(msg.OPCODE, "QMF v1 message on the v2 address"))
        return out

    def _rejected(self, opcode: str, reply_to: str, cid: str | None,
                  text: str) -> V2RequestRejected:
        return V2RequestRejected(opcode, text,
                                 self.exception(reply_to, cid, _MALFORMED_CODE, text))

    # ------------------------------------------------------------------ answers

    def _to(self, reply_to: str, msg: Any) -> Outgoing:
        headers, body, cid = encode_v2(msg)
        exchange, key = reply_target(reply_to)
        return Outgoing(exchange, key, body, headers=headers, correlation=cid)

    def answer_locate(self, reply_to: str, correlation_id: str | None,
                      timestamp: int) -> Outgoing:
        """The ``_agent_locate_response``."""
        return self._to(reply_to, V2AgentLocateResponse(self.name, self.values(timestamp),
                                                        correlation_id))

    def answer_query(self, reply_to: str, correlation_id: str | None,
                     items: Sequence[V2Data | Mapping[str, Any]],
                     content: str = "_data", *, agent: str | None = None) -> list[Outgoing]:
        """The ``_query_response`` parts carrying ``items`` (at least one part, empty
        when there are none).  ``agent`` is the name the answers carry (default the
        agent's; an alias the request was addressed by, as qpidd answers ``broker``)."""
        per = self.max_per_message
        parts = [list(items[i:i + per]) for i in range(0, len(items), per)] or [[]]
        return [self._to(reply_to, V2QueryResponse(part, i < len(parts) - 1,
                                                   agent or self.name, content,
                                                   correlation_id))
                for i, part in enumerate(parts)]

    def answer_schema_query(self, event: V2SchemaQueryRequested, *,
                            agent: str | None = None) -> list[Outgoing]:
        """The answer to a ``SCHEMA_ID`` query (every served schema's id, or those of
        the class ``schema_id`` names) or a ``SCHEMA`` query (the schemas
        ``schema_id`` selects; an ``_exception`` without a schema id)."""
        schemas = self.select_schemas(event.schema_id)
        if event.what == "SCHEMA_ID":
            ids = [v2_schema_id(s).to_map() for s in schemas]
            return self.answer_query(event.reply_to, event.correlation_id, ids, "_schema_id",
                                     agent=agent)
        if event.schema_id is None:
            return [self.exception(event.reply_to, event.correlation_id, _MALFORMED_CODE,
                                   "a SCHEMA query needs a _schema_id", agent=agent)]
        return self.answer_query(event.reply_to, event.correlation_id,
                                 [v2_schema_map(s) for s in schemas], "_schema", agent=agent)

    def select_schemas(self, schema_id: V2SchemaId | None) -> list[SchemaClass]:
        """The served schemas ``schema_id`` names (its package, class and hash, each
        when given; all of them for None)."""
        out = list(self.registry)
        if schema_id is None:
            return out
        digest = schema_id.hash
        raw = (digest.bytes if isinstance(digest, uuid.UUID)
               else bytes(digest) if digest is not None else None)
        return [s for s in out
                if s.class_key.name == schema_id.class_name
                and (not schema_id.package or s.class_key.package == schema_id.package)
                and (raw is None or s.class_key.hash == raw)]

    def answer_method(self, reply_to: str, correlation_id: str | None,
                      arguments: Mapping[str, Any], *, agent: str | None = None) -> Outgoing:
        """The ``_method_response`` with the output ``arguments`` (``agent``: as for
        :meth:`answer_query`)."""
        return self._to(reply_to, V2MethodResponse(dict(arguments), None, agent or self.name,
                                                   correlation_id))

    def exception(self, reply_to: str, correlation_id: str | None, code: int,
                  text: str, *, agent: str | None = None) -> Outgoing:
        """The ``_exception`` with ``error_code`` and ``error_text`` (``agent``: as
        for :meth:`answer_query`)."""
        return self._to(reply_to, V2Exception({"error_code": code, "error_text": text},
                                              agent or self.name, correlation_id))

    def answer_schema_v1(self, event: V2SchemaRequestedInV1) -> Outgoing | None:
        """The QMF v1 ``s`` answering a v1 ``S`` (None for a class not served),
        with ``qmf.agent`` set to the agent's name."""
        schema = self.registry.get(event.class_key)
        if schema is None:
            return None
        exchange, key = reply_target(event.reply_to)
        body = encode(SchemaResponse(event.seq, schema), self.registry)
        return Outgoing(exchange, key, body, headers={"qmf.agent": self.name})

    # ------------------------------------------------------------------ indications

    def heartbeat(self, timestamp: int) -> Outgoing:
        """The ``_agent_heartbeat_indication`` of time ``timestamp``."""
        headers, body, _ = encode_v2(V2AgentHeartbeat(self.name, self.values(timestamp)))
        return Outgoing(V2_TOPIC_EXCHANGE, self.heartbeat_subject, body, headers=headers)

    def data_indication(self, key: ClassKey, items: Sequence[V2Data]) -> list[Outgoing]:
        """The ``_data_indication`` messages of changed objects of class ``key`` (at
        most ``max_per_message`` a message; none for no items)."""
        per = self.max_per_message
        subject = self.data_subject(key)
        out = []
        for i in range(0, len(items), per):
            headers, body, _ = encode_v2(V2DataIndication(list(items[i:i + per]), self.name))
            out.append(Outgoing(V2_TOPIC_EXCHANGE, subject, body, headers=headers))
        return out

    def event(self, schema: SchemaClass, timestamp: int, severity: int,
              arguments: Mapping[str, Any]) -> Outgoing:
        """The ``_data_indication`` (content ``_event``) of one event of ``schema``.

        Raises:
            EncodeError: ``severity`` is not 0 .. 7.
        """
        if not 0 <= severity <= 7:
            raise EncodeError(f"severity {severity} is not 0 (emerg) .. 7 (debug)")
        event = V2Event(v2_schema_id(schema), dict(arguments), timestamp, severity)
        headers, body, _ = encode_v2(V2EventIndication([event], self.name))
        return Outgoing(V2_TOPIC_EXCHANGE, self.event_subject(schema.class_key, severity),
                        body, headers=headers)

    def data(self, schema: SchemaClass, object_name: str, values: Mapping[str, Any], *,
             update_ts: int, create_ts: int, delete_ts: int = 0) -> V2Data:
        """One object as v2 sends it."""
        return V2Data(values, self.object_id(object_name), v2_schema_id(schema),
                      update_ts, create_ts, delete_ts)


_INT_RANGES: Final = {
    QmfType.UINT8: (0, (1 << 8) - 1), QmfType.UINT16: (0, (1 << 16) - 1),
    QmfType.UINT32: (0, (1 << 32) - 1), QmfType.UINT64: (0, (1 << 64) - 1),
    QmfType.INT8: (-(1 << 7), (1 << 7) - 1), QmfType.INT16: (-(1 << 15), (1 << 15) - 1),
    QmfType.INT32: (-(1 << 31), (1 << 31) - 1), QmfType.INT64: (-(1 << 63), (1 << 63) - 1),
    QmfType.ABSTIME: (-(1 << 63), (1 << 63) - 1), QmfType.DELTATIME: (0, (1 << 64) - 1),
}
_PY_TYPES: Final[dict[QmfType, tuple[type, ...]]] = {
    QmfType.SSTR: (str,), QmfType.LSTR: (str,), QmfType.BOOL: (bool,),
    QmfType.FLOAT: (float, int), QmfType.DOUBLE: (float, int), QmfType.UUID: (uuid.UUID,),
    QmfType.MAP: (Mapping,), QmfType.LIST: (list, tuple), QmfType.ARRAY: (list, tuple),
}


def check_arguments(method: SchemaMethod, arguments: Mapping[str, Any]) -> str | None:
    """What is wrong with the input ``arguments`` of a v2 call of ``method`` (None:
    nothing): unknown or missing names, or a value that does not fit its argument's
    type (an integer out of its range, a string that is not text, ...).  Strings must
    be decoded already (see :func:`texts_from_schema`)."""
    names = {a.name for a in method.in_args}
    unknown = sorted(set(arguments) - names)
    if unknown:
        return f"unknown argument(s) {', '.join(unknown)}"
    missing = sorted(names - set(arguments))
    if missing:
        return f"missing argument(s) {', '.join(missing)}"
    for arg in method.in_args:
        value = arguments[arg.name]
        if value is None:
            continue
        bounds = _INT_RANGES.get(arg.type)
        if bounds is not None:
            if isinstance(value, bool) or not isinstance(value, int):
                return f"argument {arg.name!r} must be an integer, not {type(value).__name__}"
            if not bounds[0] <= value <= bounds[1]:
                return (f"argument {arg.name!r}={value} does not fit its type "
                        f"{arg.type.name.lower()}")
            continue
        types = _PY_TYPES.get(arg.type)
        if types is not None and (not isinstance(value, types)
                                  or (bool not in types and isinstance(value, bool))):
            return (f"argument {arg.name!r} must be {arg.type.name.lower()}, "
                    f"not {type(value).__name__}")
    return validate_arguments(method, arguments)


def object_name(key: ClassKey, index_values: Iterable[Any], fallback: str) -> str:
    """``package:class:key`` as qpidd names objects: the key is the index properties'
    values joined by ``,`` (``fallback`` when the class has none)."""
    parts = [v.decode("utf-8", "replace") if isinstance(v, (bytes, bytearray)) else str(v)
             for v in index_values]
    return f"{key.package}:{key.name}:{','.join(parts) if parts else fallback}"

