"""Fuzz target ``selector``: a JMS selector parsed, compiled and evaluated.

The input bytes are the selector text (UTF-8, undecodable bytes replaced).  A text
that parses is evaluated over an empty map and over maps that give every name a
value, rotating through :data:`VALUES` (every type a QMF object or event can carry,
plus edge cases: NaN, infinities, the int64 bounds, big ints, undecodable bytes,
Decimals, an object whose ``str()`` fails); its names and v2 ``_where`` predicate
are taken too.  Allowed outcome: success, or :class:`SelectorError` from parsing.
Evaluation raises nothing, and gives True, False or None (UNKNOWN).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from decimal import Decimal
from typing import Any

from qmf_async.protocol._selector import Selector, SelectorError

NAME = "selector"


class _BadStr:
    def __str__(self) -> str:
        raise RuntimeError("no text for this value")


VALUES: tuple[Any, ...] = (
    None, True, False, 0, 1, -1, 7, 2**63 - 1, -(2**63), 2**64 + 1, 10**40,
    0.5, -0.0, 1.5e308, float("inf"), float("-inf"), float("nan"),
    "", "a", "abc", "a%_b\\", "x" * 300, "\u00e9\u4e2d", b"bytes", b"\xff\xfe",
    uuid.UUID(int=5), Decimal("2.5"), Decimal("NaN"), Decimal("sNaN"), Decimal("1e400"),
    _BadStr(), [1, 2], {"a": 1},
)


class _Env(Mapping[str, Any]):
    """Every name has a value: ``VALUES[(len(name) + shift) % len(VALUES)]``."""

    def __init__(self, shift: int) -> None:
        self.shift = shift

    def __getitem__(self, name: str) -> Any:
        return VALUES[(len(name) + self.shift) % len(VALUES)]

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0


ENVS: tuple[Mapping[str, Any], ...] = ({}, *(_Env(i) for i in range(len(VALUES))))


def one_input(data: bytes) -> None:
    """Parse, compile and evaluate one selector text; raises only SelectorError
    (caught here).

    Raises:
        AssertionError: evaluation gave something other than True, False or None.
    """
    text = data.decode("utf-8", "replace")
    try:
        selector = Selector.parse(text)
    except SelectorError as exc:
        assert isinstance(exc.position, int)
        str(exc)
        return
    _ = (selector.names, selector.qmf_where(), repr(selector), hash(selector))
    for env in ENVS:
        result = selector.evaluate(env)
        assert result is None or result is True or result is False, repr(result)
        assert selector(env) is (result is True)


def seeds() -> list[bytes]:
    """Seed inputs: the selector texts of tests/test_selector.py (its evaluation and
    error cases and pathological inputs) and a few written here."""
    from tests import test_selector as t

    texts: list[str] = [case.values[0] for case in t.EVAL_CASES]
    texts += [case[0] for case in t.ERROR_CASES]
    texts += list(t.PATHOLOGICAL.values())
    texts += [
        "name LIKE 'q%' AND msgDepth > 10 OR durable = TRUE",
        "x BETWEEN -1.5e3 AND 0x7F AND y NOT IN ('a', 'b', 3)",
        "\"odd-name\" IS NOT NULL AND z LIKE '!%%' ESCAPE '!'",
        "a * 2 + b / 3 - -c >= 052 AND d <> 2.5f",
    ]
    return [x.encode("utf-8") for x in texts]
