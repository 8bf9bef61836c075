"""The classic synchronous ``qmf.console`` Session, Broker and Console over qmf-async.

A classic :class:`Session` owns an asyncio :class:`qmf_async.Session` running on the
session's event-loop thread; every classic call submits a coroutine there and blocks on
its future with the call's timeout.  Console callbacks are posted to the session's
dispatch thread, so a callback may itself call ``getObjects``, ``update()`` or a method.
"""

from __future__ import annotations

import itertools
import time
from typing import Any

from ..console import Broker as AsyncBroker
from ..console import Console as AsyncConsole
from ..console import Event as AsyncEvent
from ..console import QmfObject, RemoteAgent
from ..console import Session as AsyncSession
from ..errors import PartialResultError, QueryTimeout, UnknownClassError, UsageError
from ..transport import TlsOptions, parse_url
from ..wire import ClassKey as WireClassKey
from ..wire import ObjectId as WireObjectId
from ..wire import SchemaClass as WireClass
from ._loop import MARGIN, Dispatcher, LoopThread, track, untrack
from ._objects import Agent, Event, Object
from ._values import BrokerURL, ClassKey, ObjectId, SchemaClass


class Console:
    """Subclass and override any of these; pass an instance as ``Session(console=...)``.
    Callbacks run on the session's dispatch thread, one at a time, in arrival order."""

    def brokerConnected(self, broker: Broker) -> None: """A connection is up."""
    def brokerConnectionFailed(self, broker: Broker) -> None: """A connect failed."""
    def brokerDisconnected(self, broker: Broker) -> None: """A connection was lost."""
    def newPackage(self, name: str) -> None: """A package was seen."""
    def newClass(self, kind: int, classKey: ClassKey) -> None: """A class was seen."""
    def newAgent(self, agent: Agent) -> None: """An agent appeared."""
    def delAgent(self, agent: Agent) -> None: """An agent left."""
    def objectProps(self, broker: Broker, record: Object) -> None: """Properties."""
    def objectStats(self, broker: Broker, record: Object) -> None: """Statistics."""
    def event(self, broker: Broker, event: Event) -> None: """An event."""
    def heartbeat(self, agent: Agent, timestamp: int) -> None: """A heartbeat."""
    def brokerInfo(self, broker: Broker) -> None: """The broker identified itself."""
    def methodResponse(self, broker: Broker, seq: int, response: Any) -> None:
        """The answer of a method called with ``_async=True``."""


class DebugConsole(Console):
    """A Console printing every callback."""

    def brokerConnected(self, broker: Broker) -> None: print("brokerConnected:", broker)
    def brokerConnectionFailed(self, broker: Broker) -> None:
        print("brokerConnectionFailed:", broker)
    def brokerDisconnected(self, broker: Broker) -> None: print("brokerDisconnected:", broker)
    def newPackage(self, name: str) -> None: print("newPackage:", name)
    def newClass(self, kind: int, classKey: ClassKey) -> None: print("newClass:", kind, classKey)
    def newAgent(self, agent: Agent) -> None: print("newAgent:", agent)
    def delAgent(self, agent: Agent) -> None: print("delAgent:", agent)
    def objectProps(self, broker: Broker, record: Object) -> None: print("objectProps:", record)
    def objectStats(self, broker: Broker, record: Object) -> None: print("objectStats:", record)
    def event(self, broker: Broker, event: Event) -> None: print("event:", event)
    def heartbeat(self, agent: Agent, timestamp: int) -> None: print("heartbeat:", agent)
    def brokerInfo(self, broker: Broker) -> None: print("brokerInfo:", broker)
    def methodResponse(self, broker: Broker, seq: int, response: Any) -> None:
        print("methodResponse:", broker, seq, response)


