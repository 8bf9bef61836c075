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

import operator
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
#: most packers learned per class, and the maps a learned packer may miss before the
#: general one is used again (and another learned)
_MAX_LEARNS: Final = 8
_MAX_MISSES: Final = 32


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


def _pack_expression(fields: list[tuple[str, QmfType]], args: list[str],
                     env: dict[str, Any]) -> str:
    """The expression packing ``args`` (expressions, one per field of ``fields``) as
    the class codec's encoder writes the section: one ``struct`` call per run of
    fixed-size fields (their packers put in ``env``), the texts between."""
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
    return " + ".join(parts)


def _type_checks(fields: list[tuple[str, QmfType]], args: list[str]) -> list[str]:
    """The tests that every one of ``args`` (variables) has exactly its fast-path type
    (texts are checked by their packers)."""
    checks = []
    for kind in ("_int", "_bool", "_float"):
        of_kind = [v for v, (_, t) in zip(args, fields, strict=True) if _PACKED.get(t) == kind]
        if of_kind:
            checks.append(f"{kind} is " + " is ".join(f"type({v})" for v in of_kind))
    return checks


def _packer_env(fields: list[tuple[str, QmfType]]) -> dict[str, Any]:
    return {"_names": tuple(f[0] for f in fields), "_map": map, "_list": list, "_int": int,
            "_bool": bool, "_float": float, "_errors": _NOT_PACKED, "_text8": _text8,
            "_text16": _text16, "_defaults": tuple(v2_default(t) for _, t in fields)}


def _packable(fields: list[tuple[str, QmfType]]) -> bool:
    return bool(fields) and all(t in _PACKED or t in _TEXTS for _, t in fields)


def _compile_stats_packer(fields: list[tuple[str, QmfType]], what: str) -> _Packer | None:
    """The statistics of a map straight to the bytes of their section: the values in
    schema order in one C call, the absent or null ones given their type's zero (and
    named in ``absent``), then, when every value has exactly its fast-path type
    (``int`` for the integers, ``bool``, ``float``, UTF-8 text), one ``struct`` call
    per run of fixed-size fields: the bytes the field-by-field conversion and the
    class codec's encoder give.  None for anything else (the caller goes the
    field-by-field way), and no packer for a class with other types among its
    statistics."""
    if not _packable(fields):
        return None
    env = _packer_env(fields)
    variables = [f"v{i}" for i in range(len(fields))]
    checks = _type_checks(fields, variables)
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
    body = ["try:", f"    return {_pack_expression(fields, variables, env)}",
            "except _errors:", "    return None"]
    if checks:
        lines.append(f"    if {' and '.join(checks)}:")
        lines += ["        " + b for b in body]
        lines.append("    return None")
    else:
        lines += ["    " + b for b in body]
    packer: _Packer = _compile_source("pack_stats", lines, env, f"v2 {what}")
    return packer


def _compile_learned_packer(fields: list[tuple[str, QmfType]], missing: frozenset[str],
                            other: _Packer, what: str) -> _Packer | None:
    """A packer for the maps that lack exactly the fields named ``missing`` (or hold
    them null) and hold every other one, exactly typed: what an agent sends every
    time (qpidd leaves out the same statistics in every update).  The present values
    taken in one C call (``operator.itemgetter``), no scan for nulls, the missing ones
    packed as their type's zero (constants) and named in ``absent``, in schema order.
    Any map that departs from that (a key more or less, a null, another type, a
    value out of range, text that is not UTF-8) goes to ``other`` (the general
    packer), whose result it returns: the same bytes and names either way.  None
    when no field would be taken (nothing to gain)."""
    present = [(n, t) for n, t in fields if n not in missing]
    if not present or not _packable(fields):
        return None
    env = _packer_env(fields)
    env.update({"_other": other, "_get": operator.itemgetter(*(n for n, _ in present)),
                "_missing": tuple(n for n, _ in fields if n in missing)})
    variables = [f"v{i}" for i in range(len(present))]
    args: list[str] = []
    at = 0
    for i, (name, _) in enumerate(fields):
        if name in missing:
            args.append(f"_defaults[{i}]")
        else:
            args.append(variables[at])
            at += 1
    unpack = f"{', '.join(variables)}, = _get(values)" if len(present) > 1 \
        else "v0 = _get(values)"
    checks = [f"g({n!r}) is None" for n in env["_missing"]]
    checks += _type_checks(present, variables)
    lines = ["def pack_learned(values, absent):",
             "    try:",
             f"        {unpack}",
             "    except KeyError:",
             "        return _other(values, absent)"]
    if env["_missing"]:
        lines.insert(1, "    g = values.get")
    body = ["try:", f"    packed = {_pack_expression(fields, args, env)}",
            "except _errors:", "    return _other(values, absent)"]
    if env["_missing"]:
        body.append("absent += _missing")
    body.append("return packed")
    if checks:
        lines.append(f"    if {' and '.join(checks)}:")
        lines += ["        " + b for b in body]
        lines.append("    return _other(values, absent)")
    else:
        lines += ["    " + b for b in body]
    packer: _Packer = _compile_source("pack_learned", lines, env, f"v2 {what}")
    return packer


