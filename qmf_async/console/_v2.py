"""The console's QMF v2 side of one broker connection (asyncio driver of
:class:`~qmf_async.protocol.ConsoleProtocolV2`).

A :class:`Broker` whose connection speaks v2 (``Session(qmf_version=...)``) hands its
v2 messages here.  What v2 delivers is turned into what the v1 side delivers, so the
session's one object view, its proxies and its subscriptions serve both versions:

- a v2 object (``V2Data``) becomes a :class:`~qmf_async.wire.RawObjectRecord` of its v1
  schema (qpidd has no v2 schema query: the schema comes from the v1 ``S``, as the
  classic console does), with texts decoded (qpidd sends them as binary), by the wire
  layer's :class:`~qmf_async.wire.V2RecordConverter`; this module keeps what is
  connection state (ids, banks, schemas fetched), ``_v2parts`` what waits in parts
  (the indications held for schemas or agents, the answers streamed);
- its object id is a v1 id made from the agent's banks on this connection and a 64-bit
  digest of the v2 object name (stable across agent restarts, as qpidd's names are);
  the v2 id is kept to address methods and ``_objectId`` queries;
- a v2 agent is a :class:`~qmf_async.console.RemoteAgent` whose ``name`` is its v2
  name; qpidd's own agent takes the banks ``1.0`` that its v1 view has.

Nothing here does I/O but through the broker's transport.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final

from .. import names
from ..errors import (
    AgentGoneError,
    DecodeError,
    MethodError,
    ObjectGoneError,
    QmfError,
    QmfTimeout,
)
from ..logs import warn_limited
from ..protocol import (
    V2_TOPIC_EXCHANGE,
    AgentArrived,
    AgentLeft,
    AgentRestarted,
    BodyMalformed,
    ConsoleProtocolV2,
    EventReceived,
    HeartbeatReceived,
    MessageUnhandled,
    ObjectUpdate,
    Outgoing,
    QueryDone,
    QueryPart,
    Reply,
    RequestExpired,
    RequestFailed,
    texts_from_schema,
)
from ..transport import Delivery, TransportProtocol
from ..wire import (
    ClassKey,
    ObjectId,
    QmfType,
    RawObjectRecord,
    SchemaClass,
    SchemaMethod,
    V2Data,
    V2Event,
    V2Exception,
    V2ObjectId,
    V2RecordConverter,
    V2SchemaId,
    v2_class_key,
)
from ._dispatch import Handlers, handle, ignore
from ._objects import Event, MethodResult, RemoteAgent
from ._sessionevents import HeartbeatSeen, SchemaArrived
from ._v2bindings import Interest, keyify, v2_bindings
from ._v2parts import HeldIndications, V2Agents, V2Answer, V2Beats, V2Host, V2Owner
from ._waits import Expired, Wait, Waits, within

__all__ = ["Interest", "V2Host", "V2Link", "V2Owner", "keyify", "v2_bindings"]

log = logging.getLogger("qmf_async.console")

#: how many v2 object ids a connection remembers (for methods and ``_objectId``)
_MAX_OIDS: Final = 2_000_000
_NOTHING: Final = object()
#: how many v2 agents that left keep their banks (for their return)
_MAX_LEFT: Final = 4096
#: qpidd's agent names start with this; its agent takes the banks 1.0
_QPIDD_PREFIX: Final = names.QPIDD_AGENT_PREFIX
#: longest wait (s) before a schema that could not be fetched is asked for again
_MAX_RETRY: Final = 60.0


def _cid(out: Outgoing) -> str:
    """The correlation id of a v2 request the core built (always a string)."""
    cid = out.correlation
    assert isinstance(cid, str)
    return cid


#: what a link that no longer follows its broker's publications ignores
_INDICATIONS: Final = (ObjectUpdate, EventReceived, HeartbeatReceived)


class V2Link:
    """The v2 state and requests of one broker connection (see the module doc)."""

    def __init__(self, host: V2Host, previous: V2Link | None = None, *, agents: V2Agents,
                 beats: V2Beats) -> None:
        """``previous``: the link of the broker's former connection, whose object ids
        and agent banks carry over (proxies from before a reconnection still work);
        ``agents``: the broker's agent list, which v2 agents join and leave; ``beats``:
        its QMF version choice, told of every v2 heartbeat (qpidd's first one shows
        that it publishes v2)."""
        settings = host.session.options
        self.host = host
        self.agents = agents
        self.beats = beats
        self.core = ConsoleProtocolV2(agent_interval=settings.agent_interval,
                                      min_agent_interval=settings.min_agent_interval,
                                      missed=settings.missed_heartbeats,
                                      busy_grace=settings.timeout,
                                      max_query_items=settings.max_query_items)
        #: the requests in flight, by correlation id (a streamed query's wait has its
        #: answer as ``stream``): every request goes through it (see _waits)
        self._waits = Waits(host.publish, self.core.cancel)
        self._banks: dict[str, tuple[int, int]] = {}
        self._next_bank = 1
        #: v1 object id bytes -> the v2 object id (for methods and _objectId queries)
        self.oids: dict[bytes, V2ObjectId] = {}
        #: ids of ``oids`` whose object was deleted -> when the deletion came (oldest
        #: first): released ``forget_deleted_after`` seconds later (see :meth:`age`)
        self.deleted: dict[bytes, float] = {}
        #: while a deleted object is converted: when (the ids it brings are its)
        self._deleting: float | None = None
        #: names of v2 agents that left (their banks are kept for their return),
        #: oldest first, at most _MAX_LEFT
        self._left: dict[str, None] = {}
        self._losing = False
        self._prefixes: dict[tuple[int, int], bytes] = {}
        #: the ids of ``oids`` by their agent's prefix and object name (the digest of
        #: a name computed once): an entry lives exactly as long as its id in ``oids``
        self._named: dict[bytes, dict[str, bytes]] = {}
        if previous is not None:
            self._banks = previous._banks
            self._next_bank = previous._next_bank
            self.oids = previous.oids
            self._named = previous._named
            self.deleted = previous.deleted
            self._left = previous._left
        self._converters: dict[ClassKey, V2RecordConverter] = {}
        #: indication messages waiting for schemas or their agent
        self.held = HeldIndications(self)
        #: classes whose schema could not be fetched: (when, seconds before asking again)
        self._failed: dict[ClassKey, tuple[float, float]] = {}
        self.topic_queue: str | None = None
        self._bound: list[tuple[str, str | None]] = []
        self._sync_lock = asyncio.Lock()  # one change of the bindings at a time
        self._located = asyncio.Event()
        #: what acts on each event of the core (see _dispatch)
        self.handlers: Handlers = {
            QueryPart: self._query_part,
            QueryDone: self._query_done,
            Reply: self._reply,
            RequestFailed: self._request_failed,
            RequestExpired: self._request_expired,
            AgentArrived: self._agent_arrived,
            HeartbeatReceived: self._heartbeat,
            AgentLeft: self._agent_left,
            AgentRestarted: self._agent_restarted,
            ObjectUpdate: self._objects,
            EventReceived: self._event,
            BodyMalformed: self._malformed,
            MessageUnhandled: self._unhandled,
        }
        self._indications = True

    @property
    def indications(self) -> bool:
        """False once the connection turned to v1 (the link only finishes its
        requests): its indications and heartbeats are then ignored."""
        return self._indications

    @indications.setter
    def indications(self, follow: bool) -> None:
        self._indications = follow
        acting: Handlers = {ObjectUpdate: self._objects, EventReceived: self._event,
                            HeartbeatReceived: self._heartbeat}
        for kind in _INDICATIONS:
            self.handlers[kind] = acting[kind] if follow else ignore

    # ------------------------------------------------------------------ connection

    async def setup(self, transport: TransportProtocol,
                    bindings: Sequence[tuple[str, str | None]]) -> None:
        """Per connection: an agent locate (its answers are waited for at most
        ``broker_timeout``: the agents are known before their indications come),
        then the indication endpoint on ``qmf.default.topic`` with ``bindings`` (see
        :func:`v2_bindings`).

        Raises:
            TransportError: the broker refused the endpoint or the request.
        """
        self._located.clear()
        out = self.core.send_locate(time.monotonic())
        await self.host.publish(out)
        timeout = self.host.session.options.broker_timeout
        try:
            await within(self._located.wait(), timeout)
        except TimeoutError:
            log.info("no QMF v2 agent answered the locate on %s within %ss", self.host.where,
                     timeout)
        plain = [(V2_TOPIC_EXCHANGE, k) for k, sel in bindings if sel is None]
        name = f"{names.CONSOLE_V2_TOPIC_PREFIX}{uuid.uuid4().hex[:16]}"
        self._bound = []
        self.topic_queue = await transport.open_endpoint(name, bindings=plain, no_ack=True)
        self._bound = [(k, None) for k, sel in bindings if sel is None]
        await self.sync(transport, bindings)

    async def sync(self, transport: TransportProtocol,
                   bindings: Sequence[tuple[str, str | None]]
                   | Callable[[], Sequence[tuple[str, str | None]]]) -> None:
        """Make the indication endpoint's bindings ``bindings`` (or what the callable
        returns when this change's turn comes): bind what is missing, unbind what is
        no longer wanted.

        Raises:
            TransportError: the broker refused.
        """
        async with self._sync_lock:
            topic = self.topic_queue
            if topic is None:
                return
            if callable(bindings):
                bindings = bindings()
            for key, selector in bindings:
                if (key, selector) not in self._bound:
                    # listed once in place (the lock keeps other changes out meanwhile)
                    await transport.bind(topic, V2_TOPIC_EXCHANGE, key, selector=selector)
                    self._bound.append((key, selector))
            for key, selector in [b for b in self._bound if b not in bindings]:
                self._bound.remove((key, selector))
                await transport.unbind(topic, V2_TOPIC_EXCHANGE, key, selector=selector)

    @property
    def bindings(self) -> list[tuple[str, str | None]]:
        """The bindings (key, selector) of the indication endpoint now (those the
        broker has confirmed)."""
        return list(self._bound)

    def connection_lost(self, error: QmfError) -> None:
        """Fail what is outstanding; every v2 agent leaves (their object ids are kept:
        the agents are expected back with the connection)."""
        self._losing = True
        try:
            self._handle(self.core.connection_lost(error))
        finally:
            self._losing = False
        self._waits.fail_all(error)
        self.held.clear()

    def close(self, error: QmfError) -> None:
        """The broker is removed: as :meth:`connection_lost` (which ends the answers'
        tasks), and the schema fetch of held indications ends."""
        self.connection_lost(error)
        self.held.close()

    def age(self, now: float) -> list[bytes]:
        """Age the agent directory (agents that stopped beating leave), and release
        the ids of objects deleted more than ``forget_deleted_after`` seconds ago;
        returns the ids released."""
        settings = self.host.session.options
        self.core.agent_interval = settings.agent_interval
        self.core.min_agent_interval = settings.min_agent_interval
        self.core.busy_grace = settings.timeout
        self.core.missed = settings.missed_heartbeats
        self._handle(self.core.age(now))
        deleted = self.deleted
        if not deleted:
            return []
        horizon = now - settings.forget_deleted_after
        released: list[bytes] = []
        for raw, when in deleted.items():
            if when > horizon:
                break
            released.append(raw)
            self._release(raw)
        for raw in released:
            del deleted[raw]
        return released

    def _release(self, raw: bytes) -> None:
        """Forget the id ``raw`` (and its name's entry)."""
        oid = self.oids.pop(raw, None)
        if oid is None:
            return
        named = self._named.get(raw[:8])
        if named is not None and named.get(oid.object_name) == raw:
            del named[oid.object_name]
            if not named:
                del self._named[raw[:8]]

    # ------------------------------------------------------------------ agents

    def name_of(self, who: RemoteAgent | tuple[int, int]) -> str | None:
        """The v2 name of an agent of this connection (given as an agent or its
        banks); None when it is not a v2 agent known here."""
        if isinstance(who, RemoteAgent):
            if id(who.broker) != id(self.host) or not who.name:
                return None
            return who.name
        agent = self.host.known_agent(who)
        return agent.name if agent is not None and agent.name else None

    def retire(self, gone: Iterable[bytes], alive: Iterable[bytes]) -> list[bytes]:
        """The objects of ids ``gone`` are no longer at their agent (a whole answer
        left them out): their ids are released ``forget_deleted_after`` seconds from
        now; those of ``alive`` stay.  Returns the ids of ``gone`` not known here."""
        deleted = self.deleted
        if deleted:
            for raw in alive:
                deleted.pop(raw, None)
        now, oids = time.monotonic(), self.oids
        unknown: list[bytes] = []
        for raw in gone:
            if raw not in oids:
                unknown.append(raw)
            elif raw not in deleted:
                deleted[raw] = now
        return unknown

    def _agent_gone(self, name: str, banks: tuple[int, int]) -> None:
        """A v2 agent other than qpidd's stopped beating: the ids of its objects are
        released after ``forget_deleted_after`` (unless it is back by then, and
        publishes them again); its banks are kept for its return, for the last
        _MAX_LEFT agents that left."""
        if banks != (1, 0):
            prefix = self._prefixes.get(banks)
            if prefix is not None:
                now, deleted = time.monotonic(), self.deleted
                for raw in [r for r in self.oids if r[:8] == prefix and r not in deleted]:
                    deleted[raw] = now
        left = self._left
        left.pop(name, None)
        left[name] = None
        while len(left) > _MAX_LEFT:
            oldest = next(iter(left))
            del left[oldest]
            was = self._banks.get(oldest)
            if was is not None and self.host.known_agent(was) is None:
                del self._banks[oldest]
                if was not in self._banks.values():
                    self._prefixes.pop(was, None)

    def _banks_of(self, name: str) -> tuple[int, int]:
        self._left.pop(name, None)
        banks = self._banks.get(name)
        if banks is None:
            if name.startswith(_QPIDD_PREFIX):
                # the broker's own agent (a connection reaches one qpidd; a restarted
                # one with a new name takes over its banks)
                banks = (1, 0)
                for other in [n for n, b in self._banks.items() if b == banks]:
                    del self._banks[other]
            else:
                banks = (0, self._next_bank)
                self._next_bank += 1
            self._banks[name] = banks
        return banks

    def agent(self, name: str | None) -> RemoteAgent | None:
        """The known agent of this v2 name (``broker``: qpidd's own)."""
        if name is None:
            return None
        if name == "broker":
            return self.host.known_agent((1, 0))
        banks = self._banks.get(name)
        return self.host.known_agent(banks) if banks is not None else None

    # ------------------------------------------------------------------ dispatch

    def dispatch(self, delivery: Delivery) -> None:
        """Feed one v2 message to the core and act on what it says."""
        events = self.core.feed(delivery, time.monotonic())
        if events:
            handle(self.handlers, events, self.host.where, log)

    def _handle(self, events: Iterable[Any]) -> None:
        handle(self.handlers, events, self.host.where, log)

    def _finish(self, cid: str, result: Any = None, error: BaseException | None = None) -> None:
        wait = self._waits.finish(cid)
        if wait is None:
            return
        stream: V2Answer | None = wait.stream
        if stream is not None:
            if error is not None:
                stream.fail(error)
            else:
                stream.push(result.items)
                stream.end()
            return
        fut = wait.future
        if fut.done():
            return
        if error is not None:
            fut.set_exception(error)
        else:
            fut.set_result(result)

    def _query_part(self, ev: QueryPart) -> None:
        wait = self._waits.get(ev.request)
        if wait is not None and wait.stream is not None:
            wait.stream.push(ev.items)

    def _query_done(self, ev: QueryDone) -> None:
        if ev.code == 0:
            self._finish(str(ev.request), ev)
        else:
            self._finish(str(ev.request), error=MethodError(
                ev.code if ev.code is not None else 7, ev.text or "QMF v2 exception"))

    def _reply(self, ev: Reply) -> None:
        msg = ev.message
        if type(msg) is V2Exception:
            self._finish(str(ev.request), error=MethodError(
                msg.error_code if msg.error_code is not None else 7,
                msg.error_text or "QMF v2 exception"))
        else:
            self._finish(str(ev.request), ev)

    def _request_failed(self, ev: RequestFailed) -> None:
        self._finish(str(ev.request), error=ev.error)

    def _request_expired(self, ev: RequestExpired) -> None:
        self._finish(str(ev.request), error=QmfTimeout(f"QMF v2 request {ev.request} expired"))

    def _agent_arrived(self, ev: AgentArrived) -> None:
        name = str(ev.agent)
        banks = self._banks_of(name)
        agent = RemoteAgent(self.host, banks[0], banks[1], name,  # type: ignore[arg-type]
                            self.host.where, name=name)
        self._located.set()
        self.agents.v2_arrived(agent)
        lane = (name, False)
        if self.held.end_agent_wait(lane):
            self.held.pump(lane)  # its objects waited for it

    def _heartbeat(self, ev: HeartbeatReceived) -> None:
        name = ev.agent
        beat_banks = self._banks.get(name) if isinstance(name, str) else None
        if beat_banks is not None:
            self.beats.v2_beat_of(beat_banks)
        if self.host.session.options.rcv_heartbeats:
            beating = (self.host.known_agent(beat_banks) if beat_banks is not None
                       else None)
            if beating is not None and beating.name == name:
                stamp = ev.timestamp if ev.timestamp is not None else time.time_ns()
                self.host.emit(HeartbeatSeen(beating, stamp))

    def _agent_left(self, ev: AgentLeft) -> None:
        name = str(ev.agent)
        known = self._banks.get(name)
        if known is not None:
            self.agents.v2_left(known)
            if not self._losing:
                self._agent_gone(name, known)

    def _agent_restarted(self, ev: AgentRestarted) -> None:
        log.info("QMF v2 agent %s on %s restarted (epoch %s -> %s)", ev.agent,
                 self.host.where, ev.old_epoch, ev.new_epoch)

    def _objects(self, ev: ObjectUpdate) -> None:
        if self.host.owner.follows_objects():
            self.held.hold((ev.agent, False), list(ev.items))  # type: ignore[arg-type]

    def _event(self, ev: EventReceived) -> None:
        if self.host.owner.follows_events():
            self.held.hold((ev.agent, True), [ev.message])  # type: ignore[arg-type]

    def _malformed(self, ev: BodyMalformed) -> None:
        session = self.host.session
        session.malformed += 1
        warn_limited(log, session.malformed, "malformed QMF v2 message from %s (%s) "
                     "dropped: %s", self.host.where, ev.routing_key, ev.error)

    def _unhandled(self, ev: MessageUnhandled) -> None:
        log.debug("QMF v2 message not acted on from %s: %r", self.host.where, ev.message)

    # ------------------------------------------------------------------ schemas

    @staticmethod
    def class_key(sid: V2SchemaId | None) -> ClassKey | None:
        """The v1 class key of a v2 schema id (None without a usable hash)."""
        return v2_class_key(sid)

    def _schema(self, key: ClassKey) -> SchemaClass | None:
        found: SchemaClass | None = self.host.session.schemas.get(key)
        return found

    async def fetch_schemas(self, keys: Iterable[ClassKey],
                            agent: RemoteAgent | None = None) -> None:
        """Fetch (v1 ``S``, to ``agent`` and to the management broker) the schemas of
        ``keys`` not in the cache; one that cannot be fetched is not asked for again
        before ``completion_timeout``, then twice as long each time (up to a
        minute); meanwhile its objects are dropped and counted."""
        session = self.host.session
        now = time.monotonic()
        missing = [k for k in dict.fromkeys(keys) if self._schema(k) is None
                   and now >= self._retry_at(k)]
        if not missing:
            return
        wait = session.options.schema_timeout
        found = await asyncio.gather(*(self.host.fetch_v1_schema(k, wait, agent)
                                       for k in missing), return_exceptions=True)
        for key, schema in zip(missing, found, strict=True):
            if isinstance(schema, SchemaClass):
                self.host.emit(SchemaArrived(schema))
                self._failed.pop(key, None)
            else:
                # asked again after completion_timeout, doubling up to a minute
                previous = self._failed.get(key)
                window = (min(previous[1] * 2, _MAX_RETRY) if previous is not None
                          else session.options.completion_timeout)
                self._failed[key] = (time.monotonic(), window)
                level = logging.DEBUG if self.host.closing else logging.WARNING
                log.log(level, "schema %s of QMF v2 data from %s could not be fetched: %s",
                        key, self.host.where, schema)

    def missing(self, items: list[Any]) -> set[ClassKey]:
        """Classes of ``items`` whose schema is neither known nor lately failed."""
        now = time.monotonic()
        out: set[ClassKey] = set()
        # the objects of a message share their class's schema id (one object): each
        # run of the same one looked up once, with no hashing of the ids
        last: object = _NOTHING
        for item in items:
            sid = getattr(item, "schema_id", None)
            if sid is last:
                continue
            last = sid
            key = self.class_key(sid)
            if key is not None and key not in out and self._schema(key) is None \
                    and now >= self._retry_at(key):
                out.add(key)
        return out

    def _retry_at(self, key: ClassKey) -> float:
        """When the schema of ``key`` may be asked for again (after a failure)."""
        failed = self._failed.get(key)
        return -1e18 if failed is None else failed[0] + failed[1]

    # ------------------------------------------------------------------ conversion

    def object_id(self, banks: tuple[int, int], oid: V2ObjectId) -> bytes:
        """The v1 id bytes standing for ``oid`` on this connection (remembered)."""
        return self.name_id(banks, oid.object_name, oid=oid)

    def name_id(self, banks: tuple[int, int], name: str, epoch: int | None = None, *,
                oid: V2ObjectId | None = None) -> bytes:
        """The v1 id bytes standing for the object named ``name`` on this connection,
        remembered with its v2 id (``oid``, else the name and ``epoch``): the agent's
        banks, then a 64-bit digest of the name."""
        prefix = self._prefixes.get(banks)
        if prefix is None:
            prefix = self._prefixes[banks] = ObjectId.make(
                broker_bank=banks[0], agent_bank=banks[1]).raw[:8]
        named = self._named.get(prefix)
        if named is not None:
            known = named.get(name)
            if known is not None:  # in oids (entries leave together)
                return known
        raw = prefix + hashlib.blake2b(name.encode("utf-8", "surrogatepass"),
                                       digest_size=8).digest()
        oids = self.oids
        if raw not in oids:
            if len(oids) >= _MAX_OIDS:
                self._release(next(iter(oids)))
            oids[raw] = oid if oid is not None else V2ObjectId(name, None, epoch)
            if self._deleting is not None:  # first seen in a deletion: goes with it
                self.deleted[raw] = self._deleting
        elif oids[raw].object_name != name:  # another name of the same digest
            return raw
        if named is None:
            named = self._named[prefix] = {}
        named[name] = raw
        return raw

    def record(self, data: V2Data, banks: tuple[int, int]) -> RawObjectRecord | None:
        """``data`` as a v1 record of its class (None: its schema is not known).

        Raises:
            DecodeError: no object or schema id, or values that do not fit the schema.
        """
        key = v2_class_key(data.schema_id)
        if key is None or data.object_id is None:
            raise DecodeError("QMF v2 object without an object id or schema hash")
        conv = self._converters.get(key)
        if conv is None:
            schema = self._schema(key)
            if schema is None:
                return None
            conv = self._converters[key] = V2RecordConverter(
                schema, self.host.session.schemas.codec(schema), self.object_id)
        if not data.delete_ts:
            rec = conv.record(data, banks)
            if self.deleted:  # alive (again): its id stays
                self.deleted.pop(rec.object_id_bytes, None)
            return rec
        # a deletion: the object's id, and those first seen in it, are released
        # forget_deleted_after seconds from now
        self._deleting = now = time.monotonic()
        try:
            rec = conv.record(data, banks)
        finally:
            self._deleting = None
        raw = rec.object_id_bytes
        self.deleted.pop(raw, None)
        self.deleted[raw] = now
        return rec

    def event(self, ev: V2Event, agent: RemoteAgent | None) -> Event:
        """A v2 event as the session's :class:`Event` (texts decoded by its schema when
        the schema is known)."""
        key = self.class_key(ev.schema_id) or ClassKey(ev.schema_id.package,
                                                        ev.schema_id.class_name, bytes(16))
        schema = self._schema(key)
        if schema is not None:
            args = texts_from_schema(ev.values, schema)
        else:
            args = {k: (bytes(v).decode("utf-8", "replace")
                        if isinstance(v, (bytes, bytearray)) else v)
                    for k, v in ev.values.items()}
        ts = ev.timestamp if ev.timestamp is not None else time.time_ns()
        severity = ev.severity if ev.severity is not None else 6
        return Event(key, ts, severity, args, agent, schema)

    # ------------------------------------------------------------------ requests

    async def send_query(self, agent: RemoteAgent, query: Mapping[str, Any],
                         sink: Callable[[RawObjectRecord], None],
                         where: list[Any] | None = None) -> Wait:
        """Start a ``_query_request`` for what ``query`` (a v1 ``G`` map) asks; the
        wait completes once every object of the answer went to ``sink``.  ``where``
        (a ``_where`` predicate) goes to agents other than qpidd's, which ignores it.
        The caller awaits the wait and closes it.

        Raises:
            NotConnectedError, TransportError: not sent.
        """
        object_id: V2ObjectId | None = None
        schema_id: V2SchemaId | None = None
        if "_objectid" in query:
            object_id = self.oids.get(ObjectId.parse(str(query["_objectid"])).raw)
            if object_id is None:  # never seen over v2 here: nobody holds it
                done = self._waits.open(None)
                done.future.set_result(None)
                return done
        else:
            schema_id = V2SchemaId(str(query.get("_package") or ""), str(query["_class"]))
            await self._prefetch(schema_id, agent)
        if agent.name.startswith(_QPIDD_PREFIX):
            where = None
        self.host.check()
        out = self.core.send_query(agent.name or None, schema_id=schema_id,
                                   object_id=object_id, where=where, stream=True)
        wait = self._waits.open(_cid(out))
        wait.stream = answer = V2Answer(self, agent, sink, wait.future)
        wait.on_close = answer.cancel
        return await self._waits.send(wait, out)

    async def _prefetch(self, sid: V2SchemaId, agent: RemoteAgent) -> None:
        """Before the first query of a class, fetch its schemas (the class list of its
        package, ``Q``, then ``S``) through this link's broker (never through the
        session): the answer's parts can then be converted as they arrive instead of
        waiting, decoded, for a schema request that the agent answers only after the
        whole query (qpidd serves one request at a time).  Failing here costs nothing:
        the parts then wait for their schemas."""
        session = self.host.session
        name, package = sid.class_name, sid.package
        if any(s.class_key.name == name and (not package or s.class_key.package == package)
               for s in session.schemas):
            return
        timeout = session.options.schema_timeout
        try:
            keys = await self.host.classes_named(name, package or None, timeout)
            await self.fetch_schemas(keys, agent)
        except QmfError as exc:
            log.debug("schemas of %s not fetched ahead of the query: %s", name, exc)

    def convert_into(self, items: Iterable[Any], banks: tuple[int, int],
                     sink: Callable[[RawObjectRecord], None]) -> None:
        """Convert the objects among ``items`` and hand them to ``sink`` (those that
        do not fit their schema, or whose schema is unknown, counted and dropped)."""
        session = self.host.session
        record = self.record
        for item in items:
            if type(item) is not V2Data:
                continue
            try:
                rec = record(item, banks)
            except DecodeError as exc:
                session.malformed += 1
                log.warning("QMF v2 object from %s dropped: %s", self.host.where, exc)
                continue
            if rec is None:
                session.held_dropped += 1
                continue
            sink(rec)

    def _wire_args(self, method: SchemaMethod, args: Mapping[str, Any]) -> dict[str, Any]:
        """Input arguments as v2 carries them: a reference (an ObjectId) as the v2 id
        map of the object it stands for.

        Raises:
            ObjectGoneError: a reference to an object not known over v2 here.
        """
        refs = {a.name for a in method.in_args if a.type == QmfType.REF}
        out = dict(args)
        for name in refs:
            value = out.get(name)
            if isinstance(value, ObjectId):
                oid = self.oids.get(value.raw)
                if oid is None:
                    raise ObjectGoneError(1, f"argument {name!r}: object {value} is not known "
                                             f"over QMF v2 on {self.host.where}")
                out[name] = oid.to_map()
        return out

    async def call(self, raw_oid: bytes, agent: RemoteAgent | None, schema: SchemaClass,
                   method: SchemaMethod, args: Mapping[str, Any], timeout: float) -> MethodResult:
        """Call ``method`` on the object of v1 id bytes ``raw_oid`` over v2.

        Raises:
            ObjectGoneError: the object's v2 id is not known here.
            AgentGoneError: its agent left.
            MethodError: the agent answered with an exception.
            QmfTimeout: no answer within ``timeout``.
            NotConnectedError, TransportError: not sent, or the connection was lost.
        """
        oid = self.oids.get(raw_oid)
        if oid is None:
            raise ObjectGoneError(1, f"{schema.class_key.name} object {ObjectId(raw_oid)} is not "
                                  f"known over QMF v2 on {self.host.where} (query it again)")
        banks = ObjectId(raw_oid).agent_key()
        target = self.host.known_agent(banks)
        if target is None:
            raise AgentGoneError(f"the agent of {oid.object_name!r} on {self.host.where} "
                                 f"is gone")
        wire_oid = oid if oid.agent_name else V2ObjectId(oid.object_name, target.name or None,
                                                        oid.agent_epoch)
        out = self.core.send_method(target.name or None, wire_oid, method.name,
                                    self._wire_args(method, args))
        try:
            ev = await self._waits.request(_cid(out), out, timeout)
        except Expired:  # its error built here: no closure per call
            raise QmfTimeout(f"{schema.class_key.name}.{method.name} on {oid.object_name}: "
                             f"no response within {timeout}s") from None
        got = texts_from_schema(ev.message.arguments, method)
        # in the schema's order, as over v1 (qpidd sends the map sorted by name)
        ordered = {a.name: got.pop(a.name) for a in method.out_args if a.name in got}
        ordered.update(got)
        return MethodResult(0, "OK", ordered)
