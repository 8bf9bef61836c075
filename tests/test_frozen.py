"""``qmf_async.frozen``: ``attrs.frozen`` with one shared ``__repr__`` (start-up: attrs
compiles no ``__repr__`` per class).  The shared one must write exactly what attrs's
generated one writes, and the package's value classes must use it."""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

import attrs
import pytest

import qmf_async
from qmf_async.frozen import frozen, value_repr


def _twins(**options: Any) -> tuple[type, type]:
    """The same class built by ``attrs.frozen`` and by ``frozen``."""

    def body() -> type:
        class Value:
            __annotations__ = {"a": "int", "b": "Any", "c": "Any", "d": "Any", "e": "Any"}
            b = None
            c = attrs.field(default=0, repr=False)
            d = attrs.field(default="x", repr=lambda v: f"<{v}>")
            e = attrs.field(init=False, default=7)
        return Value

    return attrs.frozen(body(), **options), frozen(body(), **options)


@pytest.mark.parametrize("options", [{}, {"slots": True}, {"slots": False}])
def test_the_shared_repr_writes_what_attrs_writes(options: dict[str, Any]) -> None:
    theirs, ours = _twins(**options)
    assert ours.__repr__ is value_repr
    for args in [(1,), (1, "two"), (1, [1, 2], 3, "d"), (-1, {"k": (1, None)}, 0, 4.5)]:
        assert repr(ours(*args)) == repr(theirs(*args))
    # a value met again inside itself is written "...", as attrs does
    mine, its = ours(1, []), theirs(1, [])
    mine.b.append(mine)
    its.b.append(its)
    assert repr(mine) == repr(its) == "Value(a=1, b=[...], d=<x>, e=7)"
    # a subclass, decorated or not, lists its own and inherited fields
    for decorate_theirs, decorate_ours in [(attrs.frozen, frozen), (lambda c: c, lambda c: c)]:
        sub_theirs = decorate_theirs(type("Sub", (theirs,), {"__annotations__": {"f": "int"},
                                                             "f": 9}))
        sub_ours = decorate_ours(type("Sub", (ours,), {"__annotations__": {"f": "int"},
                                                       "f": 9}))
        assert repr(sub_ours(2)) == repr(sub_theirs(2))


def test_a_class_keeps_its_own_repr_or_none_when_asked() -> None:
    @frozen
    class Own:
        a: int

        def __repr__(self) -> str:
            return "own"

    @frozen(repr=False)
    class Plain:
        a: int

    assert repr(Own(1)) == "own"
    assert Plain.__repr__ is object.__repr__
    # eq, hash, frozenness and the generated __init__ are attrs's
    assert Own(1) == Own(1) and hash(Own(1)) == hash(Own(1)) and Own(1) != Own(2)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        Own(1).a = 2  # type: ignore[misc]


def test_the_package_values_use_the_shared_repr() -> None:
    """Every attrs class of the package that attrs would give a generated ``__repr__``
    has the shared one (attrs compiles none at import)."""
    generated = []
    seen = 0
    for info in pkgutil.walk_packages(qmf_async.__path__, "qmf_async."):
        if info.name.endswith("__main__"):
            continue
        try:
            module = importlib.import_module(info.name)
        except ImportError:  # an extra that is not installed here
            continue
        for value in vars(module).values():
            if not (isinstance(value, type) and attrs.has(value)
                    and value.__module__ == info.name):
                continue
            seen += 1
            code = getattr(value.__repr__, "__code__", None)
            if code is not None and code.co_filename.startswith("<attrs generated"):
                generated.append(f"{info.name}.{value.__qualname__}")
    assert seen > 100
    assert generated == [], "use qmf_async.frozen.frozen:\n" + "\n".join(generated)
