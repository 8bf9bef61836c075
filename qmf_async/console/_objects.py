"""What a console hands its users: object proxies (:class:`QmfObject`, a class per
schema) and the binding and checking of their method arguments.  The values beside
them (ids, changes, agents, method results, events) are in ``_values``, re-exported
here."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ..errors import ArgumentError, DecodeError, ObjectGoneError, UsageError
from ..wire import (
    ClassKey,
    ObjectId,
    QmfType,
    RawObjectRecord,
    RecordLayout,
    RecordReader,
    SchemaClass,
    SchemaMethod,
    plain_reader,
)
from ._links import BrokerLink, SessionLink
from ._values import BrokerObjectId, Change, Event, MethodResult, RemoteAgent, broker_object_id

if TYPE_CHECKING:
    from ..wire import ObjectRecord

_new = object.__new__
#: no element absent (shared)
_NO_NAMES: frozenset[str] = frozenset()
#: (properties received, statistics received) -> kind
_KINDS = {(True, True): "g", (True, False): "c", (False, True): "i", (False, False): ""}

__all__ = ["BrokerObjectId", "Change", "QmfObject", "MethodResult", "Event", "RemoteAgent",
           "convert_argument"]


#: what a record of each opcode carries
_OPCODE_CHANGES = {"c": Change.PROPERTIES, "i": Change.STATISTICS,
                   "g": Change.PROPERTIES | Change.STATISTICS, "": Change.NONE}


class QmfObject:
    """A proxy of a managed object: properties and statistics as attributes,
    schema methods as awaitable calls (``await queue.purge(request=0)``).

    A proxy is a snapshot; :meth:`update` refreshes it from its agent.  Proxies the
    session builds keep the record's wire bytes and decode a value when it is read
    (``qmf_async.wire._record``), so reading a malformed value raises
    :class:`~qmf_async.DecodeError`.
    """

    # _raw: the record's bytes in ``g`` layout (timestamps and object id first);
    # _kind: which parts were received ("c" properties, "i" statistics, "g" both);
    # _sofs: where the statistics start in _raw; _p/_s: values given decoded (else None);
    # _changed: what the update that produced this proxy carried (a Change);
    # _absent: the non-optional elements the agent left out (QMF v2), read as zeros
    __slots__ = (
        "__weakref__",
        "_absent",
        "_agent",
        "_broker",
        "_changed",
        "_kind",
        "_p",
        "_raw",
        "_reader",
        "_s",
        "_session",
        "_sofs",
    )
    #: the positions of the reference properties (set on each schema's proxy class)
    _refs: tuple[int, ...] = ()

    def __init__(self, session: SessionLink | None, broker: BrokerLink | None,
                 agent: RemoteAgent | None,
                 schema: SchemaClass, object_id: ObjectId, properties: tuple[Any, ...] | None,
                 statistics: tuple[Any, ...] | None, timestamps: tuple[int, int, int],
                 *, changed: Change | None = None) -> None:
        """A proxy of already decoded values (sessions build theirs from raw records).

        ``changed`` is what :meth:`get_changes` answers; by default the parts given
        (plus ``DELETED`` when the delete time is set).
        """
        reader = plain_reader(schema)
        self.__class__ = (session.proxy_classes if session is not None
                          else _UNBOUND).of(reader)
        self._session = session
        self._broker = broker
        self._agent = agent
        self._reader = reader
        self._raw = RecordLayout.header(*timestamps, object_id)
        self._kind = _KINDS[properties is not None, statistics is not None]
        self._sofs = RecordLayout.HEADER_SIZE
        self._p = tuple(properties) if properties is not None else None
        self._s = tuple(statistics) if statistics is not None else None
        self._absent = _NO_NAMES
        if changed is None:
            changed = _OPCODE_CHANGES[self._kind]
            if timestamps[2]:
                changed |= Change.DELETED
        self._changed = changed

    @classmethod
    def from_raw(cls, session: SessionLink | None, broker: BrokerLink | None,
                 agent: RemoteAgent | None, reader: RecordReader, raw: bytes, kind: str,
                 sofs: int, changed: Change | None = None,
                 absent: frozenset[str] = frozenset()) -> QmfObject:
        """A proxy of a received record's bytes (``raw`` in ``g`` layout, ``kind`` the
        parts it holds, ``sofs`` where its statistics start, ``absent`` the record's
        :attr:`~qmf_async.wire.RawObjectRecord.absent`), as sessions build them."""
        # changed: what the update carried (default: the parts in ``kind``, and
        # DELETED when the record's delete time is set)
        obj: QmfObject = _new((session.proxy_classes if session is not None
                               else _UNBOUND).of(reader))
        if changed is None:
            changed = _OPCODE_CHANGES[kind]
            if RecordLayout.is_deleted(raw):
                changed |= Change.DELETED
        obj._changed = changed
        obj._session = session
        obj._broker = broker
        obj._agent = agent
        obj._reader = reader
        obj._raw = raw
        obj._kind = kind
        obj._sofs = sofs
        obj._p = obj._s = None
        obj._absent = absent
        return obj

    @classmethod
    def from_record(cls, session: SessionLink | None, broker: BrokerLink | None,
                    agent: RemoteAgent | None, rec: RawObjectRecord | ObjectRecord) -> QmfObject:
        """A proxy of a received record (raw or decoded), as sessions build them."""
        if type(rec) is RawObjectRecord:
            return cls.from_raw(session, broker, agent, rec.codec, rec.raw,
                                rec.opcode, rec.sofs, None, rec.absent)
        return cls(session, broker, agent, rec.schema, rec.object_id, rec.properties,
                   rec.statistics, (rec.timestamp, rec.created, rec.deleted))

    # -- values
    def _props(self) -> tuple[Any, ...] | None:
        """Every property value (None: not received).  Raises DecodeError."""
        if self._p is not None:
            return self._p
        if self._kind == "i" or not self._kind:
            return None
        return self._reader.decode_props(self._raw)

    def _stats(self) -> tuple[Any, ...] | None:
        """Every statistic value (None: not received).  Raises DecodeError."""
        if self._s is not None:
            return self._s
        if self._kind == "c" or not self._kind:
            return None
        return self._reader.decode_stats(self._raw, self._sofs)

    def _prop(self, i: int) -> Any:
        # the caller checked that properties were received
        if self._p is not None:
            return self._p[i]
        return self._reader.prop(self._raw, i)

    def _stat(self, i: int) -> Any:
        if self._s is not None:
            return self._s[i]
        return self._reader.stat(self._raw, self._sofs, i)

    def __getattr__(self, name: str) -> Any:
        # Called when normal lookup fails: for elements whose value is missing (its
        # _Element raised AttributeError) and for names that match no element or
        # method (those are descriptors of the per-schema class, see _proxy_class).
        try:
            reader = object.__getattribute__(self, "_reader")
        except AttributeError:
            raise AttributeError(name) from None
        i = reader.props.get(name)
        if i is not None:
            if self._kind not in ("c", "g"):
                raise AttributeError(f"{name!r}: properties of this object were not received")
            value = self._prop(i)
            if value is None:
                raise AttributeError(f"optional property {name!r} is not present")
            return self._scoped(value) if i in self._refs else value
        i = reader.stats.get(name)
        if i is not None:
            if self._kind not in ("i", "g"):
                raise AttributeError(f"{name!r}: statistics of this object were not received")
            return self._stat(i)
        raise AttributeError(f"{reader.schema.class_key.name} object has no element or "
                             f"method {name!r}")

    def __dir__(self) -> list[str]:
        names = set(object.__dir__(self))
        reader = self._reader
        names.update(reader.props, reader.stats, reader.methods)
        return sorted(names)

    def get_properties(self) -> dict[str, Any]:
        """Properties by name (absent optional properties left out).

        Raises:
            DecodeError: a received value is malformed.
        """
        values = self._props()
        if values is None:
            return {}
        if self._refs and self._broker is not None:
            values = self._scoped_refs(values)
        if None in values:
            names = self._reader.pnames
            return {n: v for n, v in zip(names, values, strict=False) if v is not None}
        return dict(zip(self._reader.pnames, values, strict=False))

    def get_statistics(self) -> dict[str, Any]:
        """Statistics by name.

        Raises:
            DecodeError: a received value is malformed.
        """
        values = self._stats()
        if values is None:
            return {}
        return dict(zip(self._reader.snames, values, strict=False))

    def get(self, name: str, default: Any = None) -> Any:
        """A property or statistic by name, or ``default``.

        Raises:
            DecodeError: the value is malformed.
        """
        reader = self._reader
        i = reader.props.get(name)
        if i is not None and self._kind in ("c", "g"):
            v = self._prop(i)
            if v is None:
                return default
            return self._scoped(v) if i in self._refs else v
        i = reader.stats.get(name)
        if i is not None and self._kind in ("i", "g"):
            return self._stat(i)
        return default

    def values(self) -> dict[str, Any]:
        """Properties and statistics in one mapping (for selectors and tools).

        Raises:
            DecodeError: a received value is malformed.
        """
        out = self.get_properties()
        out.update(self.get_statistics())
        return out

    def _scoped(self, ref: Any) -> Any:
        """A reference value as an id of this object's broker (as is without one)."""
        broker = self._broker
        if broker is None or not isinstance(ref, ObjectId):
            return ref
        return broker_object_id(ref.raw, broker)

    def _scoped_refs(self, values: tuple[Any, ...]) -> tuple[Any, ...]:
        out = list(values)
        for i in self._refs:
            out[i] = self._scoped(out[i])
        return tuple(out)

    def get_object_id(self) -> ObjectId:
        """The object's id: a :class:`BrokerObjectId` (equal only to the same id of
        the same broker) for an object a session received, else a plain ObjectId."""
        broker = self._broker
        if broker is None:
            return RecordLayout.object_id(self._raw)
        return broker_object_id(RecordLayout.object_id_bytes(self._raw), broker)

    def get_class_key(self) -> ClassKey:
        return self._reader.schema.class_key

    def get_schema(self) -> SchemaClass:
        return self._reader.schema

    def get_timestamps(self) -> tuple[int, int, int]:
        """(last update, created, deleted) in ns since the epoch; deleted is 0 if live."""
        return RecordLayout.timestamps(self._raw)

    def is_deleted(self) -> bool:
        return RecordLayout.is_deleted(self._raw)

    def get_changes(self) -> Change:
        """What the update that produced this proxy carried.

        ``Change.PROPERTIES`` for a properties update (``c``), ``Change.STATISTICS``
        for a statistics update (``i``), both for a query answer (``get_objects``,
        :meth:`update`), with ``Change.DELETED`` added when the update reports the
        object deleted.  The proxy itself answers every property and statistic the
        session has received for the object, whatever this says.
        """
        return self._changed

    def get_absent(self) -> frozenset[str]:
        """The names of the non-optional properties and statistics the agent left out
        of the record this proxy holds: a QMF v2 agent's object map may lack some (qpidd
        leaves out, for one, the latency statistics it has no sample of); they read as
        their type's zero.  Empty over QMF v1, whose records carry every element.

        Example: ``{k: v for k, v in obj.get_statistics().items()
        if k not in obj.get_absent()}``, the statistics the agent sent.
        """
        return self._absent

    def get_index(self) -> str:
        """The index properties' values joined by ':' (qpid-tool's display name).

        Raises:
            DecodeError: an index value is malformed.
        """
        if self._kind not in ("c", "g"):
            return ""
        parts = []
        for i, p in enumerate(self._reader.schema.properties):
            if p.index:
                parts.append(str(self._prop(i)))
        return ":".join(parts)

    def get_agent(self) -> RemoteAgent | None:
        return self._agent

    def get_broker(self) -> BrokerLink | None:
        return self._broker

    def get_session(self) -> SessionLink | None:
        """The session this proxy belongs to (None for a proxy built by hand)."""
        return self._session

    async def update(self, *, _timeout: float | None = None) -> None:
        """Refresh properties and statistics from the agent.

        Raises:
            UsageError: the proxy is not attached to a session.
            QmfTimeout, TransportError: as for ``get_objects``.
            ObjectGoneError: the object no longer exists at its agent (also a
                ``LookupError``).
        """
        if self._session is None:
            raise UsageError("this object is not attached to a session")
        oid = self.get_object_id()
        fresh = await self._session.get_objects(_objectId=oid, _broker=self._broker,
                                                _agent=self._agent, _timeout=_timeout)
        if not fresh:
            raise ObjectGoneError(1, f"object {oid} is gone")
        new = fresh[0]
        self.__class__ = type(new)
        self._reader, self._raw, self._kind, self._sofs = (new._reader, new._raw, new._kind,
                                                           new._sofs)
        self._p, self._s, self._changed = new._p, new._s, new._changed
        self._absent = new._absent

    async def deref(self, name: str, *, _timeout: float | None = None) -> QmfObject | None:
        """The object an objectReference property points to (None for a null reference).

        Raises:
            UsageError: ``name`` is not a reference property, or no session.
            DecodeError: the reference is malformed.
        """
        i = self._reader.props.get(name)
        if i is None or self._reader.schema.properties[i].type != QmfType.REF:
            raise UsageError(f"{name!r} is not a reference property")
        if self._session is None:
            raise UsageError("this object is not attached to a session")
        ref = self._prop(i) if self._kind in ("c", "g") else None
        if ref is None or ref.raw == bytes(16):
            return None
        found = await self._session.get_objects(_objectId=ref, _broker=self._broker,
                                                _timeout=_timeout)
        return found[0] if found else None

    async def invoke(self, method: str, *args: Any, _timeout: float | None = None,
                     **kwargs: Any) -> MethodResult:
        """Call a schema method by name (same as ``await obj.<method>(...)``).

        Raises:
            UnknownClassError: no such method.
            ArgumentError: bad arguments (nothing is sent).
            MethodError: the agent returned a non-zero status.
            AgentGoneError: the object's agent left, before the call (raised at once,
                nothing is sent) or while waiting for the response.
            QmfTimeout: no response in time.
            NotConnectedError: the broker is not connected.
            TransportError: the connection failed or was lost.
        """
        broker = self._broker
        if self._session is None or broker is None:
            raise UsageError("this object is not attached to a session")
        schema_method = self._reader.schema.method(method)
        in_args = bind_arguments(schema_method, args, kwargs)
        result: MethodResult = await broker.call_method(self, schema_method, in_args, _timeout)
        return result

    def __repr__(self) -> str:
        key = self._reader.schema.class_key
        try:
            shown = self.get_index()
        except DecodeError:
            shown = ""
        return f"<QmfObject {key.package}:{key.name} {shown or self.get_object_id()}>"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, QmfObject):
            return NotImplemented
        return (self._broker is other._broker and RecordLayout.same_header(self._raw, other._raw)
                and self._props() == other._props() and self._stats() == other._stats())

    __hash__ = None  # type: ignore[assignment]