class V2RecordConverter:
    """Turns v2 objects of one class into v1 records of ``schema`` (encoded by
    ``codec``, the registry's codec of that schema); ``ref_id`` makes the v1 ids."""

    __slots__ = ("_absent", "_learns", "_misses", "_pack_stats", "_packer", "_sfields", "codec",
                 "has_stats", "key", "pnames", "props", "ref_id", "snames", "stats")

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
        #: what packs the statistics: the general packer, or one learned from what the
        #: agent sends (see _learn)
        self._packer: _Packer | None = self._pack_stats
        self._sfields = sfields
        self._learns = 0
        self._misses = 0
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
                packer = self._packer
                if packer is not None:
                    n = len(absent)
                    packed = packer(values, absent)
                    if packed is None:  # the field-by-field way names them again
                        del absent[n:]
                    elif self._packer is self._pack_stats and self._learns < _MAX_LEARNS:
                        self._learn(frozenset(absent[n:]))
                if packed is None:
                    stats = self.stats(values, banks, absent)
        except DecodeError:
            raise
        except _MISFITS as exc:
            raise self._misfit(v2_oid, exc) from exc
        oid = self.ref_id(banks, v2_oid)
        codec = self.codec
        head = RecordLayout.header(data.update_ts or 0, data.create_ts or 0,
                                   data.delete_ts or 0, oid)
        if packed is not None and props is None:  # statistics alone, packed: no buffer
            raw = head + packed
            sofs = len(head)
        else:
            out = bytearray(head)
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
            raw = bytes(out)
        if absent:  # an agent leaves out the same fields every time: one set each
            names = self._absent.get(tuple(absent))
            if names is None:
                if len(self._absent) >= 64:
                    self._absent.clear()
                names = self._absent[tuple(absent)] = frozenset(absent)
        else:
            names = _NO_NAMES
        return RawObjectRecord(opcode, 0, codec, raw, sofs, names)

    def _learn(self, missing: frozenset[str]) -> None:
        """Pack the statistics of the maps that lack the same fields as this one (or
        hold them null) by a packer made for them (``_compile_learned_packer``); the
        general packer again after :data:`_MAX_MISSES` maps that did not fit it, and
        at most :data:`_MAX_LEARNS` packers made per class."""
        assert self._pack_stats is not None
        self._learns += 1
        self._misses = 0
        learned = _compile_learned_packer(self._sfields, missing, self._miss,
                                          f"{self.key} statistics")
        if learned is not None:
            self._packer = learned

    def _miss(self, values: Mapping[str, Any], absent: list[str]) -> bytes | None:
        """A map the learned packer does not fit: the general packer's answer."""
        assert self._pack_stats is not None
        self._misses += 1
        if self._misses >= _MAX_MISSES:
            self._packer = self._pack_stats
        return self._pack_stats(values, absent)

    def _misfit(self, oid: V2ObjectId, exc: BaseException) -> DecodeError:
        return DecodeError(f"QMF v2 object {oid.object_name!r} does not fit its schema "
                           f"{self.key}: {exc}")
