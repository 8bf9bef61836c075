"""A session's object updates: :class:`ObjectUpdates`, a mixin of
:class:`~qmf_async.console._session.Session`.

It feeds the updates its broker connections receive to the pure
:class:`~qmf_async.console._view.ObjectView`, runs the completion queries the view asks
for (one ``G`` per agent and class, bounded by ``completion_timeout``), and hands the
merged updates out as proxies: to the console's callbacks and to every
``object_updates()`` subscription, in order.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any, cast

from ..wire import RawObjectRecord
from ._broker import Broker
from ._links import SessionLink
from ._objects import QmfObject
from ._values import Change, RemoteAgent
from ._view import Completion, ObjectView

if TYPE_CHECKING:
    from ._options import SessionOptions
    from ._streams import Streams

__all__ = ["ObjectUpdates"]

log = logging.getLogger("qmf_async.session")
#: the bits of Change.PROPERTIES and Change.STATISTICS
_PROPERTIES: int = Change.PROPERTIES.value
_STATISTICS: int = Change.STATISTICS.value


class ObjectUpdates:
    """The object view of a session and the I/O around it; the :class:`Session` it is
    mixed into provides the settings, the listeners and the callbacks named below."""

    if TYPE_CHECKING:  # provided by the Session
        options: SessionOptions
        _tasks: set[asyncio.Task[Any]]
        _streams: Streams

        @property
        def console(self) -> Any: ...

        def _notify(self, name: str, *args: Any) -> None: ...

    def __init__(self) -> None:
        self._view = ObjectView(self, self._hand_out)

    @property
    def completion_queries(self) -> int:
        """Completion queries sent: a ``G`` per agent and class for objects first seen
        through one part."""
        return self._view.completion_queries

    @property
    def completion_failures(self) -> int:
        """Objects handed out without the part their completion failed to bring."""
        return self._view.completion_failures

    @property
    def objects_evicted(self) -> int:
        """Objects evicted from the view when it held ``max_objects``."""
        return self._view.objects_evicted

    def _forget_objects_of(self, agent: RemoteAgent) -> None:
        """An agent left: its objects leave the view (they come back, completed
        again, if it returns)."""
        self._view.forget_agent(agent.broker, (agent.broker_bank, agent.agent_bank))

    def _object_update(self, broker: Broker, agent: RemoteAgent | None,
                       rec: RawObjectRecord) -> None:
        """A ``c``/``i`` (or a v2 ``g``) a broker connection received."""
        if not (self.console is not None or self._streams.update_subs):
            view = self._view
            if view.latest or view.gone:
                view.unwatched()
            return
        completion = self._view.update(broker, agent, rec, time.monotonic())
        if completion is not None:
            task = asyncio.get_running_loop().create_task(self._complete(completion))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def _hand_out(self, broker: Broker, agent: RemoteAgent | None, rec: RawObjectRecord,
                  raw: bytes, sofs: int, kind: str, changed: Change) -> None:
        # the Session this is mixed into is the proxies' SessionLink
        # absent: of the parts the received record carried (a part the view joined
        # in from an earlier record counts as sent in full)
        obj = QmfObject.from_raw(cast(SessionLink, self), broker, agent, rec.codec, raw,
                                 kind, sofs, changed, rec.absent)
        # as the classic console: properties first, then statistics, for every update
        # that carries them (a v2 object with both parts, or an object first seen
        # through statistics whose properties a completion query brought, gets both)
        # (the flags' bits tested directly: ``Change.X in changed`` is two Python calls)
        bits = changed.value
        if bits & _PROPERTIES:
            self._notify("object_props", broker, obj)
        if bits & _STATISTICS:
            self._notify("object_stats", broker, obj)
        for sub in self._streams.update_subs:
            sub.deliver(obj)

    async def _complete(self, completion: Completion) -> None:
        """Run the completion queries of one agent and class, a round while objects
        wait.  The first round starts after the rest of the current body was routed:
        a ``c`` and an ``i`` of a new object usually come together and complete each
        other without a query."""
        view = self._view
        broker: Broker = completion.broker
        agent: RemoteAgent = completion.agent
        try:
            await asyncio.sleep(0)
            while completion.batch:
                keys = view.start_round(completion, time.monotonic())
                if not keys:
                    break
                records: list[Any] | None
                try:
                    records = await broker.query(agent, completion.query,
                                                 self.options.completion_timeout)
                except Exception as exc:  # QmfError mostly; nothing may leave objects held
                    log.info("completing %d %s object(s) of %s on %s failed: %s", len(keys),
                             completion.class_key, agent, broker.where, exc)
                    records = None
                view.answered(completion, keys, records, time.monotonic())
        finally:
            view.done(completion)