class _Element:
    """A property or statistic as an attribute of the proxies of one schema.

    A descriptor on a per-schema subclass of :class:`QmfObject` is found by normal
    attribute lookup, which is cheaper than failing it and calling ``__getattr__``.
    When the value is missing it raises a bare AttributeError, and Python then calls
    ``QmfObject.__getattr__``, which explains why.
    """

    __slots__ = ("index", "stat")

    def __init__(self, index: int, stat: bool) -> None:
        self.index = index
        self.stat = stat

    def __get__(self, obj: QmfObject | None, owner: type | None = None) -> Any:
        if obj is None:
            return self
        i = self.index
        kind = obj._kind
        if self.stat:
            if kind == "g" or kind == "i":
                s = obj._s
                return s[i] if s is not None else obj._reader.stat(obj._raw, obj._sofs, i)
        elif kind == "g" or kind == "c":
            p = obj._p
            v = p[i] if p is not None else obj._reader.prop(obj._raw, i)
            if v is not None:
                return v
        raise AttributeError


class _RefElement(_Element):
    """A reference property: its value as an id of the object's broker."""

    __slots__ = ()

    def __get__(self, obj: QmfObject | None, owner: type | None = None) -> Any:
        if obj is None:
            return self
        value = _Element.__get__(self, obj, owner)
        broker = obj.get_broker()
        if broker is None or not isinstance(value, ObjectId):
            return value
        return broker_object_id(value.raw, broker)


