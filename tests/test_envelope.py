"""The envelopes: the four protocol cores (console and agent, QMF v1 and v2) take one
inbound type, the ``protocol.Delivery`` a transport hands up (``feed``), and build every
message they want sent as a ``protocol.Outgoing``, whose ``seq`` and ``correlation_id``
read the one ``correlation`` field as each version carries it."""

from __future__ import annotations

import uuid

from qmf_async import wire
from qmf_async.protocol import (
    AgentArrived,
    AgentProtocol,
    AgentProtocolV2,
    ConsoleProtocol,
    ConsoleProtocolV2,
    Delivery,
    GetRequested,
    HeartbeatReceived,
    Outgoing,
    V2ObjectQueryRequested,
    V2RequestRejected,
)
from qmf_async.transport import Delivery as TransportDelivery
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


def delivery(body: bytes = b"", key: str = "k", *, value: object = None,
             headers: dict[str, object] | None = None, reply_to: str | None = None,
             content_type: str | None = None, cid: str | None = None) -> Delivery:
    return Delivery(body, "ex", key, reply_to, content_type, headers or {}, "alice", "q",
                    value, cid)


def test_every_core_feeds_on_the_one_inbound_type() -> None:
    assert TransportDelivery is Delivery  # what transports hand up is the cores' input
    heartbeat = wire.encode(wire.Heartbeat(5))
    (_, beat) = ConsoleProtocol(wire.SchemaRegistry()).feed(
        delivery(heartbeat, "console.heartbeat.1.5"), 0.0)
    assert beat == HeartbeatReceived((1, 5), 5)
    agent = AgentProtocol(wire.SchemaRegistry([THING]), broker_bank=3, agent_bank=44)
    (get,) = agent.feed(delivery(wire.encode(wire.GetQuery(4, {"_class": "thing"})),
                                 "agent.3.44", reply_to="r"))
    assert isinstance(get, GetRequested) and (get.seq, get.reply_to) == (4, "r")
    v2_agent = AgentProtocolV2("vendor:product:1", wire.SchemaRegistry([THING]), interval=5,
                               epoch=1)
    headers = {"x-amqp-0-10.app-id": "qmf2", "method": "request",
               "qmf.opcode": "_query_request"}
    query = {"_what": "OBJECT", "_schema_id": {"_class_name": "thing"}}
    (asked,) = v2_agent.feed(delivery(value=query, headers=headers, reply_to="r", cid="c1"))
    assert isinstance(asked, V2ObjectQueryRequested) and asked.correlation_id == "c1"
    # a map as bytes is taken as one only where the connection carries maps so
    content_type, raw = wire.encode_v2_body(query)
    as_bytes = delivery(raw, headers=headers, reply_to="r", content_type=content_type)
    assert isinstance(v2_agent.feed(as_bytes)[0], V2ObjectQueryRequested)
    (rejected,) = v2_agent.feed(as_bytes, map_bytes=False)
    assert isinstance(rejected, V2RequestRejected) and "must be a map" in rejected.error
    console_v2 = ConsoleProtocolV2()
    beat_v2 = v2_agent.heartbeat(1)
    assert isinstance(beat_v2.body, dict) and beat_v2.headers is not None
    (arrived, beat) = console_v2.feed(delivery(value=beat_v2.body, key=beat_v2.key,
                                               headers=dict(beat_v2.headers)), 0.0)
    assert isinstance(arrived, AgentArrived) and arrived.agent == "vendor:product:1"
    assert isinstance(beat, HeartbeatReceived) and beat.agent == arrived.agent
