"""The classic proxies: Object, Agent and Event, over qmf-async's QmfObject,
RemoteAgent and Event, with the classic console's attributes and printed forms."""

from __future__ import annotations

import time
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, Protocol

from ..console import Change, QmfObject, RemoteAgent
from ..console import Event as AsyncEvent
from ..console import MethodResult as AsyncResult
from ..errors import AgentError, MethodError, UsageError
from ..names import is_qpidd_agent
from ..wire import ObjectId as WireObjectId
from ..wire import SchemaClass as WireClass
from ._loop import MARGIN, Dispatcher, LoopThread
from ._values import (
    ClassKey,
    MethodResult,
    ObjectId,
    SchemaClass,
    classic_text,
    display_value,
)

_REF = 10
#: severity names as the classic console prints them in an event line
_SEV = ("EMER ", "ALERT", "CRIT ", "ERROR", "WARN ", "NOTIC", "INFO ", "DEBUG")


class SessionContext(Protocol):
    """What the proxies need from their classic Session."""

    loop: LoopThread
    dispatch: Dispatcher
    console: Any
    default_timeout: float

    def _schema_w(self, schema: WireClass) -> SchemaClass: ...
    def _oid_w(self, broker: Any, wire: WireObjectId) -> ObjectId: ...
    def _broker_w(self, broker: Any) -> Any: ...
    def _agent_w(self, agent: RemoteAgent) -> Agent: ...
    def _next_seq(self) -> int: ...
    def getObjects(self, **kwargs: Any) -> list[Object]: ...


def _lookup(schema: SchemaClass) -> dict[str, tuple[str, Any]]:
    """name -> ("p"|"s"|"m"|"r", descriptor), cached on the classic schema."""
    table: dict[str, tuple[str, Any]] | None = getattr(schema, "_lookup", None)
    if table is None:
        table = {}
        for s in schema.statistics:
            table[s.name] = ("s", s)
        for p in schema.properties:
            table[p.name] = ("p", p)
            if p.type == _REF:
                table[f"_{p.name}_"] = ("r", p)
        for m in schema.methods:
            table[m.name] = ("m", m)
        schema._lookup = table  # type: ignore[attr-defined]
    return table


def _v2_unsent(schema: SchemaClass) -> frozenset[str]:
    """The statistics of ``schema`` that qpidd never puts in a QMF v2 object map,
    cached on the classic schema.

    qpidd's management code generator (qpid-cpp ``managementgen``, the ``mma`` style
    of ``mmaTime`` statistics such as the queue's ``messageLatency``) declares
    ``<base>Samples``, ``<base>Min``, ``<base>Max`` and ``<base>Average`` in the
    schema and writes all four, in that order, in a QMF v1 record, but names the map
    keys of a v2 object ``<base>Count``, ``<base>Min``, ``<base>Max`` and
    ``<base>Avg``: over v2 the ``Samples`` and ``Average`` of the schema never
    arrive."""
    unsent: frozenset[str] | None = getattr(schema, "_v2_unsent", None)
    if unsent is None:
        names = {s.name for s in schema.statistics}
        found: set[str] = set()
        for name in names:
            base = name[:-len("Samples")]
            if name.endswith("Samples") and {f"{base}Min", f"{base}Max",
                                              f"{base}Average"} <= names:
                found |= {name, f"{base}Average"}
        unsent = frozenset(found)
        schema._v2_unsent = unsent  # type: ignore[attr-defined]
    return unsent


#: sstr and lstr: the schema types of text
_TEXT_TYPES = frozenset((6, 7))


def _as_text(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray)):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            return value  # refused by the argument check, as any non-text
    return value


_SLOTS = frozenset(("_ctx", "_obj", "_schema", "_set", "_oid", "_parts", "_extra"))
_BOTH = Change.PROPERTIES | Change.STATISTICS