_BASE_NAMES = frozenset(dir(QmfObject))


class _Method:
    """A schema method as an attribute of the proxies of one schema: reading it gives
    the same :class:`_BoundMethod` as ``QmfObject.__getattr__`` would, with the
    method's compiled argument binder (see :func:`_binder`)."""

    __slots__ = ("bind", "method")

    def __init__(self, method: SchemaMethod) -> None:
        self.method = method
        self.bind = _binder(method)

    def __get__(self, obj: QmfObject | None, owner: type | None = None) -> Any:
        if obj is None:
            return self
        return _BoundMethod(obj, self.method, self.bind)


#: proxy classes a session keeps at most (cleared when full: a reader met again gets
#: a new class)
_MAX_PROXY_CLASSES = 1024


class ProxyClasses:
    """The proxy class of each record reader's schema, made on first use: one table
    per session (``session.proxy_classes``), at most ``_MAX_PROXY_CLASSES``."""

    __slots__ = ("_classes",)

    def __init__(self) -> None:
        self._classes: dict[RecordReader, type[QmfObject]] = {}

    def __len__(self) -> int:
        return len(self._classes)

    def of(self, reader: RecordReader) -> type[QmfObject]:
        """The proxy class of ``reader``'s schema (made now if it is new here)."""
        cls = self._classes.get(reader)
        if cls is None:
            classes = self._classes
            if len(classes) >= _MAX_PROXY_CLASSES:
                classes.clear()
            cls = classes[reader] = _proxy_class(reader)
        return cls


