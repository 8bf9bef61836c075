"""The asyncio Agent against the real RabbitMQ (scripts/rabbitmq.sh starts one).

A small console built on the transport sends requests to the agent's key and records
every message that comes back (replies through ``amq.direct``, indications through
``qpid.management``), decoded with the wire API.  Every test runs its own agent with
its own agent bank (and ``attach=False`` except in the attach test), so keys and object
ids are known in advance.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from typing import Any, NamedTuple

import pytest

from qmf_async import wire
from qmf_async.agent import (
    Agent,
    Arg,
    ManagedObject,
    Property,
    Statistic,
    event_class,
    method,
    object_class,
)
from qmf_async.errors import ArgumentError, MethodError, QmfError
from qmf_async.transport._aiormq import Delivery, Transport
from qmf_async.wire._values import ClassKey, ClassKind, ObjectId

from ._util import cut_connection, make_vhost, rabbitmqctl_output, vhost_url, wait_until

pytestmark = pytest.mark.integration

PKG = "org.qmfasync.test"
PKG2 = "org.qmfasync.other"
#: broker bank of every test agent (agent banks differ per test); not 1, so that a
#: management broker run by other tests on the same vhost neither adopts nor pokes them
BB = 7

WIDGET = object_class(
    PKG, "widget",
    properties=[
        Property("name", "sstr", index=True),
        Property("size", "uint32", access="RW"),
        Property("note", "lstr", optional=True),
    ],
    statistics=[Statistic("count", "uint64"), Statistic("load", "double")],
    methods=[
        method("echo", Arg("text", "lstr", direction="IO")),
        method("add", Arg("a", "uint32", direction="I", min=0, max=100),
               Arg("b", "uint32", direction="I"), Arg("sum", "uint64", direction="O")),
        method("scale", Arg("value", "int64", direction="IO"),
               Arg("factor", "int32", direction="I")),
        method("rename", Arg("name", "lstr", direction="I", maxlen=10)),
        method("nohandler"),
        method("notimpl"),
        method("forbidden"),
        method("boom"),
        method("badvalue"),
        method("custom"),
        method("hang"),
        method("slow", Arg("n", "uint32", direction="IO")),
        method("badout", Arg("v", "uint8", direction="O")),
        method("noout", Arg("v", "uint8", direction="O")),
    ],
)
GADGET = object_class(
    PKG2, "gadget",
    properties=[Property("id", "uint32", index=True)],
    statistics=[Statistic("value", "uint32")],
)
ALARM = event_class(PKG, "alarm", [Arg("text", "sstr"), Arg("level", "uint8")])
SCHEMAS = (WIDGET, GADGET, ALARM)

REPLY_EXCHANGE = "amq.direct"
TOPIC_EXCHANGE = "qpid.management"


def _token() -> str:
    return uuid.uuid4().hex[:10]


def _bank() -> int:
    """A fresh agent bank: known to the test, unlikely to meet another run's."""
    return random.randrange(1000, 1 << 27)


def _oid(agent: Agent, number: int) -> ObjectId:
    return ObjectId.make(sequence=agent.boot_sequence, broker_bank=agent.broker_bank,
                         agent_bank=agent.agent_bank, object=number)


# --------------------------------------------------------------------------- console


class Received(NamedTuple):
    """One delivery as the test console saw it."""

    exchange: str
    routing_key: str
    messages: list[Any]  # decoded messages (empty when decoding failed)
    error: Exception | None
    at: float  # time.monotonic() at arrival


