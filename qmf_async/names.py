"""The exchanges and routing keys of a QMF bus, defined once for every layer.

QMF v1 (both buses):

- :data:`MANAGEMENT_EXCHANGE` (``qpid.management``, a topic exchange): v1 requests
  (key :data:`BROKER_KEY` for the management broker, ``agent.<brokerBank>.<agentBank>``
  for an agent) and indications (``console.obj.…``, ``console.event.…``,
  ``console.heartbeat.…``);
- :data:`REPLY_EXCHANGE` (``amq.direct``): where answers go; a reply key ``K`` means the
  routing key ``K`` on this exchange.

QMF v2 (map messages):

- :data:`V2_DIRECT_EXCHANGE` (``qmf.default.direct``): requests, addressed by the
  agent's name as subject (qpidd's own agent also answers to :data:`BROKER_KEY`);
- :data:`V2_TOPIC_EXCHANGE` (``qmf.default.topic``): agent locate requests and
  indications (``agent.ind.<data|event|heartbeat>.…``).

Other modules keep their older names for these (``transport.DIRECT_EXCHANGE`` is
``amq.direct``, ``protocol.DIRECT_EXCHANGE`` is ``qmf.default.direct``): new code uses
these four, which cannot be mistaken for one another.
"""

from __future__ import annotations

from typing import Final

__all__ = ["BROKER_KEY", "MANAGEMENT_EXCHANGE", "REPLY_EXCHANGE", "V2_DIRECT_EXCHANGE",
           "V2_TOPIC_EXCHANGE"]

MANAGEMENT_EXCHANGE: Final = "qpid.management"
REPLY_EXCHANGE: Final = "amq.direct"
V2_DIRECT_EXCHANGE: Final = "qmf.default.direct"
V2_TOPIC_EXCHANGE: Final = "qmf.default.topic"
#: the management broker's key on ``qpid.management``; qpidd's v2 agent's subject alias
BROKER_KEY: Final = "broker"