def _proxy_class(reader: RecordReader) -> type[QmfObject]:
    """The subclass of QmfObject for one schema: its elements and methods as
    descriptors (names that QmfObject itself defines stay QmfObject's; a property or
    statistic hides a method of its name, as in ``QmfObject.__getattr__``)."""
    ns: dict[str, Any] = {"__slots__": (), "__module__": QmfObject.__module__,
                          "__qualname__": QmfObject.__qualname__, "__doc__": QmfObject.__doc__}
    for name, method in reader.methods.items():
        ns[name] = _Method(method)
    for name, i in reader.stats.items():
        ns[name] = _Element(i, True)
    refs = tuple(i for i, p in enumerate(reader.schema.properties) if p.type == QmfType.REF)
    for name, i in reader.props.items():  # a property wins over a statistic of its name
        ns[name] = _RefElement(i, False) if i in refs else _Element(i, False)
    ns["_refs"] = refs
    for name in _BASE_NAMES.intersection(reader.props.keys() | reader.stats.keys()
                                         | reader.methods.keys()):
        del ns[name]
    cls: type[QmfObject] = type(QmfObject.__name__, (QmfObject,), ns)
    return cls


#: the proxy classes of proxies built without a session (tests, tools building
#: objects from decoded values)
_UNBOUND = ProxyClasses()


