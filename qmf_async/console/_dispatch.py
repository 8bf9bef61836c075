"""The console's one event dispatch: what a protocol core (v1 or v2) returns is acted on
through a table of handlers keyed by event type (:data:`Handlers`), by :func:`handle`.

Both cores speak one vocabulary (:mod:`qmf_async.protocol`'s events); each side of a
broker connection (its v1 events, :class:`~qmf_async.console._v1events.V1Events`, its
v2 link, :class:`~qmf_async.console._v2.V2Link`) holds one table of this shape.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from ..protocol import AgentKey

__all__ = ["Handlers", "handle", "ignore", "v1_banks"]

#: event type -> what acts on an event of it (raising nothing it means to)
Handlers = dict[type, Callable[[Any], None]]


def handle(handlers: Handlers, events: Iterable[Any], where: str,
           log: logging.Logger) -> None:
    """Act on ``events`` in order, each by the handler of its type; one that fails
    (or has no handler) is logged with ``where`` and does not stop the rest.

    Raises:
        Nothing.
    """
    for ev in events:
        try:
            handlers[type(ev)](ev)
        except Exception:
            log.exception("failed to handle %r from %s", ev, where)


def ignore(ev: Any) -> None:
    """The handler of events a side does not act on."""


def v1_banks(agent: AgentKey) -> tuple[int, int]:
    """The banks naming an agent of the v1 core (which names every agent so).

    Raises:
        TypeError: ``agent`` is a v2 name (a v2 event handed to a v1 handler).
    """
    if isinstance(agent, str):
        raise TypeError(f"a v1 agent is named by its banks, not {agent!r}")
    return agent
