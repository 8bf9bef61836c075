"""The management-broker role (implementation; the public module is
:mod:`qmf_async.agent.broker`, whose docstring describes what the role does).

QMF v2: the role's own agent also speaks v2 (named
``qmf-async:management-broker:<broker id>``), and answers requests sent to
``broker`` on ``qmf.default.direct``, naming itself ``broker`` in those answers, as
qpidd's own agent does: a v2 console finds the role by locate or heartbeat and asks
it for the ``org.apache.qpid.broker:agent`` objects of the attached agents."""

from __future__ import annotations

import asyncio
import logging
import random
import time
import uuid
from collections.abc import Sequence
from typing import Any, Final
from urllib.parse import quote

from .. import wire as codec
from ..errors import DecodeError, QmfError, UsageError
from ..frozen import define, frozen
from ..logs import warn_limited
from ..protocol import (
    MAX_BANK,
    AgentAttached,
    AttachRefused,
    ClassAnnounced,
    ConsoleArrived,
    Outgoing,
    RequestDropped,
    RoleDirectory,
    RolePeer,
    RoleProtocol,
    SchemaForward,
    agent_v2_name,
    reply_target,
)
from ..runtime import PeerRuntime, RequestFutures
from ..transport import (
    MANAGEMENT_EXCHANGE,
    REPLY_EXCHANGE,
    Delivery,
    TlsOptions,
    TransportFactory,
    TransportProtocol,
    broker_url,
    parse_url,
)
from ..transport import transport_factory as make_transport_factory
from ..wire import (
    BrokerRequest,
    BrokerResponse,
    ClassIndication,
    ClassKey,
    ClassQuery,
    CommandComplete,
    Heartbeat,
    Message,
    ObjectId,
    PackageIndication,
    PackageQuery,
    SchemaClass,
    SchemaProperty,
    SchemaRequest,
    SchemaResponse,
)
from ._agent import Agent
from ._declare import object_class
from ._objects import ManagedObject

__all__ = ["AGENT_CLASS", "AGENT_CLASS_HASH", "AgentInfo", "ManagementBroker", "derive_broker_id"]

log = logging.getLogger("qmf_async.agent.broker")

MANAGEMENT: Final = MANAGEMENT_EXCHANGE
DIRECT: Final = REPLY_EXCHANGE
_ZERO_OID: Final = ObjectId(bytes(16))
#: the product part of the QMF v2 name of the role's own agent
#: (``qmf-async:management-broker:<broker id>``, built by ``agent_v2_name``)
V2_PRODUCT: Final = "management-broker"
#: the v2 address the role's agent also answers (qpidd's own agent answers it)
BROKER_ALIAS: Final = "broker"

#: qpidd's class hash of ``org.apache.qpid.broker:agent`` (qpidd 1.40 captures).  Our own
#: hash of the same declaration differs (qpidd hashes its schema XML, we hash the wire
#: encoding); reusing qpidd's keeps the class key identical, so a console that knows
#: qpidd (cached schema, tools matching the key, a session on both kinds of brokers)
#: sees one class, not two versions of it.
AGENT_CLASS_HASH: Final = bytes.fromhex("d9e7e6304319941e6685be8f8892f3a5")

#: ``org.apache.qpid.broker:agent`` exactly as qpidd 1.40 serves it (the ``s`` body
#: re-encodes to the captured bytes).
AGENT_CLASS: Final[SchemaClass] = object_class(
    "org.apache.qpid.broker", "agent",
    properties=[
        SchemaProperty("connectionRef", "objId", access="RO", index=True),
        SchemaProperty("label", "sstr", access="RO", desc="Label for agent"),
        SchemaProperty("registeredTo", "objId", access="RO",
                       desc="Broker agent is registered to"),
        SchemaProperty("systemId", "uuid", access="RO",
                       desc="Identifier of system where agent resides"),
        SchemaProperty("brokerBank", "uint32", access="RO",
                       desc="Assigned object-id broker bank"),
        SchemaProperty("agentBank", "uint32", access="RO",
                       desc="Assigned object-id agent bank"),
    ],
    hash=AGENT_CLASS_HASH,
)


