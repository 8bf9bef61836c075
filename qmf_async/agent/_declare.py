"""Declaring schemas in Python: object classes, event classes and their hashes.

Properties, statistics, methods and arguments are the schema value types of
:mod:`qmf_async` (``SchemaProperty`` ...), whose ``type`` and ``access`` accept names
such as ``"uint32"``, ``"sstr"``, ``"objId"`` and ``"RO"``.  The class hash is an MD5
digest of the class's canonical wire encoding, so the same declaration always
gets the same key and any change gets a new one.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from ..errors import UsageError
from ..wire import (
    ClassKey,
    ClassKind,
    SchemaArgument,
    SchemaClass,
    SchemaMethod,
    SchemaProperty,
    SchemaStatistic,
    encode_schema,
)

__all__ = ["object_class", "event_class", "method", "compute_hash"]

_ZERO = bytes(16)


def _check_names(what: str, names: Iterable[str]) -> None:
    seen: set[str] = set()
    for name in names:
        if not name or not isinstance(name, str):
            raise UsageError(f"{what}: every element needs a name")
        if len(name.encode()) > 255:
            raise UsageError(f"{what}: name {name[:20]!r}... is longer than 255 bytes")
        if name in seen:
            raise UsageError(f"{what}: {name!r} is declared twice")
        seen.add(name)


def compute_hash(schema: SchemaClass) -> bytes:
    """MD5 of the schema's wire encoding with a zero hash: deterministic, 16 bytes."""
    key = schema.class_key
    probe = SchemaClass(schema.kind, ClassKey(key.package, key.name, _ZERO),
                        schema.properties, schema.statistics, schema.methods, schema.arguments)
    out = bytearray()
    encode_schema(out, probe)
    return hashlib.md5(bytes(out), usedforsecurity=False).digest()


def _finish(schema: SchemaClass, hash: bytes | None) -> SchemaClass:
    digest = compute_hash(schema) if hash is None else hash
    key = ClassKey(schema.class_key.package, schema.class_key.name, digest)
    return SchemaClass(schema.kind, key, schema.properties, schema.statistics, schema.methods,
                       schema.arguments)


def object_class(package: str, name: str, *,
                 properties: Iterable[SchemaProperty] = (),
                 statistics: Iterable[SchemaStatistic] = (),
                 methods: Iterable[SchemaMethod] = (),
                 hash: bytes | None = None) -> SchemaClass:
    """Declare an object class; its hash is computed unless given.

    Raises:
        UsageError: duplicate or invalid names, or a bad hash.
    """
    props, stats, meths = tuple(properties), tuple(statistics), tuple(methods)
    _check_names(f"{package}:{name}", [p.name for p in props] + [s.name for s in stats])
    _check_names(f"{package}:{name} methods", [m.name for m in meths])
    for m in meths:
        _check_names(f"{name}.{m.name}", [a.name for a in m.arguments])
        for a in m.arguments:
            if a.direction not in ("I", "O", "IO"):
                raise UsageError(f"{name}.{m.name}: argument {a.name!r} needs dir I, O or IO")
    schema = SchemaClass(ClassKind.OBJECT, ClassKey(package, name, _ZERO), props, stats, meths)
    return _finish(schema, hash)


def event_class(package: str, name: str, arguments: Iterable[SchemaArgument] = (), *,
                hash: bytes | None = None) -> SchemaClass:
    """Declare an event class; its hash is computed unless given.

    Raises:
        UsageError: duplicate or invalid argument names, or a bad hash.
    """
    args = tuple(arguments)
    _check_names(f"{package}:{name}", [a.name for a in args])
    schema = SchemaClass(ClassKind.EVENT, ClassKey(package, name, _ZERO), arguments=args)
    return _finish(schema, hash)


def method(name: str, *arguments: SchemaArgument, desc: str | None = None) -> SchemaMethod:
    """Declare a method with its arguments (each with ``direction`` I, O or IO)."""
    return SchemaMethod(name, arguments, desc)