class Object:
    """A proxy of a managed object: properties and statistics as attributes (None when
    an optional one is absent), schema methods as blocking calls, ``_ref_`` to follow a
    reference.  Printed ``package:class[objectId] index``.

    Reading a name the schema lacks raises AttributeError.
    """

    # internals in slots: ``vars(record)`` gives the classic console's attributes
    __slots__ = ("__weakref__", "_ctx", "_extra", "_obj", "_oid", "_parts", "_schema", "_set")

    _ctx: SessionContext | None
    _obj: QmfObject | None
    _schema: SchemaClass
    _set: dict[str, Any]
    _oid: ObjectId | None
    _parts: Change
    _extra: dict[str, Any]

    def __init__(self, ctx: SessionContext | None, obj: QmfObject | None,
                 schema: SchemaClass, values: Mapping[str, Any] | None = None) -> None:
        put = object.__setattr__
        put(self, "_ctx", ctx)
        put(self, "_obj", obj)
        put(self, "_schema", schema)
        #: values set by hand (makeObject, assignment), over the proxy's own
        put(self, "_set", dict(values or {}))
        put(self, "_oid", None)
        #: the parts this record carries, as the classic console's: both for a query
        #: answer or an unmanaged object, one for an objectProps/objectStats update
        put(self, "_parts", _BOTH if obj is None else obj.get_changes() & _BOTH)
        #: other attributes a script sets on the record
        put(self, "_extra", {})

    @property
    def __dict__(self) -> dict[str, Any]:  # type: ignore[override]
        """The classic console's instance attributes (what ``vars(record)`` gives),
        then those a script set."""
        current, created, deleted = self.getTimestamps()
        return {"_agent": self.getAgent(), "_session": self._ctx,
                "_broker": self.getBroker(), "_schema": self._schema,
                "_properties": self.getProperties(), "_statistics": self.getStatistics(),
                "_currentTime": current, "_createTime": created, "_deleteTime": deleted,
                "_objectId": self.getObjectId(), **self._extra}

    # ---- values

    def _value(self, kind: str, desc: Any) -> Any:
        name = desc.name
        if name in self._set:
            return self._set[name]
        obj = self._obj
        if obj is None or name in obj.get_absent() \
                or (kind == "s" and name in _v2_unsent(self._schema) and self._unsent()):
            # not sent (QMF v2): None, as the classic console reads a missing element
            return None
        value = obj.get(name)
        if value is not None and desc.type == _REF and isinstance(value, WireObjectId):
            assert self._ctx is not None
            return self._ctx._oid_w(obj.get_broker(), value)
        return classic_text(value)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in _SLOTS:  # copy, pickle, a half-built object
            raise AttributeError(name)
        extra = self._extra
        if name in extra:
            return extra[name]
        entry = _lookup(self._schema).get(name)
        if entry is None:
            raise AttributeError(f"{self._schema.classKey.cname} object has no attribute "
                                 f"{name!r}")
        kind, desc = entry
        if kind == "m":
            return lambda *args, **kwargs: self._invoke(desc.name, args, kwargs)
        if kind == "r":
            ref = self._value("p", desc)
            if ref is None or self._ctx is None:
                return None
            found = self._ctx.getObjects(_objectId=ref)
            return found[0] if len(found) == 1 else None
        return self._value(kind, desc)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _SLOTS:
            object.__setattr__(self, name, value)
            return
        entry = None if name.startswith("_") else _lookup(self._schema).get(name)
        if entry is not None and entry[0] == "p":
            self._set[name] = value
            return
        self._extra[name] = value

    def getProperties(self) -> list[tuple[Any, Any]]:
        """``[(SchemaProperty, value)]`` in schema order (None for an absent one; over
        QMF v2 those the agent did not send are left out, as the classic console does);
        ``[]`` for a record that carried statistics only (an ``objectStats`` update)."""
        if not self._parts & Change.PROPERTIES:
            return []
        out = [(p, self._value("p", p)) for p in self._schema.properties]
        if self._is_v2():  # absent ones read None (the optional and the not sent)
            out = [(p, v) for p, v in out if v is not None]
        return out

    def _is_v2(self) -> bool:
        oid = self.getObjectId()
        return bool(oid is not None and oid.isV2)

    def getStatistics(self) -> list[tuple[Any, Any]]:
        """``[(SchemaStatistic, value)]`` in schema order, those the agent sent (over
        QMF v2 an agent may leave some out: they are not listed, as the classic console
        does); ``[]`` for a record that carried properties only (an ``objectProps``
        update)."""
        if not self._parts & Change.STATISTICS:
            return []
        obj = self._obj
        absent = obj.get_absent() | self._unsent() if obj is not None else None
        if absent:
            return [(s, self._value("s", s)) for s in self._schema.statistics
                    if s.name not in absent or s.name in self._set]
        return [(s, self._value("s", s)) for s in self._schema.statistics]

    def _unsent(self) -> frozenset[str]:
        """The statistics a record of qpidd's v2 agent never carries over QMF v2 (see
        :func:`_v2_unsent`).  The session reads qpidd's agent over v1 (its fast path),
        whose records carry them; the classic console, reading over v2 there, never
        lists them nor reads them (None): neither does this record."""
        obj = self._obj
        agent = obj.get_agent() if obj is not None else None
        if agent is None or not is_qpidd_agent(agent.name):
            return frozenset()
        return _v2_unsent(self._schema)

    # ---- the classic console's attributes (scripts read them off records)

    @property
    def _objectId(self) -> ObjectId | None:
        return self.getObjectId()

    @property
    def _currentTime(self) -> int:
        return self.getTimestamps()[0]

    @property
    def _createTime(self) -> int:
        return self.getTimestamps()[1]

    @property
    def _deleteTime(self) -> int:
        return self.getTimestamps()[2]

    @property
    def _properties(self) -> list[tuple[Any, Any]]:
        return self.getProperties()

    @property
    def _statistics(self) -> list[tuple[Any, Any]]:
        return self.getStatistics()

    @property
    def _session(self) -> Any:
        return self._ctx

    @property
    def _broker(self) -> Any:
        return self.getBroker()

    @property
    def _agent(self) -> Agent | None:
        return self.getAgent()

    # ---- identity

    def getAgent(self) -> Agent | None:
        obj, ctx = self._obj, self._ctx
        agent = obj.get_agent() if obj is not None else None
        return ctx._agent_w(agent) if agent is not None and ctx is not None else None

    def getBroker(self) -> Any:
        obj, ctx = self._obj, self._ctx
        if obj is None or ctx is None:
            return None
        return ctx._broker_w(obj.get_broker())

    def getObjectId(self) -> ObjectId | None:
        if self._oid is None and self._obj is not None and self._ctx is not None:
            self._oid = self._ctx._oid_w(self._obj.get_broker(),
                                                     self._obj.get_object_id())
        return self._oid

    def getClassKey(self) -> ClassKey:
        return self._schema.classKey

    def getSchema(self) -> SchemaClass:
        return self._schema

    def getMethods(self) -> list[Any]:
        return self._schema.methods

    def getTimestamps(self) -> tuple[int, int, int]:
        """(current, create, delete) in nanoseconds since the epoch."""
        if self._obj is None:
            return (0, 0, 0)
        return self._obj.get_timestamps()

    def isDeleted(self) -> bool:
        return self.getTimestamps()[2] != 0

    def isManaged(self) -> bool:
        return self._obj is not None

    def getIndex(self) -> str:
        oid = self.getObjectId()
        if oid is not None and oid.isV2:
            return oid.objectName
        parts = []
        for prop, value in self.getProperties():
            if prop.index:
                try:
                    parts.append(display_value(value, prop.type))
                except Exception:
                    parts.append("<undecodable>")
        return ":".join(parts)

    def getV2RoutingKey(self) -> str:
        agent = self.getAgent()
        return agent.getV2RoutingKey() if agent is not None else "broker"

    # ---- refreshing

    def mergeUpdate(self, newer: Object) -> None:
        """Take what the newer record of the same object carried (its properties, its
        statistics, or both) and its timestamps; the parts it lacked stay.

        Raises:
            UsageError: not managed, or a different object.
        """
        if self._obj is None or newer._obj is None:
            raise UsageError("Object is not managed")
        if self.getObjectId() != newer.getObjectId():
            raise UsageError("Objects with different object-ids")
        # the session's proxies answer every part received for the object so far
        self._obj = newer._obj
        self._parts = self._parts | newer._parts
        self._set.clear()

    def update(self, _timeout: float | None = None) -> None:
        """Fetch the latest values from the agent.

        Raises:
            UsageError: not managed.  ObjectGoneError: the object no longer exists.
            QmfTimeout, TransportError: as the asyncio ``update``.
        """
        obj, ctx = self._obj, self._ctx
        if obj is None or ctx is None:
            raise UsageError("Object is not managed")
        wait = ctx.default_timeout if _timeout is None else _timeout
        ctx.loop.call(obj.update(_timeout=wait), wait + MARGIN)
        self._parts = _BOTH
        self._set.clear()

    # ---- methods

    def _invoke(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        obj, ctx = self._obj, self._ctx
        if obj is None or ctx is None:
            raise UsageError("Object is not managed")
        timeout = kwargs.pop("_timeout", None)
        is_async = bool(kwargs.pop("_async", False))
        method = next(m for m in self._schema.methods if m.name == name)
        inputs = [a for a in method.arguments if "I" in a.dir]
        ins = {a.name for a in inputs}
        kwargs = {k: v for k, v in kwargs.items() if k in ins}  # the classic drops others
        # the text rule for arguments: a text argument given as bytes (a Python 2 str)
        # is its UTF-8 text; bytes elsewhere go out as binary
        texts = {a.name for a in inputs if a.type in _TEXT_TYPES}
        if texts:
            args = tuple(_as_text(v) if i < len(inputs) and inputs[i].name in texts else v
                         for i, v in enumerate(args))
            kwargs = {k: _as_text(v) if k in texts else v for k, v in kwargs.items()}
        wait = ctx.default_timeout if timeout is None else float(timeout)
        broker = obj.get_broker()
        conv = ctx._oid_w

        async def call() -> MethodResult:
            try:
                result: AsyncResult = await obj.invoke(name, *args, _timeout=wait, **kwargs)
            except MethodError as exc:
                return MethodResult(exc.status, exc.text, {})
            out = {k: conv(broker, v) if isinstance(v, WireObjectId) else classic_text(v)
                   for k, v in result.out_args.items()}
            return MethodResult(result.status, result.text, out)

        if not is_async:
            return ctx.loop.call(call(), wait + MARGIN)
        return self._invoke_async(ctx, call, broker)

    def _invoke_async(self, ctx: SessionContext,
                      call: Callable[[], Coroutine[Any, Any, MethodResult]],
                      broker: Any) -> int:
        seq = ctx._next_seq()
        fut = ctx.loop.submit(call())

        def answered(f: Any) -> None:
            if f.cancelled():
                return
            exc = f.exception()
            if exc is None:
                result = f.result()
            else:
                status = exc.status if isinstance(exc, AgentError) else 1
                result = MethodResult(status, str(exc), {})
            console = ctx.console
            if console is not None and hasattr(console, "methodResponse"):
                ctx.dispatch.post(console.methodResponse, ctx._broker_w(broker), seq, result)

        fut.add_done_callback(answered)
        return seq

    def __repr__(self) -> str:
        oid = self.getObjectId()
        key = self._schema.classKey
        ident = repr(oid) if self._obj is not None else "unmanaged"
        return f"{key.pname}:{key.cname}[{ident}] {self.getIndex()}"


class Agent:
    """A remote agent: ``getBroker()``, ``getBrokerBank()``, ``getAgentBank()``,
    ``label``, ``getObjects(**kwargs)``; printed ``Agent(v2) at bank 1.0 (BrokerAgent)``."""

    def __init__(self, ctx: SessionContext, broker: Any, agent: RemoteAgent) -> None:
        self._ctx, self.remote = ctx, agent
        self.broker = broker
        self.session = ctx
        self.isV2 = agent.qmf_version == 2
        self.brokerBank = 1
        own = (agent.broker_bank, agent.agent_bank) == (1, 0)
        if own:
            self.agentBank, self.label = "0", "BrokerAgent"
        elif self.isV2:
            self.agentBank, self.label = agent.name, "QMFv2 Agent"
        else:
            self.agentBank, self.label = str(agent.agent_bank), agent.label
        self.agentName = agent.name
        self.epoch = 0

    def getBroker(self) -> Any:
        return self.broker

    def getBrokerBank(self) -> int:
        return self.brokerBank

    def getAgentBank(self) -> str:
        return self.agentBank

    def getV2RoutingKey(self) -> str:
        return "broker" if self.agentBank == "0" else self.agentBank

    def isConnected(self) -> bool:
        return bool(self.broker.isConnected())

    def getObjects(self, **kwargs: Any) -> list[Object]:
        """Objects of this agent (the keywords of Session.getObjects)."""
        kwargs["_agent"] = self
        return self._ctx.getObjects(**kwargs)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Agent) and self.remote == other.remote

    def __hash__(self) -> int:
        return hash(self.remote)

    def __repr__(self) -> str:
        ver = "v2" if self.isV2 else "v1"
        return f"Agent({ver}) at bank {self.brokerBank}.{self.agentBank} ({self.label})"