class Console:
    """A bare console: a reply endpoint on ``amq.direct`` under its own name, bound
    on ``qpid.management`` to ``console.#`` and ``schema.#`` (and more on request).
    """

    def __init__(self, url: str, schemas: Iterable[Any] = SCHEMAS) -> None:
        self.url = url
        self.registry = wire.SchemaRegistry(schemas)
        self.methods: dict[int, Any] = {}
        self.received: list[Received] = []
        self.transport: Transport | None = None
        self.queue = ""
        self.target = ""  # routing key of the agent under test
        self._seq = itertools.count(random.randrange(1, 1 << 30))

    async def open(self, bindings: Sequence[str] = ("console.#", "schema.#")) -> Console:
        t = Transport(self.url, name=f"qmf-test-console-{_token()}")
        await t.connect()
        t.set_dispatcher(self._on_delivery)
        await t.declare_management_exchange()
        self.queue = await t.open_endpoint(None)
        await t.bind(self.queue, REPLY_EXCHANGE, self.queue)
        for key in bindings:
            await t.bind(self.queue, TOPIC_EXCHANGE, key)
        self.transport = t
        return self

    async def close(self) -> None:
        if self.transport is not None:
            await self.transport.close()

    def _on_delivery(self, d: Delivery) -> None:
        try:
            msgs = wire.decode(d.body, self.registry, methods=self.methods)
            self.registry.learn(msgs)
            error = None
        except wire.DecodeError as exc:  # e.g. another agent's class on a shared bus
            msgs, error = [], exc
        self.received.append(Received(d.exchange, d.routing_key, msgs, error, time.monotonic()))

    # -- sending

    def next_seq(self) -> int:
        return next(self._seq)

    async def request(self, messages: Any, *, key: str | None = None,
                      reply_to: str | type[Ellipsis] | None = ...,
                      body: bytes | None = None) -> None:
        """Publish ``messages`` (one body) to the agent, with our reply key."""
        assert self.transport is not None
        if body is None:
            body = wire.encode(messages, self.registry)
        await self.transport.publish(
            body, exchange=TOPIC_EXCHANGE, routing_key=key or self.target,
            reply_to=self.queue if reply_to is ... else reply_to)

    def method_request(self, object_id: ObjectId, name: str,
                       args: dict[str, Any] | None = None, *, class_key: ClassKey | None = None,
                       raw: bytes = b"") -> wire.MethodRequest:
        """An ``M``; outputs of its answer are decoded when the method is known."""
        key = class_key or WIDGET.class_key
        seq = self.next_seq()
        schema = self.registry.get(key)
        found = schema.find_method(name) if schema is not None else None
        if found is not None:
            self.methods[seq] = (schema, found)
        return wire.MethodRequest(seq, object_id, key, name, args, raw)

    async def call(self, object_id: ObjectId, name: str, args: dict[str, Any] | None = None,
                   **kw: Any) -> int:
        msg = self.method_request(object_id, name, args, **kw)
        await self.request(msg)
        return msg.seq

    async def get(self, query: dict[str, Any]) -> int:
        seq = self.next_seq()
        await self.request(wire.GetQuery(seq, query))
        return seq

    # -- reading

    def replies(self) -> list[Received]:
        return [r for r in self.received if r.exchange == REPLY_EXCHANGE]

    def answer_of(self, seq: int) -> list[Any]:
        """Every reply message with ``seq``, in arrival order."""
        return [m for r in self.replies() for m in r.messages if m.seq == seq]

    def is_answered(self, seq: int) -> bool:
        return any(m.OPCODE in "zms" for m in self.answer_of(seq))

    async def answer(self, seq: int, timeout: float = 5.0) -> list[Any]:
        """Wait for the final reply (``z``, ``m`` or ``s``) of ``seq``; all of its messages."""
        await wait_until(lambda: self.is_answered(seq), timeout=timeout,
                         message=f"answer to request {seq}")
        return self.answer_of(seq)

    async def method_response(self, seq: int, timeout: float = 5.0) -> wire.MethodResponse:
        msgs = await self.answer(seq, timeout)
        assert [m.OPCODE for m in msgs] == ["m"], msgs
        return msgs[0]

    def topic(self, prefix: str, since: int = 0) -> list[tuple[int, Any]]:
        """(delivery index, message) of indications whose routing key starts with ``prefix``."""
        return [(i, m) for i, r in enumerate(self.received[since:], since)
                if r.exchange == TOPIC_EXCHANGE and r.routing_key.startswith(prefix)
                for m in r.messages]

    def heartbeats(self, agent: Agent, since: int = 0) -> list[tuple[int, Any]]:
        return self.topic(f"console.heartbeat.{agent.broker_bank}.{agent.agent_bank}", since)

    def records(self, agent: Agent, obj: ManagedObject | None = None,
                since: int = 0) -> list[tuple[int, Any]]:
        """c/i indications of ``agent`` (for ``obj`` only when given)."""
        found = self.topic(f"console.obj.{agent.broker_bank}.{agent.agent_bank}.", since)
        return [(i, m) for i, m in found if obj is None or m.object_id == obj.object_id]

    async def next_heartbeats(self, agent: Agent, count: int = 1, timeout: float = 5.0) -> int:
        """Wait for ``count`` heartbeats after now; the delivery index after the last one."""
        mark = len(self.received)
        await wait_until(lambda: len(self.heartbeats(agent, mark)) >= count, timeout=timeout,
                         message=f"{count} heartbeat(s)")
        return self.heartbeats(agent, mark)[count - 1][0] + 1


def _install_handlers(agent: Agent) -> None:
    @agent.method("widget", "echo")
    async def echo(obj: ManagedObject, text: str) -> None:
        return None  # the IO argument goes back unchanged

    @agent.method("widget", "add")
    def add(obj: ManagedObject, a: int, b: int) -> dict[str, Any]:  # a plain function
        obj.inc("count")
        return {"sum": a + b}

    @agent.method("widget", "scale")
    async def scale(obj: ManagedObject, value: int, factor: int) -> dict[str, Any]:
        return {"value": value * factor}

    @agent.method("widget", "rename")
    async def rename(obj: ManagedObject, name: str) -> None:
        obj.set(name=name)

    @agent.method("widget", "notimpl")
    async def notimpl(obj: ManagedObject) -> None:
        raise NotImplementedError("not in this version")

    @agent.method("widget", "forbidden")
    async def forbidden(obj: ManagedObject) -> None:
        raise PermissionError("widgets are read-only today")

    @agent.method("widget", "boom")
    async def boom(obj: ManagedObject) -> None:
        raise RuntimeError("kaboom-1234")

    @agent.method("widget", "badvalue")
    async def badvalue(obj: ManagedObject) -> None:
        raise ValueError("size must be even")

    @agent.method("widget", "custom")
    async def custom(obj: ManagedObject) -> None:
        raise MethodError(42, "custom failure text")

    @agent.method("widget", "hang")
    async def hang(obj: ManagedObject) -> None:
        await asyncio.Event().wait()

    @agent.method("widget", "badout")
    async def badout(obj: ManagedObject) -> dict[str, Any]:
        return {"v": 300}  # does not fit its uint8

    @agent.method("widget", "noout")
    async def noout(obj: ManagedObject) -> dict[str, Any]:
        return {}

    @agent.method("widget", "slow")
    async def slow(obj: ManagedObject, n: int) -> None:
        await asyncio.sleep(0.05)