class _BoundMethod:
    __slots__ = ("_bind", "_method", "_obj")

    def __init__(self, obj: QmfObject, method: SchemaMethod,
                 bind: Callable[[tuple[Any, ...], dict[str, Any]], dict[str, Any]]) -> None:
        self._obj = obj
        self._method = method
        self._bind = bind

    async def __call__(self, *args: Any, _timeout: float | None = None,
                       **kwargs: Any) -> MethodResult:
        # QmfObject.invoke with the method at hand and its compiled binder
        obj = self._obj
        broker = obj.get_broker()
        if broker is None or obj.get_session() is None:
            raise UsageError("this object is not attached to a session")
        result: MethodResult = await broker.call_method(obj, self._method,
                                                        self._bind(args, kwargs), _timeout)
        return result

    def __repr__(self) -> str:
        args = ", ".join(f"{a.name}: {a.type.name.lower()}" for a in self._method.in_args)
        return f"<method {self._method.name}({args})>"


_INT_RANGES = {
    QmfType.UINT8: (0, 0xFF), QmfType.UINT16: (0, 0xFFFF), QmfType.UINT32: (0, 0xFFFFFFFF),
    QmfType.UINT64: (0, (1 << 64) - 1), QmfType.INT8: (-128, 127),
    QmfType.INT16: (-(1 << 15), (1 << 15) - 1), QmfType.INT32: (-(1 << 31), (1 << 31) - 1),
    QmfType.INT64: (-(1 << 63), (1 << 63) - 1), QmfType.ABSTIME: (0, (1 << 64) - 1),
    QmfType.DELTATIME: (0, (1 << 64) - 1),
}


