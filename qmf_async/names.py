"""The facts of a QMF bus, defined once for every layer: its exchanges, routing keys,
queue names, qpidd's agent name, the status codes of an answer, and AMQP's default
ports (:data:`AMQP_PORT`, :data:`AMQPS_PORT`).

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

Routing keys: v1 requests to one agent go to :func:`agent_key` (``agent.<bb>.<ab>``);
v1 indications are published under :data:`OBJECT_KEY_PREFIX`,
:data:`EVENT_KEY_PREFIX` and :data:`HEARTBEAT_KEY_PREFIX` followed by the agent's banks,
schema broadcasts under :data:`SCHEMA_PACKAGE_KEY` and :data:`SCHEMA_CLASS_KEY`; a v2
agent locate request under :data:`LOCATE_SUBJECT`; a name inside a v2 subject is
written by :func:`keyify`.

qpidd's own management agent is named ``<QPIDD_AGENT_PREFIX><uuid>`` over v2
(:func:`is_qpidd_agent`).  :class:`Status` is the status of an ``m`` or ``z`` answer
(and of a v2 ``_exception``'s v1 code): its number, its name, and the text qpidd
writes with it.

The consoles' own queues (one reply, one or two topic queues and, on RabbitMQ, a loss
queue per connection) are named ``<prefix><random hex>`` with the prefixes below; over
AMQP 1.0 qpidd names a link's queue ``<container id>_<link name>``, and the container id
is :func:`container_id` of the peer's name (no whitespace: a name is one word on every
qpid-config line).  :func:`is_console_queue` recognises them, and the classic consoles'
queues (:data:`CONSOLE_QUEUES`): the tools, the exporter and the dashboard leave them
out of their listings unless asked.
"""

from __future__ import annotations

import enum
import re
import uuid
from typing import Final

__all__ = ["AMQPS_PORT", "AMQP_PORT", "BROKER_KEY", "CONSOLE_LOSS_PREFIX", "CONSOLE_QUEUES",
           "CONSOLE_REPLY_PREFIX", "CONSOLE_TOPIC_PREFIX", "CONSOLE_V2_TOPIC_PREFIX",
           "EVENT_KEY_PREFIX", "HEARTBEAT_KEY_PREFIX", "LOCATE_SUBJECT", "MANAGEMENT_EXCHANGE",
           "OBJECT_KEY_PREFIX", "QPIDD_AGENT_PREFIX", "REPLY_EXCHANGE", "SCHEMA_CLASS_KEY",
           "SCHEMA_PACKAGE_KEY", "V2_DIRECT_EXCHANGE", "V2_TOPIC_EXCHANGE", "Status", "agent_key",
           "container_id", "is_console_queue", "is_qpidd_agent", "keyify"]

MANAGEMENT_EXCHANGE: Final = "qpid.management"
REPLY_EXCHANGE: Final = "amq.direct"
V2_DIRECT_EXCHANGE: Final = "qmf.default.direct"
V2_TOPIC_EXCHANGE: Final = "qmf.default.topic"
#: the management broker's key on ``qpid.management``; qpidd's v2 agent's subject alias
BROKER_KEY: Final = "broker"

#: v1 object indications (``c``/``i``): ``console.obj.<bb>.<ab>.<package>.<class>``
OBJECT_KEY_PREFIX: Final = "console.obj."
#: v1 events: ``console.event.<bb>.<ab>.<package>.<event>``
EVENT_KEY_PREFIX: Final = "console.event."
#: v1 heartbeats: ``console.heartbeat.<bb>.<ab>``
HEARTBEAT_KEY_PREFIX: Final = "console.heartbeat."
#: v1 broadcasts of a new package (``p``) and a new class (``q``)
SCHEMA_PACKAGE_KEY: Final = "schema.package"
SCHEMA_CLASS_KEY: Final = "schema.class"
#: the subject of a v2 agent locate request on ``qmf.default.topic``
LOCATE_SUBJECT: Final = "console.request.agent_locate"
#: how qpidd's own management agent's v2 name begins (``apache.org:qpidd:<uuid>``)
QPIDD_AGENT_PREFIX: Final = "apache.org:qpidd:"

