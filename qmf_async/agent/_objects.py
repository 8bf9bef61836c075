"""Objects an agent manages: their values, change flags and life times."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..errors import ArgumentError, UnknownClassError
from ..wire import (
    Encoder,
    ObjectId,
    ObjectRecord,
    QmfType,
    RecordWriter,
    SchemaClass,
    SchemaRegistry,
)

__all__ = ["ManagedObject", "encode_records", "rename_references", "snapshots", "zero_value"]

#: a record snapshot: (opcode, object, encoded properties (or their values when they do
#: not encode: the error is raised when the record is), statistics)
RecordSnapshot = tuple[str, "ManagedObject", "bytes | tuple[Any, ...] | None",
                       "bytes | Sequence[Any] | None"]

_ZEROS: dict[QmfType, Any] = {
    QmfType.SSTR: "", QmfType.LSTR: "", QmfType.BOOL: False, QmfType.FLOAT: 0.0,
    QmfType.DOUBLE: 0.0,
}


def zero_value(t: QmfType) -> Any:
    """The value a statistic starts with: 0, "", False, 0.0 or an empty map/list."""
    if t == QmfType.MAP:
        return {}
    if t in (QmfType.LIST, QmfType.ARRAY):
        return []
    return _ZEROS.get(t, 0)


def now_ns() -> int:
    return time.time_ns()


class ManagedObject:
    """One object published by an :class:`~qmf_async.agent.Agent`.

    Read values with ``obj["name"]`` or :meth:`get`; change them with
    :meth:`set`, :meth:`inc` and :meth:`dec`.  Changes are published at the next
    interval: properties in a ``c`` message, statistics in an ``i`` message.
    """

    __slots__ = (
        "_pbytes",
        "_pindex",
        "_props",
        "_sbytes",
        "_sindex",
        "_stats",
        "created",
        "deleted",
        "number",
        "object_id",
        "persistent",
        "props_changed",
        "schema",
        "stats_changed",
    )

    def __init__(self, schema: SchemaClass, values: Mapping[str, Any], *,
                 persistent: bool = False) -> None:
        """Raises: ArgumentError for unknown names or missing mandatory properties."""
        self.schema = schema
        self._pindex = {p.name: i for i, p in enumerate(schema.properties)}
        self._sindex = {s.name: i for i, s in enumerate(schema.statistics)}
        unknown = set(values) - set(self._pindex) - set(self._sindex)
        if unknown:
            raise ArgumentError(f"{schema.class_key.name} has no element(s) "
                                f"{', '.join(sorted(unknown))}")
        props: list[Any] = []
        for p in schema.properties:
            if p.name in values:
                props.append(values[p.name])
            elif p.optional:
                props.append(None)
            else:
                raise ArgumentError(f"{schema.class_key.name}: property {p.name!r} is mandatory")
        self._props = props
        #: presence octets + properties as encoded, until a property is set
        self._pbytes: bytes | None = None
        #: statistics as encoded, until a statistic changes
        self._sbytes: bytes | None = None
        self._stats = [values.get(s.name, zero_value(s.type)) for s in schema.statistics]
        self.created = now_ns()
        self.deleted = 0
        self.object_id: ObjectId | None = None
        self.number = 0
        self.persistent = persistent
        self.props_changed = True
        self.stats_changed = True

    def __getitem__(self, name: str) -> Any:
        i = self._pindex.get(name)
        if i is not None:
            return self._props[i]
        i = self._sindex.get(name)
        if i is not None:
            return self._stats[i]
        raise KeyError(name)

    def get(self, name: str, default: Any = None) -> Any:
        try:
            return self[name]
        except KeyError:
            return default

    def set(self, **values: Any) -> None:
        """Set properties and statistics by name.

        Setting a property, even to an equal value, has its encoding redone for the
        next answer: after changing a map or list value in place, set it again.

        Raises:
            ArgumentError: an unknown name.
        """
        for name, value in values.items():
            i = self._pindex.get(name)
            if i is not None:
                self._pbytes = None
                if self._props[i] != value:
                    self._props[i] = value
                    self.props_changed = True
                continue
            i = self._sindex.get(name)
            if i is None:
                raise ArgumentError(f"{self.schema.class_key.name} has no element {name!r}")
            if self._stats[i] != value:
                self._stats[i] = value
                self._sbytes = None
                self.stats_changed = True

    def _rename_references(self, renamed: Mapping[ObjectId, ObjectId]) -> None:
        """Point reference properties at the new ids of renamed objects."""
        for i, p in enumerate(self.schema.properties):
            if p.type == QmfType.REF:
                new = renamed.get(self._props[i])
                if new is not None:
                    self._props[i] = new
                    self._pbytes = None
                    self.props_changed = True

    def inc(self, name: str, delta: int = 1) -> None:
        """Add ``delta`` to a statistic. Raises: ArgumentError for an unknown name."""
        i = self._sindex.get(name)
        if i is None:
            raise ArgumentError(f"{self.schema.class_key.name} has no statistic {name!r}")
        if delta:
            self._stats[i] += delta
            self._sbytes = None
            self.stats_changed = True

    def dec(self, name: str, delta: int = 1) -> None:
        """Subtract ``delta`` from a statistic."""
        self.inc(name, -delta)

    @property
    def properties(self) -> dict[str, Any]:
        return {p.name: v for p, v in zip(self.schema.properties, self._props, strict=False)
                if v is not None}

    @property
    def statistics(self) -> dict[str, Any]:
        return {s.name: v for s, v in zip(self.schema.statistics, self._stats, strict=False)}

    @property
    def is_deleted(self) -> bool:
        return self.deleted != 0

    def record(self, opcode: str, seq: int = 0, timestamp: int | None = None) -> ObjectRecord:
        """This object's state as a ``c``, ``i`` or ``g`` record.

        Raises:
            UnknownClassError: the object was never added to an agent.
        """
        if self.object_id is None:
            raise UnknownClassError("object has no id: add it to an agent first")
        ts = now_ns() if timestamp is None else timestamp
        props = tuple(self._props) if opcode != "i" else None
        stats = tuple(self._stats) if opcode != "c" else None
        return ObjectRecord(opcode, seq, self.schema, ts, self.created, self.deleted,
                            self.object_id, props, stats)

    def _encoded_props(self, encode: Encoder) -> bytes | tuple[Any, ...]:
        """Presence octets + properties as ``encode`` (the class's properties
        encoder) writes them, cached until a property is set (see :func:`_encoded`)."""
        cached = self._pbytes
        if cached is not None:
            return cached
        found = _encoded(self._props, encode)
        if type(found) is bytes:
            self._pbytes = found
        return found

    def _encoded_stats(self, encode: Encoder) -> bytes | tuple[Any, ...]:
        """Statistics as ``encode`` (the class's statistics encoder) writes them,
        cached until a statistic changes (see :func:`_encoded`)."""
        cached = self._sbytes
        if cached is not None:
            return cached
        found = _encoded(self._stats, encode)
        if type(found) is bytes:
            self._sbytes = found
        return found

    def __repr__(self) -> str:
        return f"<ManagedObject {self.schema.class_key.name} {self.object_id}>"


def _encoded(values: Sequence[Any], encode: Encoder) -> bytes | tuple[Any, ...]:
    """``values`` as ``encode`` writes them; the values themselves when they do not
    encode, so that encoding their record raises (and drops just that body)."""
    snapshot = tuple(values)
    out = bytearray()
    try:
        encode(out, snapshot)
    except Exception:
        return snapshot
    return bytes(out)


def rename_references(objects: Iterable[ManagedObject],
                      renamed: Mapping[ObjectId, ObjectId]) -> None:
    """Point the reference properties of ``objects`` at the new ids of the objects
    ``renamed`` (old id -> new id) names: after a management broker gave the agent
    other banks."""
    for obj in objects:
        obj._rename_references(renamed)


def snapshots(opcodes: str, objects: Iterable[ManagedObject], registry: SchemaRegistry
              ) -> list[RecordSnapshot]:
    """What ``obj.record(op)`` would hold for each object and each opcode of
    ``opcodes`` (``"g"``, ``"ci"`` ...), taken now, for :func:`encode_records`:
    cached encodings of properties and of statistics."""
    out: list[RecordSnapshot] = []
    append = out.append
    last: SchemaClass | None = None
    encode: Encoder | None = None
    encode_stats: Encoder | None = None
    for obj in objects:
        if obj.schema is not last:
            last = obj.schema
            codec = registry.codec(last)
            encode, encode_stats = codec.properties[1], codec.statistics[1]
        for op in opcodes:
            props = obj._encoded_props(encode) if op != "i" and encode is not None else None
            stats = (obj._encoded_stats(encode_stats)
                     if op != "c" and encode_stats is not None else None)
            append((op, obj, props, stats))
    return out


def encode_records(registry: SchemaRegistry, records: Iterable[RecordSnapshot], seq: int,
                   timestamp: int) -> bytes:
    """One body of records: the bytes ``codec.encode([obj.record(op, seq, timestamp)
    ...], registry)`` gives, built from cached property encodings.

    Raises:
        EncodeError: a value does not fit its type (also struct.error, OverflowError
        or UnicodeEncodeError, as from the codec's value encoders).
    """
    out = bytearray()
    last_schema: SchemaClass | None = None
    last_op = ""
    prefix = b""
    write: RecordWriter | None = None
    for op, obj, props, stats in records:
        schema = obj.schema
        if schema is not last_schema or op != last_op:
            codec = registry.codec(schema)
            prefix = codec.record_prefix(op, seq)
            write = codec.record_writer(op)
            last_schema, last_op = schema, op
        if obj.object_id is None:
            raise UnknownClassError("object has no id: add it to an agent first")
        assert write is not None
        out += prefix
        write(out, timestamp, obj.created, obj.deleted, obj.object_id.raw, props, stats)
    return bytes(out)
