"""How qpidd names its objects over QMF v2, computed from their v1 records (pure).

qpidd gives every managed object one identity and shows it two ways: over v1 a 128-bit
id (banks, boot sequence, a per-boot counter), over v2 a name
``package:class:key``.  The key is what qpidd's generated management code streams
(``getKey()``): the index properties in schema order, ``vhostRef`` left out (qpidd has
one virtual host), joined by ``,``; a reference streams as the v2 name of the object it
points to, a bool as ``1``/``0``, every other value as its text.  One object is added
with an explicit bare key: ``memory``, named ``amqp-broker``.

The console uses this to give an object read over v1 (qpidd's fast path for queries)
the same identity as the same object published over v2.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..wire import QmfType, SchemaClass

__all__ = ["qpidd_object_name"]

#: classes whose objects qpidd adds under a bare explicit key (their index value)
_BARE: frozenset[tuple[str, str]] = frozenset({("org.apache.qpid.broker", "memory")})


def qpidd_object_name(schema: SchemaClass, properties: Sequence[Any],
                      name_of: Callable[[bytes], str | None]) -> str | None:
    """The v2 ``_object_name`` qpidd gives the object whose property values (schema
    order) are ``properties``; ``name_of(id bytes)`` names a referenced object.

    Returns None when a referenced object's name is not known (``name_of`` said None)
    or the class has no index property.  Raises nothing.
    """
    parts: list[str] = []
    for prop, value in zip(schema.properties, properties, strict=False):
        if not prop.index or prop.name == "vhostRef":
            continue
        if prop.type == QmfType.REF:
            if value is None:
                return None
            found = name_of(value.raw)
            if found is None:
                return None
            parts.append(found)
        elif value is None:
            parts.append("")
        elif isinstance(value, bool):
            parts.append("1" if value else "0")
        else:
            parts.append(str(value))
    if not parts:
        return None
    key = schema.class_key
    if (key.package, key.name) in _BARE:
        return ",".join(parts)
    return f"{key.package}:{key.name}:{','.join(parts)}"
