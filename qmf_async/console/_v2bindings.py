"""The ``qmf.default.topic`` bindings a QMF v2 console connection needs for what
its subscriptions follow (pure: no I/O).  :func:`v2_bindings` maps interests (a
package, a class, one agent) and v1 user binding keys onto v2 subject patterns and
``qmf.agent`` selectors, no two of which match one message."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ..frozen import frozen
from ..names import keyify
from ._values import RemoteAgent

__all__ = ["Binding", "Interest", "keyify", "v2_bindings"]


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


@frozen(slots=True)
class Interest:
    """What one subscription follows over v2: ``kind`` ``data`` or ``event``, narrowed
    to a package, a class (object or event class) or one agent."""

    kind: str
    package: str | None = None
    class_name: str | None = None
    agent: RemoteAgent | None = None


def v2_bindings(interests: Iterable[Interest], user_keys: Iterable[str],
                agent_name: Callable[[RemoteAgent | tuple[int, int]], str | None]
                ) -> list[tuple[str, str | None]]:
    """The ``qmf.default.topic`` bindings (key, selector) of one connection that
    receive what ``interests`` follow and what the v1 user binding keys
    ``user_keys`` (``Session(user_bindings=True)``) ask for.

    Classes and packages map onto subject patterns (qpidd's subjects are
    ``agent.ind.<data|event>.<package>.<class>.<vendor>.<product>.<instance>``,
    dots in names as ``_``); one agent maps onto a selector on ``qmf.agent``, which
    qpidd applies at the source.  ``agent_name`` gives the v2 name of an agent (a
    RemoteAgent, or the banks of a v1 key) on this connection, None when it is not
    known here over v2: such an interest binds nothing.  Heartbeats are always
    bound: the agent directory lives on them.

    No message matches two of the bindings returned: over AMQP 1.0 each binding is a
    subscription of its own, and a message both match would arrive twice.  A binding
    that another covers is left out, and two that overlap become one that covers both
    (the console filters what it receives anyway).
    """
    out: dict[tuple[str, str | None], None] = {("agent.ind.heartbeat.#", None): None}
    for it in interests:
        selector = None
        if it.agent is not None:
            name = agent_name(it.agent)
            if name is None:
                continue
            selector = f"qmf.agent = {_quote(name)}"
        package = keyify(it.package) if it.package else "*"
        if it.class_name:
            key = f"agent.ind.{it.kind}.{package}.{it.class_name}.#"
        elif it.package:
            key = f"agent.ind.{it.kind}.{package}.#"
        else:
            key = f"agent.ind.{it.kind}.#"
        out[(key, selector)] = None
    for key in user_keys:
        parts = key.split(".")
        if parts[:1] != ["console"] or len(parts) < 3 or parts[1] not in ("obj", "event"):
            continue
        kind = "data" if parts[1] == "obj" else "event"
        if len(parts) == 3:  # console.obj.# / console.event.#
            out[(f"agent.ind.{kind}.#", None)] = None
            continue
        banks, rest = parts[2:4], parts[4:]
        if banks != ["*", "*"]:
            try:
                agent = agent_name((int(banks[0]), int(banks[1])))
            except ValueError:
                agent = None
            if agent is not None:
                out[(f"agent.ind.{kind}.#", f"qmf.agent = {_quote(agent)}")] = None
            continue
        if not rest or rest == ["#"]:
            out[(f"agent.ind.{kind}.#", None)] = None
        elif rest[-1] in ("#", "*"):
            out[(f"agent.ind.{kind}.{keyify('.'.join(rest[:-1]))}.#", None)] = None
        else:
            package, cls = ".".join(rest[:-1]), rest[-1]
            out[(f"agent.ind.{kind}.{keyify(package)}.{cls}.#", None)] = None
    return _disjoint(list(out))


Binding = tuple[str, str | None]


def _covers(a: Binding, b: Binding) -> bool:
    """Every message ``b`` matches, ``a`` matches (patterns ending in ``#``)."""
    (key_a, sel_a), (key_b, sel_b) = a, b
    if sel_a is not None and sel_a != sel_b:
        return False
    words_a, words_b = key_a.split("."), key_b.split(".")
    if words_a[-1] != "#":
        return a == b
    for i, word in enumerate(words_a[:-1]):
        if i >= len(words_b) or words_b[i] == "#":
            return False
        if word not in ("*", words_b[i]):
            return False
    return True


def _overlap(a: Binding, b: Binding) -> bool:
    """Some message matches both (selectors name one agent each)."""
    (key_a, sel_a), (key_b, sel_b) = a, b
    if sel_a is not None and sel_b is not None and sel_a != sel_b:
        return False
    for word_a, word_b in zip(key_a.split("."), key_b.split("."), strict=False):
        if "#" in (word_a, word_b):
            return True
        if word_a != word_b and "*" not in (word_a, word_b):
            return False
    return len(key_a.split(".")) == len(key_b.split("."))


def _join(a: Binding, b: Binding) -> Binding:
    """A binding that covers both: the words they share, then ``#``."""
    shared = []
    for word_a, word_b in zip(a[0].split("."), b[0].split("."), strict=False):
        if word_a != word_b or word_a == "#":
            break
        shared.append(word_a)
    return (".".join([*shared, "#"]), a[1] if a[1] == b[1] else None)


def _disjoint(bindings: list[Binding]) -> list[Binding]:
    """``bindings`` with no two that match one message (order kept where it can be)."""
    out = list(dict.fromkeys(bindings))
    changed = True
    while changed:
        changed = False
        for i, a in enumerate(out):
            for j in range(i + 1, len(out)):
                b = out[j]
                if _covers(a, b):
                    del out[j]
                elif _covers(b, a):
                    out[i] = b
                    del out[j]
                elif _overlap(a, b):
                    out[i] = _join(a, b)
                    del out[j]
                else:
                    continue
                changed = True
                break
            if changed:
                break
        out = list(dict.fromkeys(out))
    return out