@asynccontextmanager
async def running_agent(url: str, console: Console | None = None,
                        **options: Any) -> AsyncIterator[Agent]:
    """An agent serving SCHEMAS with the test handlers; ``console`` targets it."""
    kw: dict[str, Any] = dict(label=f"qmf-test-agent-{_token()}", schemas=SCHEMAS,
                              interval=0.2, attach=False, broker_bank=BB,
                              agent_bank=_bank(), method_timeout=0.3)
    kw.update(options)
    agent = Agent(url, **kw)
    _install_handlers(agent)
    if console is not None:
        console.target = agent.agent_key
    await agent.start()
    try:
        yield agent
    finally:
        await agent.stop()


@pytest.fixture
async def console(amqp_url: str) -> AsyncIterator[Console]:
    c = Console(amqp_url)
    await c.open()
    yield c
    await c.close()


@pytest.fixture
async def agent(amqp_url: str, console: Console) -> AsyncIterator[Agent]:
    async with running_agent(amqp_url, console) as a:
        yield a


def _widget(agent: Agent, name: str = "w1", **values: Any) -> ManagedObject:
    return agent.create_object("widget", name=name, size=values.pop("size", 10), **values)


# --------------------------------------------------------------------------- P Q S


async def test_package_query_lists_packages_then_z(console: Console, agent: Agent) -> None:
    seq = console.next_seq()
    await console.request(wire.PackageQuery(seq))
    msgs = await console.answer(seq)
    assert [m.OPCODE for m in msgs] == ["p", "p", "z"]
    assert sorted(m.package for m in msgs[:-1]) == sorted([PKG, PKG2])
    assert msgs[-1] == wire.CommandComplete(seq, 0, "OK")
    # the p replies travel packed in one body, the z alone (as qpidd's "pp" then "z")
    bodies = [[m.OPCODE for m in r.messages] for r in console.replies()]
    assert bodies == [["p", "p"], ["z"]]


async def test_class_query_known_and_unknown_package(console: Console, agent: Agent) -> None:
    seq = console.next_seq()
    await console.request(wire.ClassQuery(seq, PKG))
    msgs = await console.answer(seq)
    assert [m.OPCODE for m in msgs] == ["q", "q", "z"]
    assert {(m.kind, m.class_key) for m in msgs[:-1]} == {
        (ClassKind.OBJECT, WIDGET.class_key), (ClassKind.EVENT, ALARM.class_key)}
    assert msgs[-1].code == 0

    seq = console.next_seq()
    await console.request(wire.ClassQuery(seq, "org.nosuch"))
    assert await console.answer(seq) == [wire.CommandComplete(seq, 0, "OK")]


async def test_schema_request_known_and_unknown(console: Console, agent: Agent) -> None:
    for schema in SCHEMAS:
        seq = console.next_seq()
        await console.request(wire.SchemaRequest(seq, schema.class_key))
        msgs = await console.answer(seq)
        assert [m.OPCODE for m in msgs] == ["s"]
        assert msgs[0].schema == schema

    for key in (ClassKey(PKG, "widget", bytes(16)), ClassKey("org.nosuch", "x", bytes(16))):
        seq = console.next_seq()
        await console.request(wire.SchemaRequest(seq, key))
        msgs = await console.answer(seq)
        assert [m.OPCODE for m in msgs] == ["z"]
        assert msgs[0].code == 1


# --------------------------------------------------------------------------- G