class Broker:
    """A broker connection (``isConnected()``, ``getUrl()``, ``getAgents()`` ...);
    printed ``Broker connected at: host:port``."""

    def __init__(self, session: Session, wrapped: AsyncBroker) -> None:
        self.session, self.wrapped = session, wrapped
        address = parse_url(wrapped.url)
        self.host, self.port = address.host, address.port
        self.ssl = address.scheme == "amqps"
        self.authUser = address.user
        self.authPass = _password(wrapped.url)
        self._session_ids: dict[str, str] = {}

    def isConnected(self) -> bool:
        return bool(self.wrapped.connected)

    def getError(self) -> str | None:
        err = self.wrapped.error
        return None if err is None else str(err)

    def getBrokerId(self) -> Any:
        return self.wrapped.broker_id

    def getBrokerBank(self) -> int:
        return 1

    def getAgents(self) -> list[Agent]:
        return self.session.getAgents(self)

    def getAgent(self, brokerBank: int, agentBank: int | str) -> Agent | None:
        return next((a for a in self.getAgents() if a.agentBank == str(agentBank)), None)

    def getBrokerAgent(self) -> Agent | None:
        return self.getAgent(1, 0)

    def getSessionId(self) -> str:
        """The name of this console's session on the broker: a broker ``session``
        object's ``name`` ends with it, as with the classic console.

        Found once per connection (two queries); when the broker lists no session of
        this connection (RabbitMQ), a name unique to this connection.
        """
        transport = self.wrapped.transport
        local = None if transport is None else transport.local_address
        if local is None:
            return f"{self.host}.{id(self.wrapped)}"
        cached = self._session_ids.get(local)
        if cached is None:
            cached = self._find_session_name(local) or f"{self.host}.{local}"
            self._session_ids = {local: cached}
        return cached

    def _find_session_name(self, local: str) -> str | None:
        suffix = "-" + local
        conns = [c for c in self.session.getObjects(_class="connection", _broker=self)
                 if str(getattr(c, "address", "") or "").endswith(suffix)]
        if len(conns) != 1:
            return None
        oid = conns[0].getObjectId()
        for sess in self.session.getObjects(_class="session", _broker=self):
            if sess.connectionRef == oid:
                return str(sess.name)
        return None

    def getAmqpSession(self) -> None:
        return None

    def getUrl(self) -> BrokerURL:
        return BrokerURL(host=self.host, port=self.port)

    def getFullUrl(self, noAuthIfGuestDefault: bool = True) -> BrokerURL:
        scheme = "amqps" if self.ssl else "amqp"
        user, pw = self.authUser, self.authPass
        if not user or (noAuthIfGuestDefault and (user, pw) == ("guest", "guest")):
            return BrokerURL(scheme=scheme, host=self.host, port=self.port)
        return BrokerURL(scheme=scheme, user=user, password=pw, host=self.host, port=self.port)

    def __repr__(self) -> str:
        if self.isConnected():
            return f"Broker connected at: {self.getUrl()}"
        return "Disconnected Broker"


def _password(url: str) -> str | None:
    from urllib.parse import unquote, urlsplit
    pw = urlsplit(url).password
    return None if pw is None else unquote(pw)


def _agent_matches(agent: Agent, filters: list[Any]) -> bool:
    if not filters:
        return True
    for f in filters:
        if isinstance(f, str):
            if agent.label == f:
                return True
            continue
        parts = [*(agent.agentName or "").split(":", 2), "", "", ""]
        if all(want is None or want == got for want, got in zip(f, parts[:3], strict=True)):
            return True
    return agent.agentBank == "0"  # the broker's own agent is never filtered


