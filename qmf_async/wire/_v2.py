"""QMF v2 (map message) values and messages, sans-I/O.

A v2 message is a set of application properties (``qmf.opcode``, ``method``,
``qmf.agent``, ``qmf.content``, ``partial``), a correlation id and a body that is a map
or a list.  Over AMQP 1.0 the body is an amqp-value, which the AMQP library decodes;
over 0-9-1 it is ``amqp/map`` / ``amqp/list`` bytes (the AMQP 0-10 encoding), which the
transport hands up as they came and the protocol core decodes
(:func:`decode_v2_body`); :func:`decode_v2` turns the three into one message value and
:func:`encode_v2` goes back.

qpidd sends every text of its maps (names, ids, string properties) as AMQP *binary*
over AMQP 1.0.  The protocol keys this module reads (object names, class and package
names, agent names, error texts, method names) are decoded as UTF-8 here; the values of
``_values`` and ``_arguments`` are handed on exactly as received, since only a schema
tells a string from real binary.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Mapping
from typing import Any, ClassVar, Final, TypeAlias

import attrs

from ..errors import DecodeError, EncodeError
from ..frozen import frozen
from ._amqp010 import decode_list, decode_map, encode_list, encode_map

__all__ = [
    "V2ObjectId",
    "V2SchemaId",
    "V2Data",
    "V2Event",
    "V2QueryRequest",
    "V2QueryResponse",
    "V2MethodRequest",
    "V2MethodResponse",
    "V2Exception",
    "V2AgentLocateRequest",
    "V2AgentLocateResponse",
    "V2AgentHeartbeat",
    "V2DataIndication",
    "V2EventIndication",
    "V2UnknownMessage",
    "V2Message",
    "APP_ID",
    "decode_v2",
    "encode_v2",
    "decode_v2_body",
    "V2_BODY_CONTENT_TYPES",
    "encode_v2_body",
]

#: value of ``x-amqp-0-10.app-id`` that qpidd requires on every v2 message
APP_ID: Final = "qmf2"
_APP_ID_KEY: Final = "x-amqp-0-10.app-id"


# ----------------------------------------------------------------------- helpers

def _text(value: Any, where: str) -> str:
    """A protocol string: ``str``, or UTF-8 ``bytes`` (qpidd's binary strings)."""
    if isinstance(value, str):
        return str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DecodeError(f"QMF v2 {where} is not UTF-8 text: {exc.reason}") from exc
    raise DecodeError(f"QMF v2 {where} must be a string, not {type(value).__name__}")


def _opt_text(value: Any, where: str) -> str | None:
    return None if value is None else _text(value, where)


def _int(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise DecodeError(f"QMF v2 {where} must be an integer, not {type(value).__name__}")
    return int(value)


def _opt_int(value: Any, where: str) -> int | None:
    return None if value is None else _int(value, where)


#: the key types of a map whose keys are all text
_STR_KEYS: Final = {str}


def _map(value: Any, where: str) -> dict[str, Any]:
    """A map with text keys (bytes keys decoded): a decoded ``dict`` whose keys are all
    ``str`` is taken as it is (decoded bodies are fresh), anything else is copied."""
    if type(value) is dict and (not value or set(map(type, value)) == _STR_KEYS):
        return value  # a decoded map (the common case; no ABC check first)
    if not isinstance(value, Mapping):
        raise DecodeError(f"QMF v2 {where} must be a map, not {type(value).__name__}")
    if isinstance(value, dict) and (not value or set(map(type, value)) == _STR_KEYS):
        return value
    out: dict[str, Any] = {}
    for key, item in value.items():
        out[key if type(key) is str else _text(key, f"{where} key")] = item
    return out


def _opt_map(value: Any, where: str) -> dict[str, Any] | None:
    return None if value is None else _map(value, where)


def _list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, (list, tuple)):
        raise DecodeError(f"QMF v2 {where} must be a list, not {type(value).__name__}")
    return list(value)


def _required(body: Mapping[str, Any], key: str, where: str) -> Any:
    if key not in body:
        raise DecodeError(f"QMF v2 {where} has no {key!r}")
    return body[key]


#: the wire types of a protocol text
_TEXTS: Final = frozenset((bytes, str))
#: the wire types of a schema hash (or none)
_HASHES: Final = frozenset((uuid.UUID, bytes, type(None)))
#: most ids remembered (each kind); then they are built again
_MAX_IDS: Final = 16384
#: object ids and schema ids already built, by their wire parts (immutable, shared)
_OIDS: dict[tuple[Any, ...], V2ObjectId] = {}
_SIDS: dict[tuple[Any, ...], V2SchemaId] = {}


def _remember(memo: dict[tuple[Any, ...], Any], key: tuple[Any, ...], made: Any) -> None:
    if len(memo) >= _MAX_IDS:
        memo.clear()
    memo[key] = made


def _put(out: dict[str, Any], key: str, value: Any) -> None:
    if value is not None:
        out[key] = value


# ----------------------------------------------------------------------- ids and data

@frozen(slots=True)
class V2ObjectId:
    """A v2 object id: ``_object_name`` (qpidd: ``package:class:key``, or a bare key
    for a few objects such as ``memory``'s ``amqp-broker``), ``_agent_name`` and
    ``_agent_epoch`` (each absent on some of qpidd's ids)."""

    object_name: str
    agent_name: str | None = None
    agent_epoch: int | None = None

    @property
    def package(self) -> str | None:
        """The package part of ``package:class:key`` (None for a bare name)."""
        parts = self.object_name.split(":", 2)
        return parts[0] if len(parts) == 3 else None

    @property
    def class_name(self) -> str | None:
        """The class part of ``package:class:key`` (None for a bare name)."""
        parts = self.object_name.split(":", 2)
        return parts[1] if len(parts) == 3 else None

    @property
    def key(self) -> str:
        """The key part of ``package:class:key`` (it may hold colons), or the whole
        name when it is bare."""
        parts = self.object_name.split(":", 2)
        return parts[2] if len(parts) == 3 else self.object_name

    def to_map(self) -> dict[str, Any]:
        """The wire map (absent parts left out)."""
        out: dict[str, Any] = {"_object_name": self.object_name}
        _put(out, "_agent_name", self.agent_name)
        _put(out, "_agent_epoch", self.agent_epoch)
        return out

    @classmethod
    def from_map(cls, value: Any, where: str = "_object_id") -> V2ObjectId:
        """Read a wire map.

        Raises:
            DecodeError: not a map, no ``_object_name``, or a part of the wrong type.
        """
        if type(value) is dict and len(value) <= 3:
            # the same id comes with every update of its object: built once
            epoch = value.get("_agent_epoch")
            name = value.get("_object_name")
            if (epoch is None or type(epoch) is int) and type(name) in _TEXTS:
                key = (name, value.get("_agent_name"), epoch)
                known = _OIDS.get(key)
                if known is not None and len(value) == 1 + (key[1] is not None) \
                        + (epoch is not None):
                    return known
                made = cls._read(value, where)
                _remember(_OIDS, key, made)
                return made
        return cls._read(value, where)

    @classmethod
    def _read(cls, value: Any, where: str) -> V2ObjectId:
        m = _map(value, where)
        return cls(
            _text(_required(m, "_object_name", where), f"{where}._object_name"),
            _opt_text(m.get("_agent_name"), f"{where}._agent_name"),
            _opt_int(m.get("_agent_epoch"), f"{where}._agent_epoch"))


@frozen(slots=True, cache_hash=True)
class V2SchemaId:
    """A v2 schema id: package (``""`` when absent: any package in a query), class,
    ``type`` (``_data`` or ``_event``; None when absent, as in qpidd's own queries) and
    the schema hash (qpidd sends a uuid; None when absent)."""

    package: str
    class_name: str
    type: str | None = None
    hash: bytes | uuid.UUID | None = None

    def to_map(self) -> dict[str, Any]:
        """The wire map (an empty package, a None type or hash left out)."""
        out: dict[str, Any] = {"_class_name": self.class_name}
        if self.package:
            out["_package_name"] = self.package
        _put(out, "_type", self.type)
        _put(out, "_hash", self.hash)
        return out

    @classmethod
    def from_map(cls, value: Any, where: str = "_schema_id") -> V2SchemaId:
        """Read a wire map (a missing package is ``""``).

        Raises:
            DecodeError: not a map, no ``_class_name``, or a part of the wrong type.
        """
        if type(value) is dict and len(value) <= 4:
            # every object of a class comes with the same schema id: built once
            package = value.get("_package_name")
            kind = value.get("_type")
            digest: Any = value.get("_hash")
            digest_type = type(digest)
            if type(value.get("_class_name")) in _TEXTS and digest_type in _HASHES:
                # a uuid by its int (uuid.UUID's hash and == are Python code)
                key = (package, value.get("_class_name"), kind,
                       digest.int if digest_type is uuid.UUID else digest)
                known = _SIDS.get(key)
                if known is not None and len(value) == 2 + (package is not None) \
                        + (kind is not None) - (digest is None):
                    return known
                made = cls._read(value, where)
                _remember(_SIDS, key, made)
                return made
        return cls._read(value, where)

    @classmethod
    def _read(cls, value: Any, where: str) -> V2SchemaId:
        m = _map(value, where)
        digest = m.get("_hash")
        if digest is not None and not isinstance(digest, (bytes, uuid.UUID)):
            raise DecodeError(f"QMF v2 {where}._hash must be a uuid or binary, "
                              f"not {type(digest).__name__}")
        return cls(
            _opt_text(m.get("_package_name"), f"{where}._package_name") or "",
            _text(_required(m, "_class_name", where), f"{where}._class_name"),
            _opt_text(m.get("_type"), f"{where}._type"),
            digest)


@frozen(slots=True)
class V2Data:
    """One object as v2 sends it: its schema and object ids, ``values`` (qpidd puts
    properties and statistics together here, as received) and the nanosecond
    timestamps (``delete_ts`` is 0 while the object lives)."""

    values: Mapping[str, Any]
    object_id: V2ObjectId | None = None
    schema_id: V2SchemaId | None = None
    update_ts: int | None = None
    create_ts: int | None = None
    delete_ts: int | None = None

    def to_map(self) -> dict[str, Any]:
        """The wire map."""
        out: dict[str, Any] = {"_values": dict(self.values)}
        if self.object_id is not None:
            out["_object_id"] = self.object_id.to_map()
        if self.schema_id is not None:
            out["_schema_id"] = self.schema_id.to_map()
        _put(out, "_update_ts", self.update_ts)
        _put(out, "_create_ts", self.create_ts)
        _put(out, "_delete_ts", self.delete_ts)
        return out

    @classmethod
    def from_map(cls, value: Any, where: str = "data") -> V2Data:
        """Read a wire map.

        Raises:
            DecodeError: not a map, no ``_values`` map, or a part of the wrong type.
        """
        if type(value) is dict and len(value) == 6:
            # qpidd's objects: every key, timestamps as integers
            values = value.get("_values")
            oid = value.get("_object_id")
            sid = value.get("_schema_id")
            uts = value.get("_update_ts")
            cts = value.get("_create_ts")
            dts = value.get("_delete_ts")
            if type(values) is dict and type(uts) is int and type(cts) is int \
                    and type(dts) is int and oid is not None and sid is not None:
                if where == "data":  # the names an error would give, not made each time
                    return cls(_map(values, "data._values"),
                               V2ObjectId.from_map(oid, "data._object_id"),
                               V2SchemaId.from_map(sid, "data._schema_id"), uts, cts, dts)
                return cls(_map(values, f"{where}._values"),
                           V2ObjectId.from_map(oid, f"{where}._object_id"),
                           V2SchemaId.from_map(sid, f"{where}._schema_id"), uts, cts, dts)
        m = _map(value, where)
        oid = m.get("_object_id")
        sid = m.get("_schema_id")
        return cls(
            _map(_required(m, "_values", where), f"{where}._values"),
            None if oid is None else V2ObjectId.from_map(oid, f"{where}._object_id"),
            None if sid is None else V2SchemaId.from_map(sid, f"{where}._schema_id"),
            _opt_int(m.get("_update_ts"), f"{where}._update_ts"),
            _opt_int(m.get("_create_ts"), f"{where}._create_ts"),
            _opt_int(m.get("_delete_ts"), f"{where}._delete_ts"))


@frozen(slots=True)
class V2Event:
    """One event: its schema id (type ``_event``), ``values`` (the arguments, as
    received), ``timestamp`` (ns since the epoch) and ``severity`` (0 emerg .. 7
    debug)."""

    schema_id: V2SchemaId
    values: Mapping[str, Any]
    timestamp: int | None = None
    severity: int | None = None

    def to_map(self) -> dict[str, Any]:
        """The wire map."""
        out: dict[str, Any] = {"_schema_id": self.schema_id.to_map(),
                               "_values": dict(self.values)}
        _put(out, "_timestamp", self.timestamp)
        _put(out, "_severity", self.severity)
        return out

    @classmethod
    def from_map(cls, value: Any, where: str = "event") -> V2Event:
        """Read a wire map.

        Raises:
            DecodeError: not a map, no ``_schema_id`` or ``_values``, or a wrong type.
        """
        m = _map(value, where)
        return cls(
            V2SchemaId.from_map(_required(m, "_schema_id", where), f"{where}._schema_id"),
            _map(_required(m, "_values", where), f"{where}._values"),
            _opt_int(m.get("_timestamp"), f"{where}._timestamp"),
            _opt_int(m.get("_severity"), f"{where}._severity"))


# ----------------------------------------------------------------------- messages

@frozen(slots=True)
class V2QueryRequest:
    """``_query_request``: ``what`` (``OBJECT``, ``SCHEMA_ID``, ...), an optional
    ``where`` predicate (qpidd ignores it), and ``schema_id`` or ``object_id`` to narrow
    it (qpidd reads only ``_class_name``/``_package_name`` of the schema id)."""

    OPCODE: ClassVar[str] = "_query_request"
    what: str = "OBJECT"
    where: Any = None
    schema_id: V2SchemaId | None = None
    object_id: V2ObjectId | None = None
    correlation_id: Any = None


@frozen(slots=True)
class V2QueryResponse:
    """``_query_response``: one part of an answer.  ``items`` are :class:`V2Data` when
    ``content`` is ``_data``, else the raw maps.  Every part but the last has
    ``partial``; qpidd puts at most 100 objects in a part."""

    OPCODE: ClassVar[str] = "_query_response"
    items: list[Any] = attrs.Factory(list)
    partial: bool = False
    agent: str | None = None
    content: str | None = "_data"
    correlation_id: Any = None


@frozen(slots=True)
class V2MethodRequest:
    """``_method_request``: call ``method_name`` on ``object_id`` with ``arguments``
    (``subtypes`` optionally maps argument names to QMF subtypes)."""

    OPCODE: ClassVar[str] = "_method_request"
    object_id: V2ObjectId
    method_name: str
    arguments: Mapping[str, Any] = attrs.Factory(dict)
    subtypes: Mapping[str, Any] | None = None
    correlation_id: Any = None


@frozen(slots=True)
class V2MethodResponse:
    """``_method_response``: the output ``arguments`` of a call that succeeded."""

    OPCODE: ClassVar[str] = "_method_response"
    arguments: Mapping[str, Any] = attrs.Factory(dict)
    subtypes: Mapping[str, Any] | None = None
    agent: str | None = None
    correlation_id: Any = None


@frozen(slots=True)
class V2Exception:
    """``_exception``: a request failed; ``values`` as sent (qpidd: ``error_code``, an
    integer status, and ``error_text``)."""

    OPCODE: ClassVar[str] = "_exception"
    values: Mapping[str, Any] = attrs.Factory(dict)
    agent: str | None = None
    correlation_id: Any = None

    @property
    def error_code(self) -> int | None:
        """``values["error_code"]`` when it is an integer, else None."""
        code = self.values.get("error_code")
        return code if isinstance(code, int) and not isinstance(code, bool) else None

    @property
    def error_text(self) -> str:
        """``values["error_text"]`` as text ("" when absent)."""
        text = self.values.get("error_text")
        if isinstance(text, (bytes, bytearray)):
            return bytes(text).decode("utf-8", "replace")
        return "" if text is None else str(text)


@frozen(slots=True)
class V2AgentLocateRequest:
    """``_agent_locate_request``: who is there?  ``query`` is the body map (empty for
    everyone, or a query with a ``_where`` on the agents' values)."""

    OPCODE: ClassVar[str] = "_agent_locate_request"
    query: Mapping[str, Any] = attrs.Factory(dict)
    correlation_id: Any = None


class _AgentValues:
    """The well-known keys of an agent's ``_values`` (qpidd: ``_timestamp`` ns,
    ``_heartbeat_interval`` s, ``_epoch``, ``_vendor``, ``_product``, ``_instance``,
    ``_name``)."""

    __slots__ = ()
    values: Mapping[str, Any]

    def _int_value(self, key: str) -> int | None:
        v = self.values.get(key)
        return v if isinstance(v, int) and not isinstance(v, bool) else None

    def _text_value(self, key: str) -> str | None:
        v = self.values.get(key)
        if isinstance(v, (bytes, bytearray)):
            return bytes(v).decode("utf-8", "replace")
        return v if isinstance(v, str) else None

    @property
    def timestamp(self) -> int | None:
        """``_timestamp`` (ns since the epoch)."""
        return self._int_value("_timestamp")

    @property
    def heartbeat_interval(self) -> int | None:
        """``_heartbeat_interval`` (seconds)."""
        return self._int_value("_heartbeat_interval")

    @property
    def epoch(self) -> int | None:
        """``_epoch`` (the agent's boot sequence)."""
        return self._int_value("_epoch")

    @property
    def vendor(self) -> str | None:
        """``_vendor``."""
        return self._text_value("_vendor")

    @property
    def product(self) -> str | None:
        """``_product``."""
        return self._text_value("_product")

    @property
    def instance(self) -> str | None:
        """``_instance``."""
        return self._text_value("_instance")


@frozen(slots=True)
class V2AgentLocateResponse(_AgentValues):
    """``_agent_locate_response``: an agent's name and ``values``."""

    OPCODE: ClassVar[str] = "_agent_locate_response"
    agent: str
    values: Mapping[str, Any] = attrs.Factory(dict)
    correlation_id: Any = None


@frozen(slots=True)
class V2AgentHeartbeat(_AgentValues):
    """``_agent_heartbeat_indication``: an agent is alive (same ``values`` as the
    locate response)."""

    OPCODE: ClassVar[str] = "_agent_heartbeat_indication"
    agent: str
    values: Mapping[str, Any] = attrs.Factory(dict)
    correlation_id: Any = None


@frozen(slots=True)
class V2DataIndication:
    """``_data_indication`` with content ``_data``: objects published by an agent
    (qpidd: changed objects of one class each interval, at most 100 a message)."""

    OPCODE: ClassVar[str] = "_data_indication"
    items: list[V2Data] = attrs.Factory(list)
    agent: str | None = None
    correlation_id: Any = None


@frozen(slots=True)
class V2EventIndication:
    """``_data_indication`` with content ``_event``: events (qpidd: one a message)."""

    OPCODE: ClassVar[str] = "_data_indication"
    events: list[V2Event] = attrs.Factory(list)
    agent: str | None = None
    correlation_id: Any = None


@frozen(slots=True)
class V2UnknownMessage:
    """A message with an opcode (or data-indication content) this codec does not know;
    everything as received."""

    opcode: str
    app_properties: Mapping[str, Any]
    body: Any
    subject: str | None = None
    correlation_id: Any = None


V2Message: TypeAlias = (
    V2QueryRequest | V2QueryResponse | V2MethodRequest | V2MethodResponse | V2Exception
    | V2AgentLocateRequest | V2AgentLocateResponse | V2AgentHeartbeat | V2DataIndication
    | V2EventIndication | V2UnknownMessage
)


# ----------------------------------------------------------------------- decode

def decode_v2(app_properties: Mapping[str, Any], body: Any, *, subject: str | None = None,
              correlation_id: Any = None) -> V2Message:
    """One v2 message from its application properties and decoded body.

    Unknown opcodes give :class:`V2UnknownMessage`.

    Raises:
        DecodeError: no ``qmf.opcode``, or a known message with a missing key or a value
            of the wrong type (the message names the key).
    """
    if not isinstance(app_properties, Mapping):
        raise DecodeError("QMF v2 application properties must be a map")
    if "qmf.opcode" not in app_properties:
        raise DecodeError("QMF v2 message has no 'qmf.opcode' application property")
    opcode = _text(app_properties["qmf.opcode"], "qmf.opcode")
    cid = correlation_id
    decoder = _DECODERS.get(opcode)
    if decoder is None:
        return V2UnknownMessage(opcode, dict(app_properties), body, subject, cid)
    agent = _opt_text(app_properties.get("qmf.agent"), "qmf.agent")
    return decoder(app_properties, body, agent, cid, subject)


def _body_map(body: Any, opcode: str) -> dict[str, Any]:
    return _map(body, f"{opcode} body")


def _query_request(props: Mapping[str, Any], body: Any, agent: str | None, cid: Any,
                   subject: str | None) -> V2Message:
    m = _body_map(body, "_query_request")
    sid, oid = m.get("_schema_id"), m.get("_object_id")
    return V2QueryRequest(
        _text(_required(m, "_what", "_query_request"), "_query_request._what"),
        m.get("_where"),
        None if sid is None else V2SchemaId.from_map(sid, "_query_request._schema_id"),
        None if oid is None else V2ObjectId.from_map(oid, "_query_request._object_id"),
        cid)


def _query_response(props: Mapping[str, Any], body: Any, agent: str | None, cid: Any,
                    subject: str | None) -> V2Message:
    content = _opt_text(props.get("qmf.content"), "qmf.content")
    raw = _list(body, "_query_response body")
    items: list[Any]
    if content == "_data":
        items = [V2Data.from_map(item, f"_query_response item {i}")
                 for i, item in enumerate(raw)]
    else:
        items = raw
    return V2QueryResponse(items, "partial" in props, agent, content, cid)


def _method_request(props: Mapping[str, Any], body: Any, agent: str | None, cid: Any,
                    subject: str | None) -> V2Message:
    m = _body_map(body, "_method_request")
    args = m.get("_arguments")
    return V2MethodRequest(
        V2ObjectId.from_map(_required(m, "_object_id", "_method_request"),
                            "_method_request._object_id"),
        _text(_required(m, "_method_name", "_method_request"), "_method_request._method_name"),
        {} if args is None else _map(args, "_method_request._arguments"),
        _opt_map(m.get("_subtypes"), "_method_request._subtypes"),
        cid)


def _method_response(props: Mapping[str, Any], body: Any, agent: str | None, cid: Any,
                     subject: str | None) -> V2Message:
    m = _body_map(body, "_method_response")
    args = m.get("_arguments")
    return V2MethodResponse(
        {} if args is None else _map(args, "_method_response._arguments"),
        _opt_map(m.get("_subtypes"), "_method_response._subtypes"), agent, cid)


def _exception(props: Mapping[str, Any], body: Any, agent: str | None, cid: Any,
               subject: str | None) -> V2Message:
    m = _body_map(body, "_exception")
    return V2Exception(_map(_required(m, "_values", "_exception"), "_exception._values"),
                       agent, cid)


def _locate_request(props: Mapping[str, Any], body: Any, agent: str | None, cid: Any,
                    subject: str | None) -> V2Message:
    return V2AgentLocateRequest(
        {} if body is None else _body_map(body, "_agent_locate_request"), cid)


def _agent_values(opcode: str, body: Any, agent: str | None) -> tuple[str, dict[str, Any]]:
    m = _body_map(body, opcode)
    values = _map(_required(m, "_values", opcode), f"{opcode}._values")
    if agent is None:
        name = values.get("_name")
        if name is None:
            raise DecodeError(f"QMF v2 {opcode} has neither 'qmf.agent' nor '_values._name'")
        agent = _text(name, f"{opcode}._values._name")
    return agent, values


def _locate_response(props: Mapping[str, Any], body: Any, agent: str | None, cid: Any,
                     subject: str | None) -> V2Message:
    name, values = _agent_values("_agent_locate_response", body, agent)
    return V2AgentLocateResponse(name, values, cid)


def _heartbeat(props: Mapping[str, Any], body: Any, agent: str | None, cid: Any,
               subject: str | None) -> V2Message:
    name, values = _agent_values("_agent_heartbeat_indication", body, agent)
    return V2AgentHeartbeat(name, values, cid)


def _data_indication(props: Mapping[str, Any], body: Any, agent: str | None, cid: Any,
                     subject: str | None) -> V2Message:
    content = _opt_text(props.get("qmf.content"), "qmf.content")
    if content is None or content == "_data":
        raw = _list(body, "_data_indication body")
        from_map = V2Data.from_map
        try:  # no text per item; a failure is read again to say which item
            items = [from_map(item) for item in raw]
        except DecodeError:
            items = [from_map(item, f"_data_indication item {i}")
                     for i, item in enumerate(raw)]
        return V2DataIndication(items, agent, cid)
    if content == "_event":
        raw = _list(body, "_data_indication body")
        return V2EventIndication([V2Event.from_map(item, f"_data_indication event {i}")
                                  for i, item in enumerate(raw)], agent, cid)
    return V2UnknownMessage("_data_indication", dict(props), body, subject, cid)


_DECODERS: Final = {
    "_query_request": _query_request,
    "_query_response": _query_response,
    "_method_request": _method_request,
    "_method_response": _method_response,
    "_exception": _exception,
    "_agent_locate_request": _locate_request,
    "_agent_locate_response": _locate_response,
    "_agent_heartbeat_indication": _heartbeat,
    "_data_indication": _data_indication,
}


# ----------------------------------------------------------------------- encode

def _props(opcode: str, method: str, agent: str | None = None,
           content: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {_APP_ID_KEY: APP_ID, "qmf.opcode": opcode, "method": method}
    _put(out, "qmf.agent", agent)
    _put(out, "qmf.content", content)
    return out


def _cid(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise EncodeError(f"a QMF v2 correlation id must be a string, not {type(value).__name__}")


def encode_v2(msg: V2Message) -> tuple[dict[str, Any], Any, str | None]:
    """The application properties, body (a map or list of plain values) and
    correlation id of one v2 message.

    Raises:
        EncodeError: not a v2 message value, or a correlation id that is not a string.
    """
    if isinstance(msg, V2QueryRequest):
        body: dict[str, Any] = {"_what": msg.what}
        _put(body, "_where", msg.where)
        if msg.schema_id is not None:
            body["_schema_id"] = msg.schema_id.to_map()
        if msg.object_id is not None:
            body["_object_id"] = msg.object_id.to_map()
        return _props(msg.OPCODE, "request"), body, _cid(msg.correlation_id)
    if isinstance(msg, V2QueryResponse):
        props = _props(msg.OPCODE, "response", msg.agent, msg.content)
        if msg.partial:
            props["partial"] = ""
        items = [i.to_map() if isinstance(i, V2Data) else i for i in msg.items]
        return props, items, _cid(msg.correlation_id)
    if isinstance(msg, V2MethodRequest):
        body = {"_object_id": msg.object_id.to_map(), "_method_name": msg.method_name,
                "_arguments": dict(msg.arguments)}
        if msg.subtypes is not None:
            body["_subtypes"] = dict(msg.subtypes)
        return _props(msg.OPCODE, "request"), body, _cid(msg.correlation_id)
    if isinstance(msg, V2MethodResponse):
        body = {"_arguments": dict(msg.arguments)}
        if msg.subtypes is not None:
            body["_subtypes"] = dict(msg.subtypes)
        return _props(msg.OPCODE, "response", msg.agent), body, _cid(msg.correlation_id)
    if isinstance(msg, V2Exception):
        return (_props(msg.OPCODE, "indication", msg.agent), {"_values": dict(msg.values)},
                _cid(msg.correlation_id))
    if isinstance(msg, V2AgentLocateRequest):
        return _props(msg.OPCODE, "request"), dict(msg.query), _cid(msg.correlation_id)
    if isinstance(msg, (V2AgentLocateResponse, V2AgentHeartbeat)):
        return (_props(msg.OPCODE, "indication", msg.agent), {"_values": dict(msg.values)},
                _cid(msg.correlation_id))
    if isinstance(msg, V2DataIndication):
        return (_props(msg.OPCODE, "indication", msg.agent, "_data"),
                [d.to_map() for d in msg.items], _cid(msg.correlation_id))
    if isinstance(msg, V2EventIndication):
        return (_props(msg.OPCODE, "indication", msg.agent, "_event"),
                [e.to_map() for e in msg.events], _cid(msg.correlation_id))
    if isinstance(msg, V2UnknownMessage):
        props = dict(msg.app_properties)
        props.setdefault("qmf.opcode", msg.opcode)
        return props, msg.body, _cid(msg.correlation_id)
    raise EncodeError(f"not a QMF v2 message: {type(msg).__name__}")


# ----------------------------------------------------------------------- 0-9-1 carrier

#: content types of v2 bodies in the AMQP 0-10 encoding
MAP_CONTENT_TYPE: Final = "amqp/map"
LIST_CONTENT_TYPE: Final = "amqp/list"
#: the content types :func:`decode_v2_body` reads
V2_BODY_CONTENT_TYPES: Final = frozenset({MAP_CONTENT_TYPE, LIST_CONTENT_TYPE})


def decode_v2_body(content_type: str | None, raw: bytes) -> Any:
    """A v2 body carried as AMQP 0-10 bytes: ``amqp/map`` -> dict, ``amqp/list`` ->
    list (bounded like the v1 codec).

    Raises:
        DecodeError: another content type, or malformed, truncated or trailing bytes.
    """
    data = bytes(raw)
    try:
        if content_type == MAP_CONTENT_TYPE:
            value: Any
            value, pos = decode_map(data, 0, len(data))
        elif content_type == LIST_CONTENT_TYPE:
            value, pos = decode_list(data, 0, len(data))
        else:
            raise DecodeError(f"QMF v2 body has content type {content_type!r}, "
                              f"not {MAP_CONTENT_TYPE!r} or {LIST_CONTENT_TYPE!r}")
    except DecodeError:
        raise
    except (ValueError, IndexError, struct.error, OverflowError, RecursionError) as exc:
        raise DecodeError(f"malformed QMF v2 {content_type} body: {exc}") from exc
    if pos != len(data):
        raise DecodeError(f"QMF v2 {content_type} body has {len(data) - pos} bytes "
                          "after its value", pos)
    return value


def encode_v2_body(value: Any) -> tuple[str, bytes]:
    """``(content type, bytes)`` of a v2 body in the AMQP 0-10 encoding: a map as
    ``amqp/map``, a list as ``amqp/list``.

    Raises:
        EncodeError: neither a map nor a list, or an item with no AMQP 0-10 encoding.
    """
    out = bytearray()
    if isinstance(value, Mapping):
        encode_map(out, value)
        return MAP_CONTENT_TYPE, bytes(out)
    if isinstance(value, (list, tuple)):
        encode_list(out, value)
        return LIST_CONTENT_TYPE, bytes(out)
    raise EncodeError(f"a QMF v2 body must be a map or a list, not {type(value).__name__}")
