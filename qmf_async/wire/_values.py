"""Small value types of the QMF v1 protocol: type codes, class keys and object ids."""

from __future__ import annotations

import enum
import re

import attrs

from ..errors import UsageError
from ..frozen import frozen

__all__ = ["QmfType", "Access", "ClassKind", "ClassKey", "ObjectId", "SEVERITY_NAMES",
           "to_qmf_type",
           "to_access"]


class QmfType(enum.IntEnum):
    """QMF v1 value type codes (properties, statistics, arguments)."""

    UINT8 = 1
    UINT16 = 2
    UINT32 = 3
    UINT64 = 4
    SSTR = 6
    LSTR = 7
    ABSTIME = 8
    DELTATIME = 9
    REF = 10
    BOOL = 11
    FLOAT = 12
    DOUBLE = 13
    UUID = 14
    MAP = 15
    INT8 = 16
    INT16 = 17
    INT32 = 18
    INT64 = 19
    OBJECT = 20
    LIST = 21
    ARRAY = 22


_TYPE_ALIASES = {
    "objid": 10, "ref": 10, "uint8": 1, "uint16": 2, "uint32": 3, "uint64": 4,
    "u8": 1, "u16": 2, "u32": 3, "u64": 4, "int8": 16, "int16": 17, "int32": 18, "int64": 19,
    "s8": 16, "s16": 17, "s32": 18, "s64": 19, "bool": 11, "boolean": 11, "sstr": 6, "str8": 6,
    "lstr": 7, "str16": 7, "abstime": 8, "deltatime": 9, "float": 12, "double": 13, "uuid": 14,
    "map": 15, "ftable": 15, "object": 20, "list": 21, "array": 22,
}


def to_qmf_type(value: object) -> QmfType:
    """A QmfType from a code, a member, or a name (``"uint32"``, ``"objId"``, ``"sstr"``...).

    Raises:
        UsageError: unknown type.
    """
    if isinstance(value, QmfType):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return QmfType(value)
        except ValueError:
            raise UsageError(f"unknown QMF type code {value}") from None
    if isinstance(value, str):
        code = _TYPE_ALIASES.get(value.lower())
        if code is None and value.upper() in QmfType.__members__:
            return QmfType[value.upper()]
        if code is not None:
            return QmfType(code)
    raise UsageError(f"unknown QMF type {value!r}")


def to_access(value: object) -> Access:
    """An Access from a code, a member or a name (``"RO"``, ``"RW"``, ``"RC"``).

    Raises:
        UsageError: unknown access.
    """
    if isinstance(value, Access):
        return value
    if isinstance(value, str) and value.upper() in Access.__members__:
        return Access[value.upper()]
    if isinstance(value, int):
        try:
            return Access(value)
        except ValueError:
            pass
    raise UsageError(f"unknown access {value!r}")


class Access(enum.IntEnum):
    """Property access codes."""

    RC = 1  #: read-create
    RW = 2  #: read-write
    RO = 3  #: read-only


class ClassKind(enum.IntEnum):
    """Schema class kinds."""

    OBJECT = 1
    EVENT = 2


#: Event severity names by level (syslog order), as the classic console prints them.
SEVERITY_NAMES = ("emerg", "alert", "crit", "error", "warn", "notice", "info", "debug")

_KEY_RE = re.compile(r"^(?P<pkg>[^:]*):(?P<cls>[^(]*)\((?P<hash>[0-9a-fA-F]{32})\)$")


def _check_hash(instance: object, attribute: attrs.Attribute[bytes], value: bytes) -> None:
    if not isinstance(value, bytes) or len(value) != 16:
        raise UsageError("class hash must be 16 bytes")


@frozen(slots=True, cache_hash=True)
class ClassKey:
    """Identity of a schema class: package, class name and 16-byte schema hash.

    Text form: ``package:class(hash-hex)``.
    """

    package: str
    name: str
    hash: bytes = attrs.field(validator=_check_hash)

    def __str__(self) -> str:
        return f"{self.package}:{self.name}({self.hash.hex()})"

    @property
    def hash_hex(self) -> str:
        """The schema hash as 32 hex digits."""
        return self.hash.hex()

    @classmethod
    def parse(cls, text: str) -> ClassKey:
        """Parse the text form ``package:class(hash-hex)``.

        Raises:
            UsageError: the text is not a class key.
        """
        m = _KEY_RE.match(text)
        if m is None:
            raise UsageError(f"not a class key: {text!r}")
        return cls(m["pkg"], m["cls"], bytes.fromhex(m["hash"]))

    def to_wire(self) -> bytes:
        """The wire form: package (str8), class name (str8), hash (bin128)."""
        pkg = self.package.encode()
        name = self.name.encode()
        if len(pkg) > 255 or len(name) > 255:
            raise UsageError("package and class names are at most 255 bytes")
        return bytes((len(pkg),)) + pkg + bytes((len(name),)) + name + self.hash


