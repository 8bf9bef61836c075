"""Subscriptions end when their broker is gone (issue 33, item 1).

The tutorial's pattern, ``async with Session.connect(url) as s: async for o in
s.object_updates(...)``, on a session that does not manage connections (the default):
when the broker is lost, ``object_updates()``, ``events()``, ``agent_changes()`` and
an ``iter_objects()`` in flight raise ConnectionLostError (the transport's error as its
cause) at once, instead of waiting forever.  With ``manage_connections=True`` a
subscription keeps going across the reconnection.

Against a genuine qpidd killed (SIGKILL) and RabbitMQ closing the connection (the
management API's ``DELETE /api/connections/NAME``, as an operator would).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections.abc import AsyncIterator, Callable
from typing import Any
from urllib.parse import quote

import pytest

from qmf_async import (
    BrokerState,
    BrokerStateChange,
    ConnectionLostError,
    Session,
    TransportError,
)
from qmf_async.transport import with_heartbeat

from ._util import _api_call, _management_api, wait_until
from .qpidd import Qpidd
from .test_session_integration import bus, running_demo, running_role

__all__ = ["bus"]  # the RabbitMQ tests' private vhost fixture

#: how long a subscription may take to end after the loss (the loss is seen at once:
#: the socket closes); generous for a loaded machine
ENDS_WITHIN = 10.0


async def _drain(it: AsyncIterator[Any], seen: list[Any]) -> None:
    """The user's loop: ``async for item in it: ...``."""
    async for item in it:
        seen.append(item)


def _pending(broker: Any) -> int:
    """Requests outstanding on a broker connection, whichever QMF version it speaks."""
    return len(broker._core) + (len(broker._v2.core) if broker._v2 is not None else 0)


async def _ends_with_lost(task: asyncio.Task[Any], what: str) -> ConnectionLostError:
    """``task`` raises ConnectionLostError within ENDS_WITHIN (a hang fails the test)."""
    done, _ = await asyncio.wait([task], timeout=ENDS_WITHIN)
    if not done:
        task.cancel()
        pytest.fail(f"{what} did not end within {ENDS_WITHIN}s of the broker's loss")
    error = task.exception()
    assert isinstance(error, ConnectionLostError), f"{what} ended with {error!r}"
    assert error.__cause__ is not None, f"{what}: the cause is not chained"
    # one line that names the connection once (the transport's text is not wrapped in
    # a second "connection to ... lost")
    assert str(error).count("connection to ") == 1, f"{what}: {error}"
    return error


@pytest.mark.qpidd
async def test_subscriptions_and_a_query_end_when_qpidd_is_killed(
        qpidd_fresh: Callable[[bool], Qpidd]) -> None:
    broker = qpidd_fresh(False)  # a stock qpidd (QMF v2), publishing every second
    async with Session.connect(broker.url, timeout=10.0) as s:
        assert not s.options.manage_connections  # Session.connect's default
        updates: list[Any] = []
        follow = asyncio.create_task(_drain(s.object_updates(_class="queue"), updates))
        events = asyncio.create_task(_drain(s.events(), []))
        agents = asyncio.create_task(_drain(s.agent_changes(), []))
        states: list[BrokerStateChange] = []
        following = asyncio.create_task(_drain(s.broker_states(_broker=s.brokers[0]), states))
        # the console's own queues are published within the interval
        await wait_until(lambda: updates, timeout=15.0, message="a queue update")
        os.kill(broker.pid, signal.SIGSTOP)  # the query below stays unanswered
        try:
            await wait_until(lambda: broker.is_stopped(), timeout=5.0,
                             message="qpidd stopped")

            async def query() -> None:
                async for _q in s.iter_objects(_class="queue", _timeout=60.0):
                    pass
            asking = asyncio.create_task(query())
            await wait_until(lambda: _pending(s.brokers[0]) > 0, timeout=5.0,
                             message="the query was sent")
        finally:
            os.kill(broker.pid, signal.SIGKILL)
            os.kill(broker.pid, signal.SIGCONT)
        started = time.monotonic()
        for task, what in ((follow, "object_updates()"), (events, "events()"),
                           (agents, "agent_changes()"), (asking, "iter_objects()")):
            error = await _ends_with_lost(task, what)
            assert broker.address in str(error) or "127.0.0.1" in str(error)
        assert time.monotonic() - started < ENDS_WITHIN
        # the state stream reports the loss (lost for good: CLOSED, with the error), then
        # ends: no polling of broker.connected
        await asyncio.wait_for(following, ENDS_WITHIN)
        assert [c.state for c in states] == [BrokerState.CONNECTED, BrokerState.CLOSED]
        assert states[-1].error is not None and s.brokers[0].state is BrokerState.CLOSED
        # a subscription taken after the loss ends at once too
        with pytest.raises(ConnectionLostError):
            await s.object_updates(_class="queue").get(timeout=1.0)


