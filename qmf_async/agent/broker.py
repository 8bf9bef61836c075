"""The management-broker role: what qpidd's built-in management agent does, for an
AMQP 0-9-1 broker (RabbitMQ) that has none.

>>> from qmf_async.agent.broker import ManagementBroker
>>> async def main(url):                                   # doctest: +SKIP
...     async with ManagementBroker(url) as mb:
...         print(mb.broker_id)

Or as a command::

    python -m qmf_async.agent.broker --url amqp://guest:guest@localhost:5672/ [-v]

What it does (see DESIGN.md section 3, "Management broker role"):

* answers ``B`` with a stable broker id and then tells every attached agent that a
  console appeared (``x``); answers ``P``/``Q``/``S`` sent to routing key ``broker``
  from its schema cache (its own class and every class learned from agents);
* assigns agent banks on ``A`` and learns the attaching agent's schema by sending
  ``P``, ``Q`` and ``S`` to ``agent.<brokerBank>.<agentBank>``;
* is itself an agent at ``<brokerBank>.0`` serving ``org.apache.qpid.broker:agent``
  with qpidd's exact schema, one object per attached agent, so consoles discover
  agents the way they do with qpidd (``G _class=agent`` on ``agent.1.0``);
* follows heartbeats (``console.heartbeat.#``) and ages out silent agents.

Broker id: unless given, ``uuid5(NAMESPACE_URL, "qmf-async:management-broker:" +
"<scheme>://<host lowercased>:<port>/<vhost>")`` (:func:`derive_broker_id`): user
and password are left out, so a restarted role (or a second one for the same
vhost, in turn) keeps the id consoles have cached.

Deliberate differences from qpidd, and why:

* An agent's liveness comes from its heartbeats, not from its connection (a 0-9-1
  broker tells us nothing about other connections): an agent silent for
  ``agent_timeout`` is aged out (its ``agent`` object published with a delete time),
  and its bank is held for ``bank_grace`` before another agent may request it.
* ``x`` is sent when a console sends ``B`` (qpidd sends it when a console binds to
  ``qpid.management``, which 0-9-1 does not report); it goes to
  ``agent.<brokerBank>.<agentBank>`` on ``qpid.management`` as the protocol text says.
* A requested agent bank is honoured when free, or when its holder has the same
  label and system id (a re-attach after a reconnect) or was only known by its
  heartbeats; qpidd honours it whenever no connected agent holds it.
* Agents heard by heartbeat but never attached to this role (e.g. after a restart of
  the role) are adopted: their bank is reserved, their schema learned and an
  ``agent`` object with an empty label and a zero system id published.
* ``connectionRef`` of an ``agent`` object is a placeholder unique per agent,
  ``0-0-<brokerBank>-<agentBank>-0`` (there are no connection objects to refer to);
  ``registeredTo`` is the zero object id (no ``broker`` object is served).
* Schemas stay cached after their agent is gone (as in qpidd), up to ``max_classes``.
* The ``agent`` objects' ids carry a boot sequence derived from the start time
  (qpidd persists a counter in its data directory; we have none).
"""

from __future__ import annotations

import sys

from ._role import AGENT_CLASS, AGENT_CLASS_HASH, AgentInfo, ManagementBroker, derive_broker_id

__all__ = ["AGENT_CLASS", "AGENT_CLASS_HASH", "AgentInfo", "ManagementBroker", "derive_broker_id"]

if __name__ == "__main__":  # python -m qmf_async.agent.broker: the command (_role_cli)
    from ._role_cli import main

    sys.exit(main())
