"""What object proxies and callbacks need of the session and its brokers.

Structural types, so that ``_objects`` does not import ``_session`` (which builds on
it): a :class:`~qmf_async.Broker` is a :class:`BrokerLink`, a
:class:`~qmf_async.Session` a :class:`SessionLink`.
"""

from __future__ import annotations

import uuid
from typing import Any, Protocol

from .. import wire as codec
from ._options import SessionOptions

__all__ = ["BrokerLink", "SessionLink", "SessionSettings"]


class BrokerLink(Protocol):
    """A broker connection as objects, agents and callbacks name it."""

    url: str
    where: str
    broker_id: uuid.UUID | None
    topic_dropped: int
    reconnects: int
    error: BaseException | None

    @property
    def connected(self) -> bool: ...

    @property
    def has_management(self) -> bool: ...

    def agents(self) -> list[Any]: ...

    async def call_method(self, obj: Any, method: Any, in_args: dict[str, Any],
                          timeout: float | None) -> Any: ...


class SessionLink(Protocol):
    """The calls an object proxy makes on its session, and the proxy classes it keeps
    (a ``ProxyClasses``)."""

    @property
    def proxy_classes(self) -> Any: ...

    async def get_objects(self, **kwargs: Any) -> list[Any]: ...


class SessionSettings(Protocol):
    """The session a :class:`Broker` belongs to, as the broker reads it (a
    :class:`~qmf_async.console._session.Session` is one): its settings (``options``,
    read live: they may be replaced after the broker was added), the schema cache and
    counters.  Nothing to ask the bus with: a broker fetches what it needs through its
    own connection, and the session sits at the top of every request's walk."""

    options: SessionOptions
    schemas: codec.SchemaRegistry
    malformed: int
    held_dropped: int

    @property
    def console(self) -> Any: ...