@pytest.mark.qpidd
async def test_a_stalled_qpidd_ends_the_subscription_within_the_heartbeat(
        qpidd_fresh: Callable[[bool], Qpidd]) -> None:
    # a broker that stops answering without closing the connection (SIGSTOP, a dead
    # host): the loss is seen at the transport's heartbeat (heartbeat=1: silent for
    # 2 s), and the subscription ends then
    broker = qpidd_fresh(False)
    async with Session.connect(with_heartbeat(broker.url, 1), timeout=10.0) as s:
        updates: list[Any] = []
        follow = asyncio.create_task(_drain(s.object_updates(_class="queue"), updates))
        await wait_until(lambda: updates, timeout=15.0, message="a queue update")
        os.kill(broker.pid, signal.SIGSTOP)
        try:
            started = time.monotonic()
            await _ends_with_lost(follow, "object_updates()")
            assert time.monotonic() - started < 2 * 2.0 + 2.0  # the idle timeout, a margin
        finally:
            os.kill(broker.pid, signal.SIGCONT)


def _console_connections(api: str, vhost: str) -> list[str]:
    """The names of the qmf-async console connections on ``vhost``."""
    found = json.loads(_api_call("GET", f"{api}/vhosts/{quote(vhost, safe='')}/connections"))
    return [c["name"] for c in found
            if (c.get("client_properties") or {}).get("connection_name") == "qmf-async console"]


@pytest.mark.integration
async def test_subscriptions_end_when_rabbitmq_closes_the_connection(bus: Any) -> None:
    api = _management_api(bus.url)
    if not bus.isolated or api is None:
        pytest.skip("needs the management API of a local broker and a private vhost")
    async with running_role(bus), running_demo(bus) as (_agent, _model), \
            Session.connect(bus.url, timeout=10.0, agent_interval=1.0) as plain, \
            Session.connect(bus.url, timeout=10.0, manage_connections=True,
                            reconnect_min_delay=0.1, reconnect_max_delay=0.5) as managed:
        plain_updates: list[Any] = []
        managed_updates: list[Any] = []
        follow = asyncio.create_task(_drain(plain.object_updates(), plain_updates))
        events = asyncio.create_task(_drain(plain.events(), []))
        agents = asyncio.create_task(_drain(plain.agent_changes(), []))
        kept = asyncio.create_task(_drain(managed.object_updates(), managed_updates))
        plain_states: list[BrokerStateChange] = []
        managed_states: list[BrokerStateChange] = []
        watch = [asyncio.create_task(_drain(plain.broker_states(), plain_states)),
                 asyncio.create_task(_drain(managed.broker_states(), managed_states))]
        await wait_until(lambda: plain_updates and managed_updates, timeout=15.0,
                         message="updates from the demo agent")
        names = await wait_until(lambda: (found := _console_connections(api, bus.vhost))
                                 and len(found) >= 2 and found, timeout=15.0,
                                 message="both consoles listed by the management API")
        for name in names:  # as an operator closing them in the management UI
            _api_call("DELETE", f"{api}/connections/{quote(name, safe='')}")
        for task, what in ((follow, "object_updates()"), (events, "events()"),
                           (agents, "agent_changes()")):
            await _ends_with_lost(task, what)
        # the managed session reconnects and its subscription goes on; its state stream
        # says so (down, then up again after the handshake), the plain one's says gone
        await wait_until(lambda: managed.brokers[0].reconnects >= 1, timeout=15.0,
                         message="the managed session reconnected")
        up, down = BrokerState.CONNECTED, BrokerState.DISCONNECTED

        def back_up() -> bool:
            seen = [c.state for c in managed_states]
            return down in seen and up in seen[seen.index(down):]
        await wait_until(back_up, timeout=15.0, message="CONNECTED after the reconnection")
        managed_seen = [c.state for c in managed_states]
        assert managed_seen[0] is up
        assert managed_states[managed_seen.index(down)].error is not None
        assert [c.state for c in plain_states] == [up, BrokerState.CLOSED]
        for task in watch:
            task.cancel()
        before = len(managed_updates)
        await wait_until(lambda: len(managed_updates) > before, timeout=15.0,
                         message="updates after the reconnection")
        assert not kept.done()
        kept.cancel()
        with pytest.raises(TransportError):  # the plain session stays down
            await plain.get_objects(_class="queue", _timeout=1.0)
