"""Hostile input against live peers: malformed bodies, oversized messages and maps, and
agents that lie, sent by raw publishers of the tests to a live console and a live agent.

RabbitMQ (AMQP 0-9-1): the management-broker role and the demo agent
(``examples/demo_agent.py``) on a private vhost of this module, a :class:`Session`, and
a raw aiormq publisher that writes whatever bytes it likes to the console's reply
queue, to the topic bindings and to the agents' request keys.  The lying agents are
fakes of the tests on the project's own transport, speaking raw v1 bodies.
qpidd (AMQP 1.0): a raw client (``tests/qmf2_raw.py``) sends the same kinds of
garbage to a session's reply address and topic bindings and to the agents (qpidd's own
and the project's), as QMF v2 values and as QMF v1 bodies in data sections.

The design (DESIGN 4.9, console/_session.py, protocol/): a body that does not decode
is dropped, counted (``Session.malformed``, ``Agent.stats["bad_requests"]``) and
logged; a pending call whose only answer was malformed is not failed early: it goes
on to time out with :class:`QmfTimeout`.  Every test checks that no exception reached
the event loop's exception handler, that every wait is bounded, and that the peer
answers a good request right afterwards.  The figures printed (``-s``) are the ones
in docs/reliability.md, section Hostile input.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import random
import struct
import sys
import time
import tracemalloc
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiormq
import attrs
import pytest

from qmf_async import (
    Broker,
    Console,
    QmfError,
    QmfObject,
    QmfTimeout,
    QueryTimeout,
    RemoteAgent,
    Session,
    UnknownClassError,
)
from qmf_async.agent import Agent, Arg, Property, method, object_class
from qmf_async.agent.broker import ManagementBroker
from qmf_async.wire import (
    CommandComplete,
    Heartbeat,
    MethodResponse,
    ObjectId,
    ObjectRecord,
    QmfType,
    SchemaArgument,
    SchemaClass,
    SchemaMethod,
    SchemaProperty,
    SchemaRegistry,
    SchemaResponse,
    SchemaStatistic,
    decode,
    encode,
    encode_v2_body,
)

from ._util import import_example, private_vhost, wait_until
from .fake_transport import object_schema

pytestmark = pytest.mark.integration

INTERVAL = 0.2
QMF = "x-application/qmf"
demo = import_example("demo_agent")


def _report(text: str) -> None:
    print(f"\n[hostile] {text}", file=sys.stderr)


def _label(what: str) -> str:
    return f"hostile-{what}-{uuid.uuid4().hex[:8]}"


# ------------------------------------------------------------------ fixtures

@pytest.fixture(scope="module")
def bus(amqp_url: str) -> Iterator[str]:
    """The RabbitMQ URL on a private vhost of this module."""
    with private_vhost(amqp_url, "qmf-hostile") as url:
        if url == amqp_url:
            pytest.skip("needs rabbitmqctl and a local RabbitMQ to make a private vhost")
        yield url


@pytest.fixture
async def loop_errors() -> AsyncIterator[list[dict[str, Any]]]:
    """Every context that reaches the event loop's exception handler during the test
    (an exception escaping a callback or a task nobody awaited); must stay empty."""
    loop = asyncio.get_running_loop()
    seen: list[dict[str, Any]] = []
    old = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: seen.append(context))
    try:
        yield seen
        gc.collect()  # "exception was never retrieved" is reported when a task is freed
        await asyncio.sleep(0)
    finally:
        loop.set_exception_handler(old)
    assert seen == [], [c.get("message") or c.get("exception") for c in seen]


class CountingHandler(logging.Handler):
    """Counts the records of a logger instead of keeping them (a flood of warnings
    must not fill pytest's log capture and the memory figures)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.count += 1


@contextlib.contextmanager
def counted_logs() -> Iterator[CountingHandler]:
    handler = CountingHandler()
    logger = logging.getLogger("qmf_async")
    saved = (logger.level, logger.propagate, list(logger.handlers))
    logger.setLevel(logging.WARNING)
    logger.propagate = False
    logger.handlers[:] = [handler]
    try:
        yield handler
    finally:
        logger.setLevel(saved[0])
        logger.propagate = saved[1]
        logger.handlers[:] = saved[2]


class RawBus:
    """A raw AMQP 0-9-1 publisher (aiormq): any bytes, any content type and headers, to
    any exchange and key; it declares the QMF exchanges as the project does."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.sent = 0
        self._conn: Any = None
        self._ch: Any = None

    async def __aenter__(self) -> RawBus:
        self._conn = await asyncio.wait_for(aiormq.connect(self.url), 10.0)
        self._ch = await self._conn.channel()
        for name, kind in (("qpid.management", "topic"), ("qmf.default.topic", "topic"),
                           ("qmf.default.direct", "direct")):
            await self._ch.exchange_declare(exchange=name, exchange_type=kind, durable=True)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.wait_for(self._conn.close(), 10.0)

    async def publish(self, body: bytes, exchange: str, key: str, *,
                      content_type: str | None = QMF, headers: dict[str, Any] | None = None,
                      reply_to: str | None = None, correlation_id: str | None = None) -> None:
        props = aiormq.spec.Basic.Properties(
            content_type=content_type, headers=headers, reply_to=reply_to,
            correlation_id=correlation_id)
        await self._ch.basic_publish(body, exchange=exchange, routing_key=key,
                                     properties=props)
        self.sent += 1

    async def queue(self) -> tuple[str, asyncio.Queue[Any]]:
        """A server-named exclusive queue bound to ``amq.direct`` under its name, and
        the queue of the messages it receives (to read an agent's answers)."""
        ok = await self._ch.queue_declare("", exclusive=True, auto_delete=True)
        name = ok.queue
        await self._ch.queue_bind(name, "amq.direct", routing_key=name)
        got: asyncio.Queue[Any] = asyncio.Queue()

        async def on_message(message: Any) -> None:
            await got.put(message)
        await self._ch.basic_consume(name, on_message, no_ack=True)
        return name, got


@attrs.define
class Live:
    """A live bus: the role, the demo agent and a session, and a raw publisher."""
    url: str
    session: Session
    broker: Broker
    agent: Agent
    model: Any
    raw: RawBus

    def remote(self) -> RemoteAgent | None:
        for a in self.session.get_agents(self.broker):
            if a.name and a.name == self.agent.v2_name:
                return a
            if (a.broker_bank, a.agent_bank) == (self.agent.broker_bank, self.agent.agent_bank):
                return a
        return None

    @property
    def agent_key(self) -> str:
        return f"agent.{self.agent.broker_bank}.{self.agent.agent_bank}"

    async def the_broker(self) -> QmfObject:
        found = await wait_until(self.remote, 10.0, message="the demo agent known")
        (b,) = await self.session.get_objects(_class="broker", _agent=found, _timeout=5.0)
        return b

    async def still_answers(self) -> None:
        """A good call and a good query right after the hostile input."""
        b = await self.the_broker()
        token = uuid.uuid4().hex
        assert (await b.echo(7, token, _timeout=5.0)).body == token
        queues = await self.session.get_objects(_class="queue", _agent=self.remote(),
                                                _timeout=5.0)
        assert queues, "the demo agent's queues"


@contextlib.asynccontextmanager
async def live_bus(url: str, **session_options: Any) -> AsyncIterator[Live]:
    async with RawBus(url) as raw:
        role = ManagementBroker(url, broker_id=uuid.uuid4(), label=_label("role"),
                                interval=INTERVAL, agent_timeout=5.0)
        await role.start()
        agent, model = demo.build_demo_agent(url, label=_label("demo"), queues=1, seed=5,
                                             interval=INTERVAL, attach_timeout=2.0)
        try:
            await model.start()
            options: dict[str, Any] = {"timeout": 5.0, "agent_interval": 0.5}
            options.update(session_options)
            session = Session(**options)
            try:
                broker = await session.add_broker(url, timeout=5.0)
                live = Live(url, session, broker, agent, model, raw)
                await live.the_broker()
                yield live
            finally:
                await session.close()
        finally:
            await model.stop()
            await role.stop(2.0)


class Gate:
    """A method handler that waits until opened (the demo agent's ``echo`` held)."""

    def __init__(self) -> None:
        self.open = asyncio.Event()
        self.entered = 0

    async def echo(self, obj: Any, **args: Any) -> dict[str, Any]:
        self.entered += 1
        await asyncio.wait_for(self.open.wait(), 30.0)
        return args


# ------------------------------------------------------------------ v1 garbage

def _header(opcode: str, seq: int) -> bytes:
    return b"AM2" + opcode.encode() + struct.pack(">I", seq)


def truncations(body: bytes) -> list[bytes]:
    """Every strict prefix of one encoded message that is not empty."""
    return [body[:n] for n in range(1, len(body))]


def v1_garbage(seq: int, rnd: random.Random) -> list[tuple[str, bytes]]:
    """Malformed v1 bodies, each with its kind; ``seq`` is the sequence number a
    pending request of the console uses (a malformed answer to it)."""
    good_z = encode(CommandComplete(seq, 0, "OK"))
    good_m = encode(MethodResponse(seq, 0, "OK"))
    out: list[tuple[str, bytes]] = []
    out += [("truncated z", b) for b in truncations(good_z)]
    out += [("truncated m", b) for b in truncations(good_m)[:12]]
    out += [
        ("empty", b""),
        ("wrong magic", b"XY2z" + good_z[4:]),
        ("wrong version", b"AM9z" + good_z[4:]),
        ("unknown opcode", _header("Y", seq) + b"\x00" * 8),
        ("unknown opcode, no body", _header("~", seq)),
        # z: code then a str16 text whose declared length passes the end
        ("z text length past the end", _header("z", seq) + struct.pack(">IH", 0, 60000) + b"OK"),
        # m: status then str16 text, then arguments the console cannot know
        ("m text length past the end", _header("m", seq) + struct.pack(">IH", 0, 65535)),
        ("z trailing garbage", good_z + b"AM2"),
        # a schema response for a class of a kind that does not exist
        ("s unknown kind", _header("s", seq) + b"\x09" + b"\x03pkg\x03cls" + b"\x00" * 16),
        # an object record with a class key whose strings run off the end
        ("g class key past the end", _header("g", seq) + b"\xff" + b"pkg"),
        # the broker response with a short uuid
        ("b short uuid", _header("b", seq) + b"\x01\x02\x03"),
    ]
    out += [("random", bytes(rnd.randrange(256) for _ in range(rnd.randrange(1, 300))))
            for _ in range(40)]
    # random bytes behind a valid header: most opcodes' bodies do not decode
    out += [("random behind a header", _header(rnd.choice("zmsbqpgch"), seq)
             + bytes(rnd.randrange(256) for _ in range(rnd.randrange(0, 3))))
            for _ in range(20)]
    return [(kind, body) for kind, body in out if _undecodable(body)]


def v1_request_garbage(seq: int, rnd: random.Random) -> list[tuple[str, bytes]]:
    """Malformed requests for an agent."""
    out: list[tuple[str, bytes]] = [
        ("empty", b""),
        ("wrong magic", b"QQ2G" + struct.pack(">I", seq)),
        ("unknown opcode", _header("Y", seq)),
        ("G map size past the end", _header("G", seq) + struct.pack(">II", 0xFFFFFFF0, 1)),
        ("G map count past the end", _header("G", seq) + struct.pack(">II", 4, 0x7FFFFFFF)),
        ("M object id only", _header("M", seq) + b"\x00" * 16),
        ("M class key past the end", _header("M", seq) + b"\x00" * 16 + b"\xff" + b"p"),
        ("S class key past the end", _header("S", seq) + b"\x05org"),
        ("Q package past the end", _header("Q", seq) + b"\x40ab"),
    ]
    out += [("random", bytes(rnd.randrange(256) for _ in range(rnd.randrange(1, 300))))
            for _ in range(30)]
    out += [("random behind a header", _header(rnd.choice("GMSQPB"), seq)
             + bytes(rnd.randrange(256) for _ in range(rnd.randrange(0, 40))))
            for _ in range(30)]
    return [(kind, body) for kind, body in out if _undecodable(body)]


def _undecodable(body: bytes) -> bool:
    """True when the project's codec rejects ``body`` (a check on the corpus, so the
    counts the tests expect are exact)."""
    from qmf_async.wire import DecodeError, SchemaRegistry, decode
    try:
        decode(body, SchemaRegistry(), defer_unknown=True, lazy=True)
    except DecodeError:
        return True
    return False


async def _held_call(live: Live, gate: Gate, arg: int, timeout: float
                     ) -> tuple[asyncio.Future[Any], int]:
    """An echo call held at the agent by ``gate``; returns its future and the sequence
    number the console gave it."""
    b = await live.the_broker()
    before = {e.seq for e in live.broker._core.correlator.entries()}
    call = asyncio.ensure_future(b.echo(arg, f"held-{arg}", _timeout=timeout))
    await wait_until(lambda: gate.entered > 0 and len(live.broker._core) > len(before), 5.0,
                     message="the call held at the agent")
    (seq,) = {e.seq for e in live.broker._core.correlator.entries()} - before
    return call, seq


async def test_malformed_v1_bodies_at_a_live_console_and_agent(
        bus: str, loop_errors: list[dict[str, Any]]) -> None:
    rnd = random.Random(18)
    async with live_bus(bus) as live:
        session, raw = live.session, live.raw
        gate = Gate()
        live.agent.set_method_handler("broker", "echo", gate.echo)
        # A: its only answers are malformed (QmfTimeout); B: answered after them
        call_a, seq_a = await _held_call(live, gate, 1, 2.0)
        gate.entered = 0
        call_b, seq_b = await _held_call(live, gate, 2, 20.0)
        garbage = v1_garbage(seq_a, rnd) + v1_garbage(seq_b, rnd)
        to_agent = v1_request_garbage(77, rnd)
        assert len(garbage) > 150 and len(to_agent) > 50
        malformed0 = session.malformed
        bad0 = live.agent.stats["bad_requests"]
        started = time.monotonic()
        topic_keys = ["console.obj.1.0.org.apache.qpid.broker.queue",
                      f"console.heartbeat.{live.agent_key[6:]}",
                      "console.event.1.0.org.apache.qpid.broker.queueDeclare", "schema.class"]
        with counted_logs() as logs:
            for _, body in garbage:
                await raw.publish(body, "amq.direct", live.broker._reply_queue or "")
            for i, (_, body) in enumerate(garbage[:100]):
                await raw.publish(body, "qpid.management", topic_keys[i % len(topic_keys)])
            for _, body in to_agent:
                await raw.publish(body, "qpid.management", live.agent_key, reply_to="nobody")
            expected = len(garbage) + min(100, len(garbage))
            await wait_until(lambda: session.malformed - malformed0 >= expected, 10.0,
                             message=f"{expected} malformed bodies counted")
            await wait_until(lambda: live.agent.stats["bad_requests"] - bad0 >= len(to_agent),
                             10.0, message=f"{len(to_agent)} bad requests counted")
            took = time.monotonic() - started
            # A's answers were all malformed: it times out, typed, on its own deadline
            with pytest.raises(QmfTimeout):
                await asyncio.wait_for(call_a, 10.0)
            assert not call_b.done()
            gate.open.set()
            result = await asyncio.wait_for(call_b, 10.0)
        assert (result.sequence, result.body) == (2, "held-2")
        assert session.malformed - malformed0 == expected
        assert live.agent.stats["bad_requests"] - bad0 == len(to_agent)
        assert seq_a not in live.broker._core.correlator and len(live.broker._waits) == 0
        live.agent.set_method_handler("broker", "echo", live.model.echo)
        await live.still_answers()
    _report(f"v1 garbage: {expected} bodies to the console, {len(to_agent)} to the agent, "
            f"all counted in {took:.2f} s, {logs.count} log records; the call whose "
            "answers were all malformed timed out, the other got its answer")



async def test_well_framed_answers_with_bad_arguments_to_a_pending_call(
        bus: str, loop_errors: list[dict[str, Any]]) -> None:
    """Method responses whose header carries a pending call's sequence number but whose
    output arguments do not match the method's schema (missing, truncated, trailing,
    a string length past the end): dropped and counted, the call times out, typed;
    the agent's real answer, coming after the caller gave up, is dropped too."""
    bodies = [b"\x00\x00\x00\x00",  # status only (short text form, no arguments)
              b"\x00\x00\x00\x00\x00\x02OK",  # no arguments
              b"\x00\x00\x00\x00\x00\x02OK\x00\x00",  # the uint32 cut short
              b"\x00\x00\x00\x00\x00\x02OK\x00\x00\x00\x05\x00\x00\x00\x10ab",  # lstr past end
              b"\x00\x00\x00\x00\x00\x02OK\x00\x00\x00\x05\x00\x00\x00\x02ab" + b"\xff" * 9]
    async with live_bus(bus) as live:
        gate = Gate()
        live.agent.set_method_handler("broker", "echo", gate.echo)
        calls = []
        for i in range(len(bodies)):
            gate.entered = 0
            calls.append(await _held_call(live, gate, i, 1.0))
        malformed0 = live.session.malformed
        for (_, seq), body in zip(calls, bodies, strict=True):
            await live.raw.publish(_header("m", seq) + body, "amq.direct",
                                   live.broker._reply_queue or "")
        outcomes = await asyncio.wait_for(
            asyncio.gather(*(c for c, _ in calls), return_exceptions=True), 10.0)
        assert all(isinstance(o, QmfTimeout) for o in outcomes), outcomes
        assert live.session.malformed - malformed0 == len(bodies)
        gate.open.set()  # the real answers come late: nobody waits for them any more
        notified: list[int] = []
        live.session.console = _MethodResponses(notified)
        live.agent.set_method_handler("broker", "echo", live.model.echo)
        await live.still_answers()
        assert notified, "the good call's answer"
        late = set(notified) & {seq for _, seq in calls}
        assert not late, f"late answers delivered: {late}"
        assert len(live.broker._core) == 0 and len(live.broker._waits) == 0


class _MethodResponses(Console):
    """Records the sequence numbers of the method responses the session delivers."""

    def __init__(self, seqs: list[int]) -> None:
        self.seqs = seqs

    def method_response(self, broker: Broker, seq: int, response: Any) -> None:
        self.seqs.append(seq)


# ------------------------------------------------------------------ v2 garbage

V2_HEADERS = {"x-amqp-0-10.app-id": "qmf2", "method": "response"}


def _v2(opcode: Any, **extra: Any) -> dict[str, Any]:
    return {**V2_HEADERS, "qmf.opcode": opcode, **extra}


def _map_bytes(value: Any) -> tuple[str, bytes]:
    return encode_v2_body(value)


def v2_garbage(agent: str) -> list[tuple[str, bytes, str | None, dict[str, Any]]]:
    """Malformed v2 messages for a console: (kind, body, content type, headers); each
    is sent with the correlation id of a pending call."""
    ok_oid = {"_agent_name": agent, "_object_name": "x"}
    ok_sid = {"_package_name": "p", "_class_name": "c", "_type": "_data",
              "_hash": uuid.UUID(int=1)}
    bad_data = [
        ("_values an int", {"_values": 5, "_object_id": ok_oid, "_schema_id": ok_sid}),
        ("_values a list", {"_values": [1, 2], "_object_id": ok_oid, "_schema_id": ok_sid}),
        ("_values a string", {"_values": "x", "_object_id": ok_oid, "_schema_id": ok_sid}),
        ("_schema_id a string", {"_values": {}, "_object_id": ok_oid, "_schema_id": "s"}),
        ("_schema_id without names", {"_values": {}, "_object_id": ok_oid,
                                      "_schema_id": {"_hash": 5}}),
        ("_schema_id names of wrong type", {"_values": {}, "_object_id": ok_oid,
                                            "_schema_id": {**ok_sid, "_class_name": 7}}),
        ("_object_id an int", {"_values": {}, "_object_id": 9, "_schema_id": ok_sid}),
        ("_object_id name an int", {"_values": {}, "_schema_id": ok_sid,
                                    "_object_id": {"_agent_name": agent, "_object_name": 3}}),
    ]
    out: list[tuple[str, bytes, str | None, dict[str, Any]]] = []
    for kind, item in bad_data:
        ct, body = _map_bytes([item])
        out.append((f"query response item: {kind}", body, ct,
                    _v2("_query_response", **{"qmf.agent": agent, "qmf.content": "_data"})))
    ct, body = _map_bytes({"_values": {}})
    out += [
        ("query response a map, not a list", body, ct, _v2("_query_response",
                                                           **{"qmf.agent": agent})),
        ("method response a list", _map_bytes([1, 2])[1], "amqp/list",
         _v2("_method_response", **{"qmf.agent": agent})),
        ("method response _arguments an int", _map_bytes({"_arguments": 3})[1], "amqp/map",
         _v2("_method_response", **{"qmf.agent": agent})),
        ("exception without _values", _map_bytes({"x": 1})[1], "amqp/map",
         _v2("_exception", **{"qmf.agent": agent})),
        ("exception _values a list", _map_bytes({"_values": [1]})[1], "amqp/map",
         _v2("_exception", **{"qmf.agent": agent})),
        ("no qmf.opcode", _map_bytes({"_values": {}})[1], "amqp/map", dict(V2_HEADERS)),
        ("qmf.opcode an int", _map_bytes({"_values": {}})[1], "amqp/map", _v2(5)),
        ("amqp/map of garbage bytes", b"\x00\x00\x00\x10\x00\x00\x00\x09abc", "amqp/map",
         _v2("_method_response")),
        ("amqp/list of garbage bytes", b"\xff\xff", "amqp/list", _v2("_query_response")),
        ("amqp/map with trailing bytes", _map_bytes({"a": 1})[1] + b"\x00", "amqp/map",
         _v2("_method_response")),
        ("a map under a text content type", _map_bytes({"_arguments": {}})[1], "text/plain",
         _v2("_method_response")),
        ("a map under no content type", _map_bytes({"_arguments": {}})[1], None,
         _v2("_method_response")),
    ]
    return out


@pytest.fixture
async def live_v2(bus: str) -> AsyncIterator[Live]:
    async with live_bus(bus, qmf_version=2) as live:
        yield live


async def test_malformed_v2_maps_at_a_live_console_and_agent(
        live_v2: Live, loop_errors: list[dict[str, Any]]) -> None:
    live = live_v2
    v2 = live.broker._v2
    assert v2 is not None
    name = live.agent.v2_name or ""
    gate = Gate()
    live.agent.set_method_handler("broker", "echo", gate.echo)
    b = await live.the_broker()
    call = asyncio.ensure_future(b.echo(1, "held", _timeout=1.5))
    await wait_until(lambda: gate.entered == 1, 5.0, message="the call held at the agent")
    (cid,) = list(v2.core._pending)
    garbage = v2_garbage(name)
    malformed0 = live.session.malformed
    reply = live.broker._reply_queue or ""
    started = time.monotonic()
    with counted_logs() as logs:
        for _, body, ct, headers in garbage:
            await live.raw.publish(body, "amq.direct", reply, content_type=ct, headers=headers,
                                   correlation_id=cid)
        # the indication endpoint (bound to heartbeats only unless asked for more):
        # the same items as data indications, and malformed heartbeats
        for _, body, ct, headers in garbage[:8]:
            await live.raw.publish(body, "qmf.default.topic", "agent.ind.heartbeat.x",
                                   content_type=ct,
                                   headers={**headers, "qmf.opcode": "_data_indication"})
        for value in ({"_values": 5}, {"x": 1}, [1]):
            ct, body = _map_bytes(value)
            await live.raw.publish(body, "qmf.default.topic", "agent.ind.heartbeat.x",
                                   content_type=ct, headers=_v2("_agent_heartbeat_indication"))
        expected = len(garbage) + 8 + 3
        await wait_until(lambda: live.session.malformed - malformed0 >= expected, 10.0,
                         message=f"{expected} malformed v2 messages counted")
        took = time.monotonic() - started
        with pytest.raises(QmfTimeout):
            await asyncio.wait_for(call, 10.0)
    assert live.session.malformed - malformed0 == expected
    assert v2.core.dropped == 0  # nothing went to another request
    assert cid not in v2.core._pending
    gate.open.set()
    live.agent.set_method_handler("broker", "echo", live.model.echo)
    await live.still_answers()
    _report(f"v2 garbage over 0-9-1: {expected} messages to the console, counted in "
            f"{took:.2f} s, {logs.count} log records; the call timed out, typed")


def v2_request_garbage(agent: str) -> list[tuple[str, Any, str | None, dict[str, Any]]]:
    """Malformed v2 requests for an agent: (kind, body value or raw bytes, content type,
    headers); bodies that are dicts or lists are encoded as amqp/map or amqp/list."""
    req = {"x-amqp-0-10.app-id": "qmf2", "method": "request"}
    oid = {"_agent_name": agent, "_object_name": "org.apache.qpid.broker:broker:amqp-broker"}
    return [
        ("query _what an int", {"_what": 5}, None, {**req, "qmf.opcode": "_query_request"}),
        ("query without _what", {"_where": []}, None, {**req, "qmf.opcode": "_query_request"}),
        ("query a list", [1, 2], None, {**req, "qmf.opcode": "_query_request"}),
        ("query _schema_id a string", {"_what": "OBJECT", "_schema_id": "x"}, None,
         {**req, "qmf.opcode": "_query_request"}),
        ("query _object_id an int", {"_what": "OBJECT", "_object_id": 3}, None,
         {**req, "qmf.opcode": "_query_request"}),
        ("method without _method_name", {"_object_id": oid}, None,
         {**req, "qmf.opcode": "_method_request"}),
        ("method _arguments a list", {"_object_id": oid, "_method_name": "echo",
                                      "_arguments": [1]}, None,
         {**req, "qmf.opcode": "_method_request"}),
        ("method _object_id a string", {"_object_id": "x", "_method_name": "echo"}, None,
         {**req, "qmf.opcode": "_method_request"}),
        ("method a list", [oid], None, {**req, "qmf.opcode": "_method_request"}),
    ]


async def test_malformed_v2_requests_at_a_live_agent(
        live_v2: Live, loop_errors: list[dict[str, Any]]) -> None:
    """Each malformed request that carries a reply address is answered with an
    ``_exception`` under its correlation id; the others (garbage bytes, no opcode) are
    dropped; every one is counted; the agent answers a good request after them."""
    live = live_v2
    name = live.agent.v2_name or ""
    answers_to, answers = await live.raw.queue()
    bad0 = live.agent.stats["bad_requests"]
    garbage = v2_request_garbage(name)
    for i, (_, value, _, headers) in enumerate(garbage):
        ct, body = _map_bytes(value)
        await live.raw.publish(body, "qmf.default.direct", name, content_type=ct,
                               headers=headers, reply_to=answers_to,
                               correlation_id=f"bad-{i}")
    raw_only = [(b"\x00\x00\x00\x09\x00", "amqp/map"), (b"\xff", "amqp/list"),
                (b"AM2Y\x00\x00\x00\x01", QMF)]
    for body, ct in raw_only:
        await live.raw.publish(body, "qmf.default.direct", name, content_type=ct,
                               headers={"x-amqp-0-10.app-id": "qmf2",
                                        "qmf.opcode": "_method_request"},
                               reply_to=answers_to, correlation_id="raw")
    got: dict[str, Any] = {}
    deadline = time.monotonic() + 10.0
    while len(got) < len(garbage) and time.monotonic() < deadline:
        with contextlib.suppress(TimeoutError):
            message = await asyncio.wait_for(answers.get(), 0.5)
            got[message.header.properties.correlation_id] = message
    assert sorted(got) == sorted(f"bad-{i}" for i in range(len(garbage)))
    for message in got.values():
        assert message.header.properties.headers["qmf.opcode"] == "_exception"
    await wait_until(lambda: live.agent.stats["bad_requests"] - bad0
                     == len(garbage) + len(raw_only), 5.0,
                     message="every bad request counted")
    await live.still_answers()
    _report(f"v2 requests: {len(garbage)} malformed requests each answered by an "
            f"_exception, {len(raw_only)} undecodable dropped, all counted")


# ------------------------------------------------------------------ floods: memory

FLOOD = 750  # bodies per round in the default run; 20,000 in the slow one
#: publishes the floods from a process of its own (tracemalloc traces this one)
FLOOD_PUBLISHER = Path(__file__).resolve().parent / "flood_publisher.py"


def _rss_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


async def _flood_round(live: Live, count: int, seed: int) -> float:
    """``count`` malformed bodies (about 1 KiB each, ``tests/flood_publisher.py``):
    three quarters to the console's reply queue and topic bindings, a quarter to the
    agent; returns the seconds until all were counted."""
    malformed0 = live.session.malformed
    bad0 = live.agent.stats["bad_requests"]
    started = time.monotonic()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(FLOOD_PUBLISHER), live.url, str(count), str(seed),
        live.broker._reply_queue or "", live.agent_key,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        out, err = await asyncio.wait_for(proc.communicate(), 300.0)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise AssertionError(f"the flood publisher did not send {count} bodies in 300 s"
                             ) from None
    assert proc.returncode == 0, err.decode(errors="replace")[-2000:]
    to_console, to_agent = map(int, out.split())
    assert to_console + to_agent == count
    await wait_until(lambda: live.session.malformed - malformed0 == to_console
                     and live.agent.stats["bad_requests"] - bad0 == to_agent, 60.0,
                     interval=0.05, message=f"{count} flood bodies counted")
    return time.monotonic() - started


async def _flood(bus: str, count: int) -> dict[str, float]:
    async with live_bus(bus) as live:
        with counted_logs():
            await _flood_round(live, 200, 1817)  # warm-up: buffers, caches, first logs
            gc.collect()
            tracemalloc.start()
            try:
                base, _ = tracemalloc.get_traced_memory()
                rss0 = _rss_kib()
                took1 = await _flood_round(live, count, 1818)
                gc.collect()
                after1, _ = tracemalloc.get_traced_memory()
                took2 = await _flood_round(live, count, 1819)
                gc.collect()
                after2, peak = tracemalloc.get_traced_memory()
                rss2 = _rss_kib()
            finally:
                tracemalloc.stop()
        await live.still_answers()
        assert len(live.broker._core) == 0 and len(live.broker._waits) == 0
    figures = {"bodies": 2.0 * count, "round1_s": took1, "round2_s": took2,
               "growth1_kib": (after1 - base) / 1024, "growth2_kib": (after2 - after1) / 1024,
               "peak_kib": (peak - base) / 1024, "rss_growth_kib": float(rss2 - rss0),
               "sent_kib": 2.0 * count * 1011 / 1024}
    _report("flood: " + ", ".join(f"{k}={v:.1f}" for k, v in figures.items()))
    # the memory left behind does not grow with what was sent
    assert figures["growth1_kib"] < 1024 and figures["growth2_kib"] < 256, figures
    return figures


async def test_thousands_of_malformed_bodies_leave_memory_flat(
        bus: str, loop_errors: list[dict[str, Any]]) -> None:
    await _flood(bus, FLOOD)


@pytest.mark.slow
async def test_a_long_flood_of_malformed_bodies_leaves_memory_flat(
        bus: str, loop_errors: list[dict[str, Any]]) -> None:
    await _flood(bus, 20_000)


# ------------------------------------------------------------------ oversized

def _map010(entries: list[bytes], count: int | None = None, size: int | None = None) -> bytes:
    """An AMQP 0-10 map from encoded entries (key, type code, value), with its count and
    byte size as declared (the true ones unless given)."""
    payload = struct.pack(">I", len(entries) if count is None else count) + b"".join(entries)
    return struct.pack(">I", len(payload) if size is None else size) + payload


def _entry(key: bytes, code: int, value: bytes) -> bytes:
    return bytes([len(key)]) + key + bytes([code]) + value


def deep_map(levels: int) -> bytes:
    """A map holding a list holding a map ... ``levels`` containers deep (built from the
    inside out, without recursion)."""
    inner, code = _map010([]), 0xA8
    for level in range(levels - 1):
        if level % 2 == 0:  # into a list of one item
            payload = struct.pack(">I", 1) + bytes([code]) + inner
            inner, code = struct.pack(">I", len(payload)) + payload, 0xA9
        else:  # into a map of one entry
            inner, code = _map010([_entry(b"m", code, inner)]), 0xA8
    return inner if code == 0xA8 else _map010([_entry(b"m", code, inner)])


def oversized_maps(big: bool) -> list[tuple[str, bytes]]:
    """Maps that lie about their sizes or are very large, in the AMQP 0-10 encoding
    (QMF v1 maps and QMF v2 bodies over AMQP 0-9-1)."""
    million = 1_000_000
    entry = _entry(b"k", 0x02, b"\x05")  # uint8 5 under one key: 4 bytes an entry
    entries = million if big else 100_000
    keys = [f"{i:x}".encode() for i in range(entries)]
    out = [
        ("map declaring 4 GiB", _map010([entry], size=0xFFFFFFF0)),
        ("map declaring 2**31 entries", _map010([entry], count=0x7FFFFFFF)),
        ("map of 1,000,000 entries under one key", _map010([entry] * million)),
        (f"map of {entries:,} distinct keys", _map010([_entry(k, 0x02, b"\x05")
                                                       for k in keys])),
        ("10,000 levels of lists in maps", deep_map(10_000)),
        ("100 MB binary declared, 10 bytes sent",
         _map010([_entry(b"s", 0xA0, struct.pack(">I", 100_000_000) + b"0123456789")])),
        ("64 KiB string declared, 10 bytes sent",
         _map010([_entry(b"s", 0x95, struct.pack(">H", 0xFFFF) + b"0123456789")])),
        ("list declaring 2**31 items", _map010([_entry(
            b"l", 0xA9, struct.pack(">II", 4, 0x7FFFFFFF))])),
        ("array of 2**31 items of a 4-byte type", _map010([_entry(
            b"a", 0xAA, struct.pack(">IBI", 5, 0x22, 0x7FFFFFFF))])),
    ]
    return out


def _decodes_as_map(data: bytes) -> bool:
    from qmf_async.wire import DecodeError, decode_v2_body
    try:
        decode_v2_body("amqp/map", data)
    except DecodeError:
        return False
    return True


def _v1_with_map(opcode: str, seq: int, hostile: bytes) -> bytes:
    """A v1 body carrying ``hostile`` where the opcode has a map: ``G`` (the query),
    ``s`` (the first property of an object schema)."""
    if opcode == "G":
        return _header("G", seq) + hostile
    key = b"\x07hostile\x05flood" + b"\x00" * 16
    return _header("s", seq) + b"\x01" + key + struct.pack(">HHH", 1, 0, 0) + hostile


async def _oversized(bus: str, big: bool) -> list[tuple[str, float]]:
    maps = oversized_maps(big)
    maps.append(("16 MiB of random bytes", random.Random(7).randbytes(16 << 20)))
    timings: list[tuple[str, float]] = []
    # decoding a map of a million keys holds the one event loop the console and the
    # agent share here for seconds: the agent's heartbeats wait meanwhile
    async with live_bus(bus, qmf_version=2, missed_heartbeats=100 if big else 3) as live:
        v2 = live.broker._v2
        assert v2 is not None
        name = live.agent.v2_name or ""
        reply = live.broker._reply_queue or ""
        gate = Gate()
        live.agent.set_method_handler("broker", "echo", gate.echo)
        b = await live.the_broker()
        call = asyncio.ensure_future(b.echo(1, "held", _timeout=30.0))
        await wait_until(lambda: gate.entered == 1, 5.0, message="the call held at the agent")
        (cid,) = list(v2.core._pending)
        with counted_logs():
            for kind, hostile in maps:
                # a well-formed map (only large) makes a v1 query the agent answers
                agent_bad = 1 if _decodes_as_map(hostile) else 2
                malformed0 = live.session.malformed
                bad0 = live.agent.stats["bad_requests"]
                started = time.monotonic()
                # console: a v2 answer to the held call, a v1 schema on reply and topic
                await live.raw.publish(hostile, "amq.direct", reply, content_type="amqp/map",
                                       headers=_v2("_query_response", **{"qmf.agent": name}),
                                       correlation_id=cid)
                await live.raw.publish(_v1_with_map("s", 5, hostile), "amq.direct", reply)
                await live.raw.publish(_v1_with_map("s", 0, hostile), "qpid.management",
                                       "console.heartbeat.9.9")  # what a v2 session binds
                # agent: a v1 query, a v2 query
                await live.raw.publish(_v1_with_map("G", 5, hostile), "qpid.management",
                                       live.agent_key, reply_to="nobody")
                await live.raw.publish(hostile, "qmf.default.direct", name,
                                       content_type="amqp/map",
                                       headers={"x-amqp-0-10.app-id": "qmf2",
                                                "qmf.opcode": "_query_request"},
                                       reply_to="nobody", correlation_id="big")
                def counts() -> tuple[int, int]:
                    return (live.session.malformed - malformed0,  # noqa: B023
                            live.agent.stats["bad_requests"] - bad0)  # noqa: B023
                try:
                    await wait_until(lambda: counts() == (3, agent_bad), 20.0)  # noqa: B023
                except AssertionError:
                    raise AssertionError(f"{kind}: (malformed at the console, bad requests "
                                         f"at the agent) = {counts()}, not "
                                         f"(3, {agent_bad})") from None
                timings.append((kind, time.monotonic() - started))
        assert not call.done()
        gate.open.set()
        assert (await asyncio.wait_for(call, 10.0)).body == "held"
        live.agent.set_method_handler("broker", "echo", live.model.echo)
        await live.still_answers()
    _report("oversized: " + "; ".join(f"{k}: {t:.2f} s" for k, t in timings))
    return timings


async def test_oversized_maps_at_a_live_console_and_agent(
        bus: str, loop_errors: list[dict[str, Any]]) -> None:
    timings = await _oversized(bus, big=False)
    assert all(t < 10.0 for _, t in timings), timings


@pytest.mark.slow
async def test_a_map_of_a_million_distinct_keys(
        bus: str, loop_errors: list[dict[str, Any]]) -> None:
    timings = await _oversized(bus, big=True)
    assert all(t < 30.0 for _, t in timings), timings


# ------------------------------------------------------------------ agents that lie

FAKE_PACKAGE = "hostile.fake"


def _thing_schema(extra: bool = False) -> SchemaClass:
    """The fake agent's class; ``extra``: another layout (and hash) of the same name."""
    props = [SchemaProperty("name", QmfType.SSTR, index=True)]
    if extra:
        props.append(SchemaProperty("owner", QmfType.SSTR))
    return object_schema(FAKE_PACKAGE, "thing", properties=props,
                         statistics=[SchemaStatistic("count", QmfType.UINT32)],
                         methods=[SchemaMethod("ping", [
                             SchemaArgument("n", QmfType.UINT32, direction="IO")])])


THING = _thing_schema()
THING_OTHER = _thing_schema(extra=True)


class FakeAgent:
    """A v1 agent of the tests, all raw bodies (aiormq): it heartbeats under its banks,
    queues every request it receives, and answers only what the test tells it to."""

    def __init__(self, url: str, banks: tuple[int, int] = (1, 77)) -> None:
        self.url = url
        self.banks = banks
        self.schemas = SchemaRegistry()
        self.schemas.add(THING)
        self.requests: asyncio.Queue[tuple[Any, str]] = asyncio.Queue()
        self._conn: Any = None
        self._ch: Any = None
        self._beat: asyncio.Task[None] | None = None

    async def __aenter__(self) -> FakeAgent:
        self._conn = await asyncio.wait_for(aiormq.connect(self.url), 10.0)
        self._ch = await self._conn.channel()
        await self._ch.exchange_declare(exchange="qpid.management", exchange_type="topic",
                                        durable=True)
        ok = await self._ch.queue_declare("", exclusive=True, auto_delete=True)
        await self._ch.queue_bind(ok.queue, "qpid.management",
                                  routing_key=f"agent.{self.banks[0]}.{self.banks[1]}")

        async def on_message(message: Any) -> None:
            for msg in decode(message.body, self.schemas):
                await self.requests.put((msg, message.header.properties.reply_to))
        await self._ch.basic_consume(ok.queue, on_message, no_ack=True)
        self._beat = asyncio.get_running_loop().create_task(self._heartbeats())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._beat is not None:
            self._beat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._beat
        await asyncio.wait_for(self._conn.close(), 10.0)

    async def _heartbeats(self) -> None:
        bb, ab = self.banks
        while True:
            await self.topic(f"console.heartbeat.{bb}.{ab}", encode(Heartbeat(time.time_ns())))
            await asyncio.sleep(INTERVAL)

    async def topic(self, key: str, body: bytes) -> None:
        await self._ch.basic_publish(body, exchange="qpid.management", routing_key=key,
                                     properties=aiormq.spec.Basic.Properties(content_type=QMF))

    async def reply(self, reply_to: str, *messages: Any, schemas: SchemaRegistry | None = None,
                    methods: dict[int, Any] | None = None) -> None:
        body = encode(messages, schemas or self.schemas, methods=methods)
        await self._ch.basic_publish(body, exchange="amq.direct", routing_key=reply_to,
                                     properties=aiormq.spec.Basic.Properties(content_type=QMF))

    async def next(self, opcode: str, timeout: float = 5.0) -> tuple[Any, str]:
        """The next request of kind ``opcode`` (others are skipped)."""
        deadline = time.monotonic() + timeout
        while True:
            msg, reply_to = await asyncio.wait_for(self.requests.get(),
                                                   max(0.0, deadline - time.monotonic()))
            if msg.OPCODE == opcode:
                return msg, reply_to

    def oid(self, n: int, banks: tuple[int, int] | None = None) -> ObjectId:
        bb, ab = banks or self.banks
        return ObjectId.make(sequence=1, broker_bank=bb, agent_bank=ab, object=n)

    def thing(self, seq: int, n: int, *, opcode: str = "g", schema: SchemaClass = THING,
              banks: tuple[int, int] | None = None) -> ObjectRecord:
        props: tuple[Any, ...] = (f"thing-{n}",) + (("eve",) if schema is THING_OTHER else ())
        return ObjectRecord(opcode, seq, schema, time.time_ns(), 1, 0, self.oid(n, banks),
                            props, (n,))


@attrs.define
class Lying:
    session: Session
    broker: Broker
    fake: FakeAgent
    raw: RawBus

    def remote(self) -> RemoteAgent | None:
        for a in self.session.get_agents(self.broker):
            if (a.broker_bank, a.agent_bank) == self.fake.banks:
                return a
        return None


@contextlib.asynccontextmanager
async def lying_bus(url: str, **session_options: Any) -> AsyncIterator[Lying]:
    """A bus with no management broker: the session finds the fake agent by its
    heartbeats and asks it directly."""
    async with RawBus(url) as raw, FakeAgent(url) as fake:
        options: dict[str, Any] = {"timeout": 5.0, "broker_timeout": 0.5,
                                   "agent_interval": 0.5, "schema_timeout": 2.0}
        options.update(session_options)
        session = Session(**options)
        try:
            broker = await session.add_broker(url, timeout=5.0)
            lying = Lying(session, broker, fake, raw)
            await wait_until(lying.remote, 10.0, message="the fake agent known")
            yield lying
        finally:
            await session.close()


async def _answer_query(fake: FakeAgent, records: list[ObjectRecord], *, times: int = 1,
                        schema_answer: SchemaClass | None = THING) -> None:
    """Answer the next ``G`` with ``records`` and a ``z`` (``times`` times over), and the
    schema request it causes with ``schema_answer``."""
    query, reply_to = await fake.next("G")
    for _ in range(times):
        await fake.reply(reply_to, *[attrs.evolve(r, seq=query.seq) for r in records],
                         CommandComplete(query.seq))
    if schema_answer is not None:
        request, to = await fake.next("S")
        reg = SchemaRegistry()
        reg.add(schema_answer)
        await fake.reply(to, SchemaResponse(request.seq, schema_answer), schemas=reg)


async def test_replies_never_asked_for_and_duplicated_replies(
        bus: str, loop_errors: list[dict[str, Any]]) -> None:
    """Replies under sequence numbers the console never sent are dropped; a query
    answered twice yields its objects once; a method answered twice is delivered once;
    the late duplicates do not complete the next requests."""
    async with lying_bus(bus) as lie:
        seen: list[int] = []
        lie.session.console = _MethodResponses(seen)
        reply = lie.broker._reply_queue or ""
        pending = set(e.seq for e in lie.broker._core.correlator.entries())
        rnd = random.Random(3)
        never = [s for s in (rnd.randrange(1, 1 << 32) for _ in range(200)) if s not in pending]
        for seq in never:
            await lie.fake.reply(reply, CommandComplete(seq, 0, "OK"))
            await lie.fake.reply(reply, MethodResponse(seq, 0, "OK"))
        agent = lie.remote()
        query = asyncio.ensure_future(lie.session.get_objects(
            _class="thing", _package=FAKE_PACKAGE, _agent=agent, _timeout=5.0))
        await _answer_query(lie.fake, [lie.fake.thing(0, n) for n in range(3)], times=2)
        things = await asyncio.wait_for(query, 10.0)
        assert sorted(t.name for t in things) == ["thing-0", "thing-1", "thing-2"]
        # a method call answered twice
        call = asyncio.ensure_future(things[0].ping(5, _timeout=5.0))
        request, to = await lie.fake.next("M")
        answer = MethodResponse(request.seq, 0, "OK", {"n": 6})
        methods = {request.seq: (THING, THING.method("ping"))}
        await lie.fake.reply(to, answer, methods=methods)
        await lie.fake.reply(to, answer, methods=methods)
        result = await asyncio.wait_for(call, 10.0)
        assert result.n == 6
        # and the next call gets its own answer, not the duplicate
        call2 = asyncio.ensure_future(things[1].ping(7, _timeout=5.0))
        request2, to2 = await lie.fake.next("M")
        assert request2.seq != request.seq
        await lie.fake.reply(to2, MethodResponse(request2.seq, 0, "OK", {"n": 8}),
                             methods={request2.seq: (THING, THING.method("ping"))})
        assert (await asyncio.wait_for(call2, 10.0)).n == 8
        assert seen.count(request.seq) == 1 and seen.count(request2.seq) == 1
        assert not set(seen) & set(never)
        assert len(lie.broker._core) == 0 and len(lie.broker._waits) == 0
    _report(f"lying agent: {2 * len(never)} replies for sequence numbers never sent "
            "dropped; a query and a method answered twice delivered once")


async def test_a_reply_sent_to_another_console(
        bus: str, loop_errors: list[dict[str, Any]]) -> None:
    """The fake agent answers console A's call into console B's reply queue and B's
    into A's: neither answer reaches a caller (each console's numbers are its own),
    both calls time out, typed, and both consoles work afterwards."""
    async with lying_bus(bus) as a, contextlib.AsyncExitStack() as stack:
        b_session = Session(timeout=5.0, broker_timeout=0.5, agent_interval=0.5)
        stack.push_async_callback(b_session.close)
        b_broker = await b_session.add_broker(bus, timeout=5.0)
        fake = a.fake

        def remote_b() -> RemoteAgent | None:
            return next((x for x in b_session.get_agents(b_broker)
                         if (x.broker_bank, x.agent_bank) == fake.banks), None)
        await wait_until(remote_b, 10.0, message="the fake agent known to B")
        seen_a: list[int] = []
        seen_b: list[int] = []
        a.session.console = _MethodResponses(seen_a)
        b_session.console = _MethodResponses(seen_b)
        things = {}
        for name, session, agent in (("a", a.session, a.remote()), ("b", b_session, remote_b())):
            query = asyncio.ensure_future(session.get_objects(
                _class="thing", _package=FAKE_PACKAGE, _agent=agent, _timeout=5.0))
            await _answer_query(fake, [fake.thing(0, 1)])
            (things[name],) = await asyncio.wait_for(query, 10.0)
        call_a = asyncio.ensure_future(things["a"].ping(1, _timeout=1.0))
        req_a, to_a = await fake.next("M")
        call_b = asyncio.ensure_future(things["b"].ping(2, _timeout=1.0))
        req_b, to_b = await fake.next("M")
        assert to_a != to_b and req_a.seq != req_b.seq
        both = {req_a.seq: (THING, THING.method("ping")),
                req_b.seq: (THING, THING.method("ping"))}
        await fake.reply(to_b, MethodResponse(req_a.seq, 0, "OK", {"n": 100}), methods=both)
        await fake.reply(to_a, MethodResponse(req_b.seq, 0, "OK", {"n": 200}), methods=both)
        outcomes = await asyncio.wait_for(
            asyncio.gather(call_a, call_b, return_exceptions=True), 10.0)
        assert all(isinstance(o, QmfTimeout) for o in outcomes), outcomes
        assert seen_a == [] and seen_b == []
        # the same agent answering properly afterwards
        for thing, arg in ((things["a"], 3), (things["b"], 4)):
            call = asyncio.ensure_future(thing.ping(arg, _timeout=5.0))
            req, to = await fake.next("M")
            await fake.reply(to, MethodResponse(req.seq, 0, "OK", {"n": arg + 1}),
                             methods={req.seq: (THING, THING.method("ping"))})
            assert (await asyncio.wait_for(call, 10.0)).n == arg + 1
        for broker in (a.broker, b_broker):
            assert len(broker._core) == 0 and len(broker._waits) == 0
    _report("lying agent: answers swapped between two consoles' reply queues reached "
            "no caller; both calls timed out (QmfTimeout)")


async def test_an_agent_answering_a_call_made_to_another_agent(
        bus: str, loop_errors: list[dict[str, Any]]) -> None:
    """What QMF v1 cannot prevent, shown: a peer that may publish to ``amq.direct``
    under a console's reply key and knows the sequence number of a pending call
    (sequence numbers start at a random 31-bit value and count up) can answer it in
    the addressed agent's place; the console takes the first answer and drops the
    real one.  v1 replies carry no sender; the protection is the broker's access
    control on ``amq.direct``.  The call still gets one answer only, typed."""
    async with live_bus(bus) as live:
        gate = Gate()
        live.agent.set_method_handler("broker", "echo", gate.echo)
        call, seq = await _held_call(live, gate, 1, 10.0)
        schema = (await live.the_broker()).get_schema()
        forged = MethodResponse(seq, 0, "OK", {"sequence": 666, "body": "forged"})
        reg = SchemaRegistry()
        reg.add(schema)
        await live.raw.publish(encode(forged, reg, methods={seq: (schema, schema.method("echo"))}),
                               "amq.direct", live.broker._reply_queue or "")
        result = await asyncio.wait_for(call, 10.0)
        assert (result.sequence, result.body) == (666, "forged")
        gate.open.set()  # the real answer comes second: dropped
        live.agent.set_method_handler("broker", "echo", live.model.echo)
        await live.still_answers()
        assert len(live.broker._core) == 0 and len(live.broker._waits) == 0


async def test_a_schema_answer_with_another_hash(
        bus: str, loop_errors: list[dict[str, Any]]) -> None:
    """The fake agent's objects name class hash H1, and it answers the schema request
    for H1 with a schema of hash H2: the console does not decode the objects with the
    wrong schema, the query fails at once with a typed error naming the mismatch, no
    body stays held, H1 is not in the schema cache, and ``get_schema(H1)`` fails,
    typed, instead of returning H2's schema."""
    async with lying_bus(bus) as lie:
        held0 = lie.session.held_dropped
        agent = lie.remote()
        started = time.monotonic()
        query = asyncio.ensure_future(lie.session.get_objects(
            _class="thing", _package=FAKE_PACKAGE, _agent=agent, _timeout=5.0))
        await _answer_query(lie.fake, [lie.fake.thing(0, n) for n in range(3)],
                            schema_answer=THING_OTHER)
        with pytest.raises(QmfError) as info:
            await asyncio.wait_for(query, 10.0)
        took = time.monotonic() - started
        assert "schema" in str(info.value) and str(THING_OTHER.class_key) in str(info.value)
        assert took < 4.0  # failed when the wrong schema came, not at the 5 s timeout
        assert lie.session.held_dropped - held0 == 1
        assert lie.broker._core.held_count == 0 and not lie.broker._core.held
        assert lie.session.schemas.get(THING.class_key) is None
        # asked directly: the same lie is refused, typed
        getting = asyncio.ensure_future(lie.session.get_schema(THING.class_key, _timeout=2.0))
        request, to = await lie.fake.next("S")
        reg = SchemaRegistry()
        reg.add(THING_OTHER)
        await lie.fake.reply(to, SchemaResponse(request.seq, THING_OTHER), schemas=reg)
        with pytest.raises(UnknownClassError):
            await asyncio.wait_for(getting, 10.0)
        # the truth is accepted afterwards
        query = asyncio.ensure_future(lie.session.get_objects(
            _class="thing", _package=FAKE_PACKAGE, _agent=agent, _timeout=5.0))
        await _answer_query(lie.fake, [lie.fake.thing(0, n) for n in range(2)])
        assert len(await asyncio.wait_for(query, 10.0)) == 2
        assert lie.session.schemas.get(THING.class_key) == THING
        assert len(lie.broker._core) == 0 and len(lie.broker._waits) == 0
    _report(f"lying agent: a schema answer with another hash: the query failed in "
            f"{took:.2f} s ({type(info.value).__name__}: {info.value})")



async def test_objects_carrying_another_agents_banks(
        bus: str, loop_errors: list[dict[str, Any]]) -> None:
    """The fake agent (banks 1.77) answers a query with objects whose ids carry banks
    3.99.  What happens, documented: the objects are delivered to the caller who asked
    (once, attributed to the agent that answered, 1.77); a method call on one goes
    where its object id points (``agent.3.99``, as the classic console does), where
    nobody answers: it times out, typed; the fake agent never sees it."""
    async with lying_bus(bus) as lie:
        agent = lie.remote()
        query = asyncio.ensure_future(lie.session.get_objects(
            _class="thing", _package=FAKE_PACKAGE, _agent=agent, _timeout=5.0))
        await _answer_query(lie.fake, [lie.fake.thing(0, n, banks=(3, 99)) for n in range(2)])
        things = await asyncio.wait_for(query, 10.0)
        assert sorted(t.name for t in things) == ["thing-0", "thing-1"]
        for t in things:
            assert t.get_object_id().agent_key() == (3, 99)
            assert t.get_agent() == agent
        with pytest.raises(QmfTimeout):
            await asyncio.wait_for(things[0].ping(1, _timeout=0.5), 5.0)
        received = []
        while not lie.fake.requests.empty():
            received.append(lie.fake.requests.get_nowait()[0].OPCODE)
        assert "M" not in received
        assert len(lie.broker._core) == 0 and len(lie.broker._waits) == 0


async def test_objects_of_a_class_the_agent_will_not_describe(
        bus: str, loop_errors: list[dict[str, Any]]) -> None:
    """The fake agent answers a query with objects of a class it then refuses to
    describe (its schema request answered with an error ``z``): the bodies held for
    the schema are dropped and counted, the query fails at once with a typed error,
    and nothing stays held."""
    async with lying_bus(bus) as lie:
        held0 = lie.session.held_dropped
        agent = lie.remote()
        started = time.monotonic()
        query = asyncio.ensure_future(lie.session.get_objects(
            _class="thing", _package=FAKE_PACKAGE, _agent=agent, _timeout=5.0))
        await _answer_query(lie.fake, [lie.fake.thing(0, n) for n in range(3)],
                            schema_answer=None)
        request, to = await lie.fake.next("S")
        await lie.fake.reply(to, CommandComplete(request.seq, 1, "no such class"))
        with pytest.raises(QmfError) as info:
            await asyncio.wait_for(query, 10.0)
        took = time.monotonic() - started
        assert "no such class" in str(info.value)
        assert took < 4.0
        assert lie.session.held_dropped - held0 == 1
        assert lie.broker._core.held_count == 0
        assert len(lie.broker._core) == 0 and len(lie.broker._waits) == 0
    _report(f"lying agent: objects of a class it will not describe: the query failed in "
            f"{took:.2f} s ({type(info.value).__name__})")


# ------------------------------------------------------------------ qpidd (AMQP 1.0, QMF v2)

def _s10(text: str) -> bytes:
    raw = text.encode()
    return (b"\xa1" + bytes([len(raw)]) + raw) if len(raw) < 256 else (
        b"\xb1" + struct.pack(">I", len(raw)) + raw)


def _compound10(code: int, items: list[bytes], *, count: int | None = None,
                size: int | None = None) -> bytes:
    """An AMQP 1.0 list32 (0xd0) or map32 (0xd1) of encoded items, with its count and
    size as declared (the true ones unless given)."""
    payload = struct.pack(">I", len(items) if count is None else count) + b"".join(items)
    return bytes([code]) + struct.pack(">I", len(payload) if size is None else size) + payload


def _deep10(levels: int) -> bytes:
    inner = _compound10(0xD1, [])
    for level in range(levels - 1):
        inner = (_compound10(0xD0, [inner]) if level % 2 == 0
                 else _compound10(0xD1, [_s10("m"), inner]))
    return inner if inner[0] == 0xD1 else _compound10(0xD1, [_s10("m"), inner])


def wellformed10(big: bool) -> list[tuple[str, bytes]]:
    """Large AMQP 1.0 values, well formed (encoded bytes)."""
    entries = 1_000_000 if big else 100_000
    one = [_s10("k"), b"\x52\x05"]
    return [
        (f"map of {entries:,} distinct keys", _compound10(
            0xD1, [b for i in range(entries) for b in (_s10(f"{i:x}"), b"\x52\x05")])),
        ("map of 1,000,000 entries under one key", _compound10(0xD1, one * 1_000_000)),
        ("10,000 levels of lists in maps", _deep10(10_000)),
    ]


def lying10() -> list[tuple[str, bytes]]:
    """AMQP 1.0 values whose declared sizes pass the end of the message."""
    one = [_s10("k"), b"\x52\x05"]
    return [
        ("map declaring 4 GiB", _compound10(0xD1, one, size=0xFFFFFFF0)),
        ("map declaring 2**31 items", _compound10(0xD1, one, count=0x7FFFFFFE)),
        ("100 MB string declared, 10 bytes sent",
         _compound10(0xD1, [_s10("s"), b"\xb1" + struct.pack(">I", 100_000_000) + b"0123456789"])),
        ("100 MB binary declared, 10 bytes sent",
         _compound10(0xD1, [_s10("b"), b"\xb0" + struct.pack(">I", 100_000_000) + b"0123456789"])),
        ("a map cut short", b"\xd1\x00\x00\x00\x10\x00\x00\x00\x02\xa1"),
    ]


def message10(value: bytes | None, *, subject: str, headers: dict[str, Any],
              reply_to: str | None = None, correlation_id: str | None = None,
              data: bytes | None = None, content_type: str | None = None) -> bytes:
    """An AMQP 1.0 message: the project's encoder for the properties and application
    properties, then ``value`` (encoded bytes, taken as they are) as the amqp-value
    section, or ``data`` as a data section."""
    from qmf_async.wire import encode_amqp10_message
    head = encode_amqp10_message(b"", subject=subject, reply_to=reply_to,
                                 correlation_id=correlation_id, content_type=content_type,
                                 application_properties=headers, body_kind="data")
    empty_data = b"\x00\x53\x75\xa0\x00"
    assert head.endswith(empty_data)
    head = head[:-len(empty_data)]
    if data is not None:
        return head + b"\x00\x53\x75\xb0" + struct.pack(">I", len(data)) + data
    return head + (b"\x00\x53\x77" + value if value is not None else b"")


def _encode10(value: Any) -> bytes:
    from qmf_async.wire import encode_amqp10_value
    return encode_amqp10_value(value)


def v2_values(agent: str) -> list[tuple[str, Any, dict[str, Any]]]:
    """The malformed v2 maps of :func:`v2_garbage` as values (for AMQP 1.0)."""
    ok_oid = {"_agent_name": agent, "_object_name": "x"}
    ok_sid = {"_package_name": "p", "_class_name": "c", "_type": "_data",
              "_hash": uuid.UUID(int=1)}
    qr = _v2("_query_response", **{"qmf.agent": agent, "qmf.content": "_data"})
    mr = _v2("_method_response", **{"qmf.agent": agent})
    return [
        ("_values an int", [{"_values": 5, "_object_id": ok_oid, "_schema_id": ok_sid}], qr),
        ("_values a list", [{"_values": [1], "_object_id": ok_oid, "_schema_id": ok_sid}], qr),
        ("_schema_id a string", [{"_values": {}, "_object_id": ok_oid, "_schema_id": "s"}], qr),
        ("_schema_id names ints", [{"_values": {}, "_object_id": ok_oid,
                                    "_schema_id": {**ok_sid, "_class_name": 7}}], qr),
        ("_object_id an int", [{"_values": {}, "_object_id": 9, "_schema_id": ok_sid}], qr),
        ("query response a map", {"_values": {}}, qr),
        ("query response an int", 5, qr),
        ("query response a string", "five", qr),
        ("method response a list", [1, 2], mr),
        ("method response _arguments an int", {"_arguments": 3}, mr),
        ("method response a string", "ok", mr),
        ("exception _values a list", {"_values": [1]}, _v2("_exception")),
        ("no qmf.opcode", {"_values": {}}, dict(V2_HEADERS)),
        ("qmf.opcode an int", {"_values": {}}, _v2(5)),
    ]


class RawQpidd:
    """A raw AMQP 1.0 client of qpidd (``tests/qmf2_raw.py``: the sans-I/O engine on a
    blocking socket, no transport, driven from a thread): sends any encoded message to
    any address."""

    def __init__(self, host: str, port: int) -> None:
        from qmf_async.wire import Described, Symbol

        from .qmf2_raw import RawV2Client
        self.client = RawV2Client(host, port, timeout=10.0)
        self._links: dict[str, Any] = {}
        # answers to ``reply_to`` come to amq.direct under this key (the project's agent
        # answers a reply address without a "/" there, as over AMQP 0-9-1)
        self.key = f"hostile-{uuid.uuid4().hex[:8]}"
        self.reply_to = f"amq.direct/{self.key}"
        self.answers: list[bytes] = []
        self.client.conn.create_receiver(
            "amq.direct", credit=1000, name="direct", sink=self.answers,
            filter={"qmf-binding": Described(
                Symbol("apache.org:legacy-amqp-direct-binding:string"), self.key)})

    def send(self, address: str, encoded: bytes) -> None:
        link = self._links.get(address)
        if link is None:
            link = self._links[address] = self.client.conn.create_sender(address)
        link.send(encoded=encoded, settled=True)

    def settle(self) -> None:
        """Pump once more (everything sent is written by then)."""
        self.client.conn.pump(0)

    def close(self) -> None:
        self.client.close()


def _counted_at_console(broker: Broker) -> int:
    """Messages the console dropped as malformed: the session's count, and the AMQP
    1.0 transport's (messages that did not decode, bodies that are not QMF)."""
    t = broker.transport
    t = getattr(t, "_inner", t)  # the AMQP 1.0 transport behind protocol detection
    return (broker.session.malformed + getattr(t, "malformed", 0)
            + getattr(t, "unsupported", 0))


def _counted_at_agent(agent: Agent) -> int:
    """Requests the agent dropped or refused: its count, and its AMQP 1.0 transport's
    (messages that did not decode)."""
    t = agent._runtime.transport
    t = getattr(t, "_inner", t)
    return agent.stats["bad_requests"] + getattr(t, "malformed", 0) + getattr(t, "unsupported", 0)


HOSTILE_HOLDER = object_class(
    "org.qmfasync.hostile", "holder", properties=[Property("n", "uint32", index=True)],
    methods=[method("echo", Arg("sequence", "uint32", direction="IO"),
                    Arg("body", "lstr", direction="IO"))])


async def _qpidd_hostile(qpidd: Any, big: bool) -> dict[str, Any]:
    gate = Gate()
    agent = Agent(qpidd.url, label=_label("holder"), schemas=[HOSTILE_HOLDER], interval=0.5,
                  attach=False, broker_bank=7, qmf_versions=(2,))
    agent.create_object("holder", n=1)
    agent.set_method_handler("holder", "echo", gate.echo)
    await agent.start()
    raw = await asyncio.to_thread(RawQpidd, "127.0.0.1", qpidd.port)
    figures: dict[str, Any] = {}
    try:
        async with Session(timeout=5.0, agent_interval=0.5,
                           missed_heartbeats=100 if big else 10) as session:
            broker = await session.add_broker(qpidd.url, timeout=10.0)
            found = await wait_until(lambda: next(
                (a for a in session.get_agents(broker) if a.name == agent.v2_name), None),
                15.0, message="the test agent known")
            (holder,) = await session.get_objects(_class="holder", _agent=found, _timeout=5.0)
            call = asyncio.ensure_future(holder.echo(1, "held", _timeout=4.0))
            await wait_until(lambda: gate.entered == 1, 5.0, message="the call held")
            v2 = broker._v2
            assert v2 is not None
            (cid,) = list(v2.core._pending)
            reply = broker._reply_queue or ""
            name = agent.v2_name or ""
            to_console: list[bytes] = []
            for _, value, headers in v2_values(name):
                to_console.append(message10(_encode10(value), subject=reply, headers=headers,
                                            correlation_id=cid))
            for _, hostile in wellformed10(big):
                to_console.append(message10(hostile, subject=reply, correlation_id=cid,
                                            headers=_v2("_query_response",
                                                        **{"qmf.agent": name})))
            # a map's 0-10 bytes in a data section, and an amqp-value cut short
            to_console.append(message10(None, subject=reply, headers=_v2("_method_response"),
                                        correlation_id=cid, data=_map_bytes({"a": 1})[1],
                                        content_type="amqp/map"))
            # (the sixth, ``{"_values": {}}`` under the agent's name, is a valid heartbeat)
            topic = [message10(_encode10(v), subject="agent.ind.heartbeat.hostile",
                               headers={**h, "qmf.opcode": "_agent_heartbeat_indication"})
                     for _, v, h in v2_values(name)[:5]]
            to_agent = [message10(_encode10(value), subject=name, headers=headers,
                                  reply_to=raw.reply_to, correlation_id=f"bad-{i}")
                        for i, (_, value, _, headers) in enumerate(v2_request_garbage(name))]
            to_agent += [message10(hostile, subject=name, reply_to=raw.reply_to,
                                   correlation_id="big", headers={
                                       "x-amqp-0-10.app-id": "qmf2", "method": "request",
                                       "qmf.opcode": "_query_request"})
                         for _, hostile in wellformed10(big)]
            # qpidd's own agent gets the same requests, under its alias
            to_qpidd = [message10(_encode10(value), subject="broker", headers=headers,
                                  reply_to="amq.direct/nobody", correlation_id=f"q-{i}")
                        for i, (_, value, _, headers) in enumerate(v2_request_garbage(name))]
            console0 = _counted_at_console(broker)
            bad0 = _counted_at_agent(agent)
            started = time.monotonic()

            qpidd_closed = 0

            def send_all() -> None:
                for m in to_console:
                    raw.send("amq.direct", m)
                for m in topic:
                    raw.send("qmf.default.topic", m)
                for m in to_agent:
                    raw.send("qmf.default.direct", m)
                raw.settle()
                # qpidd's own agent closes the connection of a request it cannot read
                # ("Out of Bounds"): a connection each
                nonlocal qpidd_closed
                for m in to_qpidd:
                    other = RawQpidd("127.0.0.1", qpidd.port)
                    try:
                        other.send("qmf.default.direct", m)
                        other.settle()
                        other.client.wait_for(lambda: False, "qpidd's answer", timeout=0.2)
                    except ConnectionError:
                        qpidd_closed += 1
                    except TimeoutError:
                        pass
                    finally:
                        with contextlib.suppress(OSError, ConnectionError):
                            other.close()
            with counted_logs() as logs:
                await asyncio.wait_for(asyncio.to_thread(send_all), 60.0)
                expected = len(to_console) + len(topic)

                def counts() -> tuple[int, int]:
                    return (_counted_at_console(broker) - console0,
                            _counted_at_agent(agent) - bad0)
                try:
                    await wait_until(lambda: counts() == (expected, len(to_agent)), 30.0)
                except AssertionError:
                    raise AssertionError(f"(counted at the console, at the agent) = "
                                         f"{counts()}, not ({expected}, {len(to_agent)})"
                                         ) from None
                took = time.monotonic() - started
                with pytest.raises(QmfTimeout):
                    await asyncio.wait_for(call, 10.0)
            # each malformed request to our agent that had a reply address: an _exception
            from qmf_async.wire import decode_amqp10_message

            def exceptions() -> set[str]:
                out = set()
                for data in raw.answers:
                    msg = decode_amqp10_message(data)
                    props = msg.application_properties or {}
                    if props.get("qmf.opcode") == "_exception" and str(
                            msg.correlation_id).startswith("bad-"):
                        out.add(str(msg.correlation_id))
                return out
            want = {f"bad-{i}" for i in range(len(v2_request_garbage(name)))}
            await asyncio.to_thread(raw.client.wait_for, lambda: exceptions() >= want,
                                    "an _exception for each malformed request", 10.0)
            gate.open.set()
            # the agent and qpidd answer good requests right after
            token = uuid.uuid4().hex
            assert (await holder.echo(2, token, _timeout=5.0)).body == token
            queues = await session.get_objects(_class="queue", _package="org.apache.qpid.broker",
                                               _timeout=5.0)
            assert queues
            # one answer under no pending request: the held call's own, after it timed out
            assert v2.core.dropped == 1
            figures = {"to_console": expected, "to_agent": len(to_agent),
                       "to_qpidd": len(to_qpidd), "qpidd_closed": qpidd_closed,
                       "seconds": took, "log_records": logs.count,
                       "at_console": _counted_at_console(broker) - console0}
    finally:
        await asyncio.to_thread(raw.close)
        await agent.stop()
    _report(f"qpidd: {figures}")
    return figures


@pytest.mark.qpidd
async def test_malformed_and_oversized_v2_at_a_live_console_and_agent_on_qpidd(
        qpidd_fresh: Any, loop_errors: list[dict[str, Any]]) -> None:
    await _qpidd_hostile(qpidd_fresh(False), big=False)


@pytest.mark.qpidd
@pytest.mark.slow
async def test_a_map_of_a_million_distinct_keys_on_qpidd(
        qpidd_fresh: Any, loop_errors: list[dict[str, Any]]) -> None:
    await _qpidd_hostile(qpidd_fresh(False), big=True)


@pytest.mark.qpidd
async def test_values_with_lying_sizes_through_qpidd(
        qpidd_fresh: Any, loop_errors: list[dict[str, Any]]) -> None:
    """AMQP 1.0 values whose declared sizes pass the end of the message, sent to a live
    console's reply address: qpidd decodes what it routes, and closes the sender's
    connection (``amqp:internal-error``, "Out of Bounds") instead of passing them on;
    whatever it did pass would be counted at the console.  The console stays connected
    and answers."""
    qpidd = qpidd_fresh(False)
    async with Session(timeout=5.0) as session:
        broker = await session.add_broker(qpidd.url, timeout=10.0)
        reply = broker._reply_queue or ""
        console0 = _counted_at_console(broker)
        refused: list[str] = []
        delivered = 0
        for kind, value in lying10():
            raw = await asyncio.to_thread(RawQpidd, "127.0.0.1", qpidd.port)
            message = message10(value, subject=reply, headers=_v2("_method_response"),
                                correlation_id="1")

            def send(raw: RawQpidd = raw, message: bytes = message) -> None:
                raw.send("amq.direct", message)
                raw.settle()
                raw.client.wait_for(lambda: False, "qpidd's answer", timeout=0.5)
            try:
                await asyncio.wait_for(asyncio.to_thread(send), 10.0)
            except ConnectionError as exc:
                assert "Out of Bounds" in str(exc) or "decode" in str(exc).lower(), exc
                refused.append(kind)
            except TimeoutError:
                delivered += 1  # qpidd kept the connection: it passed the message on
            finally:
                with contextlib.suppress(OSError, ConnectionError):
                    await asyncio.to_thread(raw.close)
        await wait_until(lambda: _counted_at_console(broker) - console0 == delivered, 5.0,
                         message=f"{delivered} delivered messages counted")
        assert broker.connected
        queues = await session.get_objects(_class="queue", _package="org.apache.qpid.broker",
                                           _timeout=5.0)
        assert queues
    _report(f"qpidd: {len(refused)} of {len(lying10())} values with lying sizes refused by "
            f"qpidd (sender's connection closed), {delivered} passed on and counted")


@pytest.mark.qpidd
async def test_malformed_v1_bodies_at_a_live_console_and_agent_on_qpidd(
        qpidd_fresh: Any, loop_errors: list[dict[str, Any]]) -> None:
    """QMF v1 over AMQP 1.0 (qpidd with ``--mgmt-qmf1 yes``): the v1 garbage of the
    RabbitMQ test in data sections, to a v1 session's reply key and topic bindings, to
    the project's agent (attached to qpidd, banks from qpidd) and to qpidd's own agent
    (``broker``): counted where it is ours, and every peer answers afterwards."""
    qpidd = qpidd_fresh(True)
    rnd = random.Random(1810)
    agent = Agent(qpidd.url, label=_label("v1holder"), schemas=[HOSTILE_HOLDER], interval=0.5,
                  qmf_versions=(1,))
    agent.create_object("holder", n=1)
    agent.set_method_handler("holder", "echo", lambda obj, **args: args)
    await agent.start()
    raw = await asyncio.to_thread(RawQpidd, "127.0.0.1", qpidd.port)
    try:
        async with Session(timeout=5.0, agent_interval=0.5, qmf_version=1) as session:
            broker = await session.add_broker(qpidd.url, timeout=10.0)
            found = await wait_until(lambda: next(
                (a for a in session.get_agents(broker)
                 if (a.broker_bank, a.agent_bank) == (agent.broker_bank, agent.agent_bank)),
                None), 15.0, message="the test agent known")
            reply = broker._reply_queue or ""
            garbage = v1_garbage(rnd.randrange(1, 1 << 31), rnd)
            to_agent = v1_request_garbage(77, rnd)
            to_qpidd = [(k, b) for k, b in to_agent if not k.startswith("random")]
            # qpidd checks the header of a v1 message to an agent (ACL) and drops the
            # message when it does not decode: only these reach the agent
            passed = [b for _, b in to_agent if len(b) >= 8 and b[:3] == b"AM2"]
            topic_keys = ["console.obj.1.0.org.apache.qpid.broker.queue",
                          "console.heartbeat.1.0", "console.event.1.0.org.apache.qpid.broker.x"]

            def data(body: bytes, key: str, reply_to: str | None = None) -> bytes:
                return message10(None, subject=key, headers={}, data=body, content_type=QMF,
                                 reply_to=reply_to)
            console0 = _counted_at_console(broker)
            bad0 = _counted_at_agent(agent)
            started = time.monotonic()
            refused = 0

            def send_all() -> None:
                for _, body in garbage:
                    raw.send("amq.direct", data(body, reply))
                for i, (_, body) in enumerate(garbage[:60]):
                    raw.send("qpid.management", data(body, topic_keys[i % len(topic_keys)]))
                for _, body in to_agent:
                    raw.send("qpid.management", data(
                        body, f"agent.{agent.broker_bank}.{agent.agent_bank}",
                        "amq.direct/nobody"))
                raw.settle()
                # qpidd's own agent decodes v1 requests as the exchange routes them and
                # closes the sending link on one it cannot: a fresh connection each time
                nonlocal refused
                for _, body in to_qpidd:
                    other = RawQpidd("127.0.0.1", qpidd.port)
                    try:
                        other.send("qpid.management", data(body, "broker", "amq.direct/nobody"))
                        other.settle()
                        other.client.wait_for(lambda: False, "qpidd's answer", timeout=0.05)
                    except ConnectionError:
                        refused += 1
                    except TimeoutError:
                        pass
                    finally:
                        with contextlib.suppress(OSError, ConnectionError):
                            other.close()
            with counted_logs() as logs:
                await asyncio.wait_for(asyncio.to_thread(send_all), 60.0)
                expected = len(garbage) + 60

                def counts() -> tuple[int, int]:
                    return (_counted_at_console(broker) - console0,
                            _counted_at_agent(agent) - bad0)
                try:
                    await wait_until(lambda: counts() == (expected, len(passed)), 30.0)
                except AssertionError:
                    raise AssertionError(f"(counted at the console, at the agent) = "
                                         f"{counts()}, not ({expected}, {len(passed)})"
                                         ) from None
                took = time.monotonic() - started
            (holder,) = await session.get_objects(_class="holder", _agent=found, _timeout=5.0)
            token = uuid.uuid4().hex
            assert (await holder.echo(2, token, _timeout=5.0)).body == token
            queues = await session.get_objects(_class="queue", _package="org.apache.qpid.broker",
                                               _timeout=5.0)
            assert queues
            # qpidd publishes every second, and a class first seen on the topic has its
            # schema fetched in the background: such a request may be in flight now on a
            # busy machine; it is answered or expires, a leaked entry would never leave
            await wait_until(lambda: len(broker._core) == 0 and len(broker._waits) == 0,
                             10.0, message="the request tables empty")
    finally:
        await asyncio.to_thread(raw.close)
        await agent.stop()
    _report(f"qpidd, QMF v1: {expected} bodies to the console counted; of {len(to_agent)} "
            f"to the agent, qpidd passed on {len(passed)} (all counted), in {took:.2f} s, "
            f"{logs.count} log records; qpidd's own agent closed the sender's link on "
            f"{refused} of {len(to_qpidd)}")


async def _stream_answer(fake: FakeAgent, reply_to: str, seq: int, count: int,
                         per_body: int = 100, stop: asyncio.Event | None = None,
                         progress: list[int] | None = None) -> int:
    """``count`` records of the query ``seq`` (``per_body`` to a body), or until
    ``stop`` is set (``progress[0]``: how many so far); returns how many were sent."""
    sent = 0
    while sent < count and not (stop is not None and stop.is_set()):
        n = min(per_body, count - sent)
        await fake.reply(reply_to, *[fake.thing(seq, sent + i) for i in range(n)])
        sent += n
        if progress is not None:
            progress[0] = sent
        if sent % 5000 == 0:
            await asyncio.sleep(0)
    return sent


async def test_a_very_large_answer_and_an_answer_that_never_ends(
        bus: str, loop_errors: list[dict[str, Any]]) -> None:
    """A query answered with 10,000 objects (in bodies of 100) completes with each
    once; a query whose answer never ends (records without a ``z``) fails at its
    timeout with ``QueryTimeout`` carrying what arrived, and the records that keep
    coming after it are dropped: memory back to where it was (the object view held at
    ``max_objects``), nothing pending."""
    count = 10_000
    # the session's object view keeps the latest values of at most max_objects objects
    async with lying_bus(bus, max_objects=count) as lie:
        agent = lie.remote()
        fake = lie.fake
        # the schema first, so that the records decode as they come
        getting = asyncio.ensure_future(lie.session.get_schema(THING.class_key, _timeout=5.0))
        request, to = await fake.next("S")
        await fake.reply(to, SchemaResponse(request.seq, THING))
        await asyncio.wait_for(getting, 10.0)
        started = time.monotonic()
        query = asyncio.ensure_future(lie.session.get_objects(
            _class="thing", _package=FAKE_PACKAGE, _agent=agent, _timeout=30.0))
        g, to = await fake.next("G")
        await _stream_answer(fake, to, g.seq, count)
        await fake.reply(to, CommandComplete(g.seq))
        things = await asyncio.wait_for(query, 60.0)
        large_s = time.monotonic() - started
        assert len(things) == count
        assert len({t.get_object_id() for t in things}) == count
        del things
        gc.collect()
        tracemalloc.start()
        try:
            base, _ = tracemalloc.get_traced_memory()
            stop = asyncio.Event()
            query = asyncio.ensure_future(lie.session.get_objects(
                _class="thing", _package=FAKE_PACKAGE, _agent=agent, _timeout=1.0))
            g, to = await fake.next("G")
            progress = [0]
            streaming = asyncio.ensure_future(_stream_answer(fake, to, g.seq, 10**9, stop=stop,
                                                             progress=progress))
            with pytest.raises(QueryTimeout) as info:
                await asyncio.wait_for(query, 30.0)
            arrived = len(info.value.partial)
            # the agent goes on answering after the caller gave up: 2,000 records more
            more = progress[0] + 2000
            await wait_until(lambda: progress[0] >= more, 20.0, message="2,000 more records")
            await lie.fake.reply(to, CommandComplete(g.seq))  # and ends, late
            stop.set()
            sent = await asyncio.wait_for(streaming, 10.0)
            del info, query  # the failed query's exception holds what arrived
            gc.collect()
            left, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert arrived > 0 and sent > arrived
        assert len(lie.broker._core) == 0 and len(lie.broker._waits) == 0
        assert left - base < 2 << 20, (left - base, peak - base)
    figures = {"large_answer_objects": count, "large_answer_s": round(large_s, 2),
               "endless_sent": sent, "endless_arrived_before_timeout": arrived,
               "memory_left_kib": round((left - base) / 1024),
               "peak_kib": round((peak - base) / 1024)}
    _report(f"very large answers: {figures}")