@pytest.mark.parametrize(
    "query, expected",
    [
        pytest.param(lambda w, g: {"_class": "widget"}, ["w1", "w2"], id="class"),
        pytest.param(lambda w, g: {"_class": "widget", "_package": PKG}, ["w1", "w2"],
                     id="class+package"),
        pytest.param(lambda w, g: {"_class": "widget", "_package": PKG2}, [], id="wrong-package"),
        pytest.param(lambda w, g: {"_class": "gadget"}, ["gadget5"], id="other-class"),
        pytest.param(lambda w, g: {"_objectid": str(w.object_id)}, ["w1"], id="objectid-text"),
        pytest.param(lambda w, g: {"_objectid": str(g.object_id)}, ["gadget5"],
                     id="objectid-gadget"),
        pytest.param(lambda w, g: {"_objectid": "0-1-7-1-999999"}, [], id="unknown-objectid"),
        pytest.param(lambda w, g: {"_key": str(WIDGET.class_key)}, ["w1", "w2"], id="key-text"),
        pytest.param(lambda w, g: {"_class": "nosuch"}, [], id="unknown-class"),
    ],
)
async def test_get_query(console: Console, agent: Agent,
                         query: Callable[[ManagedObject, ManagedObject], dict[str, Any]],
                         expected: list[str]) -> None:
    w1 = _widget(agent, "w1", note="first")
    _widget(agent, "w2")
    g1 = agent.create_object("gadget", id=5)
    g1.set(value=3)
    seq = await console.get(query(w1, g1))
    msgs = await console.answer(seq)
    assert msgs[-1] == wire.CommandComplete(seq, 0, "OK")
    records = msgs[:-1]
    assert all(m.OPCODE == "g" for m in records)
    names = [m.properties_dict().get("name") or f"gadget{m.properties_dict()['id']}"
             for m in records]
    assert sorted(names) == expected
    for m in records:
        obj = agent.find_object(m.object_id)
        assert obj is not None
        assert m.properties_dict() == obj.properties
        assert m.statistics_dict() == obj.statistics
        assert m.deleted == 0 and m.created == obj.created
        assert abs(m.timestamp - time.time_ns()) < 10 * 10**9
    if expected == ["w1"]:
        assert records[0].properties_dict()["note"] == "first"
        assert records[0].object_id == _oid(agent, w1.number)


@pytest.mark.parametrize("query", [{"_objectid": "not-an-id"}, {"_key": "no key"}])
async def test_get_with_an_unparsable_id_or_key_is_completed_with_an_error(
        console: Console, agent: Agent, query: dict[str, Any]) -> None:
    _widget(agent)
    seq = await console.get(query)
    msgs = await console.answer(seq)
    assert [(m.OPCODE, m.code) for m in msgs] == [("z", 4)]


async def test_get_with_empty_map_gets_no_answer(console: Console, agent: Agent) -> None:
    _widget(agent)
    empty = await console.get({})
    probe = await console.get({"_class": "widget"})
    await console.answer(probe)
    # the agent answers in order: an answer to the first would have come before
    assert console.answer_of(empty) == []


async def test_several_get_requests_packed_in_one_body_are_all_answered(
        console: Console, agent: Agent) -> None:
    w1 = _widget(agent)
    seqs = [console.next_seq() for _ in range(4)]
    await console.request([wire.GetQuery(seqs[0], {"_class": "widget"}),
                           wire.GetQuery(seqs[1], {"_objectid": str(w1.object_id)}),
                           wire.GetQuery(seqs[2], {"_class": "nosuch"}),
                           wire.PackageQuery(seqs[3])])
    answers = [await console.answer(s) for s in seqs]
    assert [[m.OPCODE for m in a] for a in answers] == [["g", "z"], ["g", "z"], ["z"],
                                                        ["p", "p", "z"]]


async def test_get_of_many_objects_packs_11_g_per_body_then_a_separate_z(
        console: Console, agent: Agent) -> None:
    for i in range(25):
        _widget(agent, f"w{i}")
    seq = await console.get({"_class": "widget"})
    await console.answer(seq)
    bodies = [[m.OPCODE for m in r.messages] for r in console.replies()
              if any(m.seq == seq for m in r.messages)]
    assert bodies == [["g"] * 11, ["g"] * 11, ["g"] * 3, ["z"]]
    names = {m.properties_dict()["name"] for m in console.answer_of(seq) if m.OPCODE == "g"}
    assert names == {f"w{i}" for i in range(25)}


# --------------------------------------------------------------------------- M


async def test_method_success_with_out_and_io_arguments(console: Console, agent: Agent) -> None:
    w1 = _widget(agent)
    seq = await console.call(w1.object_id, "add", {"a": 2, "b": 40})
    resp = await console.method_response(seq)
    assert (resp.status, resp.text, resp.arguments) == (0, "OK", {"sum": 42})
    assert w1["count"] == 1  # the handler ran on the object

    seq = await console.call(w1.object_id, "echo", {"text": "héllo"})
    resp = await console.method_response(seq)
    assert (resp.status, resp.arguments) == (0, {"text": "héllo"})

    seq = await console.call(w1.object_id, "scale", {"value": -21, "factor": 3})
    resp = await console.method_response(seq)
    assert (resp.status, resp.arguments) == (0, {"value": -63})

    seq = await console.call(w1.object_id, "rename", {"name": "renamed"})
    resp = await console.method_response(seq)
    assert (resp.status, resp.arguments) == (0, {})
    assert w1["name"] == "renamed"