def convert_argument(name: str, t: QmfType, value: Any, *, minimum: int | None = None,
                     maximum: int | None = None, maxlen: int | None = None) -> Any:
    """Check (and lightly convert) a value for a QMF type.

    Raises:
        ArgumentError: wrong type or out of range.
    """
    def bad(why: str) -> ArgumentError:
        return ArgumentError(f"argument {name!r}: {why}")

    if t in _INT_RANGES:
        if isinstance(value, bool) or not isinstance(value, int):
            raise bad(f"{t.name.lower()} expects an int, got {type(value).__name__}")
        lo, hi = _INT_RANGES[t]
        if minimum is not None:
            lo = max(lo, minimum)
        if maximum is not None:
            hi = min(hi, maximum)
        if not lo <= value <= hi:
            raise bad(f"{value} is outside {lo}..{hi}")
        return value
    if t in (QmfType.SSTR, QmfType.LSTR):
        if not isinstance(value, str):
            raise bad(f"expects str, got {type(value).__name__}")
        limit = 255 if t == QmfType.SSTR else 65535
        if maxlen is not None:
            limit = min(limit, maxlen)
        if len(value.encode()) > limit:
            raise bad(f"longer than {limit} bytes")
        return value
    if t == QmfType.BOOL:
        if not isinstance(value, bool):
            raise bad(f"expects bool, got {type(value).__name__}")
        return value
    if t in (QmfType.FLOAT, QmfType.DOUBLE):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise bad(f"expects a number, got {type(value).__name__}")
        return float(value)
    if t == QmfType.MAP:
        if not isinstance(value, Mapping):
            raise bad(f"expects a mapping, got {type(value).__name__}")
        return value
    if t in (QmfType.LIST, QmfType.ARRAY):
        if not isinstance(value, (list, tuple)):
            raise bad(f"expects a list, got {type(value).__name__}")
        return list(value)
    if t == QmfType.UUID:
        if isinstance(value, str):
            try:
                return uuid.UUID(value)
            except ValueError:
                raise bad("not a UUID") from None
        if not isinstance(value, uuid.UUID):
            raise bad(f"expects a UUID, got {type(value).__name__}")
        return value
    if t == QmfType.REF:
        if isinstance(value, QmfObject):
            return value.get_object_id()
        if isinstance(value, str):
            try:
                return ObjectId.parse(value)
            except UsageError as exc:
                raise bad(str(exc)) from None
        if not isinstance(value, ObjectId):
            raise bad(f"expects an ObjectId, got {type(value).__name__}")
        return value
    return value


