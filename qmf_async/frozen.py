"""``frozen``: ``attrs.frozen`` for this package's own value classes, quicker to build
(not an API for users); ``define`` likewise for its few mutable ones.

``attrs`` writes a class's methods as Python source and compiles them when the class is
made, and that compile is most of the time a class takes to build (``attrs`` 26: about
0.35 ms a class, of which ``__repr__`` a third and ``__eq__`` with ``__hash__`` a fifth);
``qmf stat -q`` builds some 70 classes before it sends a byte, most of which it never
prints, compares or hashes (docs/benchmarks.md, "Start-up").  So:

- ``__repr__`` is one shared function, :func:`value_repr`, which reads the class's
  attributes when called and writes what ``attrs``'s own ``__repr__`` writes
  (``Name(a=1, b='x')``, the fields with ``repr=False`` left out, a field's own
  ``repr=`` callable used, ``...`` for a value met again inside itself);
- ``__eq__`` and ``__hash__`` of a ``frozen`` class are made by ``attrs`` on their first
  use, from the class's attributes (a class that never compares or hashes a value never
  compiles them); from then on they are ``attrs``'s generated methods, as fast as when
  made with the class;
- ``__init__`` is ``attrs``'s own, made with the class.

What ``attrs`` leaves alone stays alone: a class that writes its own ``__repr__``,
``__eq__`` or ``__hash__`` keeps it, and options that change equality or hashing
(``eq``, ``order``, ``hash``, ``unsafe_hash``, ``cache_hash``) leave both methods to
``attrs`` at class creation.  Type checkers read ``attrs.frozen`` and ``attrs.define``
themselves (their plugin and ``dataclass_transform``).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import attrs

__all__ = ["define", "frozen", "value_repr"]

_context = threading.local()

#: options with which ``attrs`` makes ``__eq__``/``__hash__`` itself, at class creation
_EQUALITY_OPTIONS = frozenset({"eq", "order", "cmp", "hash", "unsafe_hash", "cache_hash"})


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


def _attrs_equality(cls: Any) -> None:
    """Give ``cls`` the ``__eq__``, ``__ne__`` and ``__hash__`` that ``attrs.frozen``
    would have given it: made by ``attrs`` for a twin class with the same attributes
    (they compare ``self.__class__``, so they serve ``cls``)."""
    these = {
        a.name: attrs.field(eq=a.eq_key or a.eq, hash=a.hash, init=False, repr=False)
        for a in attrs.fields(cls)
    }
    twin = attrs.make_class(cls.__name__, these, frozen=True, slots=False, repr=False,
                            init=False)
    cls.__eq__ = twin.__eq__
    cls.__ne__ = twin.__ne__
    cls.__hash__ = twin.__hash__


def _lazy_equality(cls: Any) -> None:
    """Install on ``cls`` an ``__eq__`` and a ``__hash__`` that make ``attrs``'s own on
    their first call (:func:`_attrs_equality`), then hand over to them."""

    def __eq__(self: Any, other: Any) -> Any:
        _attrs_equality(cls)
        return cls.__eq__(self, other)

    def __hash__(self: Any) -> int:
        _attrs_equality(cls)
        result: int = cls.__hash__(self)
        return result

    cls.__eq__ = __eq__
    cls.__hash__ = __hash__


if TYPE_CHECKING:
    from attrs import define as define
    from attrs import frozen as frozen
else:
    def _quicker(make, name, lazy_equality):
        def decorator(maybe_cls=None, /, **options):
            wanted = options.get("repr")  # None: unless the class writes its own
            lazy = lazy_equality and not _EQUALITY_OPTIONS & options.keys()

            def build(cls):
                if wanted or (wanted is None and "__repr__" not in cls.__dict__):
                    cls.__repr__ = value_repr
                own = lazy and ("__eq__" in cls.__dict__ or "__hash__" in cls.__dict__)
                if not lazy or own:
                    return make(cls, **{**options, "repr": False})
                built = make(cls, **{**options, "repr": False, "eq": False})
                _lazy_equality(built)
                return built

            return build if maybe_cls is None else build(maybe_cls)

        decorator.__name__ = decorator.__qualname__ = name
        decorator.__doc__ = (f"``attrs.{name}(maybe_cls, **options)`` with the shared "
                             f":func:`value_repr`; ``@{name}`` or ``@{name}(...)``.")
        return decorator

    frozen = _quicker(attrs.frozen, "frozen", lazy_equality=True)
    define = _quicker(attrs.define, "define", lazy_equality=False)