class _Adapter(AsyncConsole):
    """Forwards the asyncio callbacks to the classic console on the dispatch thread."""

    def __init__(self, session: Session) -> None:
        self.s = session

    def _post(self, name: str, *args: Any) -> None:
        fn = getattr(self.s.console, name, None)
        if fn is not None:
            self.s.dispatch.post(fn, *args)

    def broker_connected(self, broker: AsyncBroker) -> None:
        self._post("brokerConnected", self.s._broker_w(broker))

    def broker_connection_failed(self, broker: AsyncBroker, error: BaseException) -> None:
        self._post("brokerConnectionFailed", self.s._broker_w(broker))

    def broker_disconnected(self, broker: AsyncBroker) -> None:
        self._post("brokerDisconnected", self.s._broker_w(broker))

    def broker_info(self, broker: AsyncBroker) -> None:
        self._post("brokerInfo", self.s._broker_w(broker))

    def new_package(self, name: str) -> None:
        self._post("newPackage", name)

    def new_class(self, kind: int, class_key: WireClassKey) -> None:
        self._post("newClass", int(kind), ClassKey(class_key, kind))

    def new_agent(self, agent: RemoteAgent) -> None:
        w = self.s._agent_w(agent)
        if _agent_matches(w, self.s.agent_filter):
            self._post("newAgent", w)

    def del_agent(self, agent: RemoteAgent) -> None:
        # the wrapper newAgent gave, dropped from the cache as the classic console
        # drops the agent from its broker's list before calling delAgent with it
        w = self.s._agent_w(agent)
        self.s._forget_agent(agent, w)
        if _agent_matches(w, self.s.agent_filter):
            self._post("delAgent", w)

    def _wanted(self, key: WireClassKey, filters: list[tuple[str, str | None]]) -> bool:
        return not filters or (key.package, key.name) in filters or (key.package, None) in filters

    def object_props(self, broker: AsyncBroker, obj: QmfObject) -> None:
        if self.s.rcvObjects and self._wanted(obj.get_class_key(), self.s.class_filter):
            self._post("objectProps", self.s._broker_w(broker), self.s._object_w(obj))

    def object_stats(self, broker: AsyncBroker, obj: QmfObject) -> None:
        if self.s.rcvObjects and self._wanted(obj.get_class_key(), self.s.class_filter):
            self._post("objectStats", self.s._broker_w(broker), self.s._object_w(obj))

    def event(self, broker: AsyncBroker, event: AsyncEvent) -> None:
        if self.s.rcvEvents and self._wanted(event.class_key, self.s.event_filter):
            bw = self.s._broker_w(broker)
            self._post("event", bw, Event(self.s, bw, event))

    def heartbeat(self, agent: RemoteAgent, timestamp: int) -> None:
        w = self.s._agent_w(agent)
        if self.s.rcvHeartbeats and _agent_matches(w, self.s.agent_filter):
            self._post("heartbeat", w, timestamp)


_TLS_ARGS = ("ssl_certfile", "ssl_keyfile", "ssl_trustfile", "ssl_skip_hostname_check")


