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

The consoles' own queues (one reply, one or two topic queues and, on RabbitMQ, a loss
queue per connection) are named ``<prefix><random hex>`` with the prefixes below; over
AMQP 1.0 qpidd names a link's queue ``<container id>_<link name>``, and the container id
is :func:`container_id` of the peer's name (no whitespace: a name is one word on every
qpid-config line).  :func:`is_console_queue` recognises them, and the classic consoles'
queues (:data:`CONSOLE_QUEUES`): the tools, the exporter and the dashboard leave them
out of their listings unless asked.
"""

from __future__ import annotations

import fnmatch
import re
import uuid
from typing import Final

__all__ = ["BROKER_KEY", "CONSOLE_LOSS_PREFIX", "CONSOLE_QUEUES", "CONSOLE_REPLY_PREFIX",
           "CONSOLE_TOPIC_PREFIX", "CONSOLE_V2_TOPIC_PREFIX", "MANAGEMENT_EXCHANGE",
           "REPLY_EXCHANGE", "V2_DIRECT_EXCHANGE", "V2_TOPIC_EXCHANGE", "container_id",
           "is_console_queue"]

MANAGEMENT_EXCHANGE: Final = "qpid.management"
REPLY_EXCHANGE: Final = "amq.direct"
V2_DIRECT_EXCHANGE: Final = "qmf.default.direct"
V2_TOPIC_EXCHANGE: Final = "qmf.default.topic"
#: the management broker's key on ``qpid.management``; qpidd's v2 agent's subject alias
BROKER_KEY: Final = "broker"

#: a console's reply queue (answers to its requests, on ``amq.direct``)
CONSOLE_REPLY_PREFIX: Final = "qmf-reply-"
#: a console's v1 topic queue (indications from ``qpid.management``)
CONSOLE_TOPIC_PREFIX: Final = "qmf-topic-"
#: a console's v2 topic queue (indications from ``qmf.default.topic``)
CONSOLE_V2_TOPIC_PREFIX: Final = "qmf-topic2-"
#: a console's loss queue (what RabbitMQ dropped from its topic queue, counted)
CONSOLE_LOSS_PREFIX: Final = "qmf-loss-"

#: the consoles' own queues as ``fnmatch`` patterns: qmf-async's (its prefixes, alone on
#: RabbitMQ, after ``<container id>_`` on qpidd over AMQP 1.0) and the classic consoles'
#: (``qmfc-v2-...``, ``reply-...``, ``topic-...``)
CONSOLE_QUEUES: Final = (f"*{CONSOLE_REPLY_PREFIX}*", f"*{CONSOLE_TOPIC_PREFIX}*",
                         f"*{CONSOLE_V2_TOPIC_PREFIX}*", f"*{CONSOLE_LOSS_PREFIX}*",
                         "qmfc-v2-*", "reply-*", "topic-*")

_NOT_IN_ID: Final = re.compile(r"[^A-Za-z0-9._:-]+")


def is_console_queue(name: str) -> bool:
    """Whether ``name`` is a console's own reply or topic queue (:data:`CONSOLE_QUEUES`)."""
    return any(fnmatch.fnmatchcase(name, p) for p in CONSOLE_QUEUES)


def container_id(name: str) -> str:
    """An AMQP 1.0 container id for a peer called ``name``: ``name`` with every run of
    whitespace or other characters outside ``[A-Za-z0-9._:-]`` written ``-``, then
    ``-`` and 12 random hex digits (``qmf-async console`` ->
    ``qmf-async-console-3f80c2a1b4d5``).  qpidd names a link's queue after it, so the
    queue names hold no blank either."""
    word = _NOT_IN_ID.sub("-", name).strip("-") or "qmf-async"
    return f"{word}-{uuid.uuid4().hex[:12]}"
