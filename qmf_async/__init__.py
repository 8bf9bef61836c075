"""qmf-async: an asyncio SDK for the Qpid Management Framework (QMF v1)."""

from __future__ import annotations

from ._console import Console
from ._errors import (
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
    PartialResultError,
    ProtocolError,
    QmfError,
    QmfTimeout,
    QueryTimeout,
    TransportError,
    UnknownClassError,
    UsageError,
)
from ._objects import Event, MethodResult, QmfObject, RemoteAgent
from ._schema import (
    SchemaArgument,
    SchemaClass,
    SchemaMethod,
    SchemaProperty,
    SchemaStatistic,
)
from ._selector import Selector, SelectorError
from ._session import Broker, Session
from ._subscriptions import Subscription
from ._transport import TlsOptions
from ._values import SEVERITY_NAMES, Access, ClassKey, ClassKind, ObjectId, QmfType

__version__ = "0.1.0"

__all__ = [
    "__version__",
    "Session",
    "Broker",
    "Console",
    "QmfObject",
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
    "AuthenticationError",
    "ConnectionLostError",
    "QmfTimeout",
    "AgentError",
    "MethodError",
    "CommandError",
    "PartialResultError",
    "QueryTimeout",
    "AgentGoneError",
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
