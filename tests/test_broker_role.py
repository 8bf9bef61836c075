"""The management-broker role against the real RabbitMQ, spoken to as a console
(Transport + wire) with real agents (qmf_async.agent.Agent).

``broker`` is one routing key per vhost: a role run by another test session on the
same vhost would answer our B and A too.  The module therefore runs on a vhost of
its own when rabbitmqctl can make one (local broker), and otherwise on the shared
vhost.  Every test also uses a broker bank of its own and filters what it observes
by its own labels, so that agents or a fake ``agent.1.0`` of other tests do not
answer for ours.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import random
import signal
import sys
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from qmf_async import ClassKey, ClassKind, ObjectId, wire
from qmf_async.agent import Agent, Property, Statistic, object_class
from qmf_async.agent.broker import AGENT_CLASS, ManagementBroker, derive_broker_id
from qmf_async.transport._aiormq import Delivery, Transport

from ._util import private_vhost, wait_until

pytestmark = pytest.mark.integration

MANAGEMENT = "qpid.management"
ROOT = Path(__file__).resolve().parent.parent

WIDGET = object_class(
    "com.example.brokertest.widgets", "widget",
    properties=[Property("name", "sstr", index=True, desc="widget name"),
                Property("owner", "objId", optional=True)],
    statistics=[Statistic("spins", "uint64", unit="spin")],
)
GADGET = object_class(
    "com.example.brokertest.gadgets", "gadget",
    properties=[Property("serial", "uint32", index=True)],
)


def _bank() -> int:
    return random.randrange(1000, 1 << 20)


def _label(what: str) -> str:
    return f"{what}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def role_url(amqp_url: str) -> Iterator[str]:
    """``amqp_url`` on a temporary vhost of this module (deleted afterwards), or
    ``amqp_url`` itself when rabbitmqctl cannot make one for that broker."""
    with private_vhost(amqp_url, "qmf-broker-role-test") as url:
        yield url


class Console:
    """A bare QMF console: reply queue on amq.direct, ``console.#``/``schema.#`` bindings,
    every delivery decoded and kept in arrival order."""

    def __init__(self, url: str) -> None:
        self.transport = Transport(url, name="qmf-broker-role-test-console")
        self.registry = wire.SchemaRegistry([AGENT_CLASS, WIDGET, GADGET])
        self.received: list[tuple[Delivery, list[Any]]] = []
        self.queue = ""
        self._seq = itertools.count(random.randrange(1, 1 << 30))

    async def start(self) -> None:
        await self.transport.connect()
        self.transport.set_dispatcher(self._on_delivery)
        await self.transport.declare_management_exchange()
        self.queue = await self.transport.open_endpoint(None)
        await self.transport.bind(self.queue, "amq.direct", self.queue)
        await self.transport.bind(self.queue, MANAGEMENT, "console.#")
        await self.transport.bind(self.queue, MANAGEMENT, "schema.#")

    def _on_delivery(self, d: Delivery) -> None:
        try:
            msgs: list[Any] = wire.decode(d.body, self.registry, defer_unknown=True)
            self.registry.learn(msgs)
        except wire.DecodeError:
            msgs = []  # other test runs' traffic may be anything
        self.received.append((d, msgs))

    def seq(self) -> int:
        return next(self._seq) & 0xFFFFFFFF

    def mark(self) -> int:
        return len(self.received)

    async def send(self, body: bytes | Any, key: str = "broker", *,
                   reply_to: str | bool | None = True) -> None:
        if not isinstance(body, bytes):
            body = wire.encode(body, self.registry)
        await self.transport.publish(body, exchange=MANAGEMENT, routing_key=key,
                                     reply_to=self.queue if reply_to is True else reply_to or None)

    def replies(self, seq: int) -> list[Any]:
        return [m for d, msgs in self.received if d.exchange == "amq.direct"
                for m in msgs if getattr(m, "seq", None) == seq]

    async def request(self, msg: Any, key: str = "broker", *,
                      done: Callable[[list[Any]], bool] | None = None,
                      timeout: float = 3.0) -> list[Any]:
        """Send ``msg`` and return the replies with its seq once ``done`` (default:
        a ``z`` arrived)."""
        await self.send(msg, key)
        finished = done or (lambda rs: any(isinstance(m, wire.CommandComplete) for m in rs))
        await wait_until(lambda: finished(self.replies(msg.seq)), timeout,
                         message=f"answer to {msg!r} on {key}")
        return self.replies(msg.seq)

    def records(self, since: int = 0, *, class_name: str | None = None,
                key: str = "console.obj.") -> list[wire.ObjectRecord]:
        """``c``/``i`` records published with a routing key starting with ``key``."""
        return [m for d, msgs in self.received[since:] if d.routing_key.startswith(key)
                for m in msgs if isinstance(m, wire.ObjectRecord)
                and (class_name is None or m.class_key.name == class_name)]

    async def close(self) -> None:
        await self.transport.close()


@pytest.fixture
async def console(role_url: str) -> AsyncIterator[Console]:
    c = Console(role_url)
    await c.start()
    try:
        yield c
    finally:
        await c.close()


@contextlib.asynccontextmanager
async def running(*parts: Any) -> AsyncIterator[None]:
    """Start brokers/agents in order, stop them in reverse order."""
    async with contextlib.AsyncExitStack() as stack:
        for part in parts:
            await stack.enter_async_context(part)
        yield


async def agent_objects(console: Console, bank: int, labels: set[str]) -> dict[str, dict[str, Any]]:
    """G ``_class=agent`` to ``agent.<bank>.0``: our agents' properties by label."""
    seq = console.seq()
    answer = await console.request(wire.GetQuery(seq, {"_class": "agent"}), f"agent.{bank}.0")
    records = [m for m in answer if isinstance(m, wire.ObjectRecord)]
    assert all(r.opcode == "g" and r.class_key == AGENT_CLASS.class_key for r in records)
    found = {}
    for r in records:
        props = r.properties_dict()
        if props["label"] in labels:
            found[props["label"]] = {**props, "_object_id": r.object_id}
    return found


