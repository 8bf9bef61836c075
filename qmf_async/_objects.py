"""What a console hands its users: object proxies, method results, events, agents."""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs

from ._errors import ArgumentError, UsageError
from ._schema import SchemaClass, SchemaMethod
from ._values import SEVERITY_NAMES, ClassKey, ObjectId, QmfType

if TYPE_CHECKING:
    from ._session import Broker, Session

__all__ = ["QmfObject", "MethodResult", "Event", "RemoteAgent", "convert_argument"]


class _Layout:
    """Name -> (kind, index) of one schema, shared by all its proxies."""

    __slots__ = ("props", "stats", "methods")

    def __init__(self, schema: SchemaClass) -> None:
        self.props = {p.name: i for i, p in enumerate(schema.properties)}
        self.stats = {s.name: i for i, s in enumerate(schema.statistics)}
        self.methods = {m.name: m for m in schema.methods}


_LAYOUTS: dict[ClassKey, _Layout] = {}


def _layout(schema: SchemaClass) -> _Layout:
    found = _LAYOUTS.get(schema.class_key)
    if found is None:
        found = _LAYOUTS[schema.class_key] = _Layout(schema)
    return found


@attrs.frozen(slots=True)
class RemoteAgent:
    """A remote agent as a console sees it: its broker and banks, and its label."""

    broker: Broker = attrs.field(repr=False, eq=False)
    broker_bank: int
    agent_bank: int
    label: str = attrs.field(default="", eq=False)
    broker_url: str = attrs.field(default="", eq=False)

    @property
    def key(self) -> str:
        """Routing key of requests to this agent: ``agent.<brokerBank>.<agentBank>``."""
        return f"agent.{self.broker_bank}.{self.agent_bank}"

    def __str__(self) -> str:
        return f"RemoteAgent({self.broker_bank}.{self.agent_bank} {self.label or '?'})"


