"""The console's protocol core for QMF v2 (map messages).  No I/O.

:class:`ConsoleProtocolV2` holds, as plain data, what a console knows about the v2
side of one broker connection: its outstanding requests by correlation id (a
query gathers every ``partial`` part of its answer until the last), the agent
directory fed by heartbeats and locate answers, with aging.

Messages go in (:meth:`ConsoleProtocolV2.receive`: application properties, decoded
body, subject, correlation id), events come out (the values of :mod:`._events`, the
vocabulary the v1 core speaks too: requests named by correlation id, agents by name);
requests are built by the ``send_*`` methods and returned as
:class:`~._envelope.Outgoing`, never sent.  Time is passed in (``now``, any monotonic
clock in seconds).

Addressing (what qpidd accepts): requests go to ``qmf.default.direct`` with the
agent's name as subject; qpidd's own agent also answers on the alias ``broker``
(it then names itself ``broker`` in its answers).  Agent locate goes to
``qmf.default.topic`` under ``console.request.agent_locate``; every agent answers
on the console's reply address.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from .. import names
from ..errors import AgentGoneError, DecodeError, ProtocolError, QmfError, UsageError
from ..wire import (
    V2_BODY_CONTENT_TYPES,
    QmfType,
    SchemaClass,
    SchemaMethod,
    V2AgentHeartbeat,
    V2AgentLocateRequest,
    V2AgentLocateResponse,
    V2DataIndication,
    V2EventIndication,
    V2Exception,
    V2MethodRequest,
    V2MethodResponse,
    V2ObjectId,
    V2QueryRequest,
    V2QueryResponse,
    V2SchemaId,
    decode_v2,
    decode_v2_body,
    encode_v2,
)
from ._agents import AgentDirectory
from ._envelope import Delivery, Outgoing
from ._events import (
    AgentArrived,
    AgentLeft,
    AgentRestarted,
    BodyMalformed,
    Event,
    EventReceived,
    HeartbeatReceived,
    MessageUnhandled,
    ObjectUpdate,
    QueryDone,
    QueryPart,
    Reply,
    RequestExpired,
    RequestFailed,
)

__all__ = [
    "BROKER_ADDRESS",
    "V2AgentInfo",
    "ConsoleProtocolV2",
    "texts_from_schema",
]

#: the subject under which qpidd's own agent answers (whatever its name)
BROKER_ADDRESS: Final = names.BROKER_KEY

_QUERY: Final = "query"
_METHOD: Final = "method"
_LOCATE: Final = "locate"
_STRING_TYPES: Final = frozenset({QmfType.SSTR, QmfType.LSTR})
#: a heartbeat interval beyond this (s) is taken as this (a day)
_MAX_INTERVAL: Final = 86_400


class V2AgentInfo:
    """What the directory knows of one v2 agent (times in the caller's clock;
    ``interval`` in seconds; ``values`` as last announced)."""

    __slots__ = ("epoch", "instance", "interval", "last_seen", "name", "product", "timestamp",
                 "values", "vendor")

    def __init__(self, name: str, now: float, interval: float) -> None:
        self.name = name
        self.vendor: str | None = None
        self.product: str | None = None
        self.instance: str | None = None
        self.epoch: int | None = None
        self.timestamp: int | None = None
        self.values: Mapping[str, Any] = {}
        self.interval = interval
        self.last_seen = now

    def __repr__(self) -> str:
        return f"<V2AgentInfo {self.name!r} epoch={self.epoch} interval={self.interval:.3g}>"


class _Pending:
    """One outstanding request.  A query whose answer grew past the limit is
    ``draining``: it was already failed, and its remaining parts are read and
    dropped until the last one."""

    __slots__ = ("agent", "cid", "count", "deadline", "draining", "items", "kind", "stream")

    def __init__(self, cid: str, kind: str, agent: str | None, deadline: float | None,
                 stream: bool = False) -> None:
        self.cid = cid
        self.kind = kind
        self.agent = agent
        self.deadline = deadline
        self.items: list[Any] = []
        self.draining = False
        #: a streamed query hands each part out as it comes (items stays empty)
        self.stream = stream
        #: items received so far (streamed or gathered)
        self.count = 0


def texts_from_schema(values: Mapping[str, Any],
                      schema: SchemaClass | SchemaMethod) -> dict[str, Any]:
    """``values`` with the bytes of string-typed elements decoded as UTF-8 text.

    qpidd sends every text inside ``_values`` and ``_arguments`` as AMQP binary; only
    the v1 schema tells a string from real binary.  The string-typed elements
    (``sstr``/``lstr``) of ``schema`` are its properties, statistics and (event)
    arguments for a class, its arguments for a method.  Other values, names the
    schema does not know and bytes that are not UTF-8 are left as they are.
    """
    if isinstance(schema, SchemaMethod):
        elements: Any = schema.arguments
    else:
        elements = (*schema.properties, *schema.statistics, *schema.arguments)
    names = {e.name for e in elements if e.type in _STRING_TYPES}
    out = dict(values)
    for name in names:
        value = out.get(name)
        if isinstance(value, (bytes, bytearray, memoryview)):
            try:
                out[name] = bytes(value).decode("utf-8")
            except UnicodeDecodeError:
                pass
    return out


def _text_or_none(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray)):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            return None
    return None


class ConsoleProtocolV2:
    """The v2 protocol state of one console <-> broker connection.

    Limits: ``max_query_items`` objects gathered per query answer (past it the
    query fails and the rest of its answer is dropped); ``max_agents`` agents in
    the directory (heartbeats of further agents are dropped and counted).
    ``agent_interval`` is the heartbeat interval assumed for an agent that does
    not say; an agent is gone after ``missed`` intervals of silence, plus
    ``busy_grace`` seconds while a request to it is outstanding.

    Counters: ``dropped`` answers nobody waits for (unknown, cancelled, expired
    requests, or failed ones after their last part), ``drained`` parts of failed
    query answers read to their end, ``malformed`` messages that did not decode,
    ``unhandled`` well-formed messages not acted on, ``agents_refused``.
    """

    def __init__(self, *, start_cid: int = 1, max_query_items: int = 1_000_000,
                 agent_interval: float = 10.0, min_agent_interval: float = 0.1,
                 missed: int = 3, max_agents: int = 10_000, busy_grace: float = 0.0) -> None:
        if max_query_items < 1:
            raise UsageError("max_query_items must be at least 1")
        if missed < 1:
            raise UsageError("missed must be at least 1")
        self.max_query_items = max_query_items
        self.agent_interval = agent_interval
        self.min_agent_interval = min_agent_interval
        self.missed = missed
        self.max_agents = max_agents
        self.busy_grace = busy_grace
        self._next_cid = start_cid
        self._pending: dict[str, _Pending] = {}
        #: the agents of this connection (the one directory and aging rule, _agents.py)
        self.directory: AgentDirectory[str, V2AgentInfo] = AgentDirectory()
        #: agents known on this connection, by name, in the order they arrived
        self.agents = self.directory.agents
        self.dropped = 0
        self.drained = 0
        self.malformed = 0
        self.unhandled = 0
        self.agents_refused = 0

    def __len__(self) -> int:
        """How many requests are outstanding (a failed query still draining is not)."""
        return sum(1 for entry in self._pending.values() if not entry.draining)

    def __contains__(self, cid: object) -> bool:
        entry = self._pending.get(cid) if isinstance(cid, str) else None
        return entry is not None and not entry.draining

    # ------------------------------------------------------------------ requests

    def _new_cid(self) -> str:
        while True:
            cid = str(self._next_cid)
            self._next_cid += 1
            if cid not in self._pending:
                return cid

    def _register(self, kind: str, agent: str | None, deadline: float | None,
                  stream: bool = False) -> str:
        cid = self._new_cid()
        self._pending[cid] = _Pending(cid, kind, agent, deadline, stream)
        return cid

    @staticmethod
    def _outgoing(msg: Any, exchange: str, subject: str) -> Outgoing:
        headers, body, cid = encode_v2(msg)
        assert cid is not None
        return Outgoing(exchange, subject, body, headers=headers, correlation=cid)

    def send_locate(self, now: float, deadline: float | None = None) -> Outgoing:
        """An agent locate request to every agent.

        Answers update the directory whenever they come.  With a ``deadline`` the
        request is tracked: :meth:`expired` reports it then, with the names of the
        agents that answered.  ``now`` is accepted for symmetry with the other
        clock-driven calls; nothing depends on the send time.
        """
        del now
        if deadline is None:
            cid = self._new_cid()
        else:
            cid = self._register(_LOCATE, None, deadline)
        return self._outgoing(V2AgentLocateRequest({}, cid), names.V2_TOPIC_EXCHANGE,
                              names.LOCATE_SUBJECT)

    def send_query(self, agent: str | None, *, what: str = "OBJECT",
                   schema_id: V2SchemaId | None = None, object_id: V2ObjectId | None = None,
                   where: Any = None, deadline: float | None = None,
                   stream: bool = False) -> Outgoing:
        """A ``_query_request`` to ``agent`` (its name; None or ``broker``: qpidd's
        own agent).  The answer comes as one :class:`QueryDone` (code 0; another code
        for an ``_exception``), or :class:`RequestFailed`, :class:`RequestExpired`.
        With ``stream`` every part but the last comes as a :class:`QueryPart` when it
        arrives and the :class:`QueryDone` holds the last part's items only, so a
        large answer is not held whole (the failure events then carry no items).

        Raises:
            UsageError: an empty agent name.
            EncodeError: ``where`` holds a value with no AMQP encoding (nothing is
                registered).
        """
        subject = self._address(agent)
        cid = self._register(_QUERY, subject, deadline, stream)
        try:
            return self._outgoing(V2QueryRequest(what, where, schema_id, object_id, cid),
                                  names.V2_DIRECT_EXCHANGE, subject)
        except BaseException:
            self._pending.pop(cid, None)
            raise

    def send_method(self, agent: str | None, object_id: V2ObjectId, method: str,
                    arguments: Mapping[str, Any], deadline: float | None = None, *,
                    subtypes: Mapping[str, Any] | None = None) -> Outgoing:
        """A ``_method_request`` calling ``method`` of ``object_id`` on ``agent``;
        answered by a :class:`Reply` of its ``_method_response`` (or its ``_exception``).

        Raises:
            UsageError: an empty agent or method name.
        """
        if not method:
            raise UsageError("a method name is required")
        subject = self._address(agent)
        cid = self._register(_METHOD, subject, deadline)
        msg = V2MethodRequest(object_id, method, dict(arguments), subtypes, cid)
        try:
            return self._outgoing(msg, names.V2_DIRECT_EXCHANGE, subject)
        except BaseException:
            self._pending.pop(cid, None)
            raise

    @staticmethod
    def _address(agent: str | None) -> str:
        if agent is None:
            return BROKER_ADDRESS
        if not agent:
            raise UsageError("an agent name must not be empty")
        return agent

    def cancel(self, cid: str) -> bool:
        """Forget request ``cid`` (its answers are dropped and counted); returns
        whether it was outstanding."""
        entry = self._pending.pop(cid, None)
        return entry is not None and not entry.draining

    def expired(self, now: float) -> list[RequestExpired]:
        """Release the requests whose deadline is not after ``now``: one
        :class:`RequestExpired` each, with the partial answer gathered so far.
        Failed queries still draining are released silently."""
        out: list[RequestExpired] = []
        for cid, entry in list(self._pending.items()):
            if entry.deadline is not None and entry.deadline <= now:
                del self._pending[cid]
                if not entry.draining:
                    out.append(RequestExpired(cid, entry.kind, entry.items))
        return out

    def connection_lost(self, error: QmfError) -> list[Event]:
        """The connection ended: every request fails with ``error``
        (:class:`RequestFailed`) and every agent leaves (:class:`AgentLeft`)."""
        events: list[Event] = []
        for cid, entry in self._pending.items():
            if not entry.draining:
                events.append(RequestFailed(cid, error, entry.items))
        self._pending.clear()
        why = f"connection lost: {error}"
        events.extend(AgentLeft(name, why) for name in self.directory.clear())
        return events

    def close(self, error: QmfError) -> list[Event]:
        """The console closes: as :meth:`connection_lost`."""
        return self.connection_lost(error)

    def pending(self) -> list[str]:
        """Correlation ids of the outstanding requests, oldest first."""
        return [cid for cid, entry in self._pending.items() if not entry.draining]

    # ------------------------------------------------------------------ agents

    def age(self, now: float) -> list[Event]:
        """Agents silent for more than ``missed`` times their interval leave
        (:class:`AgentLeft`), ``busy_grace`` seconds later when a request to
        them is outstanding; requests addressed to them fail
        (:class:`RequestFailed` with :class:`~qmf_async.errors.AgentGoneError`)."""
        events: list[Event] = []
        # an agent still owing an answer gets ``busy_grace`` more: a busy agent (qpidd
        # building a large answer) may skip heartbeats
        waited_on = {entry.agent for entry in self._pending.values() if not entry.draining}
        busy = self.busy_grace
        directory = self.directory
        for name, silent in directory.silent(
                now, self.missed, self.min_agent_interval,
                grace=lambda name: busy if name in waited_on else 0.0):
            why = f"no heartbeat for {silent:.3g} s"
            directory.leave(name, why)
            events.append(AgentLeft(name, why))
            error = AgentGoneError(f"QMF v2 agent {name!r} left (no heartbeat)")
            for cid, entry in list(self._pending.items()):
                if entry.agent == name:
                    del self._pending[cid]
                    if not entry.draining:
                        events.append(RequestFailed(cid, error, entry.items))
        return events

    def _agent_seen(self, msg: V2AgentHeartbeat | V2AgentLocateResponse, now: float,
                    events: list[Event]) -> bool:
        name = msg.agent
        interval = msg.heartbeat_interval
        seconds = (float(min(interval, _MAX_INTERVAL)) if interval is not None and interval > 0
                   else self.agent_interval)
        seconds = max(seconds, self.min_agent_interval)
        info = self.agents.get(name)
        epoch = msg.epoch
        if info is None:
            if len(self.agents) >= self.max_agents:
                self.agents_refused += 1
                return False
            info = V2AgentInfo(name, now, seconds)
            self.directory.add(name, info)
            self._update(info, msg, seconds, now)
            events.append(AgentArrived(name, name, info.vendor, info.product, info.instance,
                                       info.epoch, info.interval))
            return True
        if epoch is not None and info.epoch is not None and epoch != info.epoch:
            events.append(AgentRestarted(name, info.epoch, epoch))
        self._update(info, msg, seconds, now)
        return True

    @staticmethod
    def _update(info: V2AgentInfo, msg: V2AgentHeartbeat | V2AgentLocateResponse,
                seconds: float, now: float) -> None:
        info.values = msg.values
        info.vendor = msg.vendor if msg.vendor is not None else info.vendor
        info.product = msg.product if msg.product is not None else info.product
        info.instance = msg.instance if msg.instance is not None else info.instance
        if msg.epoch is not None:
            info.epoch = msg.epoch
        if msg.timestamp is not None:
            info.timestamp = msg.timestamp
        info.interval = seconds
        info.last_seen = now

    # ------------------------------------------------------------------ receive

    def feed(self, delivery: Delivery, now: float) -> list[Event]:
        """One delivery: :meth:`receive` of its headers, value or bytes, subject and
        correlation id."""
        return self.receive(delivery.headers, delivery.value, body=delivery.body,
                            content_type=delivery.content_type, subject=delivery.routing_key,
                            correlation_id=delivery.correlation_id, now=now)

    def receive(self, headers: Mapping[str, Any] | None, value: Any, *,
                body: bytes = b"", content_type: str | None = None,
                subject: str | None = None, correlation_id: Any = None,
                now: float) -> list[Event]:
        """Interpret one received message; never raises on what a peer sent.

        ``value`` is the body as the AMQP library decoded it (an AMQP 1.0
        amqp-value); a body of bytes in ``content_type`` ``amqp/map``/``amqp/list``
        (AMQP 0-9-1) is decoded here.  Returns the events it causes (often none: a
        query part that is not the last only adds to its answer).
        """
        events: list[Event] = []
        cid = _cid_text(correlation_id)
        try:
            if value is None and content_type in V2_BODY_CONTENT_TYPES:
                value = decode_v2_body(content_type, body)
            msg = decode_v2(headers if headers is not None else {}, value, subject=subject,
                            correlation_id=cid)
        except DecodeError as exc:
            self._malformed(headers, subject, exc, events)
            return events
        except (TypeError, ValueError, KeyError, AttributeError) as exc:
            err = DecodeError(f"malformed QMF v2 message: {type(exc).__name__}: {exc}")
            self._malformed(headers, subject, err, events)
            return events
        agent = getattr(msg, "agent", None)
        if isinstance(agent, str):
            known = self.agents.get(agent)
            if known is not None:
                known.last_seen = now
        if isinstance(msg, V2QueryResponse):
            self._query_part(msg, cid, events)
        elif isinstance(msg, V2MethodResponse):
            entry = self._pending.get(cid) if cid is not None else None
            if entry is None or entry.kind != _METHOD:
                self.dropped += 1
            else:
                del self._pending[entry.cid]
                events.append(Reply(entry.cid, msg))
        elif isinstance(msg, V2Exception):
            self._exception(msg, cid, events)
        elif isinstance(msg, (V2AgentHeartbeat, V2AgentLocateResponse)):
            seen = self._agent_seen(msg, now, events)
            if seen and isinstance(msg, V2AgentHeartbeat):
                events.append(HeartbeatReceived(msg.agent, msg.timestamp))
            if seen and isinstance(msg, V2AgentLocateResponse):
                entry = self._pending.get(cid) if cid is not None else None
                if entry is not None and entry.kind == _LOCATE:
                    entry.items.append(msg.agent)
        elif isinstance(msg, V2DataIndication):
            events.append(ObjectUpdate(msg.agent, None, msg.items))
        elif isinstance(msg, V2EventIndication):
            events.extend(EventReceived(msg.agent, event) for event in msg.events)
        else:
            self.unhandled += 1
            events.append(MessageUnhandled(msg))
        return events

    def _malformed(self, headers: Any, subject: str | None, error: QmfError,
                   events: list[Event]) -> None:
        self.malformed += 1
        opcode = None
        if isinstance(headers, Mapping):
            try:
                opcode = _text_or_none(headers.get("qmf.opcode"))
            except (TypeError, ValueError, KeyError, AttributeError):
                opcode = None
        events.append(BodyMalformed(subject, error, opcode))

    def _query_part(self, msg: V2QueryResponse, cid: str | None,
                    events: list[Event]) -> None:
        entry = self._pending.get(cid) if cid is not None else None
        if entry is None or entry.kind != _QUERY:
            self.dropped += 1
            return
        if entry.draining:
            self.drained += 1
            if not msg.partial:
                del self._pending[entry.cid]
            return
        if entry.count + len(msg.items) > self.max_query_items:
            gathered = entry.items
            entry.items = []
            entry.draining = True
            if not msg.partial:
                del self._pending[entry.cid]
            error = ProtocolError(
                f"QMF v2 query {entry.cid} answer exceeds max_query_items="
                f"{self.max_query_items} (the rest of it is dropped)")
            events.append(RequestFailed(entry.cid, error, gathered))
            return
        entry.count += len(msg.items)
        if entry.stream:
            if msg.partial:
                events.append(QueryPart(entry.cid, list(msg.items), msg.agent))
            else:
                del self._pending[entry.cid]
                events.append(QueryDone(entry.cid, list(msg.items), agent=msg.agent))
            return
        entry.items.extend(msg.items)
        if not msg.partial:
            del self._pending[entry.cid]
            events.append(QueryDone(entry.cid, entry.items, agent=msg.agent))

    def _exception(self, msg: V2Exception, cid: str | None, events: list[Event]) -> None:
        entry = self._pending.get(cid) if cid is not None else None
        if entry is None or entry.kind == _LOCATE:
            self.dropped += 1
            return
        del self._pending[entry.cid]
        if entry.draining:
            self.drained += 1
        elif entry.kind == _QUERY:
            # a failure's code is never 0 (that is success): absent, or 0, it is None
            events.append(QueryDone(entry.cid, [], msg.error_code or None, msg.error_text,
                                    msg.agent))
        else:
            events.append(Reply(entry.cid, msg))


def _cid_text(value: Any) -> str | None:
    """A received correlation id as the text this core hands out (None when it
    cannot be one of ours)."""
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray)):
        return _text_or_none(value)
    return None

