"""What object proxies and callbacks need of the session and its brokers.

Structural types, so that ``_objects`` does not import ``_session`` (which builds on
it): a :class:`~qmf_async.Broker` is a :class:`BrokerLink`, a
:class:`~qmf_async.Session` a :class:`SessionLink`.
"""

from __future__ import annotations

import uuid
from typing import Any, Protocol

__all__ = ["BrokerLink", "SessionLink"]


class BrokerLink(Protocol):
    """A broker connection as objects, agents and callbacks name it."""

    url: str
    where: str
    broker_id: uuid.UUID | None
    connected: bool
    topic_dropped: int
    reconnects: int
    error: BaseException | None

    @property
    def has_management(self) -> bool: ...

    def agents(self) -> list[Any]: ...


class SessionLink(Protocol):
    """The calls an object proxy makes on its session."""

    async def get_objects(self, **kwargs: Any) -> list[Any]: ...

    async def _call_method(self, obj: Any, method: Any, in_args: dict[str, Any],
                           timeout: float | None) -> Any: ...