async def packages(console: Console) -> set[str]:
    answer = await console.request(wire.PackageQuery(console.seq()))
    assert isinstance(answer[-1], wire.CommandComplete) and answer[-1].code == 0
    return {m.package for m in answer if isinstance(m, wire.PackageIndication)}


def _superset(console: Console, wanted: set[str]) -> Any:
    """A coroutine for wait_until: does P via 'broker' list every package of ``wanted``?"""
    async def check() -> bool:
        return (await packages(console)) >= wanted
    return check()


# ---------------------------------------------------------------------- tests


async def test_broker_id_is_stable_across_instances(role_url: str, console: Console) -> None:
    bank = _bank()
    ids = []
    for _ in range(2):  # a restart: the second role answers with the same id
        async with ManagementBroker(role_url, broker_bank=bank, interval=0.2) as mb:
            seq = console.seq()
            await console.send(wire.BrokerRequest(seq))
            await wait_until(lambda: any(isinstance(m, wire.BrokerResponse)
                                         and m.broker_id == mb.broker_id
                                         for m in console.replies(seq)), 3.0)  # noqa: B023
            ids.append(mb.broker_id)
    assert ids[0] == ids[1] == derive_broker_id(role_url)
    # a given id wins
    explicit = uuid.uuid4()
    async with ManagementBroker(role_url, broker_bank=bank, broker_id=explicit):
        answer = await console.request(wire.BrokerRequest(console.seq()),
                                       done=lambda rs: any(m.broker_id == explicit for m in rs))
        assert all(isinstance(m, wire.BrokerResponse) for m in answer)


async def test_attach_learn_discover_and_console_added(role_url: str, console: Console) -> None:
    bank = _bank()
    l1, l2 = _label("widgets"), _label("gadgets")
    mb = ManagementBroker(role_url, broker_bank=bank, interval=0.2, agent_timeout=30,
                          request_timeout=1.0)
    # long agent intervals: the agents publish only when woken by x
    a1 = Agent(role_url, label=l1, schemas=[WIDGET], interval=60)
    a2 = Agent(role_url, label=l2, schemas=[GADGET], interval=60)
    w = a1.create_object("widget", name="w1")
    g = a2.create_object("gadget", serial=7)
    async with running(mb, a1, a2):
        # banks: assigned by the role, >= 10, distinct; object ids carry them
        assert a1.attached and a2.attached
        assert (a1.broker_bank, a2.broker_bank) == (bank, bank)
        assert a1.agent_bank >= 10 and a2.agent_bank >= 10 and a1.agent_bank != a2.agent_bank
        assert w.object_id is not None and g.object_id is not None
        assert w.object_id.agent_key() == (bank, a1.agent_bank)
        assert g.object_id.agent_key() == (bank, a2.agent_bank)

        # P via 'broker' lists the role's package and both agents' (learned)
        wanted = {"org.apache.qpid.broker", WIDGET.class_key.package, GADGET.class_key.package}
        await wait_until(lambda: _superset(console, wanted), 5.0)

        # Q and S via 'broker' return the learned classes with identical schemas
        for schema in (WIDGET, GADGET):
            answer = await console.request(wire.ClassQuery(console.seq(), schema.class_key.package))
            assert [m.class_key for m in answer if isinstance(m, wire.ClassIndication)] == \
                [schema.class_key]
            answer = await console.request(
                wire.SchemaRequest(console.seq(), schema.class_key),
                done=lambda rs: any(isinstance(m, wire.SchemaResponse) for m in rs))
            assert answer[0].schema == schema
        answer = await console.request(
            wire.SchemaRequest(console.seq(), AGENT_CLASS.class_key),
            done=lambda rs: bool(rs))
        assert answer[0].schema == AGENT_CLASS

        # G _class=agent on agent.<bank>.0: one object per attached agent
        found = await agent_objects(console, bank, {l1, l2})
        assert set(found) == {l1, l2}
        for agent in (a1, a2):
            props = found[agent.label]
            assert (props["brokerBank"], props["agentBank"]) == (bank, agent.agent_bank)
            assert props["systemId"] == agent.system_id
            assert props["registeredTo"] == ObjectId(bytes(16))  # no broker object
            assert props["_object_id"].agent_key() == (bank, 0)
        assert found[l1]["connectionRef"] != found[l2]["connectionRef"]  # the index is unique
        # ... and the same objects were published as c on console.obj.<bank>.0...agent
        agent_key = f"console.obj.{bank}.0.org.apache.qpid.broker.agent"
        await wait_until(lambda: {r.properties_dict()["label"] for r in console.records(
            key=agent_key) if r.opcode == "c"} >= {l1, l2}, 3.0)

        # a console's B makes the attached agents re-publish (x): twice, to be sure it
        # is not the first publication
        for _ in range(2):
            mark = console.mark()
            answer = await console.request(wire.BrokerRequest(console.seq()),
                                           done=lambda rs: bool(rs))
            assert any(m.broker_id == mb.broker_id for m in answer)
            await wait_until(lambda m=mark: {r.object_id for r in console.records(m)
                                             if r.opcode == "c"} >= {w.object_id, g.object_id},
                             3.0)
        info = {i.label: i for i in mb.agents()}
        assert info[l1].learned and info[l1].classes == {WIDGET.class_key}


