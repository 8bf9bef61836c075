"""The classic value types: ClassKey, ObjectId, BrokerURL, MethodResult and the schema
descriptors, with the printed forms of the classic ``qmf.console``."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Mapping
from typing import Any

from ..errors import UsageError
from ..names import AMQP_PORT, AMQPS_PORT
from ..wire import ClassKey as WireClassKey
from ..wire import ObjectId as WireObjectId
from ..wire import SchemaArgument as WireArgument
from ..wire import SchemaClass as WireClass
from ..wire import SchemaMethod as WireMethod
from ..wire import SchemaProperty as WireProperty
from ..wire import SchemaStatistic as WireStatistic

_KEY_TEXT = re.compile(r"^([^:]*):([^:(]*)(?::([^(]*))?\(([0-9a-fA-F-]+)\)$")


class ClassKey:
    """A schema class's identity: package, class name, hash and (when known) its type,
    ``_data`` or ``_event``.  Printed ``package:class:_data(hash)``; equal and hashed by
    package, class and hash.

    Raises (constructor): UsageError for a malformed text form.
    """

    TYPE_DATA = "_data"
    TYPE_EVENT = "_event"

    def __init__(self, constructor: str | Mapping[str, Any] | WireClassKey,
                 kind: int | None = None) -> None:
        self.type: str | None = None
        if isinstance(constructor, WireClassKey):
            self.pname, self.cname = constructor.package, constructor.name
            self.hash = uuid.UUID(bytes=constructor.hash)
        elif isinstance(constructor, str):
            m = _KEY_TEXT.match(constructor.strip())
            if m is None:
                raise UsageError(f"Invalid ClassKey format: {constructor!r}")
            self.pname, self.cname, self.type = m.group(1), m.group(2), m.group(3)
            try:
                self.hash = uuid.UUID(m.group(4))
            except ValueError:
                raise UsageError(f"Invalid ClassKey format: {constructor!r}") from None
        elif isinstance(constructor, Mapping):
            try:
                self.pname = str(constructor["_package_name"])
                self.cname = str(constructor["_class_name"])
                h = constructor["_hash"]
            except KeyError as exc:
                raise UsageError(f"Invalid ClassKey map format {constructor!r}") from exc
            self.hash = h if isinstance(h, uuid.UUID) else uuid.UUID(bytes=bytes(h))
            self.type = constructor.get("_type")
        else:
            raise UsageError(f"cannot make a ClassKey of {type(constructor).__name__}")
        if kind is not None:
            self._setType(kind)

    def _setType(self, kind: int | str) -> None:
        is_event = kind in (2, ClassKey.TYPE_EVENT)
        self.type = ClassKey.TYPE_EVENT if is_event else ClassKey.TYPE_DATA

    def wire(self) -> WireClassKey:
        """The qmf-async ClassKey this key stands for."""
        return WireClassKey(self.pname, self.cname, self.hash.bytes)

    def getPackageName(self) -> str:
        return self.pname

    def getClassName(self) -> str:
        return self.cname

    def getHash(self) -> uuid.UUID:
        return self.hash

    def getType(self) -> str | None:
        return self.type

    def getHashString(self) -> str:
        return str(self.hash)

    def getPackageKey(self) -> tuple[str, uuid.UUID]:
        return (self.cname, self.hash)

    def asMap(self) -> dict[str, Any]:
        out: dict[str, Any] = {"_package_name": self.pname, "_class_name": self.cname,
                               "_hash": self.hash}
        if self.type is not None:
            out["_type"] = self.type
        return out

    def __repr__(self) -> str:
        if self.type is None:
            return f"{self.pname}:{self.cname}({self.hash})"
        return f"{self.pname}:{self.cname}:{self.type}({self.hash})"

    def __hash__(self) -> int:
        return hash((self.pname, self.cname, self.hash))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            try:
                other = ClassKey(other)
            except UsageError:
                return False
        if not isinstance(other, ClassKey):
            return NotImplemented
        return (self.pname, self.cname, self.hash) == (other.pname, other.cname, other.hash)


class ObjectId:
    """A QMF object id as the classic console shows it:
    ``flags-sequence-brokerBank-agentName-objectName`` (``0-1-1-0-org.apache.qpid.broker:
    queue:q1`` over QMF v2, ``0-1-1-0-26`` over v1).  Equal and hashed by value (also
    equal to its text form); ordered like the classic ids.

    ``ObjectId({"_object_name": ..., "_agent_name": ..., "_agent_epoch": ...})`` builds a
    v2 id, ``ObjectId(None, first, second)`` a v1 id from its two 64-bit halves.
    """

    __slots__ = ("_wire", "agentEpoch", "agentName", "isV2", "objectName")

    def __init__(self, constructor: Mapping[str, Any] | WireObjectId | None = None,
                 first: int = 0, second: int = 0, agentName: str | None = None) -> None:
        self._wire: WireObjectId | None = None
        if isinstance(constructor, Mapping):
            if "_object_name" not in constructor:
                raise UsageError("QMFv2 OBJECT_ID must have the '_object_name' field.")
            self.isV2: bool | None = True
            self.agentName = str(constructor.get("_agent_name", agentName))
            self.agentEpoch = int(constructor.get("_agent_epoch", 0) or 0)
            self.objectName = str(constructor["_object_name"])
            return
        if isinstance(constructor, WireObjectId):
            self._wire = constructor
            first, second = constructor.first, constructor.second
        self.isV2 = None
        self.agentName = str(first & 0x000000000FFFFFFF)
        self.agentEpoch = (first & 0x0FFF000000000000) >> 48
        self.objectName = str(second)
        if self._wire is None:
            self._wire = WireObjectId.from_ints(first, second)

    @classmethod
    def create(cls, agent_name: str, object_name: str, epoch: int = 0) -> ObjectId:
        return cls({"_agent_name": agent_name, "_object_name": object_name,
                    "_agent_epoch": epoch})

    @classmethod
    def _v2(cls, agent_name: str, epoch: int, object_name: str,
            wire: WireObjectId | None) -> ObjectId:
        oid = cls({"_object_name": object_name, "_agent_name": agent_name,
                   "_agent_epoch": epoch})
        oid._wire = wire
        return oid

    def wire(self) -> WireObjectId | None:
        """The qmf-async ObjectId on the connection it came from (None for a v2 id
        built by hand)."""
        return self._wire

    def getFlags(self) -> int:
        return 0

    def getSequence(self) -> int:
        return self.agentEpoch

    def getBrokerBank(self) -> int:
        return 1

    def getAgentBank(self) -> str:
        return self.agentName

    def getV2RoutingKey(self) -> str:
        return "broker" if self.agentName == "0" else self.agentName

    def getObject(self) -> str:
        return self.objectName

    def isDurable(self) -> bool:
        return self.getSequence() == 0

    def asMap(self) -> dict[str, Any]:
        out: dict[str, Any] = {"_agent_name": self.agentName, "_object_name": self.objectName}
        if self.agentEpoch != 0:
            out["_agent_epoch"] = self.agentEpoch
        return out

    def index(self) -> str:
        return repr(self)

    def _key(self) -> tuple[str, str, int]:
        return (self.objectName, self.agentName, self.agentEpoch)

    def __repr__(self) -> str:
        return f"0-{self.agentEpoch}-1-{self.agentName}-{self.objectName}"

    __str__ = __repr__

    def __hash__(self) -> int:
        return hash(repr(self))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            return repr(self) == other
        if not isinstance(other, ObjectId):
            return NotImplemented
        return self._key() == other._key()

    def __lt__(self, other: ObjectId) -> bool:
        return self._key() < other._key()


class BrokerURL:
    """A broker address: ``[amqp[s]://][user[/password]@]host[:port]`` (port 5672, or
    5671 behind ``amqps://``).  ``str()`` gives it back without defaults added.

    Raises (constructor): UsageError when the text is not such an address.
    """

    _RE = re.compile(r"^(?:([^:/@]+)://)?(?:([^:/@]+)(?:[/:]([^@]+))?@)?"
                     r"(?:([^@:/\[]+)|\[([a-fA-F0-9:.]+)\])(?::([0-9]+))?(/.*)?$")
    AMQPS = "amqps"
    AMQP = "amqp"
    scheme: str | None
    user: str | None
    password: str | None
    host: str
    port: int
    path: str

    def __init__(self, s: str | BrokerURL | None = None, *, scheme: str | None = None,
                 user: str | None = None, password: str | None = None,
                 host: str | None = None, port: int | None = None, path: str = "") -> None:
        if isinstance(s, BrokerURL):
            scheme, user, password, host, port = s.scheme, s.user, s.password, s.host, s.port
            path = s.path
        elif s is not None:
            m = self._RE.match(s.strip())
            if m is None:
                raise UsageError(f"not a broker address: {s!r}")
            scheme, user, password, host4, host6, p, path = m.groups()
            host, port, path = host4 or host6, int(p) if p else None, path or ""
            if user is not None and password is None and ":" in user:
                user, _, password = user.partition(":")
        if host is None:
            raise UsageError("Host required for url")
        self.scheme, self.user, self.password, self.host = scheme, user, password, host
        #: a vhost path (``/vhost``, percent-encoded) after the port: RabbitMQ's vhosts
        self.path = "" if path == "/" else path
        self.port = port if port is not None else (AMQPS_PORT if scheme == self.AMQPS
                                                   else AMQP_PORT)
        self.authName = user or None
        self.authPass = password or None

    def name(self) -> str:
        return str(self)

    def url(self) -> str:
        """The ``amqp[s]://user:password@host:port`` URL qmf-async connects to."""
        from urllib.parse import quote
        auth = ""
        if self.user:
            auth = quote(self.user, safe="")
            if self.password:
                auth += ":" + quote(self.password, safe="")
            auth += "@"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme or 'amqp'}://{auth}{host}:{self.port}{self.path}"

    def __str__(self) -> str:
        s = f"{self.scheme}://" if self.scheme else ""
        if self.user:
            s += self.user + (f"/{self.password}" if self.password else "") + "@"
        s += f"[{self.host}]" if ":" in self.host else self.host
        return s + (f":{self.port}" if self.port else "") + self.path

    def __repr__(self) -> str:
        return f"URL({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            other = BrokerURL(other)
        if not isinstance(other, BrokerURL):
            return NotImplemented
        return str(self) == str(other)

    def __hash__(self) -> int:
        return hash(str(self))


