"""A session's object updates: :class:`ObjectUpdates`, a component a
:class:`~qmf_async.console._session.Session` builds and holds (its collaborators given
to it, not shared through ``self``).

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
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..wire import RawObjectRecord
from ._broker import Broker
from ._links import SessionLink
from ._objects import QmfObject
from ._values import Change, RemoteAgent
from ._view import Completion, ObjectView, ViewOwner

if TYPE_CHECKING:
    from ._streams import Streams

__all__ = ["ObjectUpdates"]

log = logging.getLogger("qmf_async.session")
#: the bits of Change.PROPERTIES and Change.STATISTICS
_PROPERTIES: int = Change.PROPERTIES.value
_STATISTICS: int = Change.STATISTICS.value


class ObjectUpdates:
    """The object view of a session and the I/O around it.

    ``owner`` is what holds the settings (read at each use: ``options``), ``link``
    the proxies' session, ``watched`` tells whether anybody listens to updates (a
    console or an ``object_updates()`` subscription), ``streams`` holds those
    subscriptions, ``notify`` calls a console callback by name, and ``tasks`` keeps
    the completion tasks (the session cancels them when it closes).
    """

    def __init__(self, owner: ViewOwner, link: SessionLink, watched: Callable[[], bool],
                 streams: Streams, notify: Callable[..., None],
                 tasks: set[asyncio.Task[Any]]) -> None:
        self._owner = owner
        self._link = link
        self._watched = watched
        self._streams = streams
        self._notify = notify
        self._tasks = tasks
        #: the pure object view (its state and rules)
        self.view = ObjectView(owner, self._hand_out)

    @property
    def completion_queries(self) -> int:
        """Completion queries sent: a ``G`` per agent and class for objects first seen
        through one part."""
        return self.view.completion_queries

    @property
    def completion_failures(self) -> int:
        """Objects handed out without the part their completion failed to bring."""
        return self.view.completion_failures

    @property
    def objects_evicted(self) -> int:
        """Objects evicted from the view when it held ``max_objects``."""
        return self.view.objects_evicted

    def forget_agent(self, agent: RemoteAgent) -> None:
        """An agent left: its objects leave the view (they come back, completed
        again, if it returns)."""
        self.view.forget_agent(agent.broker, (agent.broker_bank, agent.agent_bank))

    def object_update(self, broker: Broker, agent: RemoteAgent | None,
                      rec: RawObjectRecord) -> None:
        """A ``c``/``i`` (or a v2 ``g``) a broker connection received."""
        if not self._watched():
            view = self.view
            if view.latest or view.gone:
                view.unwatched()
            return
        completion = self.view.update(broker, agent, rec, time.monotonic())
        if completion is not None:
            task = asyncio.get_running_loop().create_task(self._complete(completion))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def _hand_out(self, broker: Broker, agent: RemoteAgent | None, rec: RawObjectRecord,
                  raw: bytes, sofs: int, kind: str, changed: Change) -> None:
        # absent: of the parts the received record carried (a part the view joined
        # in from an earlier record counts as sent in full)
        obj = QmfObject.from_raw(self._link, broker, agent, rec.codec, raw,
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
        view = self.view
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
                                                 self._owner.options.completion_timeout)
                except Exception as exc:  # QmfError mostly; nothing may leave objects held
                    log.info("completing %d %s object(s) of %s on %s failed: %s", len(keys),
                             completion.class_key, agent, broker.where, exc)
                    records = None
                view.answered(completion, keys, records, time.monotonic())
        finally:
            view.done(completion)
