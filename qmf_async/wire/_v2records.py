"""QMF v2 objects as the values of v1 object records of their class.  Pure: no I/O.

A console that speaks v2 serves the same object view as over v1: each v2 object
(:class:`~qmf_async.wire.V2Data`) becomes a :class:`ValuesRecord` of its class's v1
schema (qpidd has no v2 schema query; the v1 ``S`` gives it), whose values are those a
v1 record of the object would read, held decoded rather than encoded (a v1 record is
smaller, a tuple quicker to merge and read: docs/architecture.md, "v2 objects held as
values"):

- values are read from the object's ``_values`` map by name: texts decoded (qpidd
  sends them as binary), uuids sent as 16 bytes made uuids, booleans and floats made
  so, references (v2 object id maps) made v1 object ids; integers and the other types
  as received, then checked against their v1 type (one that does not fit is a
  :class:`~qmf_async.DecodeError`, as it would be encoding the record);
- an absent element is None when optional, else its type's zero, and its name is
  kept in the record's ``absent`` (the classic console lists only what arrived);
- the opcode is ``g`` when the map holds properties and statistics, ``i`` when only
  statistics, else ``c``.

The v1 object ids (of the object and of its references) are not made here: they
belong to the connection (which agent banks, which v2 id each stands for), so the
caller passes ``ref_id(banks, v2 object id) -> 16 id bytes``.  A converter is compiled
once per schema (the conversion is the hot path of a large v2 answer).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Mapping
from typing import Any, Final

import attrs

from ..errors import DecodeError, EncodeError
from ..frozen import frozen
from ._classcodec import ClassCodec
from ._compile import _FIXED_FMT, _compile_source
from ._record import RecordLayout
from ._schema import SchemaClass
from ._v2 import V2Data, V2ObjectId, V2SchemaId
from ._values import ClassKey, ObjectId, QmfType

__all__ = ["RefId", "V2RecordConverter", "ValuesRecord", "v2_class_key", "v2_default", "v2_value"]

#: ``ref_id(agent banks, v2 object id) -> v1 object id bytes`` (16)
RefId = Callable[[tuple[int, int], V2ObjectId], bytes]
#: ``convert(values, banks, absent) -> the values of one record section, in schema
#: order``; the names of the non-optional elements ``values`` lacks (filled with their
#: type's zero) are appended to ``absent``
_Section = Callable[[Mapping[str, Any], tuple[int, int], list[str]], list[Any]]
#: no element absent (shared)
_NO_NAMES: Final[frozenset[str]] = frozenset()

_INTS: Final = frozenset({QmfType.UINT8, QmfType.UINT16, QmfType.UINT32, QmfType.UINT64,
                          QmfType.INT8, QmfType.INT16, QmfType.INT32, QmfType.INT64,
                          QmfType.ABSTIME, QmfType.DELTATIME})
_TEXTS: Final = frozenset({QmfType.SSTR, QmfType.LSTR})
_FLOATS: Final = frozenset({QmfType.FLOAT, QmfType.DOUBLE})
#: what a value that does not fit its type raises in conversion or encoding
_MISFITS: Final = (EncodeError, TypeError, ValueError, OverflowError, AttributeError,
                   UnicodeError)


#: class keys of the schema ids seen (a class's objects share one V2SchemaId)
_KEYS: dict[V2SchemaId, ClassKey | None] = {}
_MAX_KEYS: Final = 4096


#: the same, by the id of the (shared) schema id object: (that object, its key); the
#: entry holds the object, so its id is not reused while the entry lives
_BY_ID: dict[int, tuple[V2SchemaId, ClassKey | None]] = {}


def v2_class_key(sid: V2SchemaId | None) -> ClassKey | None:
    """The v1 class key of a v2 schema id (None without a 16-byte hash)."""
    if sid is None:
        return None
    # a class's objects share one V2SchemaId: found by identity first (its hash and
    # == are Python code)
    known = _BY_ID.get(id(sid))
    if known is not None and known[0] is sid:
        return known[1]
    try:
        key = _KEYS[sid]
    except KeyError:
        key = _class_key(sid)
        if len(_KEYS) >= _MAX_KEYS:
            _KEYS.clear()
        _KEYS[sid] = key
    if len(_BY_ID) >= _MAX_KEYS:
        _BY_ID.clear()
    _BY_ID[id(sid)] = (sid, key)
    return key


def _class_key(sid: V2SchemaId) -> ClassKey | None:
    if sid.hash is None:
        return None
    digest = sid.hash.bytes if isinstance(sid.hash, uuid.UUID) else bytes(sid.hash)
    if len(digest) != 16:
        return None
    return ClassKey(sid.package, sid.class_name, digest)


def v2_default(t: QmfType) -> Any:
    """The value of an absent, non-optional element of type ``t``."""
    if t in _TEXTS:
        return ""
    if t in _FLOATS:
        return 0.0
    if t == QmfType.BOOL:
        return False
    if t == QmfType.REF:
        return ObjectId(bytes(16))
    if t == QmfType.UUID:
        return uuid.UUID(int=0)
    if t == QmfType.MAP:
        return {}
    if t in (QmfType.LIST, QmfType.ARRAY):
        return []
    return 0


def _text(value: Any) -> str:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", "replace")
    return value if isinstance(value, str) else str(value)


def _uuid(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray)) and len(value) == 16:
        return uuid.UUID(bytes=bytes(value))
    return value


def _ref(name: str, value: Any, banks: tuple[int, int], ref_id: RefId) -> ObjectId:
    if isinstance(value, Mapping):
        return ObjectId(ref_id(banks, V2ObjectId.from_map(value, name)))
    if isinstance(value, ObjectId):
        return value
    raise DecodeError(f"QMF v2 reference {name!r} is not an object id map")


def v2_value(name: str, t: QmfType, value: Any, banks: tuple[int, int],
             ref_id: RefId) -> Any:
    """The v1 value of the element ``name`` of type ``t`` received as ``value`` (not
    None) from the agent of ``banks``.

    Raises:
        DecodeError: a reference that is not an object id map (or a broken one).
        TypeError, ValueError: a float or double that is not a number.
    """
    if t in _TEXTS:
        return _text(value)
    if t in _INTS:
        return int(value) if isinstance(value, bool) else value
    if t == QmfType.REF:
        return _ref(name, value, banks, ref_id)
    if t == QmfType.UUID:
        return _uuid(value)
    if t == QmfType.BOOL:
        return bool(value)
    if t in _FLOATS:
        return float(value)
    return value


def _conversion(name: str, t: QmfType) -> str | None:
    """The generated expression that converts ``v``, a v2 value of field ``name`` of
    type ``t``, to its v1 value; None when it is taken as it came (integers, as over v1,
    and maps, lists, objects)."""
    if t in _TEXTS:
        return "v.decode('utf-8', 'replace') if type(v) is _bytes else _text(v)"
    if t == QmfType.REF:
        return f"_ref({name!r}, v, banks)"
    if t == QmfType.UUID:
        return "_uuid16(v)"
    if t == QmfType.BOOL:
        return "_bool(v)"
    if t in _FLOATS:
        return "_float(v)"
    return None


def _compile_section(fields: list[tuple[str, QmfType, bool]], ref_id: RefId,
                     what: str, *, fast: bool = True) -> _Section:
    """``convert(values, banks, absent) -> list`` for one section's ``fields`` (name,
    type, optional): a few lines per field, the value rules of :func:`v2_value`
    inlined; a non-optional field the map lacks gets its type's zero and its name
    appended to ``absent`` (the present ones cost nothing more).  With ``fast`` (and
    two fields or more), a map holding every field with a value takes a shorter way
    to the same list."""

    def ref(name: str, value: Any, banks: tuple[int, int]) -> ObjectId:
        return _ref(name, value, banks, ref_id)

    env: dict[str, Any] = {"_text": _text, "_uuid16": _uuid, "_ref": ref, "_bytes": bytes}
    lines = ["def convert(values, banks, absent):", "    g = values.get", "    out = []",
             "    add = out.append"]
    for i, (name, t, optional) in enumerate(fields):
        env[f"d{i}"] = None if optional else v2_default(t)
        lines.append(f"    v = g({name!r})")
        expr = _conversion(name, t) or "v"
        if optional:
            lines.append(f"    add(d{i} if v is None else {expr})")
        else:
            lines += ["    if v is None:", f"        add(d{i})",
                      f"        absent.append({name!r})", "    else:",
                      f"        add({expr})"]
    lines.append("    return out")
    slow: _Section = _compile_source("convert", lines, env, f"v2 {what}")
    if len(fields) < 2 or not fast:
        return slow
    # the values in schema order in one C call; only the absent or null ones (few) and
    # the types that need it converted then, as in ``slow`` (whose output the encoders
    # get the same bytes from: an integer as it came, a bool sent for an integer
    # encodes as 0 or 1 either way)
    names = tuple(f[0] for f in fields)
    env2: dict[str, Any] = {
        "_names": names, "_list": list, "_map": map,
        "_mandatory": tuple(not f[2] for f in fields),
        "_defaults": tuple(env[f"d{i}"] for i in range(len(fields))), **env}
    lines = ["def convert_fast(values, banks, absent):",
             "    out = _list(_map(values.get, _names))",
             "    if None in out:",
             "        i = out.index(None)",
             "        while True:",
             "            if _mandatory[i]:",
             "                out[i] = _defaults[i]",
             "                absent.append(_names[i])",
             "            try:",
             "                i = out.index(None, i + 1)",
             "            except ValueError:",
             "                break"]
    for i, (name, t, _) in enumerate(fields):
        converted = _conversion(name, t)
        if converted is None:
            continue
        # a default is its own conversion (and asks no id); an optional None stays
        lines += [f"    v = out[{i}]", "    if v is not None:", f"        out[{i}] = {converted}"]
    lines.append("    return out")
    quick: _Section = _compile_source("convert_fast", lines, env2, f"v2 {what}")
    return quick


#: the statistics types the quick fit takes (an exact ``int``, ``bool`` or ``float`` is
#: its own conversion; a ``float`` statistic is not taken: its 4 bytes would round it)
_FITTED: Final = {**{t: "_int" for t in _INTS}, QmfType.BOOL: "_bool",
                  QmfType.DOUBLE: "_float"}
#: what a value the quick fit cannot take raises inside it
_NOT_FITTED: Final = (struct.error, OverflowError, TypeError, ValueError)
#: ``fit(values) -> the same values as a tuple``, or None (a value needs the v1
#: codec's way: another type, out of range)
_Fit = Callable[[list[Any]], "tuple[Any, ...] | None"]


def _text8(v: str) -> bytes:
    """An sstr as the class codec's encoder writes it.  Raises ValueError: too long."""
    raw = v.encode()
    if len(raw) > 255:
        raise ValueError("too long")
    return raw