class MethodResult:
    """The outcome of a method call: ``status``, ``text``, ``outArgs`` (a dict); output
    arguments also read as attributes (None when absent, as in the classic console)."""

    def __init__(self, status: int, text: str, outArgs: Mapping[str, Any]) -> None:
        self.status = status
        self.text = text
        self.outArgs = dict(outArgs)

    def __getattr__(self, name: str) -> Any:
        out = self.__dict__.get("outArgs")
        if name.startswith("__") or out is None:
            raise AttributeError(name)
        return out.get(name)

    def __repr__(self) -> str:
        return f"{self.text} ({self.status}) - {self.outArgs}"


# ----------------------------------------------------------------------- schemas

_DIR = {"in": "I", "out": "O", "inout": "IO", "i": "I", "o": "O", "io": "IO"}


class _Named:
    """Equal and hashed by kind, name and type: the pairs of ``getProperties()`` and
    ``getStatistics()`` key dicts that match across records and schema reloads."""

    name: str
    type: int

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, _Named)
        return (self.name, self.type) == (other.name, other.type)

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.name, self.type))


class SchemaProperty(_Named):
    """A property of a schema class (printed as its name)."""

    def __init__(self, p: WireProperty) -> None:
        self.name, self.type = p.name, int(p.type)
        self.access = str(int(p.access))
        self.index, self.optional = bool(p.index), bool(p.optional)
        self.unit, self.min, self.max, self.maxlen = p.unit, p.min, p.max, p.maxlen
        self.desc, self.refPackage, self.refClass = p.desc, p.ref_package, p.ref_class

    def __repr__(self) -> str:
        return self.name


