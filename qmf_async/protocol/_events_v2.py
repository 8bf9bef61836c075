"""Events the QMF v2 console core hands its driver (see :mod:`._console_v2`).

Small frozen values.  Requests are named by their correlation id (a ``str``),
agents by their v2 name (qpidd: ``apache.org:qpidd:<uuid>``; answers from qpidd's
own agent addressed as ``broker`` carry ``broker``).  Every name is ``V2<Name>``
(see :mod:`qmf_async.protocol`); :data:`V2ConsoleEvent` is any of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from ..errors import QmfError
from ..frozen import frozen
from ..wire import V2Event

__all__ = [
    "V2AgentArrived",
    "V2AgentBeat",
    "V2AgentLeft",
    "V2AgentRestarted",
    "V2ConsoleEvent",
    "V2DataIndicated",
    "V2EventIndicated",
    "V2MessageMalformed",
    "V2MessageUnhandled",
    "V2MethodAnswered",
    "V2MethodFailed",
    "V2QueryAnswered",
    "V2QueryFailed",
    "V2QueryPart",
    "V2RequestExpired",
    "V2RequestFailed",
]


@frozen(slots=True)
class V2QueryAnswered:
    """Query ``cid`` is answered: ``items`` gathered from every part in the order
    received (:class:`~qmf_async.wire.V2Data` for ``_data`` answers, else the raw
    maps); ``agent`` is the ``qmf.agent`` of the last part."""

    cid: str
    items: list[Any]
    agent: str | None


@frozen(slots=True)
class V2QueryPart:
    """A part of the answer to a streamed query (``send_query(stream=True)``) that is
    not the last: its ``items`` only (the last part comes as :class:`V2QueryAnswered`
    holding the items of that part alone)."""

    cid: str
    items: list[Any]
    agent: str | None


@frozen(slots=True)
class V2QueryFailed:
    """Query ``cid`` was answered with an ``_exception`` (``code`` as sent, None when
    absent or not an integer)."""

    cid: str
    code: int | None
    text: str
    agent: str | None = None


@frozen(slots=True)
class V2MethodAnswered:
    """Method call ``cid`` succeeded with output ``arguments`` (values as received:
    see :func:`~._console_v2.texts_from_schema`)."""

    cid: str
    arguments: Mapping[str, Any]
    agent: str | None = None


@frozen(slots=True)
class V2MethodFailed:
    """Method call ``cid`` was answered with an ``_exception``."""

    cid: str
    code: int | None
    text: str
    agent: str | None = None


@frozen(slots=True)
class V2RequestFailed:
    """Request ``cid`` can no longer complete here: its answer grew past the limit,
    its agent left, the connection was lost or closed.  ``items`` are what had been
    gathered (empty for a method call)."""

    cid: str
    error: QmfError
    items: list[Any] = attrs.Factory(list)


@frozen(slots=True)
class V2RequestExpired:
    """Request ``cid`` (``kind`` ``query``, ``method`` or ``locate``) reached its
    deadline; ``items`` are the partial answer gathered so far (for a locate: the
    names of the agents that answered it, which is its normal end)."""

    cid: str
    kind: str
    items: list[Any]


@frozen(slots=True)
class V2AgentArrived:
    """An agent was seen for the first time (or again, after it left)."""

    name: str
    vendor: str | None
    product: str | None
    instance: str | None
    epoch: int | None
    interval: float


@frozen(slots=True)
class V2AgentBeat:
    """A heartbeat indication of an agent in the directory (after its
    :class:`V2AgentArrived`, when it is the one that announced it): ``timestamp``
    is the agent's ``_timestamp`` (ns since the epoch; None when it sent none)."""

    name: str
    timestamp: int | None


@frozen(slots=True)
class V2AgentRestarted:
    """A known agent announced another epoch: it restarted (its objects and
    subscriptions are gone)."""

    name: str
    old_epoch: int | None
    new_epoch: int | None


@frozen(slots=True)
class V2AgentLeft:
    """An agent left the directory (``why``: silent too long, the connection ended)."""

    name: str
    why: str


@frozen(slots=True)
class V2DataIndicated:
    """A ``_data_indication`` of objects (qpidd: the changed objects of one class)."""

    agent: str | None
    items: list[Any]


@frozen(slots=True)
class V2EventIndicated:
    """One event of a ``_data_indication`` with content ``_event``."""

    agent: str | None
    event: V2Event


@frozen(slots=True)
class V2MessageMalformed:
    """A message did not decode (missing or mistyped keys); it was dropped."""

    subject: str | None
    opcode: str | None
    error: QmfError


@frozen(slots=True)
class V2MessageUnhandled:
    """A well-formed message a console does not act on (an unknown opcode or
    content: an :class:`~qmf_async.wire.V2UnknownMessage`; a request seen on a
    shared topic); it was dropped."""

    message: Any


#: any event of the v2 console core
V2ConsoleEvent = (V2QueryAnswered | V2QueryPart | V2QueryFailed | V2MethodAnswered
                  | V2MethodFailed | V2RequestFailed | V2RequestExpired | V2AgentArrived
                  | V2AgentBeat | V2AgentRestarted | V2AgentLeft | V2DataIndicated
                  | V2EventIndicated | V2MessageMalformed | V2MessageUnhandled)
