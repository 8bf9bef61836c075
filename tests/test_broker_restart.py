"""A real RabbitMQ restart (``rabbitmqctl stop_app`` / ``start_app``) under a running
management-broker role, demo agent and console session.

Every connection is closed by the broker and every non-durable queue is gone; the
role, the agent and the session (``manage_connections=True``) must each reconnect,
redeclare and rebind on their own, and the session must find the agent again and get
objects and call methods as before, once the agent's reconnect backoff lets it in.
Marked slow: the broker takes a few seconds to stop and start, and every other test on
the node would see it go.
"""

from __future__ import annotations

import pytest

from qmf_async import AgentGoneError, NotConnectedError, QmfObject, QmfTimeout

from ._util import rabbitmqctl_output, wait_until
from .test_session_integration import DEMO_QUEUES, Recorder, bus, managed_env, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

__all__ = ["bus"]  # the module's private vhost fixture, shared with the session tests


async def test_role_agent_and_session_come_back_after_a_broker_restart(bus) -> None:  # type: ignore[no-untyped-def]
    if not bus.isolated:
        pytest.skip("needs rabbitmqctl on a local broker (it restarts the node)")
    recorder = Recorder()
    async with managed_env(bus, console=recorder, manage_connections=True,
                           reconnect_min_delay=0.2, reconnect_max_delay=2.0) as env:
        queues = await env.session.get_objects(_class="queue", _agent=env.remote)
        assert {q.name for q in queues} == DEMO_QUEUES
        assert await rabbitmqctl_output("stop_app") is not None, "rabbitmqctl stop_app failed"
        try:
            await wait_until(lambda: not env.broker.connected, timeout=30.0,
                             message="the session saw the connection go")
            with pytest.raises(NotConnectedError):  # fails fast while the broker is down
                await env.session.get_objects(_class="queue", _timeout=2.0)
        finally:
            assert await rabbitmqctl_output("start_app") is not None, \
                "rabbitmqctl start_app failed"
        await wait_until(lambda: env.broker.connected and env.broker.has_management,
                         timeout=60.0, message="the session reconnected and found the role")
        assert env.broker.broker_id == env.role.broker_id

        async def queues_again() -> list[QmfObject] | None:
            # the role remembers the agent at once; the agent itself is back when its
            # own reconnect backoff (up to 10 s, with jitter) lets it in
            agent = await wait_for(env.session, env.agent, timeout=30.0)
            try:
                return await env.session.get_objects(_class="queue", _agent=agent,
                                                     _timeout=1.0)
            except (QmfTimeout, AgentGoneError):
                # AgentGoneError: the role aged the agent out (still in its reconnect
                # backoff) between finding it and asking; it attaches again later
                return None

        queues = await wait_until(queues_again, timeout=60.0,
                                  message="the agent answers again")
        assert {q.name for q in queues} == DEMO_QUEUES
        again = await wait_for(env.session, env.agent)
        (broker_obj,) = await env.session.get_objects(_class="broker", _agent=again)
        assert (await broker_obj.echo(3, "after the restart")).body == "after the restart"
        await wait_until(lambda: len(recorder.connected) >= 2,
                         message="broker_connected ran again")  # callbacks run as tasks
        assert recorder.disconnected == [env.broker] and env.broker.reconnects >= 1
