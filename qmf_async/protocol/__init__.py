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

Names: both console cores speak one event vocabulary (:class:`Reply`,
:class:`QueryDone`, :class:`AgentArrived`, :class:`ObjectUpdate`, ...; :data:`Event` is
any of them): a request is named by its sequence number (v1) or correlation id (v2), an
agent by its banks (v1) or name (v2).  Of the other QMF v2 types, the protocol classes
are ``<Role>ProtocolV2`` (pairing with :class:`ConsoleProtocol` and
:class:`AgentProtocol`) and the agent core's events ``V2<Name>``
(:class:`V2LocateRequested`, ...; their union :data:`V2AgentEvent`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # at run time each name is imported on first use (__getattr__)
    # the bus's names, from ``names`` (no protocol module needs loading for them)
    from ..names import LOCATE_SUBJECT, V2_DIRECT_EXCHANGE, V2_TOPIC_EXCHANGE
    from ..names import MANAGEMENT_EXCHANGE as MANAGEMENT
    from ..names import REPLY_EXCHANGE as DIRECT
    from ._agent import (
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
        ConsoleProtocolV2,
        V2AgentInfo,
        texts_from_schema,
    )
    from ._correlation import Correlator, ItemSink, Pending, ReplyMessage
    from ._drain import DrainClock
    from ._envelope import Delivery, Outgoing
    from ._events import (
        AgentArrived,
        AgentKey,
        AgentLeft,
        AgentRelabeled,
        AgentRestarted,
        BodyMalformed,
        ClassSeen,
        Event,
        EventReceived,
        HeartbeatReceived,
        HeldDropped,
        MessageUnhandled,
        ObjectUpdate,
        PackageSeen,
        QueryDone,
        QueryPart,
        Reply,
        RequestExpired,
        RequestFailed,
        SchemaNeeded,
        SchemaSeen,
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
    "AgentKey",
    "AgentRestarted",
    "MessageUnhandled",
    "QueryPart",
    "RequestExpired",
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
    "LOCATE_SUBJECT",
    "ConsoleProtocolV2",
    "V2AgentInfo",
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


#: each public name -> the module it is imported from on first use (``module:name``
#: when it is renamed here)
_LAZY: dict[str, str] = {
    "DIRECT": "..names:REPLY_EXCHANGE",
    "MANAGEMENT": "..names:MANAGEMENT_EXCHANGE",
    "STATUS_TEXT": "._agent",
    "AgentEvent": "._agent",
    "AgentProtocol": "._agent",
    "AttachAnswered": "._agent",
    "ClassesRequested": "._agent",
    "ConsoleJoined": "._agent",
    "GetRequested": "._agent",
    "GetSelection": "._agent",
    "MethodRequested": "._agent",
    "PackagesRequested": "._agent",
    "RequestDropped": "._agent",
    "SchemaRequested": "._agent",
    "reply_target": "._agent",
    "validate_arguments": "._agent",
    "SEVERITY_NAMES": "._agent_v2",
    "V2_DIRECT_EXCHANGE": "..names",
    "V2_TOPIC_EXCHANGE": "..names",
    "AgentProtocolV2": "._agent_v2",
    "V2AgentEvent": "._agent_v2",
    "V2LocateRequested": "._agent_v2",
    "V2MethodRequested": "._agent_v2",
    "V2ObjectQueryRequested": "._agent_v2",
    "V2RequestDropped": "._agent_v2",
    "V2RequestRejected": "._agent_v2",
    "V2SchemaQueryRequested": "._agent_v2",
    "V2SchemaRequestedInV1": "._agent_v2",
    "check_arguments": "._agent_v2",
    "keyify": "._agent_v2",
    "object_name": "._agent_v2",
    "v2_schema_id": "._agent_v2",
    "v2_schema_map": "._agent_v2",
    "AGENT_VENDOR": "._agents",
    "AgentDirectory": "._agents",
    "Twins": "._agents",
    "agent_v2_name": "._agents",
    "is_twin": "._agents",
    "silence_allowed": "._agents",
    "BROKER_AGENT_CLASS": "._console",
    "AgentInfo": "._console",
    "ConsoleProtocol": "._console",
    "agent_banks": "._console",
    "BROKER_ADDRESS": "._console_v2",
    "LOCATE_SUBJECT": "..names",
    "ConsoleProtocolV2": "._console_v2",
    "V2AgentInfo": "._console_v2",
    "texts_from_schema": "._console_v2",
    "Correlator": "._correlation",
    "DrainClock": "._drain",
    "QPIDD_V1_EVENT": "._version_choice",
    "VersionChoice": "._version_choice",
    "ItemSink": "._correlation",
    "Pending": "._correlation",
    "ReplyMessage": "._correlation",
    "Delivery": "._envelope",
    "Outgoing": "._envelope",
    "AgentArrived": "._events",
    "AgentKey": "._events",
    "AgentRestarted": "._events",
    "MessageUnhandled": "._events",
    "QueryPart": "._events",
    "RequestExpired": "._events",
    "AgentLeft": "._events",
    "AgentRelabeled": "._events",
    "BodyMalformed": "._events",
    "ClassSeen": "._events",
    "Event": "._events",
    "EventReceived": "._events",
    "HeartbeatReceived": "._events",
    "HeldDropped": "._events",
    "ObjectUpdate": "._events",
    "PackageSeen": "._events",
    "QueryDone": "._events",
    "Reply": "._events",
    "RequestFailed": "._events",
    "SchemaNeeded": "._events",
    "SchemaSeen": "._events",
    "qpidd_object_name": "._qpidd_names",
    "MAX_BANK": "._role",
    "AgentAttached": "._role",
    "AttachRefused": "._role",
    "ClassAnnounced": "._role",
    "ConsoleArrived": "._role",
    "RoleDirectory": "._role",
    "RolePeer": "._role",
    "RoleProtocol": "._role",
    "SchemaForward": "._role",
    "Selector": "._selector",
    "SelectorError": "._selector",
    "compile_selector": "._selector",
}


if not TYPE_CHECKING:  # type checkers read the imports above; this is the run time
    from ..lazy import lazy_names

    __getattr__, __dir__ = lazy_names(globals(), _LAZY)
    del lazy_names