def _text16(v: str) -> bytes:
    """An lstr as :func:`_text8` (up to 65535 bytes)."""
    raw = v.encode()
    if len(raw) > 65535:
        raise ValueError("too long")
    return raw


def _fit_expression(fields: list[tuple[str, QmfType]], args: list[str],
                    env: dict[str, Any]) -> str:
    """The expression that packs ``args`` (variables, one per field of ``fields``) as
    the class codec's encoder would, one ``struct`` call per run of fixed-size fields
    (their packers put in ``env``) and the texts between: it raises what the encoder
    would for a value that does not fit."""
    parts: list[str] = []
    run: list[tuple[str, QmfType]] = []

    def flush() -> None:
        if run:
            sname = f"_p{len(parts)}"
            env[sname] = struct.Struct(">" + "".join(_FIXED_FMT[t] for _, t in run)).pack
            parts.append(f"{sname}({', '.join(v for v, _ in run)})")
            run.clear()

    for v, (_, t) in zip(args, fields, strict=True):
        if t in _TEXTS:
            flush()
            parts.append(f"_text8({v})" if t == QmfType.SSTR else f"_text16({v})")
        else:
            run.append((v, t))
    flush()
    return ", ".join(parts)


def _compile_fit(fields: list[tuple[str, QmfType]], what: str) -> _Fit | None:
    """``fit(values)``: the converted values of a section (texts already ``str``) as a
    tuple when every one has exactly its type (``int`` for the integers, ``bool``,
    ``float`` for a double) and fits it as the v1 encoder checks (range, text size):
    then they are what a v1 record of them would read.  None for anything else (the
    caller goes the v1 codec's way).  No fit for a section with other types."""
    if not fields or not all(t in _FITTED or t in _TEXTS for _, t in fields):
        return None
    env: dict[str, Any] = {"_int": int, "_bool": bool, "_float": float, "_tuple": tuple,
                           "_errors": _NOT_FITTED, "_text8": _text8, "_text16": _text16}
    variables = [f"v{i}" for i in range(len(fields))]
    checks = []
    for kind in ("_int", "_bool", "_float"):
        of_kind = [v for v, (_, t) in zip(variables, fields, strict=True)
                   if _FITTED.get(t) == kind]
        if of_kind:
            checks.append(f"{kind} is " + " is ".join(f"type({v})" for v in of_kind))
    texts = [v for v, (_, t) in zip(variables, fields, strict=True) if t in _TEXTS]
    if texts:  # a text that is not a str goes the codec's way
        checks.append("_str is " + " is ".join(f"type({v})" for v in texts))
        env["_str"] = str
    lines = ["def fit(values):", f"    {', '.join(variables)}, = values"]
    body = ["try:", f"    {_fit_expression(fields, variables, env)}",
            "except _errors:", "    return None", "return _tuple(values)"]
    if checks:
        lines.append(f"    if {' and '.join(checks)}:")
        lines += ["        " + b for b in body]
        lines.append("    return None")
    else:
        lines += ["    " + b for b in body]
    fit: _Fit = _compile_source("fit", lines, env, f"v2 {what}")
    return fit