def derive_broker_id(url: str) -> uuid.UUID:
    """The broker id used when none is given: a UUID5 of the URL without credentials.

    Scheme, host (lowercased), port and vhost enter it; user and password do not.

    Raises:
        UsageError: the URL is malformed.
    """
    t = parse_url(url)
    name = f"qmf-async:management-broker:{t.scheme}://{t.host.lower()}:{t.port}/" \
           f"{quote(t.vhost, safe='')}"
    return uuid.uuid5(uuid.NAMESPACE_URL, name)


@frozen
class AgentInfo:
    """What the role knows about one agent (a snapshot).

    ``live`` is False during the grace period after the agent was aged out;
    ``adopted`` means it was heard by heartbeat but never attached to this role;
    ``classes`` are the class keys it listed; ``learned`` is True once its schema
    was fetched completely.
    """

    label: str
    system_id: uuid.UUID
    broker_bank: int
    agent_bank: int
    live: bool
    adopted: bool
    learned: bool
    classes: frozenset[ClassKey]


@define(eq=False)
class _Learning:
    """Learning one agent's schemas (P, Q, S): the task, its phase, its back-off."""

    phase: str = ""
    task: asyncio.Task[None] | None = None
    relearn: bool = False
    next_try: float = 0.0
    backoff: float = 0.0


class _NoAnswer(Exception):
    """A request to an agent got no (complete) answer in time."""


