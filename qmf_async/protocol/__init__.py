"""qmf_async.protocol: the sans-I/O protocol core (no asyncio, no client library).

:class:`ConsoleProtocol` is the console's state for one broker connection:
bodies in (``receive(body, routing_key, now)``), events out, requests built by
``send_*``.  :class:`AgentProtocol` is the agent's: bodies in (``receive(body,
routing_key, reply_to)``), request events out, every body the agent sends built by it.
:class:`AgentProtocolV2` is the agent's QMF v2 core: messages in (``receive(headers,
value, body=, content_type=, reply_to=, correlation_id=)``), request events out, every
message it sends built by it.
:class:`ConsoleProtocolV2` is the console's QMF v2 (map message) state: messages in
(``receive(headers, value, body=, content_type=, subject=, correlation_id=, now=)``),
events out, requests built by ``send_*``.  Both decode a v2 map that arrives as
``amqp/map``/``amqp/list`` bytes (AMQP 0-9-1).
The four cores take one inbound type, the :class:`Delivery` a transport hands up
(``feed``), and build every message they want sent as one type, :class:`Outgoing`
(exchange, key, body, reply key, headers, correlation); time is passed in.
:class:`AgentDirectory` is the one agent directory of both console cores (v1 by banks,
v2 by name), with :func:`silence_allowed` the one rule that ages agents out;
:class:`Twins` is the rule that lists an agent seen over both versions once, with
:func:`agent_v2_name`, the v2 name it reads.  :class:`RoleDirectory` is the
management-broker role's agent directory (banks, attach, adoption, aging) and
:class:`RoleProtocol` its answers to what comes to ``broker``.

Names: the QMF v1 types carry no marker (:class:`Reply`, :class:`AgentArrived`, ...).
Of the QMF v2 types, the protocol classes are ``<Role>ProtocolV2`` (pairing with
:class:`ConsoleProtocol` and :class:`AgentProtocol`) and every event type is
``V2<Name>`` (:class:`V2QueryAnswered`, :class:`V2AgentArrived`,
:class:`V2LocateRequested`, ...; the unions of every event a core returns are
:data:`V2ConsoleEvent` and :data:`V2AgentEvent`).
"""

from __future__ import annotations

from ._agent import (
    DIRECT,
    MANAGEMENT,
    STATUS_TEXT,
    AgentEvent,
    AgentProtocol,
    AttachAnswered,
    ClassesRequested,
    ConsoleJoined,
    GetRequested,
    GetSelection,
    MethodRequested,
    PackagesRequested,
    RequestDropped,
    SchemaRequested,
    reply_target,
    validate_arguments,
)
from ._agent_v2 import (
    SEVERITY_NAMES,
    V2_DIRECT_EXCHANGE,
    V2_TOPIC_EXCHANGE,
    AgentProtocolV2,
    V2AgentEvent,
    V2LocateRequested,
    V2MethodRequested,
    V2ObjectQueryRequested,
    V2RequestDropped,
    V2RequestRejected,
    V2SchemaQueryRequested,
    V2SchemaRequestedInV1,
    check_arguments,
    keyify,
    object_name,
    v2_schema_id,
    v2_schema_map,
)
from ._agents import (
    AGENT_VENDOR,
    AgentDirectory,
    Twins,
    agent_v2_name,
    is_twin,
    silence_allowed,
)
from ._console import BROKER_AGENT_CLASS, AgentInfo, ConsoleProtocol, agent_banks
from ._console_v2 import (
    BROKER_ADDRESS,
    DIRECT_EXCHANGE,
    LOCATE_SUBJECT,
    TOPIC_EXCHANGE,
    ConsoleProtocolV2,
    V2AgentInfo,
    texts_from_schema,
)
from ._correlation import Correlator, ItemSink, Pending, ReplyMessage
from ._drain import DrainClock
from ._envelope import Delivery, Outgoing
from ._events import (
    AgentArrived,
    AgentLeft,
    AgentRelabeled,
    BodyMalformed,
    ClassSeen,
    Event,
    EventReceived,
    HeartbeatReceived,
    HeldDropped,
    ObjectUpdate,
    PackageSeen,
    QueryDone,
    Reply,
    RequestFailed,
    SchemaNeeded,
    SchemaSeen,
)
from ._events_v2 import (
    V2AgentArrived,
    V2AgentBeat,
    V2AgentLeft,
    V2AgentRestarted,
    V2ConsoleEvent,
    V2DataIndicated,
    V2EventIndicated,
    V2MessageMalformed,
    V2MessageUnhandled,
    V2MethodAnswered,
    V2MethodFailed,
    V2QueryAnswered,
    V2QueryFailed,
    V2QueryPart,
    V2RequestExpired,
    V2RequestFailed,
)
from ._qpidd_names import qpidd_object_name
from ._role import (
    MAX_BANK,
    AgentAttached,
    AttachRefused,
    ClassAnnounced,
    ConsoleArrived,
    RoleDirectory,
    RolePeer,
    RoleProtocol,
    SchemaForward,
)
from ._selector import Selector, SelectorError, compile_selector
from ._version_choice import QPIDD_V1_EVENT, VersionChoice