@frozen(slots=True)
class ValuesRecord:
    """A QMF v2 object as the values of its v1 class, held decoded: the record header
    (timestamps and the v1 object id, laid out as :class:`RecordLayout` lays out a
    record's first bytes) and the property and statistic values in schema order, as
    a v1 record of them would read (never encoded on the way, see
    :class:`V2RecordConverter`).  Reads like :class:`RawObjectRecord`."""

    opcode: str
    codec: ClassCodec = attrs.field(repr=lambda c: str(c.class_key))
    header: bytes = attrs.field(repr=False)
    #: property values in schema order (None: the object's map held none)
    properties: tuple[Any, ...] | None = attrs.field(repr=False)
    #: statistic values in schema order (None: the object's map held none)
    statistics: tuple[Any, ...] | None = attrs.field(repr=False)
    #: the non-optional elements the agent left out, which read as their type's zero
    absent: frozenset[str] = attrs.field(default=_NO_NAMES, repr=False)

    @property
    def schema(self) -> SchemaClass:
        return self.codec.schema

    @property
    def class_key(self) -> ClassKey:
        return self.codec.class_key

    @property
    def timestamps(self) -> tuple[int, int, int]:
        """(last update, created, deleted) in ns since the epoch."""
        return RecordLayout.timestamps(self.header)

    def is_deleted(self) -> bool:
        return RecordLayout.is_deleted(self.header)

    @property
    def object_id(self) -> ObjectId:
        return RecordLayout.object_id(self.header)

    @property
    def object_id_bytes(self) -> bytes:
        """The object id's 16 wire bytes."""
        return self.header[24:40]

    @property
    def has_properties(self) -> bool:
        return self.properties is not None

    @property
    def has_statistics(self) -> bool:
        return self.statistics is not None

    def parts(self) -> tuple[tuple[Any, ...] | None, tuple[Any, ...] | None]:
        """(properties, statistics): what an object view holds of the object."""
        return self.properties, self.statistics

    def get(self, name: str, default: Any = None) -> Any:
        """A property or statistic by name; ``default`` when the record does not carry
        it (or an optional property is absent)."""
        codec = self.codec
        i = codec.props.get(name)
        if i is not None and self.properties is not None:
            v = self.properties[i]
            return default if v is None else v
        i = codec.stats.get(name)
        if i is not None and self.statistics is not None:
            return self.statistics[i]
        return default


