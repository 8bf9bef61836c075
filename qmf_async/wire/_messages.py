"""The QMF v1 messages as frozen value types, one per opcode.

Every message has ``seq`` (the 32-bit sequence number of the header) and a class
attribute ``OPCODE``.  ``c``, ``i`` and ``g`` share :class:`ObjectRecord`, whose
``opcode`` field tells them apart.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any, ClassVar

import attrs

from ..frozen import frozen
from ._schema import SchemaClass
from ._values import SEVERITY_NAMES, ClassKey, ClassKind, ObjectId

__all__ = [
    "Message",
    "BrokerRequest",
    "BrokerResponse",
    "CommandComplete",
    "PackageQuery",
    "PackageIndication",
    "ClassQuery",
    "ClassIndication",
    "SchemaRequest",
    "SchemaResponse",
    "Heartbeat",
    "ObjectRecord",
    "EventIndication",
    "GetQuery",
    "MethodRequest",
    "MethodResponse",
    "AttachRequest",
    "AttachResponse",
    "ConsoleAdded",
    "UndecodedTail",
]


@frozen(slots=True)
class BrokerRequest:
    """``B``: a console opens a management session with the broker."""

    OPCODE: ClassVar[str] = "B"
    seq: int = 0


@frozen(slots=True)
class BrokerResponse:
    """``b``: the broker's identity."""

    OPCODE: ClassVar[str] = "b"
    broker_id: uuid.UUID
    seq: int = 0


@frozen(slots=True)
class CommandComplete:
    """``z``: the end of a query, or a request's failure (``code`` != 0)."""

    OPCODE: ClassVar[str] = "z"
    seq: int
    code: int = 0
    text: str = "OK"


@frozen(slots=True)
class PackageQuery:
    """``P``: list the known schema packages."""

    OPCODE: ClassVar[str] = "P"
    seq: int


@frozen(slots=True)
class PackageIndication:
    """``p``: one known package."""

    OPCODE: ClassVar[str] = "p"
    seq: int
    package: str


@frozen(slots=True)
class ClassQuery:
    """``Q``: list the classes of a package."""

    OPCODE: ClassVar[str] = "Q"
    seq: int
    package: str


@frozen(slots=True)
class ClassIndication:
    """``q``: one known class (object or event) of a package."""

    OPCODE: ClassVar[str] = "q"
    seq: int
    kind: ClassKind = attrs.field(converter=ClassKind)
    class_key: ClassKey


@frozen(slots=True)
class SchemaRequest:
    """``S``: ask for the full schema of a class."""

    OPCODE: ClassVar[str] = "S"
    seq: int
    class_key: ClassKey


@frozen(slots=True)
class SchemaResponse:
    """``s``: a full schema."""

    OPCODE: ClassVar[str] = "s"
    seq: int
    schema: SchemaClass


@frozen(slots=True)
class Heartbeat:
    """``h``: an agent is alive; ``timestamp`` in ns since the epoch."""

    OPCODE: ClassVar[str] = "h"
    timestamp: int
    seq: int = 0


@frozen(slots=True)
class ObjectRecord:
    """``c`` (properties), ``i`` (statistics) or ``g`` (both): one object's state.

    ``properties`` and ``statistics`` are tuples in schema order (``None`` for a
    part the opcode does not carry; ``None`` items for absent optional properties).
    Timestamps are ns since the epoch; ``deleted`` is 0 for a live object.
    """

    opcode: str
    seq: int
    schema: SchemaClass = attrs.field(repr=lambda s: str(s.class_key))
    timestamp: int
    created: int
    deleted: int
    object_id: ObjectId
    properties: tuple[Any, ...] | None = None
    statistics: tuple[Any, ...] | None = None

    @property
    def OPCODE(self) -> str:
        return self.opcode

    @property
    def class_key(self) -> ClassKey:
        return self.schema.class_key

    def properties_dict(self) -> dict[str, Any]:
        """Properties by name (absent optional properties are left out)."""
        if self.properties is None:
            return {}
        return {p.name: v for p, v in zip(self.schema.properties, self.properties, strict=False)
                if v is not None}

    def statistics_dict(self) -> dict[str, Any]:
        """Statistics by name."""
        if self.statistics is None:
            return {}
        return {s.name: v for s, v in zip(self.schema.statistics, self.statistics, strict=False)}