class Event:
    """An event: ``classKey``, ``arguments``, ``timestamp`` (ns), ``severity`` and
    ``schema``; printed as the classic console prints it (UTC time, severity, class,
    broker and arguments)."""

    def __init__(self, ctx: SessionContext, broker: Any, event: AsyncEvent) -> None:
        self.session, self.broker = ctx, broker
        self.agent = ctx._agent_w(event.agent) if event.agent is not None else None
        self.isV2 = bool(event.agent is not None and event.agent.qmf_version == 2) or None
        self.classKey = ClassKey(event.class_key, 2)
        self.timestamp, self.severity = event.timestamp, event.severity
        self.schema = ctx._schema_w(event.schema) if event.schema is not None else None
        async_broker = broker.wrapped if broker is not None else None
        self.arguments = {k: ctx._oid_w(async_broker, v) if isinstance(v, WireObjectId)
                          else classic_text(v) for k, v in event.arguments.items()}

    def getClassKey(self) -> ClassKey:
        return self.classKey

    def getArguments(self) -> dict[str, Any]:
        return self.arguments

    def getTimestamp(self) -> int:
        return self.timestamp

    def getSeverity(self) -> int:
        return self.severity

    def getSchema(self) -> SchemaClass | None:
        return self.schema

    def _sevName(self) -> str:
        s = self.severity
        return _SEV[s] if 0 <= s < len(_SEV) else f"INV-{s}"

    def __repr__(self) -> str:
        if self.schema is None:
            return "<uninterpretable>"
        out = time.strftime("%c", time.gmtime(self.timestamp // 1_000_000_000))
        out += f" {self._sevName()} {self.classKey.pname}:{self.classKey.cname}"
        out += f" broker={self.broker.getUrl() if self.broker is not None else ''}"
        for arg in self.schema.arguments:
            disp = display_value(self.arguments.get(arg.name), arg.type)
            if " " in disp:
                disp = f'"{disp}"'
            out += f" {arg.name}={disp}"
        return out