class SchemaStatistic(_Named):
    """A statistic of a schema class (printed as its name)."""

    def __init__(self, s: WireStatistic) -> None:
        self.name, self.type, self.unit, self.desc = s.name, int(s.type), s.unit, s.desc

    def __repr__(self) -> str:
        return self.name


class SchemaArgument:
    """An argument of a method or an event; ``dir`` is ``I``, ``O`` or ``IO``."""

    def __init__(self, a: WireArgument, method_arg: bool) -> None:
        self.name, self.type = a.name, int(a.type)
        if method_arg:
            self.dir = _DIR.get((a.direction or "I").lower(), (a.direction or "I").upper())
        self.unit, self.min, self.max, self.maxlen = a.unit, a.min, a.max, a.maxlen
        self.desc, self.default = a.desc, a.default
        self.refPackage, self.refClass = a.ref_package, a.ref_class

    def __repr__(self) -> str:
        return self.name



class SchemaMethod:
    """A method of a schema class, printed ``name(in1, in2)``."""

    def __init__(self, m: WireMethod) -> None:
        self.name, self.desc = m.name, m.desc
        self.arguments = [SchemaArgument(a, True) for a in m.arguments]

    def __repr__(self) -> str:
        ins = ", ".join(a.name for a in self.arguments if "I" in a.dir)
        return f"{self.name}({ins})"



