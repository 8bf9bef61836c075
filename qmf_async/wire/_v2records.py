"""QMF v2 objects as v1 object records of their class.  Pure: no I/O.

A console that speaks v2 serves the same object view as over v1: each v2 object
(:class:`~qmf_async.wire.V2Data`) becomes a :class:`~qmf_async.wire.RawObjectRecord`
of its class's v1 schema (qpidd has no v2 schema query; the v1 ``S`` gives it):

- values are read from the object's ``_values`` map by name: texts decoded (qpidd
  sends them as binary), uuids sent as 16 bytes made uuids, booleans and floats made
  so, references (v2 object id maps) made v1 object ids; integers and the other types
  as received;
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

from ..errors import DecodeError, EncodeError
from ._classcodec import ClassCodec, RawObjectRecord
from ._compile import _FIXED_FMT, _compile_source
from ._record import RecordLayout
from ._schema import SchemaClass
from ._v2 import V2Data, V2ObjectId, V2SchemaId
from ._values import ClassKey, ObjectId, QmfType

__all__ = ["RefId", "V2RecordConverter", "v2_class_key", "v2_default", "v2_value"]

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


def v2_class_key(sid: V2SchemaId | None) -> ClassKey | None:
    """The v1 class key of a v2 schema id (None without a 16-byte hash)."""
    if sid is None:
        return None
    try:
        return _KEYS[sid]
    except KeyError:
        pass
    key = _class_key(sid)
    if len(_KEYS) >= _MAX_KEYS:
        _KEYS.clear()
    _KEYS[sid] = key
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


#: statistics types packed straight from the map (an exact ``int``, ``bool`` or
#: ``float`` is its own conversion and takes the encoder's fast path)
_PACKED: Final = {**{t: "_int" for t in _INTS}, QmfType.BOOL: "_bool",
                  QmfType.FLOAT: "_float", QmfType.DOUBLE: "_float"}
#: ``pack(values, absent) -> the statistics section's bytes``, or None (a value
#: needs the field-by-field way: another type, out of range, not UTF-8); the names
#: of the absent or null fields are appended to ``absent`` either way
_Packer = Callable[[Mapping[str, Any], list[str]], "bytes | None"]
#: what a value the packer cannot take raises inside it
_NOT_PACKED: Final = (struct.error, OverflowError, TypeError, ValueError)


def _text8(v: Any) -> bytes:
    """An sstr as the class codec's encoder writes it, from a ``str``, or ``bytes``
    that are UTF-8 (the conversion's text is then those bytes again).

    Raises:
        TypeError, ValueError: anything else (the field-by-field way then).
    """
    if type(v) is bytes:
        v.decode("utf-8")  # strict: the conversion would replace what is not UTF-8
        raw = v
    elif type(v) is str:
        raw = v.encode()
    else:
        raise TypeError("not a text")
    if len(raw) > 255:
        raise ValueError("too long")
    return bytes((len(raw),)) + raw


def _text16(v: Any) -> bytes:
    """An lstr as :func:`_text8` (a two-byte size)."""
    if type(v) is bytes:
        v.decode("utf-8")
        raw = v
    elif type(v) is str:
        raw = v.encode()
    else:
        raise TypeError("not a text")
    if len(raw) > 65535:
        raise ValueError("too long")
    return len(raw).to_bytes(2, "big") + raw


def _compile_stats_packer(fields: list[tuple[str, QmfType]], what: str) -> _Packer | None:
    """The statistics of a map straight to the bytes of their section: the values in
    schema order in one C call, the absent or null ones given their type's zero (and
    named in ``absent``), then, when every value has exactly its fast-path type
    (``int`` for the integers, ``bool``, ``float``, UTF-8 text), one ``struct`` call
    per run of fixed-size fields: the bytes the field-by-field conversion and the
    class codec's encoder give.  None for anything else (the caller goes the
    field-by-field way), and no packer for a class with other types among its
    statistics."""
    if not fields or any(t not in _PACKED and t not in _TEXTS for _, t in fields):
        return None
    names = tuple(f[0] for f in fields)
    env: dict[str, Any] = {
        "_names": names, "_map": map, "_list": list, "_int": int, "_bool": bool,
        "_float": float, "_errors": _NOT_PACKED, "_text8": _text8, "_text16": _text16,
        "_defaults": tuple(v2_default(t) for _, t in fields)}
    variables = [f"v{i}" for i in range(len(fields))]
    checks = []
    for kind in ("_int", "_bool", "_float"):
        of_kind = [v for v, (_, t) in zip(variables, fields, strict=True)
                   if _PACKED.get(t) == kind]
        if of_kind:
            checks.append(f"{kind} is " + " is ".join(f"type({v})" for v in of_kind))
    parts: list[str] = []
    run: list[tuple[str, QmfType]] = []

    def flush() -> None:
        if run:
            sname = f"_p{len(parts)}"
            env[sname] = struct.Struct(">" + "".join(_FIXED_FMT[t] for _, t in run)).pack
            parts.append(f"{sname}({', '.join(v for v, _ in run)})")
            run.clear()

    for v, (_, t) in zip(variables, fields, strict=True):
        if t in _TEXTS:
            flush()
            parts.append(f"_text8({v})" if t == QmfType.SSTR else f"_text16({v})")
        else:
            run.append((v, t))
    flush()
    lines = ["def pack_stats(values, absent):",
             "    out = _list(_map(values.get, _names))",
             "    if None in out:",
             "        i = out.index(None)",
             "        while True:",
             "            out[i] = _defaults[i]",
             "            absent.append(_names[i])",
             "            try:",
             "                i = out.index(None, i + 1)",
             "            except ValueError:",
             "                break",
             f"    {', '.join(variables)}, = out"]
    body = ["try:", f"    return {' + '.join(parts)}", "except _errors:", "    return None"]
    if checks:
        lines.append(f"    if {' and '.join(checks)}:")
        lines += ["        " + b for b in body]
        lines.append("    return None")
    else:
        lines += ["    " + b for b in body]
    packer: _Packer = _compile_source("pack_stats", lines, env, f"v2 {what}")
    return packer


class V2RecordConverter:
    """Turns v2 objects of one class into v1 records of ``schema`` (encoded by
    ``codec``, the registry's codec of that schema); ``ref_id`` makes the v1 ids."""

    __slots__ = ("_absent", "_pack_stats", "codec", "has_stats", "key", "pnames", "props",
                 "ref_id", "snames", "stats")

    def __init__(self, schema: SchemaClass, codec: ClassCodec, ref_id: RefId, *,
                 fast: bool = True) -> None:
        """``fast=False``: every map the field-by-field way (the same records; for
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
        #: the statistics packed straight from a map that has them all, exactly typed
        self._pack_stats = _compile_stats_packer(
            sfields, f"{schema.class_key} statistics") if fast else None
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

    def record(self, data: V2Data, banks: tuple[int, int]) -> RawObjectRecord:
        """``data``, an object of this class from the agent of ``banks``, as a v1
        record (its id, and those of its references, from ``ref_id``, the references
        asked first).

        Raises:
            DecodeError: no object id, or values that do not fit the schema.
        """
        v2_oid = data.object_id
        if v2_oid is None:
            raise DecodeError("QMF v2 object without an object id or schema hash")
        values = data.values
        opcode = self.opcode(values)
        absent: list[str] = []
        stats: list[Any] | None = None
        packed: bytes | None = None
        try:
            props = self.props(values, banks, absent) if opcode != "i" else None
            if opcode != "c":
                if self._pack_stats is not None:
                    n = len(absent)
                    packed = self._pack_stats(values, absent)
                    if packed is None:  # the field-by-field way names them again
                        del absent[n:]
                if packed is None:
                    stats = self.stats(values, banks, absent)
        except DecodeError:
            raise
        except _MISFITS as exc:
            raise self._misfit(v2_oid, exc) from exc
        oid = self.ref_id(banks, v2_oid)
        codec = self.codec
        out = bytearray(RecordLayout.header(data.update_ts or 0, data.create_ts or 0,
                                            data.delete_ts or 0, oid))
        try:
            if props is not None:
                codec.properties[1](out, props)
            sofs = len(out)
            if packed is not None:
                out += packed
            elif stats is not None:
                codec.statistics[1](out, stats)
        except _MISFITS as exc:
            raise self._misfit(v2_oid, exc) from exc
        if absent:  # an agent leaves out the same fields every time: one set each
            names = self._absent.get(tuple(absent))
            if names is None:
                if len(self._absent) >= 64:
                    self._absent.clear()
                names = self._absent[tuple(absent)] = frozenset(absent)
        else:
            names = _NO_NAMES
        return RawObjectRecord(opcode, 0, codec, bytes(out), sofs, names)

    def _misfit(self, oid: V2ObjectId, exc: BaseException) -> DecodeError:
        return DecodeError(f"QMF v2 object {oid.object_name!r} does not fit its schema "
                           f"{self.key}: {exc}")
