"""What a console :class:`~qmf_async.console._session.Session` binds on its brokers:
the v1 topic keys its settings call for (or the user's own keys, ``bind_*``), and
the QMF v2 bindings its subscriptions and console call for, kept in line with them.

The session owns one :class:`Bindings` (composition: it is given the session's
brokers, settings, console and subscription interests as callables, and its task set).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import QmfError, UsageError
from ..transport import TransportProtocol
from ._broker import MANAGEMENT
from ._options import SessionOptions
from ._v2bindings import Interest, v2_bindings

if TYPE_CHECKING:  # console._v2 loads where QMF v2 is spoken only (Broker._setup)
    from ._broker import Broker
    from ._v2 import V2Link

__all__ = ["Bindings"]

log = logging.getLogger("qmf_async.session")


class Bindings:
    """The bindings of one session.

    ``brokers()``, ``options()`` read the session's current brokers and settings,
    ``has_console()`` whether it has a :class:`Console`, ``interests()`` what its
    event and update subscriptions follow; ``tasks`` is the session's task set (the
    background v2 re-bindings join it, so closing the session cancels them).
    """

    __slots__ = ("_brokers", "_has_console", "_interests", "_options", "_tasks", "user_keys")

    def __init__(self, brokers: Callable[[], Sequence[Broker]],
                 options: Callable[[], SessionOptions], has_console: Callable[[], bool],
                 interests: Callable[[], Iterable[Interest]],
                 tasks: set[asyncio.Task[Any]]) -> None:
        self._brokers = brokers
        self._options = options
        self._has_console = has_console
        self._interests = interests
        self._tasks = tasks
        #: the keys the user bound (``bind_*``, with ``user_bindings``)
        self.user_keys: list[str] = []

    def keys(self) -> list[str]:
        """The v1 topic keys to bind on ``qpid.management`` at each connection."""
        options = self._options()
        keys = ["schema.#"]
        if options.rcv_heartbeats:
            keys.append("console.heartbeat.#")
        if options.user_bindings:
            keys.extend(self.user_keys)
        else:
            if options.rcv_objects:
                keys.append("console.obj.#")
            if options.rcv_events:
                keys.append("console.event.#")
        # the management broker's agent objects keep the agent list current
        if options.user_bindings or not options.rcv_objects:
            keys.append("console.obj.*.*.org.apache.qpid.broker.agent")
        return list(dict.fromkeys(keys))

    def v2_bindings_for(self, broker: Broker) -> list[tuple[str, str | None]]:
        """The v2 indication bindings of ``broker``: what the subscriptions follow,
        everything for a :class:`Console` (as ``rcv_objects``/``rcv_events`` say),
        or the user's bindings."""
        options = self._options()
        interests = list(self._interests())
        if not options.user_bindings and self._has_console():
            if options.rcv_objects:
                interests.append(Interest("data"))
            if options.rcv_events:
                interests.append(Interest("event"))
        assert broker.v2 is not None
        return v2_bindings(interests, self.user_keys if options.user_bindings else (),
                           broker.v2.name_of)

    def sync_v2(self) -> list[asyncio.Task[None]]:
        """Bring the v2 bindings of every connected broker in line with the
        subscriptions (in the background; a failure is logged).  Returns the tasks."""
        tasks = []
        for broker in self._brokers():
            v2, transport = broker.v2, broker.transport
            if v2 is None or transport is None or not broker.connected:
                continue
            task = asyncio.get_running_loop().create_task(
                self._sync_broker(broker, v2, transport))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            tasks.append(task)
        return tasks

    async def _sync_broker(self, broker: Broker, v2: V2Link,
                           transport: TransportProtocol) -> None:
        try:
            # the bindings are computed when this change's turn comes: never stale
            await v2.sync(transport, lambda: self.v2_bindings_for(broker))
        except QmfError as exc:
            log.warning("could not update the QMF v2 bindings on %s: %s", broker.where, exc)

    async def add(self, *keys: str) -> None:
        """Bind the user's ``keys`` (v1 topic keys) on every connected broker (over
        v2, the bindings they stand for).

        Raises:
            UsageError: the session does not have ``user_bindings``.
            TransportError: a broker refused or lost the binding.
        """
        if not self._options().user_bindings:
            raise UsageError("bind_* needs Session(user_bindings=True)")
        new = [k for k in keys if k not in self.user_keys]
        self.user_keys.extend(new)
        for broker in self._brokers():
            transport = broker.transport
            if not broker.connected or transport is None:
                continue
            if broker.v2 is not None:
                await broker.v2.sync(transport, self.v2_bindings_for(broker))
                await broker.bind_early(new)
            elif broker.topic_queue:
                for k in new:
                    await transport.bind(broker.topic_queue, MANAGEMENT, k)