class SchemaClass:
    """A schema class: ``getKey()``, ``getProperties()``, ``getStatistics()``,
    ``getMethods()``, ``getArguments()`` (events); printed ``Table Class: key ``."""

    CLASS_KIND_TABLE = 1
    CLASS_KIND_EVENT = 2

    def __init__(self, schema: WireClass) -> None:
        self.kind = int(schema.kind)
        self.classKey = ClassKey(schema.class_key, self.kind)
        self.properties = [SchemaProperty(p) for p in schema.properties]
        self.statistics = [SchemaStatistic(s) for s in schema.statistics]
        self.methods = [SchemaMethod(m) for m in schema.methods]
        self.arguments = [SchemaArgument(a, False) for a in schema.arguments]
        self.superTypeKey = None
        self.wire = schema

    def getKey(self) -> ClassKey:
        return self.classKey

    def getProperties(self) -> list[SchemaProperty]:
        return self.properties

    def getStatistics(self) -> list[SchemaStatistic]:
        return self.statistics

    def getMethods(self) -> list[SchemaMethod]:
        return self.methods

    def getArguments(self) -> list[SchemaArgument]:
        return self.arguments

    def __repr__(self) -> str:
        kind = {1: "Table", 2: "Event"}.get(self.kind, "Unsupported")
        return f"{kind} Class: {self.classKey!r} "


def classic_text(value: Any) -> Any:
    """A received value as the classic console gives it to Python 2 scripts: every
    string is text (``str``) when it is valid UTF-8, at any depth of maps and lists
    (keys too); bytes that are not UTF-8 stay ``bytes``.  Other values are returned
    as they are (the same object when nothing changes)."""
    t = type(value)
    if t is str or t is int or t is bool or t is float or value is None:
        return value
    if isinstance(value, (bytes, bytearray)):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            return bytes(value)
    if isinstance(value, Mapping):  # also the codec's typed maps: plain dicts here
        return {classic_text(k): classic_text(v) for k, v in value.items()}
    if isinstance(value, list):
        return [classic_text(v) for v in value]
    if isinstance(value, tuple):
        return tuple(classic_text(v) for v in value)
    return value


def display_value(value: Any, type_code: int) -> str:
    """A value as the classic console displays it in an index or an event line."""
    if type_code == 8:
        return time.strftime("%c", time.gmtime(value / 1_000_000_000))
    if type_code == 11:
        return "T" if value else "F"
    if type_code in (10, 14, 15, 20, 21, 22):
        return repr(value)
    return str(value)