class V2RecordConverter:
    """Turns v2 objects of one class into :class:`ValuesRecord` of ``schema`` (whose
    codec is ``codec``, the registry's codec of that schema); ``ref_id`` makes the v1
    ids.

    The values read as a v1 record of them would, without the record: a section
    whose converted values all have exactly their type and fit it is kept as it is
    (the statistics of qpidd's objects, for one: checked by one ``struct`` call per
    run of fixed-size fields); any other section is encoded by the v1 codec and
    decoded again (the properties always: they carry maps and references, and come
    seldom over v2)."""

    __slots__ = ("_absent", "_fit", "codec", "has_stats", "key", "pnames", "props",
                 "ref_id", "snames", "stats")

    def __init__(self, schema: SchemaClass, codec: ClassCodec, ref_id: RefId, *,
                 fast: bool = True) -> None:
        """``fast=False``: every section the v1 codec's way (the same values; for
        tests and comparisons)."""
        self.key = schema.class_key
        self.codec = codec
        self.ref_id = ref_id
        self.props = _compile_section(
            [(p.name, QmfType(p.type), p.optional) for p in schema.properties], ref_id,
            f"{schema.class_key} properties", fast=fast)
        sfields = [(st.name, QmfType(st.type)) for st in schema.statistics]
        self.stats = _compile_section([(n, t, False) for n, t in sfields], ref_id,
                                      f"{schema.class_key} statistics", fast=fast)
        self._fit = _compile_fit(sfields, f"{schema.class_key} statistics") if fast else None
        self.pnames = frozenset(p.name for p in schema.properties)
        self.snames = frozenset(st.name for st in schema.statistics)
        self.has_stats = bool(schema.statistics)
        #: the sets of absent field names made so far (shared by the records)
        self._absent: dict[tuple[str, ...], frozenset[str]] = {}

    def opcode(self, values: Mapping[str, Any]) -> str:
        """``g`` (properties and statistics), ``i`` (statistics only) or ``c``."""
        has_p = not self.pnames.isdisjoint(values)
        has_s = self.has_stats and not self.snames.isdisjoint(values)
        return "g" if has_p and has_s else ("i" if has_s else "c")

    def convert(self, data: V2Data, banks: tuple[int, int]) -> ValuesRecord:
        """``data``, an object of this class from the agent of ``banks``, as the
        values of a v1 record (its id, and those of its references, from ``ref_id``,
        the references asked first).

        Raises:
            DecodeError: no object id, or values that do not fit the schema.
        """
        v2_oid = data.object_id
        if v2_oid is None:
            raise DecodeError("QMF v2 object without an object id or schema hash")
        values = data.values
        opcode = self.opcode(values)
        absent: list[str] = []
        props: tuple[Any, ...] | None = None
        stats: tuple[Any, ...] | None = None
        codec = self.codec
        try:
            if opcode != "i":
                props = self._through_codec(self.props(values, banks, absent), True)
            if opcode != "c":
                listed = self.stats(values, banks, absent)
                fit = self._fit
                stats = fit(listed) if fit is not None else None
                if stats is None:
                    stats = self._through_codec(listed, False)
        except DecodeError:
            raise
        except _MISFITS as exc:
            raise self._misfit(v2_oid, exc) from exc
        oid = self.ref_id(banks, v2_oid)
        head = RecordLayout.header(data.update_ts or 0, data.create_ts or 0,
                                   data.delete_ts or 0, oid)
        if absent:  # an agent leaves out the same fields every time: one set each
            names = self._absent.get(tuple(absent))
            if names is None:
                if len(self._absent) >= 64:
                    self._absent.clear()
                names = self._absent[tuple(absent)] = frozenset(absent)
        else:
            names = _NO_NAMES
        return ValuesRecord(opcode, codec, head, props, stats, names)

    def _through_codec(self, values: list[Any], props: bool) -> tuple[Any, ...]:
        """``values`` (a section) encoded by the v1 codec and decoded again: what a v1
        record of them reads.  Raises what the encoder raises."""
        codec = self.codec
        out = bytearray(_BLANK_HEADER)
        if props:
            codec.properties[1](out, values)
            return codec.decode_props(bytes(out))
        codec.statistics[1](out, values)
        return codec.decode_stats(bytes(out), RecordLayout.HEADER_SIZE)

    def _misfit(self, oid: V2ObjectId, exc: BaseException) -> DecodeError:
        return DecodeError(f"QMF v2 object {oid.object_name!r} does not fit its schema "
                           f"{self.key}: {exc}")


_BLANK_HEADER: Final = bytes(RecordLayout.HEADER_SIZE)