class QmfObject:
    """A proxy of a managed object: properties and statistics as attributes,
    schema methods as awaitable calls (``await queue.purge(request=0)``).

    A proxy is a snapshot; :meth:`update` refreshes it from its agent.
    """

    __slots__ = ("_session", "_broker", "_agent", "_schema", "_oid", "_props", "_stats",
                 "_times", "_layout", "__weakref__")

    def __init__(self, session: Session | None, broker: Broker | None, agent: RemoteAgent | None,
                 schema: SchemaClass, object_id: ObjectId, properties: tuple[Any, ...] | None,
                 statistics: tuple[Any, ...] | None, timestamps: tuple[int, int, int]) -> None:
        self._session = session
        self._broker = broker
        self._agent = agent
        self._schema = schema
        self._oid = object_id
        self._props = properties
        self._stats = statistics
        self._times = timestamps
        self._layout = _layout(schema)

    # -- data
    def __getattr__(self, name: str) -> Any:
        # only called when normal lookup fails: elements and methods of the schema
        try:
            layout = object.__getattribute__(self, "_layout")
        except AttributeError:
            raise AttributeError(name) from None
        i = layout.props.get(name)
        if i is not None:
            props = self._props
            if props is None:
                raise AttributeError(f"{name!r}: properties of this object were not received")
            value = props[i]
            if value is None:
                raise AttributeError(f"optional property {name!r} is not present")
            return value
        i = layout.stats.get(name)
        if i is not None:
            stats = self._stats
            if stats is None:
                raise AttributeError(f"{name!r}: statistics of this object were not received")
            return stats[i]
        method = layout.methods.get(name)
        if method is not None:
            return _BoundMethod(self, method)
        raise AttributeError(f"{self._schema.class_key.name} object has no element or "
                             f"method {name!r}")

    def __dir__(self) -> list[str]:
        names = set(object.__dir__(self))
        names.update(self._layout.props, self._layout.stats, self._layout.methods)
        return sorted(names)

    def get_properties(self) -> dict[str, Any]:
        """Properties by name (absent optional properties left out)."""
        if self._props is None:
            return {}
        return {p.name: v for p, v in zip(self._schema.properties, self._props) if v is not None}

    def get_statistics(self) -> dict[str, Any]:
        """Statistics by name."""
        if self._stats is None:
            return {}
        return {s.name: v for s, v in zip(self._schema.statistics, self._stats)}

    def get(self, name: str, default: Any = None) -> Any:
        """A property or statistic by name, or ``default``."""
        i = self._layout.props.get(name)
        if i is not None and self._props is not None:
            v = self._props[i]
            return default if v is None else v
        i = self._layout.stats.get(name)
        if i is not None and self._stats is not None:
            return self._stats[i]
        return default

    def values(self) -> dict[str, Any]:
        """Properties and statistics in one mapping (for selectors and tools)."""
        out = self.get_properties()
        out.update(self.get_statistics())
        return out

    def get_object_id(self) -> ObjectId:
        return self._oid

    def get_class_key(self) -> ClassKey:
        return self._schema.class_key

    def get_schema(self) -> SchemaClass:
        return self._schema

    def get_timestamps(self) -> tuple[int, int, int]:
        """(last update, created, deleted) in ns since the epoch; deleted is 0 if live."""
        return self._times

    def is_deleted(self) -> bool:
        return self._times[2] != 0

    def get_index(self) -> str:
        """The index properties' values joined by ':' (qpid-tool's display name)."""
        parts = []
        for p, v in zip(self._schema.properties, self._props or ()):
            if p.index:
                parts.append(str(v))
        return ":".join(parts)

    def get_agent(self) -> RemoteAgent | None:
        return self._agent

    def get_broker(self) -> Broker | None:
        return self._broker

    async def update(self, *, _timeout: float | None = None) -> None:
        """Refresh properties and statistics from the agent.

        Raises:
            UsageError: the proxy is not attached to a session.
            QmfTimeout, TransportError: as for ``get_objects``.
            LookupError: the object no longer exists at its agent.
        """
        if self._session is None:
            raise UsageError("this object is not attached to a session")
        fresh = await self._session.get_objects(_objectId=self._oid, _broker=self._broker,
                                                _agent=self._agent, _timeout=_timeout)
        if not fresh:
            raise LookupError(f"object {self._oid} is gone")
        new = fresh[0]
        self._schema, self._props, self._stats = new._schema, new._props, new._stats
        self._times, self._layout = new._times, new._layout

    async def deref(self, name: str, *, _timeout: float | None = None) -> QmfObject | None:
        """The object an objectReference property points to (None for a null reference).

        Raises:
            UsageError: ``name`` is not a reference property, or no session.
        """
        i = self._layout.props.get(name)
        if i is None or self._schema.properties[i].type != QmfType.REF:
            raise UsageError(f"{name!r} is not a reference property")
        if self._session is None:
            raise UsageError("this object is not attached to a session")
        ref = (self._props or ())[i] if self._props else None
        if ref is None or ref.raw == bytes(16):
            return None
        found = await self._session.get_objects(_objectId=ref, _broker=self._broker,
                                                _timeout=_timeout)
        return found[0] if found else None

    async def invoke(self, method: str, *args: Any, _timeout: float | None = None,
                     **kwargs: Any) -> MethodResult:
        """Call a schema method by name (same as ``await obj.<method>(...)``).

        Raises:
            UnknownClassError: no such method.
            ArgumentError: bad arguments (nothing is sent).
            MethodError: the agent returned a non-zero status.
            QmfTimeout: no response in time.
            NotConnectedError: the broker is not connected.
            TransportError: the connection failed or was lost.
        """
        if self._session is None or self._broker is None:
            raise UsageError("this object is not attached to a session")
        schema_method = self._schema.method(method)
        in_args = bind_arguments(schema_method, args, kwargs)
        return await self._session._call_method(self, schema_method, in_args, _timeout)

    def __repr__(self) -> str:
        return f"<QmfObject {self._schema.class_key.package}:{self._schema.class_key.name} " \
               f"{self.get_index() or self._oid}>"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, QmfObject):
            return NotImplemented
        return (self._broker is other._broker and self._oid == other._oid
                and self._props == other._props and self._stats == other._stats
                and self._times == other._times)

    __hash__ = None  # type: ignore[assignment]


