"""One broker connection of a console :class:`~qmf_async.console._session.Session`.

A :class:`Broker` owns one peer runtime (:class:`~qmf_async.runtime.PeerRuntime`:
connection, supervision, reconnect), a reply queue (``amq.direct`` under its own
name) and a length-capped topic queue on ``qpid.management``, and drives one
sans-I/O protocol core (:class:`~qmf_async.protocol.ConsoleProtocol`): every delivery
goes through one synchronous dispatcher that hands the body to the core and acts on
the events it returns (their handlers: :class:`~qmf_async.console._v1events.V1Events`;
its agents: :class:`~qmf_async.console._agentlist.AgentList`).  What it needs of its
session is :class:`SessionHost`.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .. import names
from ..errors import (
    ConnectionLostError,
    NotConnectedError,
    QmfError,
    QmfTimeout,
)
from ..protocol import (
    BROKER_AGENT_CLASS,
    ConsoleProtocol,
    DrainClock,
    Outgoing,
    VersionChoice,
)
from ..runtime import PeerRuntime
from ..transport import (
    QMF_CONTENT_TYPE,
    Delivery,
    TlsOptions,
    TransportProtocol,
    parse_url,
)
from ..wire import (
    ClassKey,
    GetQuery,
    Message,
    ObjectId,
    RawObjectRecord,
    SchemaClass,
    SchemaMethod,
)
from ._agentlist import AgentList
from ._calls import MethodCalls
from ._dispatch import handle
from ._links import SessionSettings
from ._objects import QmfObject, RemoteAgent
from ._schemas import SchemaFetches
from ._sessionevents import AgentChange, SchemaArrived, SessionEvent, SessionHost
from ._state import BrokerState, BrokerStateChange
from ._v1events import V1Events
from ._v1route import V1Route
from ._values import MethodResult
from ._versions import VersionTurn
from ._waits import Wait, Waits

if TYPE_CHECKING:  # QMF v2's modules load where v2 is spoken only (:meth:`Broker._setup`)
    from ..wire import V2ObjectId
    from ._v2 import V2Link

__all__ = ["Broker", "SessionHost", "SessionSettings"]

# the session's logger: a broker's messages are the console's
log = logging.getLogger("qmf_async.session")

MANAGEMENT = names.MANAGEMENT_EXCHANGE
DIRECT = names.REPLY_EXCHANGE

#: how many departed agents a broker remembers (to fail calls to them at once)
_MAX_DEPARTED = 4096
#: seconds after which a probe that did not come back is sent again
_PROBE_RETRY = 5.0
#: the states in which requests can be sent (:attr:`BrokerState.up`)
_HANDSHAKING, _CONNECTED = BrokerState.HANDSHAKING, BrokerState.CONNECTED


def lost_error(where: str, cause: BaseException | None) -> ConnectionLostError:
    """The error of a lost connection to ``where``, ``cause`` (the transport's error)
    chained; its text is the cause's own when that already says which connection was
    lost (the transports' ConnectionLostError do), so it is not said twice.

    Raises:
        Nothing: it returns the error.
    """
    text = str(cause) if cause is not None else ""
    if not (isinstance(cause, ConnectionLostError) and text.startswith("connection to ")):
        text = f"connection to {where} lost" + (f": {text}" if text else "")
    lost = ConnectionLostError(text)
    lost.__cause__ = cause
    return lost


class Broker:
    """One broker connection of a :class:`Session`.

    ``broker_id`` is set when a management broker answered ``B``;
    ``has_management`` tells whether one did.  ``topic_dropped`` counts
    unsolicited messages the broker dropped because this console was too slow.
    ``where`` is the address without credentials: ``amqp://host:port/vhost`` over AMQP
    0-9-1, ``amqp://host:port/`` once connected over AMQP 1.0 (qpidd has no vhosts).

    The protocol state lives in a :class:`~qmf_async.protocol.ConsoleProtocol`
    (``_core``); this class is its asyncio driver: it feeds deliveries to the core,
    turns the core's events into future results, callbacks and subscription items,
    publishes what the core builds, and owns the timers and the schema fetches.  The
    connection is a :class:`~qmf_async.runtime.PeerRuntime`: it connects, declares, opens
    the reply endpoint and reconnects (``manage_connections``); :meth:`_setup` opens the
    loss and topic endpoints and runs the ``B`` handshake on every connection.
    """

    def __init__(self, host: SessionHost, url: str, *, tls: TlsOptions | None,
                 timeout: float, sasl_mechanisms: tuple[str, ...] | None = None) -> None:
        #: the session this broker belongs to, and the calls that reach it
        self.session: SessionSettings = host.session
        self.owner: SessionHost = host
        #: while a delivery is dispatched (or agents aged): what goes up to the session,
        #: returned instead of handed at once (see emit)
        self._collected: list[SessionEvent] | None = None
        self._act = host.act
        session = self.session
        settings = session.options
        self.url = url
        self.where = parse_url(url).where
        self.tls = tls
        self.timeout = timeout
        self.broker_id: uuid.UUID | None = None
        self._state = BrokerState.CONNECTING
        # cleared while a connection's handshake (B, the agent list) runs
        self._handshake_done = asyncio.Event()
        self._handshake_done.set()
        # cleared from the connection's start until ``B`` is answered or timed out
        self._management_known = asyncio.Event()
        self._management_known.set()
        self.topic_dropped = 0
        self.reconnects = 0
        self.error: BaseException | None = None
        self._runtime = PeerRuntime(
            url, dispatch=self._received, setup=self._setup,
            transport_factory=host.transport_factory, tls=tls,
            sasl_mechanisms=sasl_mechanisms, name="qmf-async console",
            prefetch=settings.prefetch, connect_timeout=timeout,
            endpoint_prefix=names.CONSOLE_REPLY_PREFIX, reconnect=settings.manage_connections,
            min_delay=settings.reconnect_min_delay, max_delay=settings.reconnect_max_delay,
            on_lost=self._on_lost, on_reconnected=self._reconnected,
            on_connect_failed=self._connect_failed, what=f"console of {self.where}", log=log)
        self._runtime.begin_dispatch()
        self._core = ConsoleProtocol(
            session.schemas, where=self.where, max_held=settings.max_held,
            agent_interval=settings.agent_interval,
            min_agent_interval=settings.min_agent_interval,
            missed_heartbeats=settings.missed_heartbeats, max_departed=_MAX_DEPARTED)
        #: the v1 requests in flight (keyed by sequence number): every request of this
        #: connection goes through it (see _waits)
        self._waits = Waits(self.publish, self._core.cancel)
        self._reply_queue: str | None = None
        self._topic_queue: str | None = None
        #: the QMF version spoken on the current connection (1 or 2; None before one)
        self.qmf_version: int | None = None
        #: the v2 side of the current connection (None when it speaks v1)
        self._v2: V2Link | None = None
        #: over v2, queries to qpidd's agent sent over v1 (None when it speaks v1)
        self._route: V1Route | None = None
        #: a v2 link left when the connection turned to v1 (see retire_v2): answers
        #: to its requests still reach it
        self._v2_retired: V2Link | None = None
        #: over v2 with the version left to choose: whether qpidd publishes v2, and
        #: qpidd's v1 events held meanwhile (the protocol core's VersionChoice)
        self._choice = VersionChoice()
        self._loss_queue: str | None = None
        #: the content types of v2 maps that arrive as bytes on this connection (none
        #: over AMQP 1.0, where a v2 map is a decoded amqp-value)
        self._v2_bodies: frozenset[str] = frozenset()
        #: as of when every delivery received has been handled (see age_agents)
        self._drain = DrainClock(time.monotonic(), _PROBE_RETRY)
        #: the drain probe's routing key (over AMQP 0-9-1, once connected)
        self._probe_key: str | None = None
        #: the known agents, as the core's directory has them (same order), and over
        #: v2 the v1 twins of v2 agents (hidden)
        self._agent_list = AgentList(self, self._core, self._drain)
        self._agents = self._agent_list.agents
        self._twins = self._agent_list.twins
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closing = False
        #: its schema fetches and its method calls (parts with explicit collaborators)
        self._schemas = SchemaFetches(
            session=session, core=self._core, agents=self._agents, tasks=self._tasks,
            request=self.request, management_known=self.management_known,
            handle=self._handle, schema_seen=lambda schema: self.emit(SchemaArrived(schema)))
        self._calls = MethodCalls(session=session, core=self._core, waits=self._waits,
                                  check=self.check, where=lambda: self.where)
        #: what each event of the core does
        self._events = V1Events(self, self._waits, self._agent_list, self._choice,
                                self._schemas.on_schema_needed)
        self._handlers = self._events.handlers
        #: the QMF version spoken to qpidd as it goes, and the v1 keys bound
        self._turn = VersionTurn(self, choice=self._choice, agents=self._agent_list,
                                 core=self._core, events=self._events,
                                 binding_keys=host.binding_keys,
                                 agent_left=lambda agent: self.emit(AgentChange(agent, False)))

    @property
    def has_management(self) -> bool:
        """Whether a management broker answered ``B`` on this connection."""
        return self._core.has_management

    @has_management.setter
    def has_management(self, value: bool) -> None:
        self._core.has_management = value

    # ------------------------------------------------------------------ connection

    def __repr__(self) -> str:
        state = "connected" if self.connected else "disconnected"
        return f"<Broker {self.where} {state}>"

    @property
    def state(self) -> BrokerState:
        """Where the connection stands (:class:`BrokerState`); the session's
        :meth:`~qmf_async.Session.broker_states` streams its changes."""
        return self._state

    @property
    def connected(self) -> bool:
        """Whether requests can be sent: connected, its handshake running or done."""
        return self._state.up

    def _enter(self, state: BrokerState) -> None:
        """Move to ``state`` and tell the session (nothing after ``CLOSED``, nor when
        the state does not change; raises nothing)."""
        if self._state is state or self._state is BrokerState.CLOSED:
            return
        self._state = state
        self.owner.state_changed(BrokerStateChange(
            self, state, None if state.up else self.error))

    @property
    def transport(self) -> TransportProtocol | None:
        """The current connection's transport (None between connections)."""
        return self._runtime.transport

    @property
    def protocol(self) -> str | None:
        """The AMQP version of the current connection: ``"0-9-1"`` or ``"1.0"`` (None
        while not connected, or for a transport that does not say)."""
        transport = self._runtime.transport
        return None if transport is None else transport.capabilities.protocol or None

    @property
    def v2(self) -> V2Link | None:
        """The QMF v2 side of the current connection (None when it speaks v1)."""
        return self._v2

    @property
    def reply_queue(self) -> str | None:
        """The current connection's reply endpoint (None before one)."""
        return self._reply_queue

    @property
    def topic_queue(self) -> str | None:
        """The current connection's v1 topic endpoint (None before one)."""
        return self._topic_queue

    @property
    def closing(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closing

    @property
    def in_handshake(self) -> bool:
        """Whether a connection's handshake (``B``, the agent list) is running."""
        return not self._handshake_done.is_set()

    async def handshake_done(self) -> None:
        """Return once no handshake runs (at once when none does)."""
        await self._handshake_done.wait()

    async def management_known(self) -> None:
        """Return once :attr:`has_management` holds for this connection: ``B`` was
        answered or timed out (within the session's ``broker_timeout``), or no
        connection is being set up."""
        await self._management_known.wait()

    async def connect(self) -> None:
        """Connect once (runtime: connect, declare, reply endpoint; then :meth:`_setup`).

        Raises:
            UsageError, TransportError, QmfTimeout: as ``PeerRuntime.connect``.
        """
        await self._runtime.connect()
        self._runtime.run()

    async def _setup(self, transport: TransportProtocol, reply: str) -> None:
        """Per connection: the loss and topic endpoints, then ``B`` and the agent list."""
        session = self.session
        self._reply_queue = reply
        caps = transport.capabilities
        if not caps.vhosts:  # qpidd over AMQP 1.0: its address has no vhost to show
            self.where = self._core.where = parse_url(self.url).server_where
        # requests can flow from here on (schema fetches for early topic messages)
        self._enter(BrokerState.HANDSHAKING)
        self._handshake_done.clear()
        self._management_known.clear()
        version = session.options.qmf_version
        if version is None:  # v2 where qpidd is reached (AMQP 1.0), v1 on a 0-9-1 bus
            version = 2 if caps.qmf_v2 else 1
        self.qmf_version = version
        self._v2_bodies = frozenset()
        if version == 2:
            # QMF v2's modules (its codec, core and link) are imported where v2 is spoken
            from ..wire import V2_BODY_CONTENT_TYPES
            from ._v2 import V2Link

            if caps.v2_map_bytes:
                self._v2_bodies = V2_BODY_CONTENT_TYPES
        try:
            self._v2 = (V2Link(self, self._v2, agents=self._agent_list, beats=self._choice)
                        if version == 2 else None)
            self._route = V1Route(self) if version == 2 else None
            self._calls.use(self._v2, self._route)
            self._v2_retired = None
            self._twins.clear()
            v1_keys = self._turn.start(version, session.options.qmf_version is None)
            # the topic endpoint's overflow is dead-lettered to the loss endpoint, which
            # counts it (topic_dropped); AMQP 1.0 has neither a length cap nor dead
            # letters for it (the link credit bounds it), so there is no loss endpoint
            loss: str | None = None
            self._loss_queue = None
            if caps.dead_letters:
                loss = f"{names.CONSOLE_LOSS_PREFIX}{uuid.uuid4().hex[:16]}"
                self._loss_queue = await transport.open_endpoint(
                    loss, bindings=[(DIRECT, loss)])
            topic = f"{names.CONSOLE_TOPIC_PREFIX}{uuid.uuid4().hex[:16]}"
            self._drain.start(time.monotonic())
            # the drain probe's own key on qpid.management (where a console may publish
            # already): it reaches this topic queue only
            self._probe_key = f"qmf-async.probe.{topic}" if loss else None
            probe = [(MANAGEMENT, self._probe_key)] if self._probe_key else []
            self._topic_queue = await transport.open_endpoint(
                topic, bindings=[(MANAGEMENT, k) for k in v1_keys] + probe,
                max_length=session.options.topic_max_length,
                dead_letter_exchange=DIRECT if loss else None,
                dead_letter_routing_key=loss, no_ack=False)
            self.error = None
            await self._handshake()
            if self._v2 is not None:
                await self._v2.setup(transport, self.owner.v2_bindings_for(self))
        except BaseException:
            self._enter(BrokerState.DISCONNECTED)
            raise
        else:
            self._enter(BrokerState.CONNECTED)
        finally:
            self._management_known.set()
            self._handshake_done.set()

    async def _handshake(self) -> None:
        """B/b, then the agent list of a management broker."""
        self.check()
        out = self._core.send_broker_request()
        timeout = self.session.options.broker_timeout
        try:
            msg = await self._waits.request(out.seq, out, timeout, lambda: QmfTimeout(
                f"no management broker answered B on {self.where} within {timeout}s"))
        except QmfTimeout:
            self.has_management = False
            self._management_known.set()
            log.info("no management broker answered B on %s; finding agents by heartbeats",
                     self.where)
            return
        self.broker_id = msg.broker_id
        self.has_management = True
        self._management_known.set()
        transport = self.transport
        options = self.session.options
        if self._v2 is None and options.qmf_version == 1 and options.rcv_heartbeats \
                and transport is not None and transport.capabilities.qmf_v2:
            self.spawn(self._turn.expect_v1_beats())
        self.owner.notify("broker_info", self)
        await self._load_broker_agents()

    async def bind_early(self, keys: Sequence[str]) -> None:
        """Over v2 while qpidd is not known to publish v2: also bind the v1 event keys
        among the user's new ``keys`` (:meth:`VersionTurn.bind_early`).

        Raises:
            TransportError: the broker refused a binding.
        """
        await self._turn.bind_early(keys)

    def v1_beat_of_qpidd(self) -> None:
        """Over v2: a v1 heartbeat of qpidd's agent (two and no v2 one turn the
        connection to v1: :meth:`VersionTurn.v1_beat_of_qpidd`)."""
        link = self._v2
        self._turn.v1_beat_of_qpidd(link is not None and bool(link.bindings))

    def retire_v2(self) -> bool:
        """The connection turns to QMF v1 (see :class:`VersionTurn`): its v2 link only
        finishes its requests, method calls go over v1.  False (nothing done) when it
        does not speak v2 or is not connected."""
        link = self._v2
        if link is None or not self.connected:
            return False
        self._v2, self._v2_retired = None, link
        self._calls.use(None, self._route)
        link.indications = False
        self.qmf_version = 1
        return True

    async def _load_broker_agents(self) -> None:
        """Ask the broker's own agent (1.0) for its ``agent`` objects (the v1
        agents attached to it)."""
        if self._v2 is not None:  # 1.0 is the v2 agent here: asked over v1 all the same
            self._handle(self._core.see_agent(1, 0, time.monotonic(), label="broker"))
            agent = RemoteAgent(self, 1, 0, "broker", self.where)
        else:
            agent = self.see_agent(1, 0, label="broker")
        try:
            records = await self.query(agent,
                                       {"_class": "agent", "_package": BROKER_AGENT_CLASS[0]},
                                       self.session.options.broker_timeout)
        except QmfError as exc:
            log.info("agent list of %s not available: %s", self.where, exc)
            return
        self._handle(self._core.agent_objects(records, time.monotonic()))

    def _on_lost(self, exc: BaseException) -> None:
        if self._closing:
            return
        self.error = exc
        # read at each loss: the session's setting may have changed since
        self._runtime.reconnect = self.session.options.manage_connections
        self._enter(BrokerState.DISCONNECTED if self._runtime.reconnect
                    else BrokerState.CLOSED)
        lost = lost_error(self.where, exc)
        self._handle(self._core.connection_lost(lost))
        for link in (self._v2, self._v2_retired):
            if link is not None:
                link.connection_lost(lost)
        self._waits.fail_all(lost)  # waits the core no longer knew (already answered)
        self.owner.notify("broker_disconnected", self)
        if not self._runtime.reconnect:  # gone for good: what follows it ends
            self.owner.connection_lost(self, lost)

    def start_reconnect(self) -> None:
        """The first connection failed: let the runtime retry it with backoff (in the
        background; raises nothing)."""
        self._runtime.run(connected=False)

    def _connect_failed(self, exc: BaseException, delay: float) -> None:
        self.connect_failed(exc)

    def connect_failed(self, exc: BaseException, *, retried: bool = True) -> None:
        """A connection could not be made (``exc``): retried in the background
        (``retried``: the state is ``DISCONNECTED``), or not (``CLOSED``: the session
        gives the broker up).  Raises nothing."""
        self.error = exc
        self._enter(BrokerState.DISCONNECTED if retried else BrokerState.CLOSED)
        if retried:
            self.owner.notify("broker_connection_failed", self, exc)

    def _reconnected(self) -> None:
        self.reconnects += 1
        self.owner.notify("broker_connected", self)

    async def close(self) -> None:
        """Close the connection (bounded by the session's ``close_timeout``): pending
        requests fail with NotConnectedError.  Raises nothing of its own."""
        self._closing = True
        for task in list(self._tasks):
            task.cancel()
        removed = NotConnectedError(f"broker {self.where} was removed")
        self._handle(self._core.close(removed))
        for link in (self._v2, self._v2_retired):
            if link is not None:
                link.close(removed)
        self._waits.fail_all(removed)
        self._enter(BrokerState.CLOSED)
        await self._runtime.stop(self.session.options.close_timeout, flush=0.0)

    def check(self) -> TransportProtocol:
        """The open transport, for publishing at once (requests bypass the runtime's
        queue: their replies are awaited, and the hot path stays one call deep).

        Raises:
            NotConnectedError: not connected (never, lost, or removed).
        """
        transport = self._runtime.transport
        state = self._state  # BrokerState.up, tested here: a check per request and publish
        if (state is not _HANDSHAKING and state is not _CONNECTED) or transport is None:
            raise NotConnectedError(f"not connected to {self.where}"
                                    + (f" ({self.error})" if self.error else ""))
        return transport

    def publish(self, out: Outgoing, *,
                content_type: str | None = QMF_CONTENT_TYPE) -> Awaitable[None]:
        """This connection's one send path: publish what a core built (v1 or v2, to
        its exchange under its key, with its headers and correlation id), replies to
        this connection's reply queue.  Returns the transport's publish to await (no
        coroutine of its own: the call path of every request stays one frame shorter).

        Raises:
            NotConnectedError: at once, when not connected.
            TransportError: when awaited, the message was not sent.
        """
        transport = self.check()
        return transport.publish(out.body, exchange=out.exchange, routing_key=out.key,
                                 reply_to=self._reply_queue, content_type=content_type,
                                 headers=out.headers, correlation_id=out.correlation_id)

    # ------------------------------------------------------------------ requests

    @staticmethod
    def _banks(agent: RemoteAgent | None) -> tuple[int, int] | None:
        return None if agent is None else (agent.broker_bank, agent.agent_bank)

    @property
    def waits(self) -> Waits:
        """The v1 requests in flight on this connection (the request primitive:
        :meth:`Waits.request <qmf_async.console._waits.Waits.request>`)."""
        return self._waits

    async def request(self, agent: RemoteAgent | None, msg_factory: Callable[[int], Message],
                      routing_key: str, *, query: bool, expect: str, timeout: float,
                      exchange: str = MANAGEMENT) -> Any:
        """Send one request and wait for its reply (or its indications and ``z``).
        ``exchange``: ``qmf.default.direct`` for a v1 ``S`` to a v2 agent, which v2
        agents answer on their v2 address (``routing_key`` their name).

        Raises:
            NotConnectedError, TransportError: not sent, or the connection was lost.
            QmfTimeout: no complete answer within ``timeout``.
            CommandError: the agent answered with an error (a query's ``z``).
            AgentGoneError: the agent left meanwhile.
        """
        self.check()
        banks = None if agent is not None and agent.name else self._banks(agent)
        out = self._core.send_request(msg_factory, routing_key, query=query,
                                      agent=banks, expect=expect, exchange=exchange)
        return await self._waits.request(out.seq, out, timeout, lambda: QmfTimeout(
            f"no complete answer from {agent or routing_key} on {self.where} "
            f"within {timeout}s"))

    async def query(self, agent: RemoteAgent, query: Mapping[str, Any],
                    timeout: float) -> list[Message]:
        """The records of one ``G`` to ``agent`` (over v1 or v2 as the agent speaks).

        Raises:
            As :meth:`request`.
        """
        if agent.name and self._v2 is not None:  # a v2 agent: its records, as over v1
            records: list[Any] = []
            wait = await self.send_query(agent, query, records.append)
            await wait.result(timeout, lambda: QmfTimeout(
                f"no complete answer from {agent} on {self.where} within {timeout}s"))
            return records
        found: list[Message] = await self.request(
            agent, lambda seq: GetQuery(seq, dict(query)), agent.key, query=True, expect="",
            timeout=timeout)
        return found

    async def send_query(self, agent: RemoteAgent, query: Mapping[str, Any],
                         sink: Callable[[Message | RawObjectRecord], None],
                         where: list[Any] | None = None) -> Wait:
        """Start a query of ``agent`` (a v1 ``G``, a v2 query, or qpidd's v1 fast path
        over v2) whose records go to ``sink``; the wait completes once its answer is
        complete.  ``where``: a v2 ``_where`` predicate for a v2 agent that applies it.

        The caller awaits the wait (under its deadline) and closes it.

        Raises:
            NotConnectedError, TransportError: not sent.
        """
        if agent.name and self._v2 is not None:
            route = self._route
            if route is not None and route.takes(agent, query):
                return route.start(agent, query, sink, where)
            return await self._v2.send_query(agent, query, sink, where=where)
        return await self.send_v1_query((agent.broker_bank, agent.agent_bank), query, sink)

    async def send_v1_query(self, banks: tuple[int, int], query: Mapping[str, Any],
                            sink: Callable[[Message | RawObjectRecord], None]) -> Wait:
        """Start a v1 ``G`` to the agent of ``banks``; as :meth:`send_query`."""
        self.check()
        out = self._core.send_query(banks, query, sink=sink)
        return await self._waits.start(out.seq, out)

    # ------------------------------------------------------------ schemas, methods

    async def fetch_v1_schema(self, key: ClassKey, timeout: float,
                              agent: RemoteAgent | None = None) -> SchemaClass | None:
        """The schema of ``key`` with a v1 ``S``: asked of the v2 ``agent`` on its v2
        address (as the classic console does; v2 agents answer it there) unless it is
        qpidd's, and of the management broker (qpidd answers it whichever QMF version
        it publishes), both at once; None when neither can be asked.

        Raises:
            ProtocolError: answered with the schema of another class.
            QmfTimeout, CommandError, TransportError: every request failed.
        """
        return await self._schemas.fetch_v1_schema(key, timeout, agent)

    async def ask_catalog(self, make: Callable[[int], Message], expect: str,
                          timeout: float) -> list[Message]:
        """A ``P`` or ``Q`` (``expect``: ``p`` or ``q``) to this connection's management
        broker, or to each of its agents without one; the indications answered.

        Raises:
            NotConnectedError, TransportError, QmfTimeout, CommandError: every request
                failed.
        """
        return await self._schemas.ask_catalog(make, expect, timeout)

    async def classes_named(self, name: str, package: str | None,
                            timeout: float) -> list[ClassKey]:
        """The keys of the classes called ``name`` (in ``package``, else in any) that
        this connection lists (``P``, then ``Q``); the session hears of what the
        answers list as of unsolicited indications.

        Raises:
            As :meth:`ask_catalog`.
        """
        return await self._schemas.classes_named(name, package, timeout)

    async def ask_schema(self, key: ClassKey,
                         targets: list[tuple[RemoteAgent | None, str, str]],
                         timeout: float) -> SchemaClass | None:
        """Send a v1 ``S`` for ``key`` to every target (agent, routing key, exchange) at
        once and return the first schema of ``key`` answered; the other requests are
        then withdrawn.  All at once, not one after the other: an agent that does not
        know the class may stay silent, and a console that waited for it first would
        wait out ``timeout`` before asking the management broker.  None when there is
        no target to ask.

        Raises:
            ProtocolError: a target answered with another class's schema (or another
                answer) and no other target answered right.
            QmfTimeout, CommandError, TransportError: every request failed.
        """
        return await self._schemas.ask_schema(key, targets, timeout)

    def release_held(self, key: ClassKey) -> None:
        """The schema of ``key`` arrived: route the bodies held for it."""
        self._schemas.release_held(key)

    def call_method(self, obj: QmfObject, method: SchemaMethod, in_args: dict[str, Any],
                    timeout: float | None) -> Coroutine[Any, Any, MethodResult]:
        """Call ``method`` of ``obj`` (a proxy received on this connection) with bound
        ``in_args``; ``timeout`` None is the session's ``timeout``.  (A plain function
        returning the call's coroutine: the hot path awaits one coroutine, not two.)

        Raises:
            MethodError: the agent returned a non-zero status or an exception.
            AgentGoneError: the object's agent left, before the call (raised at once,
                nothing is sent) or while waiting for the response.
            ObjectGoneError: over v2, the object's v2 id is not known here (or no
                longer: it was deleted ``forget_deleted_after`` seconds ago).
            QmfTimeout: no response in time.
            NotConnectedError, TransportError: not sent, or the connection was lost.
        """
        return self._calls.call_method(obj, method, in_args, timeout)

    # ------------------------------------------------------------------ agents

    def see_agent(self, bb: int, ab: int, *, label: str | None = None) -> RemoteAgent:
        """The agent of these banks, noted alive now (it arrives if it was not known)."""
        self._handle(self._core.see_agent(bb, ab, time.monotonic(), label=label))
        return self._agents[(bb, ab)]

    def age_agents(self, now: float) -> list[SessionEvent]:
        """Age the agents out whose heartbeats stopped, as of the last moment this
        console is known to have handled everything it had received (see
        :meth:`AgentList.age`); over v2, also the v2 agents and deleted object ids.
        Returns what goes up (:class:`AgentChange` values: agents that left, v1 twins
        listed again), in order, for the caller to act on (the session is not
        called).  Raises nothing."""
        outer, self._collected = self._collected, []
        try:
            now, events = self._agent_list.age(now, self._probe_key, self._loss_queue)
            self._handle(events)
            if self._v2 is not None:
                released = self._v2.age(now)
                if released and self._route is not None:
                    self._route.forget(released)
            return self._collected
        finally:
            self._collected = outer

    def forget_agents(self) -> list[SessionEvent]:
        """The broker is removed: every agent leaves; returns their departures, in
        order, for the caller to act on (as :meth:`age_agents`).  Raises nothing."""
        outer, self._collected = self._collected, []
        try:
            self._handle(self._core.forget_agents("broker removed"))
            self._agent_list.forget_v2()
            return self._collected
        finally:
            self._collected = outer

    def known_agent(self, banks: tuple[int, int]) -> RemoteAgent | None:
        """The known agent of ``banks`` (None when none is)."""
        return self._agents.get(banks)

    def agents(self) -> list[RemoteAgent]:
        """The agents currently known on this broker."""
        return list(self._agents.values())

    def v2_object_id(self, object_id: ObjectId) -> V2ObjectId | None:
        """The QMF v2 id (``_object_name`` ...) that ``object_id``, an id of an object
        received on this connection over QMF v2, stands for; None over v1 or when the
        id is not one of this connection's."""
        v2 = self._v2
        return None if v2 is None else v2.oids.get(object_id.raw)

    # ------------------------------------------------------------------ dispatch

    def emit(self, event: SessionEvent) -> None:
        """Hand ``event`` up to the session: returned by the dispatch (or aging) that
        runs, else (a schema fetch, a timer) acted on at once.  Raises nothing."""
        collected = self._collected
        if collected is not None:
            collected.append(event)
        else:
            self._act(self, [event])

    def _received(self, delivery: Delivery) -> None:
        """The runtime's delivery callback: dispatch, then the session acts on what
        the delivery brought, in order."""
        # dispatch(), one call shallower: this runs for every delivery
        outer, self._collected = self._collected, []
        try:
            self._route_delivery(delivery)
            events = self._collected
        finally:
            self._collected = outer
        if events:
            self._act(self, events)

    def dispatch(self, delivery: Delivery) -> list[SessionEvent]:
        """Feed one delivery to its core (v1, or the v2 link) and act on the core's
        events here (the waits of requests complete, the agent list changes);
        returns what goes up to the session (:mod:`~qmf_async.console._sessionevents`
        values), in order.  Raises nothing."""
        outer, self._collected = self._collected, []
        try:
            self._route_delivery(delivery)
            return self._collected
        finally:
            self._collected = outer

    def _route_delivery(self, delivery: Delivery) -> None:
        self._drain.received += 1
        v2 = self._v2 or self._v2_retired
        if v2 is not None and (delivery.value is not None
                               or delivery.content_type in self._v2_bodies):
            v2.dispatch(delivery)
            return
        if delivery.routing_key == self._probe_key \
                and self._drain.back(delivery.body, time.monotonic()):
            return
        if self._v2 is not None and self._choice.drops(delivery.routing_key):
            # qpidd's v1 event, on an early binding: v2 delivers it.  The early v1 event
            # bindings stay until the connection ends (over AMQP 1.0 detaching one makes
            # qpidd raise events of this console, which every console would receive)
            return
        if delivery.endpoint == self._loss_queue:
            if self._drain.back(delivery.body, time.monotonic()):
                return
            self.topic_dropped += 1
            if self.topic_dropped in (1, 100) or self.topic_dropped % 10_000 == 0:
                log.warning("console too slow for %s: %d unsolicited messages dropped so far",
                            self.where, self.topic_dropped)
            return
        events = self._core.feed(delivery, time.monotonic())
        if events:
            handle(self._handlers, events, self.where, log)  # _handle, a call shallower

    def _handle(self, events: list[Any]) -> None:
        """Act on the core's events, in order (one failing handler does not stop the rest)."""
        handle(self._handlers, events, self.where, log)

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        """Run ``coro`` in a task of this broker (cancelled by :meth:`close`)."""
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