@pytest.mark.parametrize(
    "name, args, target, status, text",
    [
        pytest.param("echo", {"text": "x"}, "unknown", 1, "UnknownObject", id="1-unknown-object"),
        pytest.param("nosuch", None, "w1", 2, "UnknownMethod", id="2-unknown-method"),
        pytest.param("nohandler", {}, "w1", 3, "NotImplemented", id="3-no-handler"),
        pytest.param("add", b"\x00\x00\x00", "w1", 4, "arguments", id="4-truncated-arguments"),
        pytest.param("add", {"a": 101, "b": 1}, "w1", 4, "maximum", id="4-above-max"),
        pytest.param("rename", {"name": "x" * 11}, "w1", 4, "longer than 10", id="4-maxlen"),
        pytest.param("echo", {"text": "x"}, "g1", 4, "not a widget", id="4-class-mismatch"),
        pytest.param("badvalue", {}, "w1", 4, "size must be even", id="4-handler-valueerror"),
        pytest.param("notimpl", {}, "w1", 5, "not in this version", id="5-notimplemented"),
        pytest.param("forbidden", {}, "w1", 6, "read-only today", id="6-permission"),
        pytest.param("boom", {}, "w1", 7, "kaboom-1234", id="7-exception"),
        pytest.param("hang", {}, "w1", 7, "timed out", id="7-timeout"),
        pytest.param("badout", {}, "w1", 7, "bad output", id="7-bad-output-value"),
        pytest.param("noout", {}, "w1", 7, "returned no v", id="7-missing-output"),
        pytest.param("echo", None, "pkg", 8, "org.nosuch", id="8-unknown-package"),
        pytest.param("echo", None, "cls", 9, "nosuch", id="9-unknown-class"),
        pytest.param("custom", {}, "w1", 42, "custom failure text", id="methoderror-passthrough"),
    ],
)
async def test_method_error_status(console: Console, agent: Agent, name: str,
                                   args: dict[str, Any] | bytes | None, target: str,
                                   status: int, text: str) -> None:
    w1 = _widget(agent)
    g1 = agent.create_object("gadget", id=1)
    key = WIDGET.class_key
    oid = {"w1": w1.object_id, "g1": g1.object_id}.get(target)
    if oid is None:
        oid = _oid(agent, 999_999)
    if target == "pkg":
        key = ClassKey("org.nosuch", "widget", WIDGET.class_key.hash)
    elif target == "cls":
        key = ClassKey(PKG, "nosuch", bytes(16))
    raw = args if isinstance(args, bytes) else b""
    started = time.monotonic()
    seq = await console.call(oid, name, None if isinstance(args, bytes) else args,
                             class_key=key, raw=raw)
    resp = await console.method_response(seq)
    elapsed = time.monotonic() - started
    assert resp.status == status, resp
    assert text in resp.text
    assert resp.arguments in (None, {}) and resp.raw_arguments == b""
    if name == "hang":
        assert 0.25 <= elapsed < 3.0
    # the agent keeps serving after the error
    seq = await console.call(w1.object_id, "echo", {"text": "still here"})
    assert (await console.method_response(seq)).status == 0


async def test_method_replies_arrive_alone_and_packed_requests_are_all_answered(
        console: Console, agent: Agent) -> None:
    w1 = _widget(agent)
    requests = [console.method_request(w1.object_id, "add", {"a": i, "b": 1}) for i in range(5)]
    requests.append(console.method_request(w1.object_id, "echo", {"text": "last"}))
    requests.append(console.method_request(w1.object_id, "nohandler", {}))
    await console.request(requests)  # one AMQP body with seven M
    responses = [await console.method_response(r.seq) for r in requests]
    assert [r.arguments for r in responses[:5]] == [{"sum": i + 1} for i in range(5)]
    assert responses[5].arguments == {"text": "last"}
    assert responses[6].status == 3
    for r in console.replies():
        if any(m.OPCODE == "m" for m in r.messages):
            assert len(r.messages) == 1, "an m reply shares its AMQP message"


async def test_burst_of_200_slow_methods_is_served_concurrently(
        console: Console, agent: Agent) -> None:
    w1 = _widget(agent)
    requests = [console.method_request(w1.object_id, "slow", {"n": i}) for i in range(200)]
    started = time.monotonic()
    for r in requests:
        await console.request(r)
    await wait_until(lambda: all(console.is_answered(r.seq) for r in requests), timeout=10.0,
                     message="200 method answers")
    elapsed = time.monotonic() - started
    for i, r in enumerate(requests):
        resp = await console.method_response(r.seq)
        assert (resp.status, resp.arguments) == (0, {"n": i})
    assert elapsed < 5.0, f"200 x 0.05 s handlers took {elapsed:.2f} s"


# --------------------------------------------------------------------------- publication