class Session:
    """A classic console session over one or more brokers (see the module docstring).

    ``timeout`` (keyword only, default 60 s as the classic console) bounds every wait;
    other keywords go to :class:`qmf_async.Session` (``qmf_version``, ``protocol`` ...).

    Raises (constructor): UsageError for ``userBindings`` without a console.
    """

    def __init__(self, console: Any = None, rcvObjects: bool = True, rcvEvents: bool = True,
                 rcvHeartbeats: bool = True, manageConnections: bool = False,
                 userBindings: bool = False, *, timeout: float = 60.0, **options: Any) -> None:
        if userBindings and console is None:
            raise UsageError("userBindings can't be set unless a console is provided.")
        self.console = console
        on = console is not None
        self.rcvObjects, self.rcvEvents = rcvObjects and on, rcvEvents and on
        self.rcvHeartbeats = rcvHeartbeats and on
        self.userBindings, self.manageConnections = userBindings, manageConnections
        self.default_timeout = float(timeout)
        self.class_filter: list[tuple[str, str | None]] = []
        self.event_filter: list[tuple[str, str | None]] = []
        self.agent_filter: list[Any] = []
        self.brokers: list[Broker] = []
        self._by_broker: dict[int, Broker] = {}
        self._agents: dict[tuple[int, int, int], Agent] = {}
        self._schemas: dict[WireClassKey, SchemaClass] = {}
        self._seq = itertools.count(int(time.time()))
        self._closed = False
        self.loop = LoopThread("qmf-classic-loop")
        self.dispatch = Dispatcher("qmf-classic-callbacks")
        adapter = _Adapter(self) if on else None

        async def make() -> AsyncSession:
            return AsyncSession(adapter, self.rcvObjects, self.rcvEvents, self.rcvHeartbeats,
                                userBindings, manageConnections, timeout=self.default_timeout,
                                **options)

        try:
            self.wrapped: AsyncSession = self.loop.call(make(), 30.0)
        except BaseException:
            self.dispatch.stop(1.0)
            self.loop.stop(1.0)
            raise
        track(self)

    def __repr__(self) -> str:
        return f"QMF Console Session Manager (brokers: {len(self.brokers)})"

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---------------------------------------------------------------- wrappers

    def _next_seq(self) -> int:
        return next(self._seq)

    def _broker_w(self, broker: Any) -> Broker:
        w = self._by_broker.get(id(broker))
        if w is None:
            w = self._by_broker.setdefault(id(broker), Broker(self, broker))
        return w

    def _agent_w(self, agent: RemoteAgent) -> Agent:
        key = (id(agent.broker), agent.broker_bank, agent.agent_bank)
        w = self._agents.get(key)
        if w is None or (w.remote is not agent and w.remote.name != agent.name):
            w = self._agents[key] = Agent(self, self._broker_w(agent.broker), agent)
        return w

    def _forget_agent(self, agent: RemoteAgent, wrapper: Agent) -> None:
        """An agent left: its wrapper leaves the cache (a returning agent, or one
        restarted with other banks, gets a new one, as from the classic console)."""
        key = (id(agent.broker), agent.broker_bank, agent.agent_bank)
        if self._agents.get(key) is wrapper:
            self._agents.pop(key, None)

    def _schema_w(self, schema: WireClass) -> SchemaClass:
        w = self._schemas.get(schema.class_key)
        if w is None or w.wire is not schema:
            w = self._schemas[schema.class_key] = SchemaClass(schema)
        return w

    def _object_w(self, obj: QmfObject) -> Object:
        return Object(self, obj, self._schema_w(obj.get_schema()))

    def _oid_w(self, broker: Any, wire: WireObjectId) -> ObjectId:
        v2 = broker.v2_object_id(wire) if isinstance(broker, AsyncBroker) else None
        if v2 is None:
            return ObjectId(wire)
        name = v2.agent_name
        if not name:
            banks = wire.agent_key()
            if banks == (1, 0):
                name = "0"
            else:
                name = next((a.name for a in broker.agents()
                             if (a.broker_bank, a.agent_bank) == banks), "0")
        return ObjectId._v2(name, v2.agent_epoch or 0, v2.object_name, wire)

    def _call(self, coro: Any, timeout: float | None = None) -> Any:
        wait = self.default_timeout if timeout is None else timeout
        return self.loop.call(coro, wait + MARGIN)

    # ---------------------------------------------------------------- brokers

    def addBroker(self, target: str | BrokerURL = "localhost", timeout: float | None = None,
                  mechanisms: str | None = None, sessTimeout: float | None = None,
                  **connectArgs: Any) -> Broker:
        """Connect to a broker: ``[amqp[s]://][user/password@]host[:port]`` (port 5672).

        TLS (``amqps://``): ``ssl_trustfile`` (CA file; the system CAs otherwise),
        ``ssl_certfile``, ``ssl_keyfile``, ``ssl_skip_hostname_check``.  The server
        certificate and its host name are verified.

        Raises:
            UsageError: a bad address or an unknown keyword.
            TransportError: the broker cannot be reached or refused the login (not with
                ``manageConnections=True``: then it is retried in the background).
            QmfTimeout: connecting took longer than ``timeout``.
        """
        url = target if isinstance(target, BrokerURL) else BrokerURL(str(target))
        unknown = set(connectArgs) - set(_TLS_ARGS) - {"service", "ssl"}
        if unknown:
            raise UsageError(f"addBroker: unknown keyword(s) {sorted(unknown)}")
        tls = None
        if url.scheme == BrokerURL.AMQPS:
            tls = TlsOptions(connectArgs.get("ssl_trustfile"), connectArgs.get("ssl_certfile"),
                             connectArgs.get("ssl_keyfile"),
                             not connectArgs.get("ssl_skip_hostname_check", False))
        if url.user is None:
            url = BrokerURL(scheme=url.scheme, user="guest", password="guest", host=url.host,
                            port=url.port, path=url.path)
        wait = float(timeout) if timeout is not None else self.default_timeout
        broker = self._call(self.wrapped.add_broker(url.url(), timeout=wait, tls=tls,
                                                    sasl_mechanisms=mechanisms), wait)
        w = self._broker_w(broker)
        self.brokers.append(w)
        track(self)  # after the transport's imports (see track)
        return w

    def delBroker(self, broker: Broker) -> None:
        """Disconnect from a broker and forget it (pending calls of it fail)."""
        if broker in self.brokers:
            self.brokers.remove(broker)
        self._by_broker.pop(id(broker.wrapped), None)
        self._call(self.wrapped.del_broker(broker.wrapped), self.wrapped.close_timeout)

    def close(self) -> None:
        """Close every connection and stop the session's threads; bounded, idempotent."""
        if self._closed:
            return
        self._closed = True
        untrack(self)
        bound = self.wrapped.close_timeout * max(1, len(self.brokers)) + MARGIN
        try:
            if not self.loop.in_loop():
                self.loop.call(self.wrapped.close(), bound)
        except Exception:
            pass
        self.brokers.clear()
        self.dispatch.stop(bound)
        self.loop.stop(bound)

    # ---------------------------------------------------------------- schema

    def getPackages(self) -> list[str]:
        """The package names the bus knows."""
        return sorted(self._call(self.wrapped.get_packages()))

    def getClasses(self, packageName: str) -> list[ClassKey]:
        """The class keys of a package (typed ``_data``/``_event``)."""
        keys = self._call(self.wrapped.get_classes(packageName))
        return [ClassKey(k, self.wrapped.class_kind(k)) for k in keys]

    def getSchema(self, classKey: ClassKey | str | WireClassKey) -> SchemaClass | None:
        """The schema of a class; None when nobody knows it."""
        if isinstance(classKey, str):
            classKey = ClassKey(classKey)
        key = classKey.wire() if isinstance(classKey, ClassKey) else classKey
        try:
            return self._schema_w(self._call(self.wrapped.get_schema(key)))
        except UnknownClassError:
            return None

    def makeObject(self, classKey: ClassKey | str, **kwargs: Any) -> Object:
        """An unmanaged object of a class, its properties from ``kwargs``.

        Raises:
            UsageError: the schema is unknown.
        """
        schema = self.getSchema(classKey)
        if schema is None:
            raise UsageError("Schema not found for classKey")
        return Object(None, None, schema, kwargs)

    # ---------------------------------------------------------------- agents

    def getAgents(self, broker: Broker | None = None) -> list[Agent]:
        """The agents known now (of one broker, or all)."""
        async def agents() -> list[RemoteAgent]:
            return self.wrapped.get_agents(broker.wrapped if broker is not None else None)
        return [self._agent_w(a) for a in self._call(agents())]

    # ---------------------------------------------------------------- objects

    def getObjects(self, **kwargs: Any) -> list[Object]:
        """Query objects: ``_class``/``_package``, ``_key``, ``_schema``, ``_objectId``,
        ``_agent``, ``_broker``, ``_timeout`` and ``name=value`` matches.

        As the classic console: an unknown class and no agent give ``[]``; agents that
        do not answer in time give what did arrive.

        Raises:
            UsageError: no class, key, schema or object id.
            QueryTimeout: no agent answered in time and nothing arrived.
            TransportError: the connection failed.
            PartialResultError: an agent answered with an error.
        """
        kw: dict[str, Any] = {}
        timeout = kwargs.pop("_timeout", None)
        wait = self.default_timeout if timeout is None else float(timeout)
        for name in ("_class", "_package"):
            if name in kwargs:
                kw[name] = kwargs.pop(name)
        schema = kwargs.pop("_schema", None)
        key = kwargs.pop("_key", None) or (schema.getKey() if schema is not None else None)
        if key is not None:
            key = ClassKey(key) if isinstance(key, str) else key
            kw["_key"] = key.wire() if isinstance(key, ClassKey) else key
        agent = kwargs.pop("_agent", None)
        if agent is not None:
            kw["_agent"] = agent.remote if isinstance(agent, Agent) else agent
        broker = kwargs.pop("_broker", None)
        if broker is not None:
            kw["_broker"] = broker.wrapped if isinstance(broker, Broker) else broker
        oid = kwargs.pop("_objectId", None)
        want_name: str | None = None
        if oid is not None:
            if isinstance(oid, str):
                oid = self._parse_oid(oid)
            if isinstance(oid, ObjectId) and oid.wire() is None:
                pkg, _, rest = oid.objectName.partition(":")
                kw.setdefault("_package", pkg)
                kw.setdefault("_class", rest.partition(":")[0])
                want_name = oid.objectName
            else:
                wire = oid.wire() if isinstance(oid, ObjectId) else oid
                if isinstance(wire, WireObjectId) and wire.first == 0 and wire.second == 0:
                    return []  # a null reference (0-0-0-0-0) names no object
                kw["_objectId"] = wire
        kwargs.pop("_async", None)
        matches: dict[str, Any] = {k: (v.wire() if isinstance(v, ObjectId) else v)
                                   for k, v in kwargs.items()}
        try:
            found = self._call(self.wrapped.get_objects(_timeout=wait, **kw, **matches), wait)
        except UnknownClassError:
            return []
        except QueryTimeout as exc:
            if not exc.partial:
                raise
            found = list(exc.partial)
        except PartialResultError as exc:
            if "no agent" not in str(exc):
                raise
            return []
        out = [self._object_w(o) for o in found]
        if want_name is not None:
            out = [o for o in out if getattr(o.getObjectId(), "objectName", None) == want_name]
        return out

    def _parse_oid(self, text: str) -> ObjectId | WireObjectId:
        parts = text.split("-", 4)
        if len(parts) == 5 and parts[3].isdigit() and parts[4].isdigit():
            return WireObjectId.parse(text)
        if len(parts) == 5:
            return ObjectId.create(parts[3], parts[4], int(parts[1]))
        raise UsageError(f"not an object id: {text!r}")

    # ---------------------------------------------------------------- bindings

    def _need_bindings(self, what: str | None = None) -> None:
        if not self.userBindings:
            raise UsageError("userBindings option must be set for this Session.")
        if what == "objects" and not self.rcvObjects:
            raise UsageError("Session needs to be configured with rcvObjects=True.")
        if what == "events" and not self.rcvEvents:
            raise UsageError("Session needs to be configured with rcvEvents=True.")

    def bindPackage(self, packageName: str) -> None:
        """Receive objects and events of one package only (needs ``userBindings``).

        Raises: UsageError without ``userBindings``."""
        self._need_bindings()
        for filt in (self.class_filter, self.event_filter):
            if (packageName, None) not in filt:
                filt.append((packageName, None))
        self._call(self.wrapped.bind_package(packageName))

    def bindClass(self, pname: str, cname: str | None = None) -> None:
        """Receive objects of one class (or of a package's classes).

        Raises: UsageError without ``userBindings`` or ``rcvObjects``."""
        self._need_bindings("objects")
        if (pname, cname) not in self.class_filter:
            self.class_filter.append((pname, cname))
        if cname is None:
            self._call(self.wrapped.bind_package(pname))
        else:
            self._call(self.wrapped.bind_class(pname, cname))

    def bindClassKey(self, classKey: ClassKey) -> None:
        self.bindClass(classKey.getPackageName(), classKey.getClassName())

    def bindEvent(self, pname: str, ename: str | None = None) -> None:
        """Receive events of one class (or of a package).

        Raises: UsageError without ``userBindings`` or ``rcvEvents``."""
        self._need_bindings("events")
        if (pname, ename) not in self.event_filter:
            self.event_filter.append((pname, ename))
        self._call(self.wrapped.bind_event(pname, ename or "*"))

    def bindEventKey(self, eventKey: ClassKey) -> None:
        self.bindEvent(eventKey.getPackageName(), eventKey.getClassName())

    def bindAgent(self, vendor: str | None = None, product: str | None = None,
                  instance: str | None = None, label: str | None = None) -> None:
        """Heartbeats and agent callbacks only of matching agents (v2: vendor, product,
        instance; v1: label); objects and events of known matching agents are bound.

        Raises: UsageError without ``userBindings`` or without vendor and label."""
        if not self.userBindings:
            raise UsageError("Session not configured for binding specific agents.")
        if vendor is None and label is None:
            raise UsageError("Must specify at least a vendor (V2 agents) or label (V1 agents).")
        if vendor is not None:
            f = tuple(None if x in (None, "*") else x for x in (vendor, product, instance))
            if any(f) and f not in self.agent_filter:
                self.agent_filter.append(f)
        elif label != "*" and label not in self.agent_filter:
            self.agent_filter.append(label)
        for agent in self.getAgents():
            if agent.agentBank != "0" and _agent_matches(agent, self.agent_filter):
                self._call(self.wrapped.bind_agent(agent.remote))

    def addEventFilter(self, **kwargs: Any) -> None:
        """Receive only events of ``package`` (and ``event``).

        Raises: UsageError for ``event`` without ``package``."""
        package, event = kwargs.get("package", "*"), kwargs.get("event", "*")
        if package == "*" and event != "*":
            raise UsageError("'package' parameter required if 'event' parameter supplied")
        if package != "*":
            f = (package, None if event == "*" else event)
            if f not in self.event_filter:
                self.event_filter.append(f)