class _BoundMethod:
    __slots__ = ("_obj", "_method")

    def __init__(self, obj: QmfObject, method: SchemaMethod) -> None:
        self._obj = obj
        self._method = method

    async def __call__(self, *args: Any, _timeout: float | None = None, **kwargs: Any) -> MethodResult:
        return await self._obj.invoke(self._method.name, *args, _timeout=_timeout, **kwargs)

    def __repr__(self) -> str:
        args = ", ".join(f"{a.name}: {a.type.name.lower()}" for a in self._method.in_args)
        return f"<method {self._method.name}({args})>"


_INT_RANGES = {
    QmfType.UINT8: (0, 0xFF), QmfType.UINT16: (0, 0xFFFF), QmfType.UINT32: (0, 0xFFFFFFFF),
    QmfType.UINT64: (0, (1 << 64) - 1), QmfType.INT8: (-128, 127),
    QmfType.INT16: (-(1 << 15), (1 << 15) - 1), QmfType.INT32: (-(1 << 31), (1 << 31) - 1),
    QmfType.INT64: (-(1 << 63), (1 << 63) - 1), QmfType.ABSTIME: (0, (1 << 64) - 1),
    QmfType.DELTATIME: (0, (1 << 64) - 1),
}


def convert_argument(name: str, t: QmfType, value: Any, *, minimum: int | None = None,
                     maximum: int | None = None, maxlen: int | None = None) -> Any:
    """Check (and lightly convert) a value for a QMF type.

    Raises:
        ArgumentError: wrong type or out of range.
    """
    def bad(why: str) -> ArgumentError:
        return ArgumentError(f"argument {name!r}: {why}")

    if t in _INT_RANGES:
        if isinstance(value, bool) or not isinstance(value, int):
            raise bad(f"{t.name.lower()} expects an int, got {type(value).__name__}")
        lo, hi = _INT_RANGES[t]
        if minimum is not None:
            lo = max(lo, minimum)
        if maximum is not None:
            hi = min(hi, maximum)
        if not lo <= value <= hi:
            raise bad(f"{value} is outside {lo}..{hi}")
        return value
    if t in (QmfType.SSTR, QmfType.LSTR):
        if not isinstance(value, str):
            raise bad(f"expects str, got {type(value).__name__}")
        limit = 255 if t == QmfType.SSTR else 65535
        if maxlen is not None:
            limit = min(limit, maxlen)
        if len(value.encode()) > limit:
            raise bad(f"longer than {limit} bytes")
        return value
    if t == QmfType.BOOL:
        if not isinstance(value, bool):
            raise bad(f"expects bool, got {type(value).__name__}")
        return value
    if t in (QmfType.FLOAT, QmfType.DOUBLE):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise bad(f"expects a number, got {type(value).__name__}")
        return float(value)
    if t == QmfType.MAP:
        if not isinstance(value, Mapping):
            raise bad(f"expects a mapping, got {type(value).__name__}")
        return value
    if t in (QmfType.LIST, QmfType.ARRAY):
        if not isinstance(value, (list, tuple)):
            raise bad(f"expects a list, got {type(value).__name__}")
        return list(value)
    if t == QmfType.UUID:
        if isinstance(value, str):
            try:
                return uuid.UUID(value)
            except ValueError:
                raise bad("not a UUID") from None
        if not isinstance(value, uuid.UUID):
            raise bad(f"expects a UUID, got {type(value).__name__}")
        return value
    if t == QmfType.REF:
        if isinstance(value, QmfObject):
            return value.get_object_id()
        if isinstance(value, str):
            try:
                return ObjectId.parse(value)
            except UsageError as exc:
                raise bad(str(exc)) from None
        if not isinstance(value, ObjectId):
            raise bad(f"expects an ObjectId, got {type(value).__name__}")
        return value
    return value