async def test_heartbeats_at_the_interval_with_ns_timestamps(
        console: Console, agent: Agent) -> None:
    await console.next_heartbeats(agent, 4)
    beats = console.heartbeats(agent)[:4]
    assert all(type(m) is wire.Heartbeat and m.seq == 0 for _, m in beats)
    now = time.time_ns()
    for _, m in beats:
        assert abs(now - m.timestamp) < 10 * 10**9, "heartbeat timestamp is not ns since epoch"
    stamps = [m.timestamp for _, m in beats]
    gaps = [(b - a) / 1e9 for a, b in itertools.pairwise(stamps)]
    assert all(g >= 0.5 * agent.interval for g in gaps), gaps
    assert sum(gaps) / len(gaps) <= 3 * agent.interval, gaps
    arrivals = [console.received[i].at for i, _ in beats]
    spacing = (arrivals[-1] - arrivals[0]) / 3
    assert 0.5 * agent.interval <= spacing <= 3 * agent.interval, spacing


async def test_only_changes_are_published(console: Console, agent: Agent) -> None:
    w1 = _widget(agent, note="n")
    # first publication: properties and statistics
    await wait_until(lambda: {m.OPCODE for _, m in console.records(agent, w1)} == {"c", "i"})
    first = [m for _, m in console.records(agent, w1)]
    c = next(m for m in first if m.OPCODE == "c")
    i = next(m for m in first if m.OPCODE == "i")
    assert c.properties_dict() == {"name": "w1", "size": 10, "note": "n"}
    assert c.statistics is None and i.properties is None
    assert i.statistics_dict() == {"count": 0, "load": 0.0}
    assert c.deleted == i.deleted == 0 and c.object_id == w1.object_id

    # nothing changes: nothing is sent again (two publications later)
    mark = await console.next_heartbeats(agent, 1)
    await console.next_heartbeats(agent, 2)
    assert console.records(agent, w1, mark) == []

    # a statistic changes: only i
    mark = len(console.received)
    w1.inc("count", 5)
    await wait_until(lambda: console.records(agent, w1, mark))
    await console.next_heartbeats(agent, 2)
    sent = [m for _, m in console.records(agent, w1, mark)]
    assert [m.OPCODE for m in sent] == ["i"]
    assert sent[0].statistics_dict()["count"] == 5

    # a property changes: only c
    mark = len(console.received)
    w1.set(size=11)
    w1.set(size=11)  # the same value again is no change
    await wait_until(lambda: console.records(agent, w1, mark))
    await console.next_heartbeats(agent, 2)
    sent = [m for _, m in console.records(agent, w1, mark)]
    assert [m.OPCODE for m in sent] == ["c"]
    assert sent[0].properties_dict()["size"] == 11


async def test_object_deleted_within_one_interval_is_reported_once(
        console: Console, agent: Agent) -> None:
    keeper = _widget(agent, "keeper")
    await wait_until(lambda: console.records(agent, keeper))
    await console.next_heartbeats(agent, 1)
    mark = len(console.received)
    brief = _widget(agent, "brief")  # created and deleted between two publications
    agent.delete_object(brief)
    await wait_until(lambda: console.records(agent, brief, mark))
    after = await console.next_heartbeats(agent, 2)
    sent = console.records(agent, brief, mark)
    assert {m.OPCODE for _, m in sent} <= {"c", "i"} and len(sent) <= 2
    assert all(m.deleted != 0 and m.deleted >= m.created for _, m in sent)
    hb = [i for i, _ in console.heartbeats(agent, mark)]
    assert len({sum(1 for h in hb if h < i) for i, _ in sent}) == 1, "reported in two publications"
    # never again, not even after a console asks for everything
    await console.request(wire.ConsoleAdded(0))
    await wait_until(lambda: console.records(agent, keeper, after))
    await console.next_heartbeats(agent, 1)
    assert console.records(agent, brief, after) == []
    seq = await console.get({"_objectid": str(brief.object_id)})
    assert await console.answer(seq) == [wire.CommandComplete(seq)]
    seq = await console.call(brief.object_id, "echo", {"text": "x"})
    assert (await console.method_response(seq)).status == 1


async def test_console_added_republishes_everything(console: Console, agent: Agent) -> None:
    objs = [_widget(agent, "a"), _widget(agent, "b"), agent.create_object("gadget", id=9)]
    await wait_until(lambda: all(len(console.records(agent, o)) == 2 for o in objs))
    mark = await console.next_heartbeats(agent, 1)
    await console.next_heartbeats(agent, 1)
    assert console.records(agent, since=mark) == []
    await console.request(wire.ConsoleAdded(0), reply_to=None)
    await wait_until(lambda: all(
        sorted(m.OPCODE for _, m in console.records(agent, o, mark)) == ["c", "i"]
        for o in objs))
    g = next(m for _, m in console.records(agent, objs[2], mark) if m.OPCODE == "c")
    rk = next(console.received[i].routing_key for i, m in console.records(agent, objs[2], mark))
    assert g.properties_dict() == {"id": 9}
    assert rk == f"console.obj.{BB}.{agent.agent_bank}.{PKG2}.gadget"


