"""``frozen``: ``attrs.frozen`` for this package's own value classes, quicker to build
(not an API for users); ``define`` likewise for its few mutable ones.

``attrs`` writes each class's ``__repr__`` as Python source and compiles it when the
class is made; that compile is about a third of the time a frozen class takes to build
(``attrs`` 26: 0.12 of 0.35 ms), and ``qmf stat -q`` builds some 70 classes before it
sends a byte.  :func:`frozen` is ``attrs.frozen`` with ``repr=False`` and one shared
:func:`value_repr` in its place, which reads the class's attributes when called and
writes what ``attrs``'s own ``__repr__`` writes (``Name(a=1, b='x')``, the fields with
``repr=False`` left out, a field's own ``repr=`` callable used, ``...`` for a value met
again inside itself).  ``__init__``, ``__eq__`` and ``__hash__`` stay the ones ``attrs``
generates: they are on the hot paths.  A class that writes its own ``__repr__``
keeps it, as with ``attrs``; ``frozen(..., repr=False)`` leaves the class without one of
``attrs``'s, as ``attrs`` does.

Type checkers read ``attrs.frozen`` itself (its plugin and ``dataclass_transform``).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import attrs

__all__ = ["define", "frozen", "value_repr"]

_context = threading.local()


def value_repr(self: Any) -> str:
    """``repr`` of an attrs instance as ``attrs``'s generated ``__repr__`` writes it."""
    try:
        seen: set[int] = _context.seen
    except AttributeError:
        seen = _context.seen = set()
    key = id(self)
    if key in seen:
        return "..."
    seen.add(key)
    try:
        parts = []
        for a in type(self).__attrs_attrs__:
            how = a.repr
            if how is False:
                continue
            value = getattr(self, a.name) if a.init else getattr(self, a.name, attrs.NOTHING)
            parts.append(f"{a.name}={value!r}" if how is True else f"{a.name}={how(value)}")
        name = self.__class__.__qualname__.rsplit(">.", 1)[-1]
        return f"{name}({', '.join(parts)})"
    finally:
        seen.discard(key)


if TYPE_CHECKING:
    from attrs import define as define
    from attrs import frozen as frozen
else:
    def _with_shared_repr(make, name):
        def decorator(maybe_cls=None, /, **options):
            wanted = options.get("repr")  # None: unless the class writes its own

            def build(cls):
                if wanted or (wanted is None and "__repr__" not in cls.__dict__):
                    cls.__repr__ = value_repr
                return make(cls, **{**options, "repr": False})

            return build if maybe_cls is None else build(maybe_cls)

        decorator.__name__ = decorator.__qualname__ = name
        decorator.__doc__ = (f"``attrs.{name}(maybe_cls, **options)`` with the shared "
                             f":func:`value_repr`; ``@{name}`` or ``@{name}(...)``.")
        return decorator

    frozen = _with_shared_repr(attrs.frozen, "frozen")
    define = _with_shared_repr(attrs.define, "define")
