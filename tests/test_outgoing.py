"""One outgoing type: the four protocol cores (console and agent, QMF v1 and v2) build
every message they want sent as a ``protocol.Outgoing``; its ``seq`` and
``correlation_id`` read the one ``correlation`` field as each version carries it."""

from __future__ import annotations

import uuid

from qmf_async import wire
from qmf_async.protocol import (
    AgentProtocol,
    AgentProtocolV2,
    ConsoleProtocol,
    ConsoleProtocolV2,
    Outgoing,
)
from qmf_async.wire import V2SchemaId
from tests.fake_transport import object_schema

THING = object_schema("org.example", "thing")


def test_every_core_builds_the_one_type() -> None:
    console = ConsoleProtocol(wire.SchemaRegistry())
    console.see_agent(1, 5, 0.0)
    v1_request = console.send_query((1, 5), {"_class": "thing"})
    v1_s_to_v2 = console.send_request(lambda seq: wire.SchemaRequest(seq, THING.class_key),
                                      "vendor:product:1", query=False, expect="s",
                                      exchange="qmf.default.direct")
    v2_request = ConsoleProtocolV2().send_query(None, schema_id=V2SchemaId("", "queue"))
    agent = AgentProtocol(wire.SchemaRegistry([THING]), broker_bank=3, agent_bank=44)
    v1_answer = agent.complete(9, "amq.direct/reply-1")
    v1_attach = agent.attach_request(2, "label", uuid.UUID(int=1), "my-queue")
    v2_agent = AgentProtocolV2("vendor:product:1", wire.SchemaRegistry([THING]), interval=5,
                               epoch=1)
    v2_heartbeat = v2_agent.heartbeat(1)
    sent = [v1_request, v1_s_to_v2, v2_request, v1_answer, v1_attach, v2_heartbeat]
    assert {type(out) for out in sent} == {Outgoing}

    # a v1 request: to qpid.management (or the exchange asked for), its seq correlates
    assert (v1_request.exchange, v1_request.key) == ("qpid.management", "agent.1.5")
    assert v1_request.seq == v1_request.correlation != 0
    assert v1_request.correlation_id is None and v1_request.headers is None
    assert (v1_s_to_v2.exchange, v1_s_to_v2.key) == ("qmf.default.direct", "vendor:product:1")
    # a v2 request: a map with headers, its correlation id a string
    assert isinstance(v2_request.body, dict) and v2_request.headers is not None
    assert isinstance(v2_request.correlation_id, str) and v2_request.seq == 0
    # an agent's answer goes to the reply key; its request carries the agent's own
    assert (v1_answer.exchange, v1_answer.key, v1_answer.reply_to) == (
        "amq.direct", "reply-1", None)
    assert (v1_attach.key, v1_attach.reply_to) == ("broker", "my-queue")
    assert v2_heartbeat.exchange == "qmf.default.topic" and v2_heartbeat.correlation is None