async def test_events_with_severity_and_arguments(console: Console, agent: Agent) -> None:
    prefix = f"console.event.{BB}.{agent.agent_bank}."
    agent.raise_event("alarm", 3, text="hot", level=7)
    agent.raise_event("alarm", text="cool", level=1)  # the class's default severity
    await wait_until(lambda: len(console.topic(prefix)) == 2)
    events = console.topic(prefix)
    assert {console.received[i].routing_key for i, _ in events} == {f"{prefix}{PKG}.alarm"}
    (_, hot), (_, cool) = events
    assert type(hot) is wire.EventIndication and hot.class_key == ALARM.class_key
    assert (hot.severity, dict(hot.arguments)) == (3, {"text": "hot", "level": 7})
    assert (cool.severity, dict(cool.arguments)) == (6, {"text": "cool", "level": 1})
    assert abs(hot.timestamp - time.time_ns()) < 10 * 10**9
    with pytest.raises(ArgumentError):
        agent.raise_event("alarm", text="no level")
    with pytest.raises(ArgumentError):
        agent.raise_event("alarm", 9, text="x", level=1)


async def test_schema_broadcast_at_start(amqp_url: str, console: Console) -> None:
    async with running_agent(amqp_url, console):
        def ours() -> tuple[set[str], set[tuple[int, ClassKey]]]:
            pkgs = {m.package for _, m in console.topic("schema.package")
                    if m.package in (PKG, PKG2)}
            classes = {(m.kind, m.class_key) for _, m in console.topic("schema.class")}
            return pkgs, classes
        expected = {(s.kind, s.class_key) for s in SCHEMAS}
        await wait_until(lambda: ours()[0] == {PKG, PKG2} and expected <= ours()[1])
        assert all(m.seq == 0 for _, m in console.topic("schema."))


# --------------------------------------------------------------------------- robustness


async def test_malformed_bodies_and_requests_without_reply_to_are_dropped(
        console: Console, agent: Agent) -> None:
    _widget(agent)
    before = agent.stats["bad_requests"]
    valid = wire.encode(wire.GetQuery(1, {"_class": "widget"}))
    bad = [
        b"\x00\x01garbage bytes",
        b"XM2G" + valid[4:],  # wrong magic
        valid[:6],  # truncated header
        valid[:-3],  # truncated map
        b"AM2G\x00\x00\x00\x01\xff\xff\xff\xff",  # map size beyond the body
        b"AM2?\x00\x00\x00\x01",  # unknown opcode
    ]
    for body in bad:
        await console.request(None, body=body)
    no_reply = console.next_seq()
    await console.request(wire.GetQuery(no_reply, {"_class": "widget"}), reply_to=None)
    probe = await console.get({"_class": "widget"})
    assert [m.OPCODE for m in await console.answer(probe)] == ["g", "z"]
    assert console.answer_of(no_reply) == []
    assert agent.stats["bad_requests"] == before + len(bad) + 1


async def test_schema_sent_to_the_agent_does_not_change_what_it_serves(
        console: Console, agent: Agent) -> None:
    foreign = object_class("org.intruder", "thing", properties=[Property("x", "uint8")])
    await console.request(wire.SchemaResponse(0, foreign))
    seq = console.next_seq()
    await console.request(wire.PackageQuery(seq))
    msgs = await console.answer(seq)
    assert sorted(m.package for m in msgs if m.OPCODE == "p") == sorted([PKG, PKG2])
    seq = console.next_seq()
    await console.request(wire.SchemaRequest(seq, foreign.class_key))
    assert [(m.OPCODE, m.code) for m in await console.answer(seq)] == [("z", 1)]


async def test_replies_to_vanished_consoles_do_not_block_the_agent(
        console: Console, agent: Agent) -> None:
    w1 = _widget(agent)
    gone = f"gone-{_token()}"  # nobody is bound under this key
    for i in range(50):
        await console.request(wire.GetQuery(i, {"_class": "widget"}), reply_to=gone)
        await console.request(console.method_request(w1.object_id, "slow", {"n": i}),
                              reply_to=gone)
    seq = await console.call(w1.object_id, "add", {"a": 1, "b": 2})
    assert (await console.method_response(seq)).arguments == {"sum": 3}
    seq = await console.get({"_class": "widget"})
    assert [m.OPCODE for m in await console.answer(seq)] == ["g", "z"]

    # a reply key naming a missing exchange costs the agent its publish channel
    # (RabbitMQ closes it): the agent reopens it and keeps answering
    await console.request(wire.GetQuery(1, {"_class": "widget"}),
                          reply_to=f"no-such-exchange-{_token()}/k")
    deadline = time.monotonic() + 10.0
    while True:
        seq = await console.get({"_class": "widget"})
        try:
            await console.answer(seq, timeout=0.5)
            break
        except AssertionError:
            if time.monotonic() > deadline:
                raise
    published = agent.stats["published"]
    await wait_until(lambda: agent.stats["published"] > published + 2)


# --------------------------------------------------------------------------- broker control


_rabbitmqctl = rabbitmqctl_output