_M28 = (1 << 28) - 1
_M20 = (1 << 20) - 1
_M12 = (1 << 12) - 1
_M64 = (1 << 64) - 1


def _check_oid(instance: object, attribute: attrs.Attribute[bytes], value: bytes) -> None:
    if type(value) is not bytes or len(value) != 16:
        raise UsageError("an object id is 16 bytes")


@frozen(slots=True, repr=False)
class ObjectId:
    """A QMF v1 128-bit object id, held as its 16-byte wire form ``raw``.

    The first 64 bits pack flags (4 bits), boot sequence (12), broker bank (20) and
    agent bank (28); the second 64 bits are the object number assigned by the
    agent.  Text form: ``flags-sequence-brokerBank-agentBank-object`` (``0-1-1-0-26``).
    """

    raw: bytes = attrs.field(validator=_check_oid)

    @classmethod
    def make(cls, *, flags: int = 0, sequence: int = 0, broker_bank: int = 0,
             agent_bank: int = 0, object: int = 0) -> ObjectId:
        """Build an id from its parts.

        Raises:
            UsageError: a part does not fit its bit width.
        """
        for name, value, mask in (("flags", flags, 0xF), ("sequence", sequence, _M12),
                                  ("broker_bank", broker_bank, _M20),
                                  ("agent_bank", agent_bank, _M28), ("object", object, _M64)):
            if not isinstance(value, int) or value < 0 or value > mask:
                raise UsageError(f"object id {name} {value!r} out of range")
        first = (flags << 60) | (sequence << 48) | (broker_bank << 28) | agent_bank
        return cls(first.to_bytes(8, "big") + object.to_bytes(8, "big"))

    @classmethod
    def from_ints(cls, first: int, second: int) -> ObjectId:
        """Build from the two 64-bit halves.

        Raises:
            UsageError: a half does not fit 64 bits.
        """
        try:
            return cls(first.to_bytes(8, "big") + second.to_bytes(8, "big"))
        except (OverflowError, AttributeError):
            raise UsageError("object id halves must be unsigned 64-bit integers") from None

    @property
    def first(self) -> int:
        """The first 64 bits (flags, sequence, broker bank, agent bank)."""
        return int.from_bytes(self.raw[:8], "big")

    @property
    def second(self) -> int:
        """The second 64 bits (the object number)."""
        return int.from_bytes(self.raw[8:], "big")

    @property
    def flags(self) -> int:
        return self.first >> 60

    @property
    def sequence(self) -> int:
        """Boot sequence of the agent (0 for persistent ids)."""
        return (self.first >> 48) & _M12

    @property
    def broker_bank(self) -> int:
        return (self.first >> 28) & _M20

    @property
    def agent_bank(self) -> int:
        return self.first & _M28

    @property
    def object(self) -> int:
        return self.second

    def __hash__(self) -> int:
        return hash(self.raw)

    def to_bytes(self) -> bytes:
        """The 16-byte wire form."""
        return self.raw

    @classmethod
    def from_bytes(cls, raw: bytes) -> ObjectId:
        """Build from the 16-byte wire form.

        Raises:
            UsageError: ``raw`` is not 16 bytes.
        """
        return cls(bytes(raw))

    @classmethod
    def parse(cls, text: str) -> ObjectId:
        """Parse the text form ``flags-sequence-brokerBank-agentBank-object``.

        Raises:
            UsageError: the text is not an object id.
        """
        parts = text.strip().split("-")
        if len(parts) != 5 or not all(p.isascii() and p.isdigit() for p in parts):
            raise UsageError(f"not an object id: {text!r}")
        f, s, b, a, o = (int(p) for p in parts)
        return cls.make(flags=f, sequence=s, broker_bank=b, agent_bank=a, object=o)

    def __str__(self) -> str:
        first = self.first
        return (f"{first >> 60}-{(first >> 48) & _M12}-{(first >> 28) & _M20}-"
                f"{first & _M28}-{self.second}")

    def __repr__(self) -> str:
        return f"ObjectId('{self}')"

    def agent_key(self) -> tuple[int, int]:
        """(broker bank, agent bank) of the agent that owns the object."""
        return self.broker_bank, self.agent_bank


_new = object.__new__
_set_raw = ObjectId.__dict__["raw"].__set__  # slot descriptor, bypasses the frozen __setattr__


def oid_from_wire(raw: bytes) -> ObjectId:
    """Fast constructor for decoders: ``raw`` is known to be 16 bytes."""
    oid = _new(ObjectId)
    _set_raw(oid, raw)
    return oid