#: the IANA ports of AMQP, plain and over TLS (``amqps://``): an address without a port
AMQP_PORT: Final = 5672
AMQPS_PORT: Final = 5671

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
#: :data:`CONSOLE_QUEUES` as plain string tests (``*X*``: contains X, ``X*``: starts
#: with X), which match what ``fnmatch.fnmatchcase`` matches with no regex compiled
#: (``qmf stat -q`` asks it of every queue: docs/benchmarks.md, "Start-up")
_CONSOLE_INFIXES: Final = tuple(p[1:-1] for p in CONSOLE_QUEUES if p[0] == "*")
_CONSOLE_PREFIXES: Final = tuple(p[:-1] for p in CONSOLE_QUEUES if p[0] != "*")
assert all(p[-1] == "*" and not set(p[1:-1]) & set("*?[") for p in CONSOLE_QUEUES)


class Status(enum.IntEnum):
    """The status of a v1 ``m`` (method response) or ``z`` (command completion), and
    the v1 code of a v2 ``_exception``: the number on the wire, the name, and
    :attr:`text`, the words qpidd writes for it (``UnknownObject``)."""

    OK = 0
    UNKNOWN_OBJECT = 1
    UNKNOWN_METHOD = 2
    NOT_IMPLEMENTED = 3
    INVALID_PARAMETER = 4
    FEATURE_NOT_IMPLEMENTED = 5
    FORBIDDEN = 6
    EXCEPTION = 7
    UNKNOWN_PACKAGE = 8
    UNKNOWN_CLASS = 9

    @property
    def text(self) -> str:
        """The status as qpidd writes it: ``OK``, else the name in camel case
        (``UNKNOWN_OBJECT`` -> ``UnknownObject``)."""
        return "OK" if self is Status.OK else self.name.title().replace("_", "")

    @classmethod
    def name_of(cls, code: int) -> str:
        """The name of status ``code`` (``UNKNOWN_OBJECT``), ``UNKNOWN_STATUS`` for a
        code outside the table (an application's own)."""
        try:
            return cls(code).name
        except ValueError:
            return "UNKNOWN_STATUS"


def agent_key(broker_bank: int, agent_bank: int) -> str:
    """The routing key of v1 requests to the agent of these banks on
    ``qpid.management``: ``agent.<brokerBank>.<agentBank>``."""
    return f"agent.{broker_bank}.{agent_bank}"


def keyify(name: str) -> str:
    """``name`` as one word of a v2 subject (a topic key): every ``.`` written ``_``
    (``org.apache.qpid.broker`` -> ``org_apache_qpid_broker``)."""
    return name.replace(".", "_")


def is_qpidd_agent(name: str | None) -> bool:
    """Whether the v2 agent name ``name`` is qpidd's own management agent's."""
    return name is not None and name.startswith(QPIDD_AGENT_PREFIX)


def is_console_queue(name: str) -> bool:
    """Whether ``name`` is a console's own reply or topic queue (:data:`CONSOLE_QUEUES`)."""
    return name.startswith(_CONSOLE_PREFIXES) or any(i in name for i in _CONSOLE_INFIXES)


def container_id(name: str) -> str:
    """An AMQP 1.0 container id for a peer called ``name``: ``name`` with every run of
    whitespace or other characters outside ``[A-Za-z0-9._:-]`` written ``-``, then
    ``-`` and 12 random hex digits (``qmf-async console`` ->
    ``qmf-async-console-3f80c2a1b4d5``).  qpidd names a link's queue after it, so the
    queue names hold no blank either."""
    word = _NOT_IN_ID.sub("-", name).strip("-") or "qmf-async"
    return f"{word}-{uuid.uuid4().hex[:12]}"