__all__ = [
    "DrainClock",
    "QPIDD_V1_EVENT",
    "VersionChoice",
    "AGENT_VENDOR",
    "AgentDirectory",
    "MAX_BANK",
    "AgentAttached",
    "AttachRefused",
    "ClassAnnounced",
    "ConsoleArrived",
    "RoleDirectory",
    "RolePeer",
    "RoleProtocol",
    "SchemaForward",
    "Twins",
    "agent_v2_name",
    "is_twin",
    "silence_allowed",
    "DIRECT",
    "MANAGEMENT",
    "STATUS_TEXT",
    "AgentEvent",
    "AgentProtocol",
    "AttachAnswered",
    "ClassesRequested",
    "ConsoleJoined",
    "GetRequested",
    "GetSelection",
    "MethodRequested",
    "PackagesRequested",
    "RequestDropped",
    "SchemaRequested",
    "reply_target",
    "validate_arguments",
    "BROKER_AGENT_CLASS",
    "AgentArrived",
    "AgentInfo",
    "AgentLeft",
    "AgentRelabeled",
    "BodyMalformed",
    "ClassSeen",
    "ConsoleProtocol",
    "Correlator",
    "Delivery",
    "Event",
    "EventReceived",
    "HeartbeatReceived",
    "HeldDropped",
    "ItemSink",
    "ObjectUpdate",
    "Outgoing",
    "PackageSeen",
    "Pending",
    "QueryDone",
    "Reply",
    "ReplyMessage",
    "RequestFailed",
    "SchemaNeeded",
    "SchemaSeen",
    "Selector",
    "SelectorError",
    "agent_banks",
    "compile_selector",
    "BROKER_ADDRESS",
    "DIRECT_EXCHANGE",
    "LOCATE_SUBJECT",
    "TOPIC_EXCHANGE",
    "ConsoleProtocolV2",
    "V2AgentArrived",
    "V2AgentBeat",
    "V2AgentInfo",
    "V2AgentLeft",
    "V2AgentRestarted",
    "V2ConsoleEvent",
    "V2DataIndicated",
    "V2EventIndicated",
    "V2MessageMalformed",
    "V2MessageUnhandled",
    "V2MethodAnswered",
    "V2MethodFailed",
    "V2QueryAnswered",
    "V2QueryFailed",
    "V2QueryPart",
    "V2RequestExpired",
    "V2RequestFailed",
    "texts_from_schema",
    "SEVERITY_NAMES",
    "V2_DIRECT_EXCHANGE",
    "V2_TOPIC_EXCHANGE",
    "AgentProtocolV2",
    "V2AgentEvent",
    "V2LocateRequested",
    "V2MethodRequested",
    "V2ObjectQueryRequested",
    "V2RequestDropped",
    "V2RequestRejected",
    "V2SchemaQueryRequested",
    "V2SchemaRequestedInV1",
    "keyify",
    "object_name",
    "qpidd_object_name",
    "v2_schema_id",
    "v2_schema_map",
    "check_arguments",
]