def _default(arg_type: QmfType, text: str) -> Any:
    if arg_type in _INT_RANGES:
        return int(text, 0)
    if arg_type == QmfType.BOOL:
        return text.strip().lower() in ("1", "true", "yes", "y")
    if arg_type in (QmfType.FLOAT, QmfType.DOUBLE):
        return float(text)
    if arg_type == QmfType.MAP:
        return {}
    if arg_type in (QmfType.LIST, QmfType.ARRAY):
        return []
    return text


def bind_arguments(method: SchemaMethod, args: tuple[Any, ...], kwargs: Mapping[str, Any]
                   ) -> dict[str, Any]:
    """Map positional and keyword arguments onto the method's I/IO arguments,
    filling schema defaults and checking types and ranges.

    Raises:
        ArgumentError: too many, unknown, missing or mistyped arguments.
    """
    params = method.in_args
    if len(args) > len(params):
        raise ArgumentError(f"{method.name}() takes {len(params)} argument(s), "
                            f"{len(args)} given")
    values: dict[str, Any] = {}
    for p, v in zip(params, args):
        values[p.name] = v
    names = {p.name for p in params}
    for k, v in kwargs.items():
        if k not in names:
            raise ArgumentError(f"{method.name}() has no argument {k!r}")
        if k in values:
            raise ArgumentError(f"{method.name}() got argument {k!r} twice")
        values[k] = v
    out: dict[str, Any] = {}
    for p in params:
        if p.name in values:
            v = values[p.name]
        elif p.default is not None:
            try:
                v = _default(p.type, p.default)
            except ValueError:
                raise ArgumentError(f"{method.name}(): schema default {p.default!r} of "
                                    f"{p.name!r} is not a {p.type.name.lower()}") from None
        elif p.type == QmfType.MAP:
            v = {}  # qpidd's optional map arguments (filter, properties, options)
        else:
            raise ArgumentError(f"{method.name}() is missing argument {p.name!r}")
        out[p.name] = convert_argument(p.name, p.type, v, minimum=p.min, maximum=p.max,
                                       maxlen=p.maxlen)
    return out


class MethodResult:
    """The outcome of a method call: ``status``, ``text`` and output arguments
    (``out_args``, also readable as attributes)."""

    __slots__ = ("status", "text", "out_args")

    def __init__(self, status: int, text: str, out_args: Mapping[str, Any]) -> None:
        self.status = status
        self.text = text
        self.out_args = dict(out_args)

    def __getattr__(self, name: str) -> Any:
        try:
            return object.__getattribute__(self, "out_args")[name]
        except KeyError:
            raise AttributeError(f"method result has no output argument {name!r}") from None

    def __repr__(self) -> str:
        return f"MethodResult(status={self.status}, text={self.text!r}, out_args={self.out_args!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MethodResult):
            return NotImplemented
        return (self.status, self.text, self.out_args) == (other.status, other.text, other.out_args)

    __hash__ = None  # type: ignore[assignment]


@attrs.frozen(slots=True, repr=False)
class Event:
    """An event received from an agent."""

    class_key: ClassKey
    timestamp: int
    severity: int
    arguments: Mapping[str, Any]
    agent: RemoteAgent | None = attrs.field(default=None, eq=False)
    schema: SchemaClass | None = attrs.field(default=None, eq=False, repr=False)

    @property
    def severity_name(self) -> str:
        """emerg, alert, crit, error, warn, notice, info or debug."""
        return SEVERITY_NAMES[self.severity] if 0 <= self.severity < 8 else str(self.severity)

    def get_class_key(self) -> ClassKey:
        return self.class_key

    def get_arguments(self) -> dict[str, Any]:
        return dict(self.arguments)

    def get_severity(self) -> int:
        return self.severity

    def get_timestamp(self) -> int:
        return self.timestamp

    def __str__(self) -> str:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.timestamp / 1e9))
        args = " ".join(f"{k}={v}" for k, v in self.arguments.items())
        return (f"{when} {self.severity_name.upper()[:4]} {self.class_key.package}:"
                f"{self.class_key.name} {args}").rstrip()

    __repr__ = __str__
