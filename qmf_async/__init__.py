"""qmf-async: an asyncio SDK for the Qpid Management Framework (QMF v1)."""

from __future__ import annotations

from ._errors import (
    AgentError, ArgumentError, CommandError, ConnectionLostError, DecodeError, EncodeError,
    MethodError, NotConnectedError, PartialResultError, ProtocolError, QmfError, QmfTimeout,
    TransportError, UnknownClassError, UsageError,
)
from ._schema import (
    SchemaArgument, SchemaClass, SchemaMethod, SchemaProperty, SchemaStatistic,
)
from ._values import SEVERITY_NAMES, Access, ClassKey, ClassKind, ObjectId, QmfType

__version__ = "0.1.0"

__all__ = [
    "__version__",
    "QmfError",
    "UsageError",
    "ArgumentError",
    "UnknownClassError",
    "EncodeError",
    "ProtocolError",
    "DecodeError",
    "TransportError",
    "NotConnectedError",
    "ConnectionLostError",
    "QmfTimeout",
    "AgentError",
    "MethodError",
    "CommandError",
    "PartialResultError",
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