@frozen(slots=True)
class EventIndication:
    """``e``: an event with its arguments by name."""

    OPCODE: ClassVar[str] = "e"
    seq: int
    schema: SchemaClass = attrs.field(repr=lambda s: str(s.class_key))
    timestamp: int
    severity: int
    arguments: Mapping[str, Any]

    @property
    def class_key(self) -> ClassKey:
        return self.schema.class_key

    @property
    def severity_name(self) -> str:
        return SEVERITY_NAMES[self.severity] if 0 <= self.severity < 8 else str(self.severity)


@frozen(slots=True)
class GetQuery:
    """``G``: ask for objects matching ``query`` (``_class``, ``_package``,
    ``_objectid``, ``_key`` ...)."""

    OPCODE: ClassVar[str] = "G"
    seq: int
    query: Mapping[str, Any]


@frozen(slots=True)
class MethodRequest:
    """``M``: invoke ``method`` on ``object_id``.

    ``arguments`` holds the I/IO arguments by name when the method's schema is
    known and they decoded; otherwise it is ``None`` and ``raw_arguments`` holds the
    undecoded remainder of the body (re-encoded unchanged).
    """

    OPCODE: ClassVar[str] = "M"
    seq: int
    object_id: ObjectId
    class_key: ClassKey
    method: str
    arguments: Mapping[str, Any] | None = None
    raw_arguments: bytes = b""


@frozen(slots=True)
class MethodResponse:
    """``m``: a method's status, text and O/IO arguments.

    ``arguments`` is set when the caller said which method the response answers;
    otherwise ``raw_arguments`` keeps the bytes.  ``short_text`` records qpidd's
    str8 status text (written for unknown methods) so re-encoding is exact.
    """

    OPCODE: ClassVar[str] = "m"
    seq: int
    status: int = 0
    text: str = "OK"
    arguments: Mapping[str, Any] | None = None
    raw_arguments: bytes = b""
    short_text: bool = False


@frozen(slots=True)
class AttachRequest:
    """``A``: an agent asks the management broker for banks."""

    OPCODE: ClassVar[str] = "A"
    seq: int
    label: str
    system_id: uuid.UUID
    broker_bank: int = 0
    agent_bank: int = 0


@frozen(slots=True)
class AttachResponse:
    """``a``: the banks the management broker assigned."""

    OPCODE: ClassVar[str] = "a"
    seq: int
    broker_bank: int
    agent_bank: int


@frozen(slots=True)
class ConsoleAdded:
    """``x``: a console appeared; agents re-publish everything."""

    OPCODE: ClassVar[str] = "x"
    seq: int = 0


@frozen(slots=True)
class UndecodedTail:
    """The rest of a body that names a class whose schema is not known yet.

    Returned (instead of raising) when decoding with ``defer_unknown=True``:
    ``body[offset:]`` starts at the message that needs ``class_key``; decode it
    again once the schema is in the registry.
    """

    OPCODE: ClassVar[str] = "?"
    opcode: str
    seq: int
    class_key: ClassKey
    body: bytes
    offset: int

    @property
    def remaining(self) -> bytes:
        return self.body[self.offset:]


Message = (BrokerRequest | BrokerResponse | CommandComplete | PackageQuery | PackageIndication
           | ClassQuery | ClassIndication | SchemaRequest | SchemaResponse | Heartbeat
           | ObjectRecord | EventIndication | GetQuery | MethodRequest | MethodResponse
           | AttachRequest | AttachResponse | ConsoleAdded | UndecodedTail)