async def test_age_out_and_reattach_with_old_bank(role_url: str, console: Console) -> None:
    bank = _bank()
    label = _label("ageing")
    mb = ManagementBroker(role_url, broker_bank=bank, interval=0.2, bank_grace=30)
    assert mb.agent_timeout == pytest.approx(0.6)
    async with mb:
        first = Agent(role_url, label=label, schemas=[WIDGET], interval=0.1)
        async with first:
            old_bank = first.agent_bank
            found = await agent_objects(console, bank, {label})
            assert found[label]["agentBank"] == old_bank
            oid = found[label]["_object_id"]
            mark = console.mark()
        # stopped: no more heartbeats -> aged out, its agent object published deleted
        await wait_until(lambda: any(r.object_id == oid and r.deleted for r in console.records(
            mark, key=f"console.obj.{bank}.0.org.apache.qpid.broker.agent")), 5.0)
        assert label not in await agent_objects(console, bank, {label})
        assert [i.label for i in mb.agents(include_expired=True) if not i.live] == [label]

        # another agent requesting that bank during the grace period gets another one
        seq = console.seq()
        answer = await console.request(
            wire.AttachRequest(seq, _label("intruder"), uuid.uuid4(), bank, old_bank),
            done=lambda rs: bool(rs))
        assert isinstance(answer[0], wire.AttachResponse)
        assert answer[0].agent_bank not in (0, old_bank)

        # the same agent re-attaching (as after a reconnect) gets its bank back
        again = Agent(role_url, label=label, system_id=first.system_id, schemas=[WIDGET],
                      broker_bank=bank, agent_bank=old_bank, interval=0.1)
        again.attached = True  # request the banks it had, as the reconnect path does
        async with again:
            assert (again.broker_bank, again.agent_bank) == (bank, old_bank)
            found = await agent_objects(console, bank, {label})
            assert found[label]["agentBank"] == old_bank
            assert found[label]["_object_id"] != oid  # a new agent object
            assert any(i.label == label and i.live for i in mb.agents())


async def test_adopts_an_agent_heard_only_by_heartbeat(role_url: str, console: Console) -> None:
    bank = _bank()
    async with ManagementBroker(role_url, broker_bank=bank, interval=0.2, request_timeout=0.5):
        loner = Agent(role_url, label="loner", schemas=[GADGET], attach=False,
                      broker_bank=bank, agent_bank=4242, interval=0.1)
        async with loner:
            await wait_until(lambda: _superset(console, {GADGET.class_key.package}), 5.0)
            found = await agent_objects(console, bank, {""})
            assert found[""]["agentBank"] == 4242
            # an attaching agent asking for the adopted bank (the loner itself) gets it
            answer = await console.request(
                wire.AttachRequest(console.seq(), "loner", uuid.uuid4(), bank, 4242),
                done=lambda rs: bool(rs))
            assert answer[0].agent_bank == 4242
            assert "loner" in await agent_objects(console, bank, {"loner"})


