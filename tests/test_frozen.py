"""``qmf_async.frozen``: ``attrs.frozen`` with one shared ``__repr__`` and ``__eq__`` /
``__hash__`` made by attrs on first use (start-up: attrs compiles neither when a class
is made).  The shared ``__repr__`` must write exactly what attrs's generated one writes,
equality and hashing must behave as attrs's, and the package's value classes must use
them."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys
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


def _generated(method: Any) -> bool:
    code = getattr(method, "__code__", None)
    return code is not None and code.co_filename.startswith("<attrs generated")


def _eq_twins(**options: Any) -> tuple[type, type]:
    def body() -> type:
        class Value:
            __annotations__ = {"a": "int", "b": "Any", "c": "Any", "d": "Any"}
            b = None
            c = attrs.field(default=0, eq=False)  # left out of eq and hash
            d = attrs.field(default="X", eq=str.lower)  # compared by its key
        return Value

    return attrs.frozen(body(), **options), frozen(body(), **options)


@pytest.mark.parametrize("options", [{}, {"slots": True}, {"slots": False}])
def test_equality_and_hashing_are_attrs_made_on_first_use(options: dict[str, Any]) -> None:
    theirs, ours = _eq_twins(**options)
    assert not _generated(ours.__eq__) and not _generated(ours.__hash__)  # nothing compiled
    samples = [(1,), (1, None, 5), (1, "b"), (2,), (1, None, 0, "x"), (1, None, 0, "y"),
               (1, (1, 2))]
    for x in samples:
        for y in samples:
            assert (ours(*x) == ours(*y)) is (theirs(*x) == theirs(*y)), (x, y)
            assert (ours(*x) != ours(*y)) is (theirs(*x) != theirs(*y)), (x, y)
            if ours(*x) == ours(*y):
                assert hash(ours(*x)) == hash(ours(*y))
    assert _generated(ours.__eq__) and _generated(ours.__hash__)  # attrs's own, now
    assert ours(1) != theirs(1) and ours(1) != 1 and ours(1).__eq__(1) is NotImplemented
    assert len({ours(1), ours(1, None, 9), ours(2)}) == 2
    # hashing first works as well, and an undecorated subclass inherits them
    _, fresh = _eq_twins(**options)
    sub = type("Sub", (fresh,), {})
    assert hash(sub(1)) == hash(sub(1)) and sub(1) == sub(1) and sub(1) != fresh(1)


def test_a_class_keeps_its_own_equality_and_attrs_options() -> None:
    @frozen
    class Own:
        a: int

        def __eq__(self, other: object) -> bool:
            return True

        def __hash__(self) -> int:
            return 7

    @frozen(cache_hash=True)
    class Cached:
        a: int

    @frozen(eq=False)
    class Identity:
        a: int

    assert Own(1) == Own(2) and hash(Own(1)) == 7
    assert _generated(Cached.__eq__) and _generated(Cached.__hash__)  # attrs's, at once
    assert Cached(1) == Cached(1) and hash(Cached(1)) == hash(Cached(1))
    assert Identity(1) != Identity(1)


def test_importing_the_codec_compiles_no_equality() -> None:
    """A fresh ``import qmf_async.wire`` compiles no ``__eq__`` of a message class (the
    class key, hashed on every record, keeps attrs's ``cache_hash``, made at once)."""
    code = ("import qmf_async.wire._messages as m, qmf_async.wire._values as v\n"
            "g = lambda f: getattr(getattr(f, '__code__', None), 'co_filename', '')"
            ".startswith('<attrs generated')\n"
            "print(g(m.SchemaRequest.__eq__), g(m.Heartbeat.__hash__), g(v.ClassKey.__eq__))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True)
    assert done.stdout.split() == ["False", "False", "True"]