class ManagementBroker:
    """The management-broker role on an AMQP 0-9-1 bus.

    Use as ``async with ManagementBroker(url) as mb:`` (or :meth:`start` /
    :meth:`stop`).  Run one per vhost: two roles would both answer ``B`` and ``A``
    (the role warns at start when another one answers).

    ``interval`` is the publish interval of the role's own agent and the pace of its
    housekeeping; ``agent_timeout`` (default ``3 * interval``) ages out agents whose
    heartbeats stop -- agents should heartbeat more often than that; ``bank_grace``
    (default ``2 * agent_timeout``) is how long an aged-out agent's bank stays
    reserved for it; ``request_timeout`` bounds every wait for an agent's answer.
    """

    def __init__(
        self,
        url: str,
        *,
        broker_id: uuid.UUID | None = None,
        broker_bank: int = 1,
        interval: float = 10.0,
        agent_timeout: float | None = None,
        first_agent_bank: int = 10,
        tls: TlsOptions | None = None,
        request_timeout: float = 2.0,
        bank_grace: float | None = None,
        boot_sequence: int | None = None,
        label: str = "qmf-async management broker",
        max_agents: int = 10_000,
        max_classes: int = 10_000,
        max_outgoing: int = 10_000,
        connect_timeout: float = 10.0,
        transport_factory: TransportFactory | None = None,
        protocol: str = "auto",
        sasl_mechanisms: str | Sequence[str] | None = None,
    ) -> None:
        """Prepare the role; nothing is sent before :meth:`start`.

        ``transport_factory`` builds the connections of the role and of its own agent
        (default: the AMQP version from the broker's answer, or ``protocol``); ``tls``
        and ``sasl_mechanisms`` apply to both.

        Raises:
            UsageError: a malformed URL, a bank out of range or a non-positive time.
        """
        if not 0 < broker_bank < (1 << 20):
            raise UsageError(f"broker bank {broker_bank} must be 1 .. 2**20-1")
        if not 0 < first_agent_bank <= MAX_BANK:
            raise UsageError(f"first agent bank {first_agent_bank} must be 1 .. 2**28-1")
        timeout = 3 * interval if agent_timeout is None else agent_timeout
        grace = 2 * timeout if bank_grace is None else bank_grace
        if interval <= 0 or timeout <= 0 or grace < 0 or request_timeout <= 0:
            raise UsageError("interval, agent_timeout and request_timeout must be positive, "
                             "bank_grace >= 0")
        if max_agents < 1 or max_classes < 1 or max_outgoing < 1:
            raise UsageError("max_agents, max_classes and max_outgoing must be positive")
        url = broker_url(url)  # qpid-tools addresses (host:port, ...) too, as Agent takes
        self.url = url
        self.broker_id = broker_id if broker_id is not None else derive_broker_id(url)
        self.broker_bank = broker_bank
        self.interval = interval
        self.agent_timeout = timeout
        self.bank_grace = grace
        self.first_agent_bank = first_agent_bank
        self.request_timeout = request_timeout
        self.max_agents = max_agents
        self.max_classes = max_classes
        self.label = label
        if boot_sequence is None:
            boot_sequence = int(time.time()) % 0xFFF + 1
        #: the role's own agent (bank ``<broker_bank>.0``), serving ``AGENT_CLASS``
        self.agent = Agent(url, label=label, schemas=[AGENT_CLASS], interval=interval,
                           broker_bank=broker_bank, agent_bank=0, attach=False,
                           boot_sequence=boot_sequence, tls=tls,
                           sasl_mechanisms=sasl_mechanisms,
                           connect_timeout=connect_timeout,
                           transport_factory=transport_factory, protocol=protocol,
                           v2_name=agent_v2_name(V2_PRODUCT, str(self.broker_id)),
                           v2_aliases=(BROKER_ALIAS,))
        #: every schema the role serves: its own class and those learned from agents
        self.registry = codec.SchemaRegistry([AGENT_CLASS])
        #: counters
        self.stats = {"requests": 0, "bad_requests": 0, "published": 0, "dropped": 0,
                      "attaches": 0, "aged_out": 0}
        #: the agents, by bank (the rules: protocol/_role.py)
        self._dir = RoleDirectory(broker_bank, first_agent_bank=first_agent_bank,
                                  max_agents=max_agents, agent_timeout=timeout,
                                  bank_grace=grace)
        #: the answers to what comes to ``broker`` (protocol/_role.py)
        self._core = RoleProtocol(self.broker_id, self._dir, self.registry)
        self._learning: dict[int, _Learning] = {}  # by agent bank
        self._objects: dict[int, ManagedObject] = {}  # each agent's ``agent`` object
        self._correlator: RequestFutures[Message] = RequestFutures(random.randrange(1, 1 << 30))
        self._fetching: set[ClassKey] = set()  # S asked for a q received on 'broker'
        self._chased: dict[ClassKey, float] = {}  # unknown broadcast classes -> when asked
        self._tasks: set[asyncio.Task[Any]] = set()
        self._housekeeper: asyncio.Task[None] | None = None
        self._running = False
        self._runtime = PeerRuntime(
            url, dispatch=self._dispatch, setup=self._setup,
            transport_factory=transport_factory or make_transport_factory(protocol), tls=tls,
            sasl_mechanisms=sasl_mechanisms,
            name=f"qmf-broker {label}",
            connect_timeout=connect_timeout, max_outgoing=max_outgoing,
            endpoint_max_length=10_000, endpoint_no_ack=False,
            on_lost=self._on_lost, on_reconnected=self._reconnected, stats=self.stats,
            what="management broker", log=log)
        self._probe_seq = -1
        self._probe_answers = 0

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> ManagementBroker:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    @property
    def agent_key(self) -> str:
        """Routing key of the role's own agent: ``agent.<brokerBank>.0``."""
        return f"agent.{self.broker_bank}.0"

    @property
    def _transport(self) -> TransportProtocol | None:
        """The current connection (None while disconnected)."""
        return self._runtime.transport

    @property
    def _queue(self) -> str | None:
        """The role's endpoint (its reply key)."""
        return self._runtime.endpoint

    async def start(self) -> None:
        """Connect, bind, start the role's own agent and answer requests.

        Raises:
            TransportError: the broker cannot be reached or refused a declaration.
            QmfTimeout: connecting timed out.
        """
        if self._running:
            return
        await self._runtime.connect()  # deliveries wait until the role's agent runs
        try:
            await self.agent.start()
        except BaseException:
            await self._runtime.stop()
            raise
        self._running = True
        self._runtime.begin_dispatch()
        self._runtime.run()
        self._housekeeper = asyncio.create_task(self._housekeeping(), name="qmf-broker-ageing")
        self._probe()
        transport = self._runtime.transport
        log.info("management broker %s ready as bank %d on %s", self.broker_id,
                 self.broker_bank, transport.where if transport else self.url)

    async def _setup(self, transport: TransportProtocol, endpoint: str) -> None:
        """Per connection, once the endpoint is open: bind the role's keys."""
        for key in ("broker", "console.heartbeat.#", "schema.#"):
            await transport.bind(endpoint, MANAGEMENT, key)

    def _probe(self) -> None:
        """Send ``B`` to ``broker`` ourselves: a second answer means a second role."""
        self._probe_seq = self._next_seq()
        self._probe_answers = 0
        self._request(MANAGEMENT, "broker", BrokerRequest(self._probe_seq))

    async def stop(self, timeout: float = 5.0) -> None:
        """Flush what is queued (bounded by ``timeout``), stop and disconnect.

        Raises:
            Nothing: failures while stopping are logged.
        """
        if not self._running:
            return
        self._running = False
        await self._runtime.flush(timeout / 2)
        tasks = [t for t in (self._housekeeper, *self._tasks) if t is not None]
        tasks += [st.task for st in self._learning.values() if st.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks.clear()
        self._fail_pending()
        try:
            await self.agent.stop(timeout / 2)
        except Exception:  # stopping must not raise
            log.exception("stopping the management broker's own agent failed")
        await self._runtime.stop(timeout / 2, flush=0.0)

    def _on_lost(self, exc: BaseException) -> None:
        self._fail_pending()

    def _reconnected(self) -> None:
        for peer in self._dir.reconnected(time.monotonic()):  # we heard nothing while away
            self._learn_state(peer).next_try = 0.0

    # ------------------------------------------------------------------ public views

    def agents(self, *, include_expired: bool = False) -> list[AgentInfo]:
        """The agents known to the role, by agent bank."""
        return [self._info(p) for _, p in sorted(self._dir.peers.items())
                if p.live or include_expired]

    def _info(self, p: RolePeer) -> AgentInfo:
        return AgentInfo(p.label, p.system_id, self.broker_bank, p.agent_bank, p.live,
                         p.adopted, p.learned, frozenset(p.classes))

    # ------------------------------------------------------------------ sending

    def _next_seq(self) -> int:
        return self._correlator.next_seq()

    def _put(self, out: list[Outgoing]) -> None:
        for one in out:
            self._runtime.enqueue(one)

    def _request(self, exchange: str, key: str, msg: Message) -> None:
        """Send a request carrying our reply key (dropped while disconnected)."""
        if self._queue is None:
            return
        self._put(self._core.encoded(exchange, key, [msg], reply_to=self._queue))

    def _reply(self, reply_to: str, messages: Sequence[Message]) -> None:
        """Send replies, packed as qpidd packs them (``RoleProtocol.reply``)."""
        self._put(self._core.reply(reply_to, messages))

    async def _ask(self, routing_key: str, make: Any, *, single: bool = False,
                   exchange: str = MANAGEMENT) -> list[Message]:
        """Send ``make(seq)`` to ``routing_key`` and collect the answers until ``z``
        (or the first ``s`` when ``single``), for at most ``request_timeout``.

        Raises:
            _NoAnswer: no complete answer in time (or the connection went away).
        """
        correlator = self._correlator
        seq = correlator.next_seq()

        def complete(msg: Message) -> bool:
            return isinstance(msg, CommandComplete) or (single and isinstance(msg,
                                                                              SchemaResponse))

        correlator.expect(seq, complete)
        try:
            self._request(exchange, routing_key, make(seq))
            return await correlator.wait(seq, self.request_timeout)
        except QmfError as exc:
            raise _NoAnswer(f"no answer from {routing_key} within "
                            f"{self.request_timeout}s") from exc
        finally:
            correlator.forget(seq)

    def _fail_pending(self) -> None:
        self._correlator.fail_all(QmfError("connection lost"))

    def _spawn(self, coro: Any, name: str) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # ------------------------------------------------------------------ receiving

    def _dispatch(self, d: Delivery) -> None:
        if not self._running:
            return
        rk = d.routing_key
        if d.exchange == DIRECT or rk == self._queue:
            self._on_reply(d)
        elif rk == "broker":
            self._on_request(d)
        elif rk.startswith("console.heartbeat."):
            self._on_heartbeat(d)
        elif rk.startswith("schema."):
            self._on_schema_broadcast(d)
        else:
            log.debug("management broker: unexpected delivery %s/%s ignored", d.exchange, rk)

    def _decode(self, d: Delivery) -> list[Message] | None:
        """Decode with our registry (decoding never adds to it: a peer's ``s`` enters
        our cache only when we asked for it)."""
        try:
            return codec.decode(d.body, self.registry)
        except DecodeError as exc:
            self.stats["bad_requests"] += 1
            warn_limited(log, self.stats["bad_requests"], "management broker: malformed "
                         "body on %s/%s dropped: %s", d.exchange, d.routing_key, exc)
            return None

    def _on_reply(self, d: Delivery) -> None:
        messages = self._decode(d)
        for msg in messages or ():
            if isinstance(msg, BrokerResponse):
                self._on_probe_answer(msg)
                continue
            if not self._correlator.feed(msg.seq, msg):
                log.debug("management broker: late or unexpected %r (seq %d) ignored",
                          msg.OPCODE, msg.seq)

    def _on_probe_answer(self, msg: BrokerResponse) -> None:
        if msg.seq != self._probe_seq:
            return
        self._probe_answers += 1
        if msg.broker_id != self.broker_id or self._probe_answers == 2:
            log.warning("another management broker (id %s) answers on this bus: agents may "
                        "get conflicting banks; run one per vhost", msg.broker_id)

    def _on_request(self, d: Delivery) -> None:
        messages = self._decode(d)
        for msg in messages or ():
            self.stats["requests"] += 1
            try:
                answer = self._core.request(msg, d.reply_to, time.monotonic(),
                                            own_reply=self._queue)
                for item in answer:
                    self._apply(item)
            except Exception:
                self.stats["bad_requests"] += 1
                log.exception("management broker: failed to handle %r", msg.OPCODE)

    def _apply(self, item: Any) -> None:
        """Do what the core answered: send, or act on its event."""
        if type(item) is Outgoing:
            self._runtime.enqueue(item)
        elif isinstance(item, ConsoleArrived):
            self.agent.republish()  # the agents were sent x: our own agent too
        elif isinstance(item, AgentAttached):
            self._attached(item.peer, item.new)
        elif isinstance(item, SchemaForward):
            self._spawn(self._forward_schema(item), "qmf-broker-schema")
        elif isinstance(item, ClassAnnounced):
            self._fetch_announced(item)
        elif isinstance(item, AttachRefused):
            log.warning("management broker: %d agents known; attach of %r refused",
                        self.max_agents, item.label)
        elif isinstance(item, RequestDropped):
            self.stats["bad_requests"] += 1
            log.warning("management broker: %r request dropped: %s", item.opcode, item.why)

    # ------------------------------------------------------------------ schemas

    async def _forward_schema(self, forward: SchemaForward) -> None:
        schema = None
        for peer in forward.holders[:3]:
            schema = await self._fetch_schema(forward.class_key,
                                              (MANAGEMENT, self._core.agent_key(peer)))
            if schema is not None:
                break
        if schema is None:
            self._reply(forward.reply_to,
                        [CommandComplete(forward.seq, 1, "Schema not available")])
        else:
            self._reply(forward.reply_to, [SchemaResponse(forward.seq, schema)])

    async def _fetch_schema(self, key: ClassKey,
                            routing: tuple[str, str]) -> SchemaClass | None:
        """S to an agent at ``routing`` = (exchange, key); cache and return the schema,
        or None (error, timeout, wrong class)."""
        exchange, rk = routing
        try:
            answer = await self._ask(rk, lambda seq: SchemaRequest(seq, key), single=True,
                                     exchange=exchange)
        except _NoAnswer:
            return None
        for m in answer:
            if isinstance(m, SchemaResponse):
                if m.schema.class_key != key:
                    log.warning("management broker: asked %s for %s, got %s; ignored", rk, key,
                                m.schema.class_key)
                    return None
                return self._cache(m.schema)
        return None

    def _cache(self, schema: SchemaClass) -> SchemaClass | None:
        known = self.registry.get(schema.class_key)
        if known is not None:
            return known
        if len(self.registry) >= self.max_classes:
            log.warning("management broker: schema cache full (%d classes); %s not cached",
                        self.max_classes, schema.class_key)
            return None
        self.registry.add(schema)
        log.info("management broker: learned %s", schema.class_key)
        return schema

    def _on_schema_broadcast(self, d: Delivery) -> None:
        """An agent announced its classes (``q`` on ``schema.class``, sent once it
        listens on its agent key).  Agents still waiting for an answer to our first
        ``P`` (sent before they bound) are asked again now.  A class new to us may be
        one an attached agent added: every live agent is asked again, at most once per
        class key per ``agent_timeout`` (the broadcast does not say who sent it, and
        agents not attached to us announce classes we will never learn)."""
        messages = self._decode(d)
        indications = [m for m in messages or () if isinstance(m, ClassIndication)]
        if not indications:
            return
        now = time.monotonic()
        unknown = False
        for m in indications:
            key = m.class_key
            if key not in self.registry and now - self._chased.get(key, -1e9) > self.agent_timeout:
                if len(self._chased) >= self.max_classes:
                    self._chased.clear()
                self._chased[key] = now
                unknown = True
        for peer in self._dir.live():
            st = self._learn_state(peer)
            if st.task is not None and not st.task.done() and st.phase == "P":
                st.task.cancel()
                st.task = None
            if unknown or not peer.learned:
                st.next_try = 0.0
                self._schedule_learn(peer)

    def _fetch_announced(self, announced: ClassAnnounced) -> None:
        """Ask the agent that announced a class on ``broker`` for its schema, once."""
        key = announced.class_key
        if key in self._fetching:
            return
        self._fetching.add(key)
        task = self._spawn(self._fetch_schema(key, reply_target(announced.reply_to)),
                           "qmf-broker-schema")
        task.add_done_callback(lambda _t: self._fetching.discard(key))

    def _learn_state(self, peer: RolePeer) -> _Learning:
        st = self._learning.get(peer.agent_bank)
        if st is None:
            st = self._learning[peer.agent_bank] = _Learning()
        return st

    def _schedule_learn(self, peer: RolePeer) -> None:
        if not self._running or not peer.live:
            return
        st = self._learn_state(peer)
        if st.task is not None and not st.task.done():
            st.relearn = True
            return
        if time.monotonic() < st.next_try:
            return
        st.task = asyncio.get_running_loop().create_task(
            self._learn(peer, st), name=f"qmf-broker-learn {self._core.agent_key(peer)}")

    async def _learn(self, peer: RolePeer, st: _Learning) -> None:
        """P, Q and S to the agent; every wait bounded.  On a timeout, retry a few
        times with a growing back-off, then at its next heartbeat or schema broadcast
        (the first P often arrives before the agent has bound its key)."""
        key = self._core.agent_key(peer)
        retries = 3
        while True:
            st.relearn = False
            try:
                st.phase = "P"
                answer = await self._ask(key, PackageQuery)
                st.phase = "QS"
                packages = [m.package for m in answer if isinstance(m, PackageIndication)]
                classes: set[ClassKey] = set()
                for package in packages:
                    answer = await self._ask(key, lambda seq, p=package: ClassQuery(seq, p))
                    classes.update(m.class_key for m in answer if isinstance(m, ClassIndication)
                                   and m.class_key.package == package)
                peer.classes = classes
                missing = [k for k in classes if k not in self.registry]
                fetched = await asyncio.gather(*(self._fetch_schema(k, (MANAGEMENT, key))
                                                for k in missing))
                peer.learned = all(s is not None for s in fetched)
                st.backoff = 0.0
                st.next_try = 0.0
                if peer.learned:
                    log.info("management broker: schema of %s (%s) learned: %d classes", key,
                             peer.label or "adopted", len(classes))
            except _NoAnswer as exc:
                peer.learned = False
                st.backoff = min(max(st.backoff * 2, self.request_timeout), 30.0)
                st.next_try = time.monotonic() + st.backoff
                log.info("management broker: learning the schema of %s: %s; retrying later",
                         key, exc)
                if retries and not st.relearn:
                    retries -= 1
                    st.phase = "P"  # a schema broadcast may cut the wait short
                    await asyncio.sleep(st.backoff)
                    st.relearn = True
            st.phase = ""
            if not st.relearn or not peer.live or not self._running:
                return

    # ------------------------------------------------------------------ agents

    def _attached(self, peer: RolePeer, new: bool) -> None:
        """An agent attached (its ``a`` is on its way): publish its ``agent`` object and
        learn its schemas."""
        self.stats["attaches"] += 1
        self._learn_state(peer).next_try = 0.0  # a re-attach may serve other classes
        self._revive(peer)
        log.info("management broker: agent %r attached as %d.%d%s", peer.label,
                 self.broker_bank, peer.agent_bank, "" if new else " again")
        self._schedule_learn(peer)

    def _revive(self, peer: RolePeer) -> None:
        """Publish ``peer``'s ``agent`` object, up to date, now."""
        obj = self._objects.get(peer.agent_bank)
        if obj is not None and not obj.deleted:
            obj.set(label=peer.label, systemId=peer.system_id)
        else:
            self._objects[peer.agent_bank] = self.agent.create_object(
                AGENT_CLASS,
                connectionRef=ObjectId.make(broker_bank=self.broker_bank,
                                            agent_bank=peer.agent_bank),
                label=peer.label, registeredTo=_ZERO_OID, systemId=peer.system_id,
                brokerBank=self.broker_bank, agentBank=peer.agent_bank)
        self.agent.publish_now()

    def _on_heartbeat(self, d: Delivery) -> None:
        bank = self._dir.heartbeat_bank(d.routing_key)
        if bank is None:
            log.debug("management broker: heartbeat key %r ignored", d.routing_key)
            return
        messages = self._decode(d)
        if not messages or not any(isinstance(m, Heartbeat) for m in messages):
            return
        peer, what = self._dir.heartbeat(bank, time.monotonic())
        if peer is None:
            return
        if what:
            if what == "adopted":
                log.info("management broker: adopting agent %d.%d (heard, never attached)",
                         self.broker_bank, bank)
            else:
                log.info("management broker: agent %r (%d.%d) is back", peer.label,
                         self.broker_bank, bank)
            self._learn_state(peer).next_try = 0.0
            self._revive(peer)
        if not peer.learned:
            self._schedule_learn(peer)

    async def _housekeeping(self) -> None:
        tick = max(0.05, min(self.interval, self.agent_timeout) / 4)
        while True:
            await asyncio.sleep(tick)
            if not self._runtime.is_open:
                continue  # deaf while away: nobody ages (the supervisor resets the clocks)
            try:
                self._age(time.monotonic())
            except Exception:  # keep ageing whatever one agent did
                log.exception("management broker: ageing failed")

    def _age(self, now: float) -> None:
        aged, freed = self._dir.age(now)
        for peer in aged:
            self.stats["aged_out"] += 1
            st = self._learning.get(peer.agent_bank)
            if st is not None and st.task is not None:
                st.task.cancel()
            obj = self._objects.get(peer.agent_bank)
            if obj is not None:
                self.agent.delete_object(obj)
            log.info("management broker: agent %r (%d.%d) silent for %.1fs; aged out",
                     peer.label, self.broker_bank, peer.agent_bank, now - peer.last_seen)
        for bank in freed:
            self._learning.pop(bank, None)
            self._objects.pop(bank, None)
            log.debug("management broker: bank %d freed", bank)
        if any(peer.agent_bank in self._objects for peer in aged):
            self.agent.publish_now()  # the delete records go out now

    def __repr__(self) -> str:
        state = "running" if self._running else "stopped"
        return (f"<ManagementBroker {self.broker_id} bank {self.broker_bank} "
                f"{len(self.agents())} agents {state}>")
