"""qmf-async: an asyncio SDK for the Qpid Management Framework (QMF v1 and v2), for qpidd
over AMQP 1.0 and RabbitMQ over AMQP 0-9-1."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # at run time each name is imported on first use (__getattr__)
    from .console import (
        Broker,
        BrokerObjectId,
        BrokerState,
        BrokerStateChange,
        Change,
        Console,
        Event,
        MethodResult,
        QmfObject,
        RemoteAgent,
        Session,
        SessionOptions,
        Subscription,
    )
    from .errors import (
        AgentError,
        AgentGoneError,
        ArgumentError,
        AuthenticationError,
        CommandError,
        ConnectionLostError,
        DecodeError,
        EncodeError,
        MethodError,
        NotConnectedError,
        ObjectGoneError,
        PartialResultError,
        ProtocolError,
        ProtocolMismatchError,
        QmfError,
        QmfTimeout,
        QueryTimeout,
        TransportError,
        UnknownClassError,
        UsageError,
    )
    from .protocol import Selector, SelectorError
    from .transport import TlsOptions
    from .wire import (
        SEVERITY_NAMES,
        Access,
        ClassKey,
        ClassKind,
        ObjectId,
        QmfType,
        SchemaArgument,
        SchemaClass,
        SchemaMethod,
        SchemaProperty,
        SchemaStatistic,
    )

__version__ = "0.1.0"

__all__ = [
    "__version__",
    "Session",
    "SessionOptions",
    "Broker",
    "BrokerObjectId",
    "BrokerState",
    "BrokerStateChange",
    "Console",
    "QmfObject",
    "Change",
    "MethodResult",
    "Event",
    "RemoteAgent",
    "Subscription",
    "Selector",
    "SelectorError",
    "TlsOptions",
    "QmfError",
    "UsageError",
    "ArgumentError",
    "UnknownClassError",
    "EncodeError",
    "ProtocolError",
    "DecodeError",
    "TransportError",
    "NotConnectedError",
    "ProtocolMismatchError",
    "AuthenticationError",
    "ConnectionLostError",
    "QmfTimeout",
    "AgentError",
    "MethodError",
    "CommandError",
    "PartialResultError",
    "QueryTimeout",
    "AgentGoneError",
    "ObjectGoneError",
    "ClassKey",
    "ObjectId",
    "QmfType",
    "Access",
    "ClassKind",
    "SEVERITY_NAMES",
    "SchemaClass",
    "SchemaProperty",
    "SchemaStatistic",
    "SchemaMethod",
    "SchemaArgument",
]


#: each public name -> the module it is imported from on first use (``module:name``
#: when it is renamed here)
_LAZY: dict[str, str] = {
    "Broker": ".console",
    "BrokerObjectId": ".console",
    "BrokerState": ".console",
    "BrokerStateChange": ".console",
    "Change": ".console",
    "Console": ".console",
    "Event": ".console",
    "MethodResult": ".console",
    "QmfObject": ".console",
    "RemoteAgent": ".console",
    "Session": ".console",
    "SessionOptions": ".console",
    "Subscription": ".console",
    "AgentError": ".errors",
    "AgentGoneError": ".errors",
    "ArgumentError": ".errors",
    "AuthenticationError": ".errors",
    "CommandError": ".errors",
    "ConnectionLostError": ".errors",
    "DecodeError": ".errors",
    "EncodeError": ".errors",
    "MethodError": ".errors",
    "NotConnectedError": ".errors",
    "ObjectGoneError": ".errors",
    "PartialResultError": ".errors",
    "ProtocolError": ".errors",
    "ProtocolMismatchError": ".errors",
    "QmfError": ".errors",
    "QmfTimeout": ".errors",
    "QueryTimeout": ".errors",
    "TransportError": ".errors",
    "UnknownClassError": ".errors",
    "UsageError": ".errors",
    "Selector": ".protocol",
    "SelectorError": ".protocol",
    "TlsOptions": ".transport",
    "SEVERITY_NAMES": ".wire",
    "Access": ".wire",
    "ClassKey": ".wire",
    "ClassKind": ".wire",
    "ObjectId": ".wire",
    "QmfType": ".wire",
    "SchemaArgument": ".wire",
    "SchemaClass": ".wire",
    "SchemaMethod": ".wire",
    "SchemaProperty": ".wire",
    "SchemaStatistic": ".wire",
}


if not TYPE_CHECKING:  # type checkers read the imports above; this is the run time
    from .lazy import lazy_names

    __getattr__, __dir__ = lazy_names(globals(), _LAZY)
    del lazy_names