async def _close_connection_named(name: str) -> bool:
    """Close, from the broker side, the one connection whose name is ``name``."""
    listing = await _rabbitmqctl("list_connections", "pid", "client_properties")
    if listing is None:
        return False
    pids = [line.split("\t", 1)[0] for line in listing.splitlines() if f'"{name}"' in line]
    if len(pids) != 1:
        return False
    return await _rabbitmqctl("close_connection", pids[0], "qmf-async test: forced close") \
        is not None


ISOLATED_VHOST = "qmf-async-test-isolated"


async def _isolated_url(url: str) -> str | None:
    """``url`` on a vhost of its own (created with rabbitmqctl), or None when that fails."""
    if not await asyncio.to_thread(make_vhost, url, ISOLATED_VHOST):
        return None
    isolated = vhost_url(url, ISOLATED_VHOST)
    try:  # rabbitmqctl may have managed another node than the one the URL names
        async with Transport(isolated):
            pass
    except QmfError:
        return None
    return isolated


async def _management_broker_answers(console: Console) -> bool:
    """Whether something answers an ``A`` on the console's vhost (within 0.5 s)."""
    seq = console.next_seq()
    await console.request(wire.AttachRequest(seq, "qmf-test-probe", uuid.uuid4()), key="broker")
    try:
        await wait_until(lambda: any(isinstance(m, wire.AttachResponse)
                                     for m in console.answer_of(seq)), timeout=0.5)
    except AssertionError:
        return False
    return True


# --------------------------------------------------------------------------- attach


async def test_without_a_management_broker_attach_falls_back_to_the_configured_banks(
        amqp_url: str) -> None:
    # a management broker run by other tests on the shared vhost would answer our A
    url = await _isolated_url(amqp_url) or amqp_url
    c = await Console(url).open(bindings=("console.#", "broker"))
    try:
        if url == amqp_url and await _management_broker_answers(c):
            pytest.skip("a management broker answers on the test vhost and rabbitmqctl "
                        "cannot make an isolated one")
        bank = _bank()
        label = f"qmf-test-attach-{_token()}"
        agent = Agent(url, label=label, schemas=SCHEMAS, interval=0.2, attach=True,
                      attach_timeout=0.3, broker_bank=BB, agent_bank=bank)
        c.target = f"agent.{BB}.{bank}"
        started = time.monotonic()
        await agent.start()
        try:
            elapsed = time.monotonic() - started
            assert 0.25 <= elapsed < 3.0
            assert not agent.attached
            assert (agent.broker_bank, agent.agent_bank) == (BB, bank)
            assert agent.agent_key == c.target
            attach = [m for r in c.received if r.routing_key == "broker" for m in r.messages
                      if isinstance(m, wire.AttachRequest) and m.label == label]
            assert len(attach) == 1 and (attach[0].broker_bank, attach[0].agent_bank) == (0, 0)
            assert attach[0].system_id == agent.system_id
            w = _widget(agent)
            assert w.object_id == ObjectId.make(sequence=1, broker_bank=BB, agent_bank=bank,
                                                object=w.number)
            seq = await c.get({"_class": "widget"})
            msgs = await c.answer(seq)
            assert [m.object_id for m in msgs if m.OPCODE == "g"] == [w.object_id]
            await wait_until(lambda: c.heartbeats(agent))
        finally:
            await agent.stop()
    finally:
        await c.close()


# --------------------------------------------------------------------------- reconnect


async def test_agent_reconnects_after_the_broker_closes_its_connection(
        amqp_url: str, console: Console) -> None:
    async with running_agent(amqp_url, console, label=f"reconnect-{_token()}") as agent:
        w1 = _widget(agent)
        seq = await console.get({"_class": "widget"})
        assert [m.OPCODE for m in await console.answer(seq)] == ["g", "z"]
        # after the first publication nothing changes: c/i after mark are re-publications
        await wait_until(lambda: console.records(agent, w1))
        mark = await console.next_heartbeats(agent, 1)
        old = agent._transport
        assert old is not None
        if not await _close_connection_named(f"qmf-agent {agent.label}"):
            # rabbitmqctl unusable here: close the aiormq connection under the agent
            await cut_connection(old)
        await wait_until(lambda: agent._transport is not old and agent._transport is not None
                         and agent._transport.is_open, timeout=15.0, message="reconnected")
        assert not old.is_open
        deadline = time.monotonic() + 15.0
        while True:  # until the new queue is bound under the agent key
            seq = await console.get({"_class": "widget"})
            try:
                msgs = await console.answer(seq, timeout=0.5)
                break
            except AssertionError:
                if time.monotonic() > deadline:
                    raise
        assert [m.object_id for m in msgs if m.OPCODE == "g"] == [w1.object_id]
        await console.next_heartbeats(agent, 3, timeout=15.0)
        # everything was re-published after the reconnection
        await wait_until(lambda: {m.OPCODE for _, m in console.records(agent, w1, mark)}
                         == {"c", "i"})
        seq = await console.call(w1.object_id, "add", {"a": 1, "b": 1})
        assert (await console.method_response(seq)).arguments == {"sum": 2}
