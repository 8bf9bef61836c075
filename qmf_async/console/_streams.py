"""The subscriptions of one console :class:`~qmf_async.console._session.Session`:
its event, object-update, agent-change and broker-state streams, what each one
follows (one broker or all; over QMF v2 an :class:`Interest` the broker binds), and
their ends when what they follow is lost or gone.

The session owns one :class:`Streams` (composition: it is given the session's
brokers, settings and v2 re-binding as callables) and hands it what arrives.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import ConnectionLostError, UsageError
from ..protocol import Selector, compile_selector
from ._broker import lost_error
from ._objects import QmfObject
from ._options import SessionOptions
from ._state import BrokerState, BrokerStateChange
from ._subscriptions import Subscription
from ._v2bindings import Interest
from ._values import Event, RemoteAgent

if TYPE_CHECKING:
    from ._broker import Broker

__all__ = ["Streams"]


class Streams:
    """The streams of one session and what each follows.

    ``brokers()`` and ``options()`` read the session's current brokers and settings,
    ``sync_v2()`` brings the QMF v2 bindings in line with :attr:`interests` (its
    tasks), ``closed()`` tells whether the session is closed.
    """

    __slots__ = ("_brokers", "_closed", "_options", "_sync_v2", "agent_subs", "event_subs",
                 "followed", "interests", "state_of", "state_subs", "update_subs")

    def __init__(self, brokers: Callable[[], Sequence[Broker]],
                 options: Callable[[], SessionOptions],
                 sync_v2: Callable[[], list[asyncio.Task[None]]],
                 closed: Callable[[], bool]) -> None:
        self._brokers = brokers
        self._options = options
        self._sync_v2 = sync_v2
        self._closed = closed
        self.event_subs: list[Subscription[Event]] = []
        self.update_subs: list[Subscription[QmfObject]] = []
        self.agent_subs: list[Subscription[tuple[str, RemoteAgent]]] = []
        self.state_subs: list[Subscription[BrokerStateChange]] = []
        #: the state streams that follow one broker only
        self.state_of: dict[Subscription[BrokerStateChange], Broker] = {}
        #: what each event or update subscription follows (QMF v2 binds only that)
        self.interests: dict[Subscription[Any], Interest] = {}
        #: the broker each subscription follows (None: every broker of the session)
        self.followed: dict[Subscription[Any], Broker | None] = {}

    # ------------------------------------------------------------------ builders

    def events(self, where: str | Selector | None, _class: str | None,
               _package: str | None, severity: int | None, _agent: RemoteAgent | None,
               _broker: Broker | None, maxsize: int) -> Subscription[Event]:
        """``Session.events`` (documented there).

        Raises:
            SelectorError (a UsageError): ``where`` does not parse.
            UsageError: ``_agent`` is not of ``_broker``.
        """
        selector = compile_selector(where)

        def accept(ev: Event) -> bool:
            k = ev.class_key
            if _class is not None and k.name != _class:
                return False
            if _package is not None and k.package != _package:
                return False
            if severity is not None and ev.severity > severity:
                return False
            if _agent is not None and ev.agent != _agent:
                return False
            return selector is None or selector(ev.arguments)

        sub: Subscription[Event] = Subscription(maxsize, accept)
        self.follow(sub, Interest("event", _package, _class, _agent), self.event_subs,
                    self.followed_broker(_agent, _broker))
        return sub

    @staticmethod
    def followed_broker(agent: RemoteAgent | None, broker: Broker | None) -> Broker | None:
        """The one broker a subscription follows (None: every one).

        Raises:
            UsageError: ``agent`` is not of ``broker``.
        """
        if agent is None:
            return broker
        if broker is not None and agent.broker is not broker:
            raise UsageError(f"{agent} is not an agent of {broker.where}")
        return agent.broker  # type: ignore[return-value]

    def object_updates(self, _class: str | None, _package: str | None,
                       where: str | Selector | None, _agent: RemoteAgent | None,
                       _broker: Broker | None, maxsize: int) -> Subscription[QmfObject]:
        """``Session.object_updates`` (documented there).

        Raises:
            SelectorError (a UsageError): ``where`` does not parse.
            UsageError: ``_agent`` is not of ``_broker``.
        """
        selector = compile_selector(where)
        followed = self.followed_broker(_agent, _broker)

        def accept(obj: QmfObject) -> bool:
            k = obj.get_class_key()
            if _class is not None and k.name != _class:
                return False
            if _package is not None and k.package != _package:
                return False
            if _agent is not None and obj.get_agent() != _agent:
                return False
            if followed is not None and obj.get_broker() is not followed:
                return False
            return selector is None or selector(obj.values())

        sub: Subscription[QmfObject] = Subscription(maxsize, accept)
        self.follow(sub, Interest("data", _package, _class, _agent), self.update_subs,
                    followed)
        return sub

    def agent_changes(self, _broker: Broker | None,
                      maxsize: int) -> Subscription[tuple[str, RemoteAgent]]:
        """``Session.agent_changes`` (documented there)."""
        def accept(change: tuple[str, RemoteAgent]) -> bool:
            return _broker is None or change[1].broker is _broker

        sub: Subscription[tuple[str, RemoteAgent]] = Subscription(maxsize, accept)
        self.follow(sub, None, self.agent_subs, _broker)
        return sub

    def broker_states(self, _broker: Broker | None,
                      maxsize: int) -> Subscription[BrokerStateChange]:
        """``Session.broker_states`` (documented there).

        Raises:
            UsageError: ``maxsize`` below 1.
        """
        def accept(change: BrokerStateChange) -> bool:
            return _broker is None or change.broker is _broker

        def closed(s: Subscription[BrokerStateChange]) -> None:
            self.state_subs.remove(s)
            self.state_of.pop(s, None)

        sub: Subscription[BrokerStateChange] = Subscription(maxsize, accept, closed)
        self.state_subs.append(sub)
        if _broker is not None:
            self.state_of[sub] = _broker
        for broker in [_broker] if _broker is not None else self._brokers():
            sub.deliver(BrokerStateChange(broker, broker.state,
                                          None if broker.state.up else broker.error))
        if _broker is not None and _broker.state is BrokerState.CLOSED:
            sub.close()
        return sub

    def follow(self, sub: Subscription[Any], interest: Interest | None,
               subs: list[Any], broker: Broker | None) -> None:
        """Register ``sub`` in ``subs`` with what it follows over v2 (``interest``;
        None: nothing to bind) and the broker it follows (None: every broker).  On a
        session that does not manage connections, a subscription whose broker is
        already lost (or, following every broker, when brokers were added and none is
        connected any more) ends at once: nothing would ever come."""
        def closed(s: Subscription[Any]) -> None:
            subs.remove(s)
            self.followed.pop(s, None)
            if self.interests.pop(s, None) is not None and not self._closed():
                self._sync_v2()
        sub.on_close(closed)
        subs.append(sub)
        self.followed[sub] = broker
        brokers = self._brokers()
        if interest is not None:
            self.interests[sub] = interest
            if any(b.v2 is not None for b in brokers):
                sub.binding(self._sync_v2())
        if not self._options().manage_connections:
            followed = [broker] if broker is not None else brokers
            # lost: not connected, with the loss's error (a first connection under
            # way has none yet)
            if followed and all(not b.connected and b.error is not None and not b.closing
                                for b in followed):
                sub.fail(lost_error(followed[0].where, followed[0].error))

    # ------------------------------------------------------------------ what arrives

    def event(self, broker: Broker, event: Event) -> None:
        """Hand ``event`` (received on ``broker``) to the event streams following it."""
        followed = self.followed
        for sub in self.event_subs:
            only = followed.get(sub)
            if only is None or only is broker:
                sub.deliver(event)

    def agent_change(self, change: str, agent: RemoteAgent) -> None:
        """Hand ``(change, agent)`` (``"added"`` or ``"removed"``) to the agent streams."""
        for sub in self.agent_subs:
            sub.deliver((change, agent))

    def state_changed(self, change: BrokerStateChange) -> None:
        """Hand a broker's state change to the state streams; one following that
        broker alone ends after its ``CLOSED``."""
        for sub in list(self.state_subs):
            sub.deliver(change)
            if change.state is BrokerState.CLOSED and self.state_of.get(sub) is change.broker:
                sub.close()  # what it follows is gone: it ends (its items stay)

    def connection_lost(self, broker: Broker, error: ConnectionLostError) -> None:
        """``broker``'s connection was lost for good (the session does not manage
        connections): every subscription following it ends with ConnectionLostError
        (a fresh one each, the transport's error as its cause) once its items are
        handed out."""
        for sub, followed in list(self.followed.items()):
            if followed is None or followed is broker:
                sub.fail(lost_error(broker.where, error.__cause__))

    def broker_removed(self, broker: Broker) -> None:
        """``broker`` left the session: the subscriptions following it alone end."""
        for sub, followed in list(self.followed.items()):
            if followed is broker:  # it follows nothing any more: it ends
                sub.close()

    def close_all(self) -> None:
        """The session closed: every stream ends."""
        for sub in self.event_subs + self.update_subs + self.agent_subs:
            sub.close()
        for states in list(self.state_subs):
            states.close()