def _default(arg_type: QmfType, text: str) -> Any:
    if arg_type in _INT_RANGES:
        return int(text, 0)
    if arg_type == QmfType.BOOL:
        return text.strip().lower() in ("1", "true", "yes", "y")
    if arg_type in (QmfType.FLOAT, QmfType.DOUBLE):
        return float(text)
    if arg_type == QmfType.MAP:
        return {}
    if arg_type in (QmfType.LIST, QmfType.ARRAY):
        return []
    return text


def bind_arguments(method: SchemaMethod, args: tuple[Any, ...], kwargs: Mapping[str, Any]
                   ) -> dict[str, Any]:
    """Map positional and keyword arguments onto the method's I/IO arguments,
    filling schema defaults and checking types and ranges.

    Raises:
        ArgumentError: too many, unknown, missing or mistyped arguments.
    """
    params = method.in_args
    if len(args) > len(params):
        raise ArgumentError(f"{method.name}() takes {len(params)} argument(s), "
                            f"{len(args)} given")
    values: dict[str, Any] = {}
    for p, v in zip(params, args, strict=False):
        values[p.name] = v
    names = {p.name for p in params}
    for k, v in kwargs.items():
        if k not in names:
            raise ArgumentError(f"{method.name}() has no argument {k!r}")
        if k in values:
            raise ArgumentError(f"{method.name}() got argument {k!r} twice")
        values[k] = v
    out: dict[str, Any] = {}
    for p in params:
        if p.name in values:
            v = values[p.name]
        elif p.default is not None:
            try:
                v = _default(p.type, p.default)
            except ValueError:
                raise ArgumentError(f"{method.name}(): schema default {p.default!r} of "
                                    f"{p.name!r} is not a {p.type.name.lower()}") from None
        elif p.type == QmfType.MAP:
            v = {}  # qpidd's optional map arguments (filter, properties, options)
        else:
            raise ArgumentError(f"{method.name}() is missing argument {p.name!r}")
        out[p.name] = convert_argument(p.name, p.type, v, minimum=p.min, maximum=p.max,
                                       maxlen=p.maxlen)
    return out


def _binder(method: SchemaMethod) -> Callable[[tuple[Any, ...], dict[str, Any]], dict[str, Any]]:
    """``bind(args, kwargs)``: :func:`bind_arguments` of ``method``, compiled: a call
    giving every argument by position has each checked by a per-argument checker
    (same checks, same errors), anything else goes to :func:`bind_arguments`."""
    params = method.in_args
    names = tuple(p.name for p in params)
    checks = tuple(_checker(p.name, p.type, p.min, p.max, p.maxlen) for p in params)
    count = len(params)

    def bind(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        if kwargs or len(args) != count:
            return bind_arguments(method, args, kwargs)
        return {name: check(v) for name, check, v in zip(names, checks, args, strict=True)}

    return bind


def _checker(name: str, t: QmfType, minimum: int | None, maximum: int | None,
             maxlen: int | None) -> Callable[[Any], Any]:
    """``check(value)``: :func:`convert_argument` for one argument, with the common
    cases (an int in range, a str short enough) decided at once."""
    def general(value: Any) -> Any:
        return convert_argument(name, t, value, minimum=minimum, maximum=maximum,
                                maxlen=maxlen)

    if t in _INT_RANGES:
        lo, hi = _INT_RANGES[t]
        if minimum is not None:
            lo = max(lo, minimum)
        if maximum is not None:
            hi = min(hi, maximum)

        def check_int(value: Any) -> Any:
            if type(value) is int and lo <= value <= hi:
                return value
            return general(value)
        return check_int
    if t in (QmfType.SSTR, QmfType.LSTR):
        limit = 255 if t == QmfType.SSTR else 65535
        if maxlen is not None:
            limit = min(limit, maxlen)

        def check_str(value: Any) -> Any:
            if type(value) is str and len(value.encode()) <= limit:
                return value
            return general(value)
        return check_str
    return general
