"""The console: :class:`Session` (its :class:`~qmf_async.console._broker.Broker`
connections live in ``_broker``, re-exported here).

A Session holds one schema cache shared by all its brokers, the known agents,
the user's console callbacks and subscriptions.  Each Broker owns one peer runtime
(:class:`~qmf_async.runtime.PeerRuntime`: connection, supervision, reconnect),
a reply queue (``amq.direct`` under its own name) and a length-capped topic queue
on ``qpid.management``, and drives one sans-I/O protocol core
(:class:`~qmf_async.protocol.ConsoleProtocol`): every delivery goes through one
synchronous dispatcher that hands the body to the core and acts on the events it
returns (futures of waiting requests, callbacks, subscriptions, schema fetches).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import TYPE_CHECKING, Any, Unpack, cast

import attrs

from .. import wire as codec
from ..errors import (
    CommandError,
    ConnectionLostError,
    NotConnectedError,
    PartialResultError,
    QmfError,
    QmfTimeout,
    TransportError,
    UnknownClassError,
    UsageError,
)
from ..protocol import (
    Selector,
)
from ..transport import (
    TlsOptions,
    TransportFactory,
    broker_url,
    sasl_mechanism_list,
    transport_factory,
)
from ..wire import (
    ClassIndication,
    ClassKey,
    ClassKind,
    ClassQuery,
    Message,
    ObjectId,
    PackageIndication,
    PackageQuery,
    SchemaClass,
)
from ._bindings import Bindings
from ._broker import MANAGEMENT, Broker, SessionHost
from ._console import Console as Console  # re-exported (imported from here before)
from ._dispatch import Handlers, handle
from ._links import SessionLink
from ._objects import ProxyClasses, QmfObject
from ._options import SessionKeywords, SessionOptions, Setting
from ._query import ObjectQueries
from ._query import _where_predicate as _where_predicate  # re-exported (tests use it)
from ._schemas import gathered
from ._sessionevents import (
    AgentChange,
    ClassListed,
    EventRaised,
    HeartbeatSeen,
    MethodAnswered,
    ObjectsReceived,
    PackageListed,
    SchemaArrived,
    SessionEvent,
)
from ._state import BrokerStateChange
from ._streams import Streams
from ._subscriptions import Subscription
from ._updates import ObjectUpdates
from ._values import Event, RemoteAgent
from ._waits import within

if TYPE_CHECKING:  # console._v2 loads where QMF v2 is spoken only (Broker._setup)
    pass

__all__ = ["Broker", "Session"]

log = logging.getLogger("qmf_async.session")

_DEFAULTS = SessionOptions()
_KEYWORDS = SessionKeywords.__optional_keys__


class Session:
    """An asyncio QMF console session over one or more brokers.

    ``async with Session() as session: broker = await session.add_broker(url)``.
    Every wait has a timeout; closing is bounded and safe under cancellation.

    Settings: the fields of :class:`SessionOptions` (documented there), given as
    keywords or as one frozen value ``options=``; a keyword given as well applies on
    top of it (``attrs.evolve(options, **keywords)``).  ``session.options`` holds them
    and each is an attribute of the session too (``session.timeout``).  Assigning one
    (``session.timeout = 30.0``) replaces ``session.options`` with a copy that has the
    new value (checked as when built; assigning ``session.options`` works too).  The
    brokers read a setting when they use it, so a change applies from then on: the
    bindings, ``topic_max_length`` and ``qmf_version`` at the next connection,
    ``protocol``, ``prefetch`` and the reconnect delays to brokers added later.
    """

    rcv_objects: Setting[bool] = Setting()
    rcv_events: Setting[bool] = Setting()
    rcv_heartbeats: Setting[bool] = Setting()
    user_bindings: Setting[bool] = Setting()
    manage_connections: Setting[bool] = Setting()
    timeout: Setting[float] = Setting()
    broker_timeout: Setting[float] = Setting()
    schema_timeout: Setting[float] = Setting()
    agent_interval: Setting[float] = Setting()
    min_agent_interval: Setting[float] = Setting()
    missed_heartbeats: Setting[int] = Setting()
    topic_max_length: Setting[int] = Setting()
    prefetch: Setting[int] = Setting()
    max_held: Setting[int] = Setting()
    completion_timeout: Setting[float] = Setting()
    max_objects: Setting[int] = Setting()
    max_query_items: Setting[int] = Setting()
    forget_deleted_after: Setting[float] = Setting()
    reconnect_min_delay: Setting[float] = Setting()
    reconnect_max_delay: Setting[float] = Setting()
    close_timeout: Setting[float] = Setting()
    protocol: Setting[str] = Setting()
    qmf_version: Setting[int | None] = Setting()

    def __init__(
        self,
        console: Console | None = None,
        rcv_objects: bool | None = None,
        rcv_events: bool | None = None,
        rcv_heartbeats: bool | None = None,
        user_bindings: bool | None = None,
        manage_connections: bool | None = None,
        *,
        options: SessionOptions | None = None,
        _transport_factory: TransportFactory | None = None,
        **settings: Unpack[SessionKeywords],
    ) -> None:
        """The five flags (None: as ``options`` says; True, True, True, False, False by
        default) and the keywords are fields of :class:`SessionOptions`.

        Raises:
            UsageError: a setting out of range (non-positive timeouts or limits), an
                unknown protocol or QMF version.
            TypeError: an unknown keyword.
        """
        unknown = settings.keys() - _KEYWORDS
        if unknown:
            raise TypeError(f"Session() got unexpected keyword argument(s): "
                            f"{', '.join(sorted(unknown))}")
        flags = {name: value for name, value in (
            ("rcv_objects", rcv_objects), ("rcv_events", rcv_events),
            ("rcv_heartbeats", rcv_heartbeats), ("user_bindings", user_bindings),
            ("manage_connections", manage_connections)) if value is not None}
        base = options if options is not None else _DEFAULTS
        #: the settings (see the attributes of the same names)
        self.options: SessionOptions = (attrs.evolve(base, **flags, **settings)
                                        if flags or settings else base)
        self._console = console
        # a transport factory the tests inject; else one for ``options.protocol``
        self._transport_factory = _transport_factory
        #: the schema cache shared by every broker and agent of this session
        self.schemas = codec.SchemaRegistry()
        #: the object proxies' classes, one per schema (this session's own)
        self.proxy_classes = ProxyClasses()
        self.brokers: list[Broker] = []
        self._packages: set[str] = set()
        self._classes: dict[ClassKey, int] = {}
        self._schemas_announced: set[ClassKey] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        # what it binds (v1 keys, v2 bindings), its subscriptions and what each follows
        self._bindings = Bindings(lambda: self.brokers, lambda: self.options,
                                  lambda: self.console is not None,
                                  lambda: self._streams.interests.values(), self._tasks)
        self._streams = Streams(lambda: self.brokers, lambda: self.options,
                                self._bindings.sync_v2, lambda: self._closed)
        link = cast(SessionLink, self)  # what the object proxies call back
        # the object view and its updates
        self._updates = ObjectUpdates(
            self, link, lambda: self._console is not None or bool(self._streams.update_subs),
            self._streams, self._notify, self._tasks)
        #: the object view (its state: tests and tools read it)
        self._view = self._updates.view
        #: what acts on each value a broker hands up (see _act)
        self._acts: Handlers = {
            ObjectsReceived: self._objects_received,
            EventRaised: lambda ev: self._event(ev.broker, ev.event),
            AgentChange: self._agent_changed,
            HeartbeatSeen: lambda ev: self._notify("heartbeat", ev.agent, ev.timestamp),
            MethodAnswered: lambda ev: self._notify("method_response", ev.broker, ev.seq,
                                                    ev.result),
            PackageListed: lambda ev: self._package_seen(ev.package),
            ClassListed: lambda ev: self._class_seen(ev.kind, ev.key),
            SchemaArrived: lambda ev: self._schema_seen(ev.schema),
        }
        # the object queries behind get_objects and iter_objects
        self._queries = ObjectQueries(
            link, lambda: self.brokers, lambda: self.options, self._connected_brokers,
            self.schemas, self._packages, self._classes,
            lambda timeout: self.get_packages(_timeout=timeout),
            lambda package, timeout: self.get_classes(package, _timeout=timeout),
            self._count_malformed)
        self._ager: asyncio.Task[None] | None = None
        self._closed = False
        #: bodies that failed to decode, and bodies dropped while waiting for a schema
        self.malformed = 0
        self.held_dropped = 0

    def _count_malformed(self) -> None:
        self.malformed += 1

    @property
    def completion_queries(self) -> int:
        """Completion queries sent: a ``G`` per agent and class for objects first seen
        through one part."""
        return self._view.completion_queries

    @property
    def completion_failures(self) -> int:
        """Objects handed out without the part their completion failed to bring."""
        return self._view.completion_failures

    @property
    def objects_evicted(self) -> int:
        """Objects evicted from the view when it held ``max_objects``."""
        return self._view.objects_evicted

    @property
    def console(self) -> Console | None:
        """The callbacks object (the classic console API), or None."""
        return self._console

    @console.setter
    def console(self, value: Console | None) -> None:
        self._console = value
        # over v2 a console receives every object and event: the bindings follow
        if not self._closed and any(b.v2 is not None for b in self.brokers):
            self._bindings.sync_v2()

    # ------------------------------------------------------------------ lifecycle

    @classmethod
    @contextlib.asynccontextmanager
    async def connect(cls, url: str, *, timeout: float | None = None, tls: TlsOptions | None = None,
                      sasl_mechanisms: str | Sequence[str] | None = None,
                      **kwargs: Any) -> AsyncIterator[Session]:
        """``async with Session.connect(url) as session:`` -- one broker, closed on exit
        (``timeout``, ``tls`` and ``sasl_mechanisms`` as :meth:`add_broker`; the rest,
        ``options=`` and the settings, goes to the Session).

        Raises:
            TransportError, QmfTimeout, UsageError: as :meth:`add_broker`.
        """
        session = cls(**kwargs)
        try:
            await session.add_broker(url, timeout=timeout, tls=tls,
                                     sasl_mechanisms=sasl_mechanisms)
            yield session
        finally:
            await session.close()

    async def __aenter__(self) -> Session:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def add_broker(self, url: str = "amqp://guest:guest@localhost:5672/", *,
                         timeout: float | None = None, tls: TlsOptions | None = None,
                         cafile: str | None = None, certfile: str | None = None,
                         keyfile: str | None = None, verify_hostname: bool = True,
                         sasl_mechanisms: str | Sequence[str] | None = None) -> Broker:
        """Connect to a broker: queues, bindings, ``B``/``b`` and the agent list.

        ``url`` may also be a qpid-tools address (``host:port``,
        ``user/password@host:port``).  ``amqps://`` URLs use TLS (``tls=`` or the
        ``cafile``/``certfile``/``keyfile``/
        ``verify_hostname`` shortcuts).  ``sasl_mechanisms`` (names, or one string
        ``"EXTERNAL PLAIN"``) restricts the login mechanisms: EXTERNAL logs in with the
        client certificate, PLAIN with the URL's user and password; by default the
        transport picks (PLAIN on AMQP 0-9-1; EXTERNAL with a client certificate, else
        PLAIN with a password, else ANONYMOUS on AMQP 1.0).  With
        ``manage_connections=True`` a failed connect is retried in the background and
        the Broker is returned at once.

        Raises:
            UsageError: bad URL or a closed session.
            TransportError: the broker cannot be reached or refused the login.
            QmfTimeout: connecting took longer than ``timeout``.
        """
        if self._closed:
            raise UsageError("the session is closed")
        url = broker_url(url)  # qpid-style addresses (host:port, user/pass@host) too
        if tls is None and (cafile or certfile or keyfile or not verify_hostname):
            tls = TlsOptions(cafile, certfile, keyfile, verify_hostname)
        broker = Broker(self._broker_host(), url, tls=tls, timeout=timeout or self.options.timeout,
                        sasl_mechanisms=sasl_mechanism_list(sasl_mechanisms))
        self.brokers.append(broker)
        self._streams.state_changed(BrokerStateChange(broker, broker.state))
        self._start_ager()
        try:
            await broker.connect()
        except (TransportError, QmfTimeout) as exc:
            if self.options.manage_connections:
                broker.connect_failed(exc)
                broker.start_reconnect()
                return broker
            self.brokers.remove(broker)
            broker.connect_failed(exc, retried=False)
            raise
        except BaseException:
            self.brokers.remove(broker)
            with contextlib.suppress(Exception):
                await broker.close()
            raise
        self._notify("broker_connected", broker)
        return broker

    async def del_broker(self, broker: Broker) -> None:
        """Disconnect and forget a broker; its pending requests fail with NotConnectedError."""
        if broker in self.brokers:
            self.brokers.remove(broker)
        self._act(broker, broker.forget_agents())
        self._streams.broker_removed(broker)
        await broker.close()  # its CLOSED ends the state streams that follow it alone

    async def close(self) -> None:
        """Close every broker connection (bounded by ``close_timeout`` each); idempotent."""
        if self._closed:
            return
        self._closed = True
        closing = asyncio.ensure_future(self._close_all())
        try:
            await asyncio.shield(closing)
        except asyncio.CancelledError:
            with contextlib.suppress(BaseException):
                await within(closing, self.options.close_timeout)
            raise

    async def _close_all(self) -> None:
        if self._ager is not None:
            self._ager.cancel()
        for task in list(self._tasks):
            task.cancel()
        brokers, self.brokers = list(self.brokers), []
        await asyncio.gather(*(b.close() for b in brokers), return_exceptions=True)
        self._streams.close_all()

    def _start_ager(self) -> None:
        if self._ager is None or self._ager.done():
            self._ager = asyncio.get_running_loop().create_task(self._age_loop())

    async def _age_loop(self) -> None:
        while not self._closed:
            await asyncio.sleep(max(self.options.min_agent_interval, 0.05))
            now = time.monotonic()
            for broker in list(self.brokers):
                self._act(broker, broker.age_agents(now))

    def _broker_host(self) -> SessionHost:
        """The calls a new broker of this session makes on it."""
        return SessionHost(
            self, self._transport_factory or transport_factory(self.options.protocol),
            self._act, self._notify, self._bindings.keys, self._bindings.v2_bindings_for,
            self._streams.connection_lost,
            lambda: self.console is not None or bool(self._streams.update_subs),
            lambda: self.console is not None or bool(self._streams.event_subs),
            self._streams.state_changed)

    # ------------------------------------------------------------------ bindings

    async def bind_package(self, package: str) -> None:
        """Receive objects and events of ``package`` (user_bindings only)."""
        await self._bindings.add(f"console.obj.*.*.{package}.#", f"console.event.*.*.{package}.#")

    async def bind_class(self, package: str, class_name: str) -> None:
        """Receive updates of one object class (user_bindings only)."""
        await self._bindings.add(f"console.obj.*.*.{package}.{class_name}")

    async def bind_class_key(self, class_key: ClassKey) -> None:
        """Receive updates of the class of ``class_key`` (user_bindings only)."""
        await self.bind_class(class_key.package, class_key.name)

    async def bind_event(self, package: str, event_name: str = "*") -> None:
        """Receive one event class, or every event of a package (user_bindings only)."""
        key = f"console.event.*.*.{package}.{event_name}"
        await self._bindings.add(key if event_name != "*" else f"console.event.*.*.{package}.#")

    async def bind_agent(self, agent: RemoteAgent) -> None:
        """Receive everything one agent publishes (user_bindings only)."""
        await self._bindings.add(f"console.obj.{agent.broker_bank}.{agent.agent_bank}.#",
                                f"console.event.{agent.broker_bank}.{agent.agent_bank}.#")

    # ------------------------------------------------------------------ notifications

    def _notify(self, name: str, *args: Any) -> None:
        console = self.console
        if console is None:
            return
        fn = getattr(console, name, None)
        if fn is None:
            return
        try:
            result = fn(*args)
        except Exception:
            log.exception("console callback %s raised", name)
            return
        if inspect.isawaitable(result):
            task = asyncio.ensure_future(result)
            self._tasks.add(task)
            task.add_done_callback(self._callback_done)

    def _callback_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("console callback raised", exc_info=task.exception())

    def _package_seen(self, package: str) -> None:
        if package not in self._packages:
            self._packages.add(package)
            self._notify("new_package", package)

    def _class_seen(self, kind: int, key: ClassKey) -> None:
        if key not in self._classes:
            self._classes[key] = int(kind)
            self._notify("new_class", int(kind), key)

    def _schema_seen(self, schema: SchemaClass) -> None:
        self.schemas.add(schema)
        self._package_seen(schema.class_key.package)
        self._class_seen(schema.kind, schema.class_key)
        if schema.class_key not in self._schemas_announced:
            self._schemas_announced.add(schema.class_key)
            self._notify("schema", schema)
        # the broker that received it routes its own held bodies; the others (their
        # cores share the cache) on the next turn of the loop, so that no broker is
        # entered again from the walk of the one that told the session
        loop = asyncio.get_running_loop()
        for broker in self.brokers:
            loop.call_soon(broker.release_held, schema.class_key)

    def _act(self, broker: Broker, events: list[SessionEvent]) -> None:
        """Act on what ``broker`` handed up (its dispatch's return value, its aging's
        ...), in order, each by the handler of its type: the one place where what the
        brokers received reaches the console's callbacks, the object view and the
        subscriptions.  One that fails is logged and does not stop the rest.

        Raises:
            Nothing.
        """
        handle(self._acts, events, broker.where, log)

    def _agent_changed(self, change: AgentChange) -> None:
        if change.added:
            self._agent_arrived(change.agent)
        else:
            self._agent_left(change.agent)

    def _objects_received(self, ev: ObjectsReceived) -> None:
        update, broker, agent = self._updates.object_update, ev.broker, ev.agent
        for rec in ev.records:
            try:
                update(broker, agent, rec)
            except Exception:
                log.exception("failed to handle an object update from %s", broker.where)

    def _agent_arrived(self, agent: RemoteAgent) -> None:
        self._notify("new_agent", agent)
        self._streams.agent_change("added", agent)

    def _agent_left(self, agent: RemoteAgent) -> None:
        self._updates.forget_agent(agent)
        self._notify("del_agent", agent)
        self._streams.agent_change("removed", agent)

    def _event(self, broker: Broker, event: Event) -> None:
        self._notify("event", broker, event)
        self._streams.event(broker, event)

    # ------------------------------------------------------------------ subscriptions

    def events(self, *, where: str | Selector | None = None, _class: str | None = None,
               _package: str | None = None, severity: int | None = None,
               _agent: RemoteAgent | None = None, _broker: Broker | None = None,
               maxsize: int = 10_000) -> Subscription[Event]:
        """An async iterator over events (filtered by class, package, agent, broker,
        the most severe ``severity`` level accepted, and a ``where`` selector over
        arguments).

        Over QMF v2 the broker is asked to pass only the events followed: the class
        and package by subject, the agent by a selector on ``qmf.agent`` (qpidd
        filters at the source).

        It follows ``_broker`` (or ``_agent``'s broker), else every broker of the
        session.  On a session that does not manage connections
        (``manage_connections=False``, the default), the iterator raises
        ConnectionLostError, after the events already received, as soon as a broker
        it follows is lost (to keep following the others, take one subscription per
        broker with ``_broker=``); with ``manage_connections=True`` it keeps going
        across the reconnections.

        Raises:
            SelectorError (a UsageError): ``where`` does not parse.
            UsageError: ``_agent`` is not of ``_broker``.
        """
        return self._streams.events(where, _class, _package, severity, _agent, _broker,
                                    maxsize)

    def object_updates(self, *, _class: str | None = None, _package: str | None = None,
                       where: str | Selector | None = None, _agent: RemoteAgent | None = None,
                       _broker: Broker | None = None,
                       maxsize: int = 10_000) -> Subscription[QmfObject]:
        """An async iterator over object updates (``c``/``i``), merged with the last
        known properties/statistics of the same object: every proxy answers both
        (an object first seen through one part is completed by a query first, see
        ``completion_timeout``), ``get_changes()`` tells what the update carried,
        and ``where`` is evaluated over the merged values.  ``_agent`` follows one
        agent, ``_broker`` one broker; over QMF v2 the broker passes only the classes
        and agent followed.  When the broker(s) it follows are lost, it ends as
        :meth:`events` says (ConnectionLostError without ``manage_connections``).

        Raises:
            SelectorError (a UsageError): ``where`` does not parse.
            UsageError: ``_agent`` is not of ``_broker``.
        """
        return self._streams.object_updates(_class, _package, where, _agent, _broker,
                                            maxsize)

    def agent_changes(self, *, _broker: Broker | None = None,
                      maxsize: int = 1000) -> Subscription[tuple[str, RemoteAgent]]:
        """An async iterator of ``("added" | "removed", agent)`` (of ``_broker``, else
        of every broker).  When the broker(s) it follows are lost, it ends as
        :meth:`events` says (ConnectionLostError without ``manage_connections``)."""
        return self._streams.agent_changes(_broker, maxsize)

    def broker_states(self, *, _broker: Broker | None = None,
                      maxsize: int = 1000) -> Subscription[BrokerStateChange]:
        """An async iterator of the connection-state changes of ``_broker`` (else of
        every broker, those added later too): a :class:`BrokerStateChange` (the
        broker, its :class:`BrokerState`, the error when it is not up) per change,
        starting with the state each broker is in now.  No polling of
        ``broker.connected`` is needed: ``CONNECTED`` comes after every (re)connection
        and its handshake, ``DISCONNECTED`` at every loss, ``CLOSED`` when a broker is
        removed or lost for good.  It ends when closed, when the session closes, and
        (following one broker) after that broker's ``CLOSED``; it never raises
        ConnectionLostError (the loss is one of its items).

        Raises:
            UsageError: ``maxsize`` below 1.
        """
        return self._streams.broker_states(_broker, maxsize)

    # ------------------------------------------------------------------ agents

    def get_agents(self, broker: Broker | None = None) -> list[RemoteAgent]:
        """Agents currently known (on one broker, or all)."""
        brokers = [broker] if broker is not None else self.brokers
        return [a for b in brokers for a in b.agents()]

    async def wait_for_agents(self, count: int = 1, *, timeout: float | None = None,
                              label: str | None = None) -> list[RemoteAgent]:
        """Wait until at least ``count`` agents (with ``label``, if given) are known.

        Raises:
            QmfTimeout: not enough agents appeared in time.
        """
        deadline = time.monotonic() + (timeout or self.options.timeout)
        while True:
            found = [a for a in self.get_agents() if label is None or a.label == label]
            if len(found) >= count:
                return found
            if time.monotonic() >= deadline:
                raise QmfTimeout(f"{len(found)} of {count} agents known after "
                                 f"{timeout or self.options.timeout}s")
            await asyncio.sleep(0.02)

    # ------------------------------------------------------------------ schema

    def _connected_brokers(self, broker: Broker | None = None) -> list[Broker]:
        brokers = [broker] if broker is not None else list(self.brokers)
        live = [b for b in brokers if b.connected]
        if not live:
            where = ", ".join(b.where for b in brokers) or "no broker added"
            raise NotConnectedError(f"not connected ({where})")
        return live

    async def _schema_query(self, make: Callable[[int], Message], expect: str,
                            timeout: float | None) -> list[Message]:
        """Send a P or Q to every management broker, or to every agent without one
        (each broker's :meth:`~Broker.ask_catalog`, at once)."""
        wait = timeout or self.options.timeout
        return await gathered(
            b.ask_catalog(make, expect, wait) for b in self._connected_brokers())

    async def get_packages(self, *, _timeout: float | None = None) -> list[str]:
        """Names of the schema packages known on the bus (asks the brokers or agents).

        Raises:
            NotConnectedError: no broker is connected.
            QmfTimeout: no complete answer in time.
            TransportError: the connection failed or was lost.
        """
        found = await self._schema_query(PackageQuery, "p", _timeout)
        for msg in found:
            if isinstance(msg, PackageIndication):
                self._package_seen(msg.package)
        return sorted(self._packages)

    async def get_classes(self, package: str, *, _timeout: float | None = None) -> list[ClassKey]:
        """Class keys of ``package`` (every hash version), asking the bus.

        Raises:
            NotConnectedError: no broker is connected.
            QmfTimeout: no complete answer in time.
            TransportError: the connection failed or was lost.
        """
        found = await self._schema_query(lambda seq: ClassQuery(seq, package), "q", _timeout)
        for msg in found:
            if isinstance(msg, ClassIndication):
                self._class_seen(msg.kind, msg.class_key)
        return sorted((k for k in self._classes if k.package == package), key=str)

    def class_kind(self, class_key: ClassKey) -> ClassKind | None:
        """Whether a class the bus announced is an object class or an event class
        (None when it was not announced yet: see :meth:`get_classes`)."""
        kind = self._classes.get(class_key)
        return None if kind is None else ClassKind(kind)

    async def get_schema(self, class_key: ClassKey | str, *, _timeout: float | None = None
                         ) -> SchemaClass:
        """The full schema of a class (from the cache, else fetched).

        Raises:
            UnknownClassError: nobody knows that class.
            NotConnectedError: no broker is connected.
        """
        key = ClassKey.parse(class_key) if isinstance(class_key, str) else class_key
        found = self.schemas.get(key)
        if found is not None:
            return found
        errors: list[BaseException] = []
        for b in self._connected_brokers():
            # the management broker, else every agent at once (the first right answer)
            targets: list[tuple[RemoteAgent | None, str, str]] = (
                [(None, "broker", MANAGEMENT)] if b.has_management
                else [(a, a.key, MANAGEMENT) for a in b.agents()])
            try:
                schema = await b.ask_schema(key, targets, _timeout or self.options.schema_timeout)
            except (QmfError, CommandError) as exc:
                errors.append(exc)
                continue
            if schema is not None:
                self._schema_seen(schema)
                return schema
        raise UnknownClassError(f"no schema for {key}") from (errors[0] if errors else None)

    # ------------------------------------------------------------------ objects

    async def get_objects(self, _class: str | None = None, _package: str | None = None,
                          _key: ClassKey | str | None = None,
                          _objectId: ObjectId | str | None = None,
                          _agent: RemoteAgent | None = None,
                          _broker: Broker | None = None, _timeout: float | None = None,
                          where: str | Selector | None = None, **property_equals: Any
                          ) -> list[QmfObject]:
        """Query agents for objects and return proxies.

        Filters: ``_class`` (and ``_package``), ``_key`` (one hash version),
        ``_objectId``; ``_agent``/``_broker`` narrow who is asked; ``where`` is a JMS
        selector over properties and statistics and ``name=value`` keywords compare
        elements for equality, both applied to what arrives.  When every known agent
        is asked, one that leaves the bus during the query (aged out, or deleted by the
        management broker) is left out: its objects are gone with it.

        Raises:
            UsageError: no class, key or object id given; a bad selector.
            NotConnectedError: no selected broker is connected (or it was removed).
            ConnectionLostError, AgentGoneError: every asked agent failed that way
                (the connection dropped, or the agents left, mid-query) before any
                object arrived.
            QueryTimeout: some agents did not finish in time (``partial`` holds the
                objects that did arrive).
            PartialResultError: some agents failed (errors in ``errors``), or every
                asked agent failed after some objects arrived (e.g. an agent killed
                mid-answer: ``partial`` holds them, ``errors`` the AgentGoneError).
            UnknownClassError: no object arrived and no known schema has ``_class``
                (or ``_package``): neither the schema cache nor the classes the bus
                lists when asked (``P``/``Q``).  The message names close classes.
        """
        out: list[QmfObject] = []
        await self._queries.collect(out.append, _class, _package, _key, _objectId, _agent, _broker,
                            _timeout, where, property_equals)
        return out

    async def iter_objects(self, _class: str | None = None, _package: str | None = None,
                           _key: ClassKey | str | None = None,
                           _objectId: ObjectId | str | None = None,
                          _agent: RemoteAgent | None = None,
                           _broker: Broker | None = None, _timeout: float | None = None,
                           where: str | Selector | None = None, **property_equals: Any
                           ) -> AsyncIterator[QmfObject]:
        """Like :meth:`get_objects`, yielding proxies as they arrive; errors are
        raised after what did arrive was yielded.

        Raises:
            ConnectionLostError: on a session that does not manage connections, the
                connection of a broker asked was lost before its agents finished (the
                transport's error as its cause), whatever the other brokers answered:
                what arrived was yielded already.  With ``manage_connections=True``
                that is a PartialResultError (``errors`` holds the
                ConnectionLostError) when some objects arrived, as for
                :meth:`get_objects`.
            Else: as :meth:`get_objects`.
        """
        queue: asyncio.Queue[QmfObject | None] = asyncio.Queue()
        task = asyncio.ensure_future(self._queries.collect(queue.put_nowait, _class, _package, _key,
                                                   _objectId, _agent, _broker, _timeout, where,
                                                   property_equals))
        task.add_done_callback(lambda _t: queue.put_nowait(None))
        try:
            while True:
                item = await queue.get()
                if item is None:
                    break
                yield item
            try:
                await task
            except PartialResultError as exc:
                lost = [e for e in exc.errors if isinstance(e, ConnectionLostError)]
                if lost and not self.options.manage_connections:
                    # a broker it asked is gone for good: the end, as for events()
                    raise lost[0] from lost[0].__cause__
                raise
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