async def test_bad_input_does_not_stop_the_role(role_url: str, console: Console) -> None:
    bank = _bank()
    async with ManagementBroker(role_url, broker_bank=bank, interval=0.2) as mb:
        for body in (b"garbage!", b"AM2S\x00\x00", b"AM2Q\x00\x00\x00\x01\x09short",
                     b"AM2A\x00\x00\x00\x01\x03abc"):
            await console.send(body)
        # requests without reply-to, and an opcode the role does not serve
        await console.send(wire.PackageQuery(console.seq()), reply_to=False)
        await console.send(wire.AttachRequest(console.seq(), "nobody", uuid.uuid4()),
                           reply_to=False)
        await console.send(wire.GetQuery(console.seq(), {"_class": "agent"}))
        # malformed heartbeats: no agent is adopted
        await console.send(b"AM2h\x00\x00", f"console.heartbeat.{bank}.77", reply_to=False)
        await console.send(wire.Heartbeat(1), "console.heartbeat.x.y", reply_to=False)
        await wait_until(lambda: mb.stats["bad_requests"] >= 8, 3.0,
                         message=f"bad requests counted: {mb.stats}")

        # still answering; S for unknown classes -> z 1 (qpidd's texts)
        assert "org.apache.qpid.broker" in await packages(console)
        zero = bytes(16)
        for key, text in ((ClassKey("org.apache.qpid.broker", "nosuch", zero),
                           "Class key not found"),
                          (ClassKey("no.such.package", "nothing", zero),
                           "Package not found")):
            answer = await console.request(wire.SchemaRequest(console.seq(), key))
            assert [(type(m), m.code, m.text) for m in answer] == \
                [(wire.CommandComplete, 1, text)]
        # Q for an unknown package -> z 0, no q
        answer = await console.request(wire.ClassQuery(console.seq(), "no.such.package"))
        assert [(type(m), m.code) for m in answer] == [(wire.CommandComplete, 0)]
        assert mb.agents(include_expired=True) == []


async def test_command_line_runs_until_signalled(role_url: str, console: Console) -> None:
    bank = _bank()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "qmf_async.agent.broker", "--url", role_url, "--interval", "0.2",
        "--broker-bank", str(bank), stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, cwd=ROOT, env=env)
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 15.0)).decode()
        assert "ready" in line and str(derive_broker_id(role_url)) in line, line
        answer = await console.request(wire.GetQuery(console.seq(), {"_class": "agent"}),
                                       f"agent.{bank}.0")
        assert isinstance(answer[-1], wire.CommandComplete)
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 10.0) == 0
        assert (await proc.stdout.read()) == b""  # one line, nothing more
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_learns_from_a_qpid_style_class_indication(role_url: str, console: Console) -> None:
    """qpid's C++ agents announce their classes to 'broker' with their reply key; the
    role asks there for the schema (what qpidd does) and serves it afterwards."""
    bank = _bank()
    async with ManagementBroker(role_url, broker_bank=bank, interval=0.2):
        mark = console.mark()
        await console.send(wire.ClassIndication(0, ClassKind.OBJECT, WIDGET.class_key))

        def schema_request() -> tuple[Delivery, Any] | None:
            for d, msgs in console.received[mark:]:
                for m in msgs:
                    if isinstance(m, wire.SchemaRequest) and d.exchange == "amq.direct":
                        return d, m
            return None

        d, request = await wait_until(schema_request, 3.0)
        assert request.class_key == WIDGET.class_key and d.reply_to
        await console.transport.publish(
            wire.encode(wire.SchemaResponse(request.seq, WIDGET)), exchange="amq.direct",
            routing_key=d.reply_to, content_type=None)
        await wait_until(lambda: _superset(console, {WIDGET.class_key.package}), 3.0)
        answer = await console.request(wire.SchemaRequest(console.seq(), WIDGET.class_key),
                                       done=lambda rs: bool(rs))
        assert answer[0].schema == WIDGET


async def test_a_dead_agent_blocks_nothing(role_url: str, console: Console) -> None:
    bank = _bank()
    async with ManagementBroker(role_url, broker_bank=bank, interval=0.2, agent_timeout=30,
                                request_timeout=5.0) as mb:
        # attaches, then never answers the role's P (nobody listens on its agent key)
        answer = await console.request(
            wire.AttachRequest(console.seq(), "ghost", uuid.uuid4()), done=lambda rs: bool(rs))
        ghost_bank = answer[0].agent_bank
        loop = asyncio.get_running_loop()
        started = loop.time()
        assert "org.apache.qpid.broker" in await packages(console)
        await console.request(wire.BrokerRequest(console.seq()), done=lambda rs: bool(rs))
        found = await agent_objects(console, bank, {"ghost"})
        assert found["ghost"]["agentBank"] == ghost_bank
        assert loop.time() - started < 2.0  # far below the 5 s request timeout
        assert not mb.agents()[0].learned
