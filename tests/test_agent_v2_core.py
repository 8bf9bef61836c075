"""The agent's QMF v2 protocol core, unit by unit: messages in, sends out, no loop."""

from __future__ import annotations

import base64
import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from qmf_async.agent import Agent, Arg, Property, Statistic, event_class, method, object_class
from qmf_async.errors import EncodeError, UsageError
from qmf_async.protocol import (
    AgentProtocolV2,
    Outgoing,
    V2LocateRequested,
    V2MethodRequested,
    V2ObjectQueryRequested,
    V2RequestDropped,
    V2RequestRejected,
    V2SchemaQueryRequested,
    V2SchemaRequestedInV1,
    check_arguments,
    object_name,
    v2_schema_id,
)
from qmf_async.wire import (
    ClassKey,
    SchemaRegistry,
    SchemaRequest,
    SchemaResponse,
    V2AgentHeartbeat,
    V2AgentLocateResponse,
    V2DataIndication,
    V2EventIndication,
    V2Exception,
    V2MethodResponse,
    V2QueryResponse,
    decode,
    decode_amqp10_message,
    decode_v2,
    encode,
    encode_v2_body,
)

PKG = "org.example.v2"
WIDGET = object_class(
    PKG, "widget",
    properties=[Property("name", "sstr", index=True), Property("zone", "sstr", index=True)],
    statistics=[Statistic("hits", "uint64")],
    methods=[method("add", Arg("a", "uint32", direction="I"), Arg("b", "int8", direction="I"),
                    Arg("label", "sstr", direction="I", maxlen=4),
                    Arg("sum", "int64", direction="O"))],
)
ALARM = event_class(PKG, "alarm", [Arg("level", "uint8")])
NAME = "example.com:widget.d:i-1"
REPLY = "qmf.default.direct/console-1"
REQUEST = {"x-amqp-0-10.app-id": "qmf2", "method": "request"}
CAPTURES = Path(__file__).parent / "data" / "qmf2" / "qpidd-1.40-v2.jsonl"


def core(**kw: Any) -> AgentProtocolV2:
    return AgentProtocolV2(NAME, SchemaRegistry([WIDGET, ALARM]), interval=5, epoch=3, **kw)


def request(opcode: str) -> dict[str, Any]:
    return {**REQUEST, "qmf.opcode": opcode}


def back(out: Outgoing) -> Any:
    """What a console decodes of a send."""
    return decode_v2(out.headers, out.body, subject=out.key,
                     correlation_id=out.correlation_id)


def test_names_and_subjects() -> None:
    c = core()
    assert (c.vendor, c.product, c.instance) == ("example.com", "widget.d", "i-1")
    # dots inside names are written _ (a topic key word each)
    assert c.heartbeat_subject == "agent.ind.heartbeat.example_com.widget_d.i-1"
    assert c.data_subject(WIDGET.class_key) == (
        "agent.ind.data.org_example_v2.widget.example_com.widget_d.i-1")
    assert c.event_subject(ALARM.class_key, 2) == (
        "agent.ind.event.org_example_v2.alarm.crit.example_com.widget_d.i-1")
    assert AgentProtocolV2("a:b:c:d", SchemaRegistry()).instance == "c:d"
    for bad in ("a:b", "a::c", ""):
        with pytest.raises(UsageError, match="vendor:product:instance"):
            AgentProtocolV2(bad, SchemaRegistry())
    with pytest.raises(UsageError):
        AgentProtocolV2(NAME, SchemaRegistry(), max_per_message=0)


def test_object_names_as_qpidd_writes_them() -> None:
    assert object_name(WIDGET.class_key, ["w1", "east"], "7") == f"{PKG}:widget:w1,east"
    assert object_name(WIDGET.class_key, [b"w1", 3], "7") == f"{PKG}:widget:w1,3"
    assert object_name(WIDGET.class_key, [], "7") == f"{PKG}:widget:7"


@pytest.mark.parametrize("body", [{}, [], None], ids=["map", "classic-list", "none"])
def test_agent_locate_is_answered_on_the_reply_address(body: Any) -> None:
    c = core()
    c.schema_updated = 99
    (ev,) = c.receive(request("_agent_locate_request"), body, reply_to=REPLY,
                      correlation_id=b"7")
    assert ev == V2LocateRequested(REPLY, "7")
    out = c.answer_locate(ev.reply_to, ev.correlation_id, 1234)
    assert (out.exchange, out.key, out.correlation_id) == (
        "qmf.default.direct", "console-1", "7")
    msg = back(out)
    assert isinstance(msg, V2AgentLocateResponse) and msg.agent == NAME
    assert msg.values == {"_vendor": "example.com", "_product": "widget.d", "_instance": "i-1",
                          "_name": NAME, "_timestamp": 1234, "_heartbeat_interval": 5,
                          "_epoch": 3, "_schema_updated": 99}
    # a bare reply key is one on amq.direct (AMQP 0-9-1)
    assert c.answer_locate("console-2", None, 1)[:2] == ("amq.direct", "console-2")
    (dropped,) = c.receive(request("_agent_locate_request"), {}, reply_to=None)
    assert isinstance(dropped, V2RequestDropped)


def test_heartbeat_data_and_event_indications() -> None:
    c = core(max_per_message=2)
    hb = c.heartbeat(55)
    assert (hb.exchange, hb.key) == ("qmf.default.topic", c.heartbeat_subject)
    msg = back(hb)
    assert isinstance(msg, V2AgentHeartbeat) and msg.agent == NAME and msg.timestamp == 55
    items = [c.data(WIDGET, f"{PKG}:widget:w{i}", {"name": f"w{i}", "hits": i}, update_ts=9,
                    create_ts=8) for i in range(5)]
    sends = c.data_indication(WIDGET.class_key, items)
    assert [len(s.body) for s in sends] == [2, 2, 1]
    assert {s.key for s in sends} == {c.data_subject(WIDGET.class_key)}
    got = [d for s in sends for d in back(s).items]  # type: ignore[union-attr]
    assert all(isinstance(back(s), V2DataIndication) for s in sends)
    assert got == items and got[0].object_id.agent_name == NAME  # type: ignore[union-attr]
    assert got[0].schema_id.hash == uuid.UUID(bytes=WIDGET.class_key.hash)  # type: ignore
    assert c.data_indication(WIDGET.class_key, []) == []
    ev = c.event(ALARM, 77, 4, {"level": 2})
    assert ev.key == c.event_subject(ALARM.class_key, 4) and ".warn." in ev.key
    msg = back(ev)
    assert isinstance(msg, V2EventIndication) and msg.agent == NAME
    (event,) = msg.events
    assert (event.values, event.timestamp, event.severity) == ({"level": 2}, 77, 4)
    assert event.schema_id == v2_schema_id(ALARM) and event.schema_id.type == "_event"
    with pytest.raises(EncodeError, match="severity"):
        c.event(ALARM, 1, 8, {})


def test_an_object_query_and_its_answer_in_parts_of_100() -> None:
    c = core()
    body = {"_what": "OBJECT", "_schema_id": {"_class_name": "widget"}, "_where": ["true"]}
    (ev,) = c.receive(request("_query_request"), body, reply_to=REPLY, correlation_id="q1")
    assert isinstance(ev, V2ObjectQueryRequested) and ev.correlation_id == "q1"
    assert ev.schema_id is not None and ev.where == ["true"]
    assert c.select_schemas(ev.schema_id) == [WIDGET]
    items = [c.data(WIDGET, f"{PKG}:widget:w{i}", {"hits": i}, update_ts=1, create_ts=1)
             for i in range(250)]
    parts = c.answer_query(ev.reply_to, ev.correlation_id, items)
    decoded = [back(p) for p in parts]
    assert all(isinstance(m, V2QueryResponse) for m in decoded)
    assert [(len(m.items), m.partial) for m in decoded] == [  # type: ignore[union-attr]
        (100, True), (100, True), (50, False)]
    assert ["partial" in p.headers for p in parts] == [True, True, False]
    assert {p.correlation_id for p in parts} == {"q1"}
    (empty,) = c.answer_query(REPLY, "q2", [])
    assert back(empty) == V2QueryResponse([], False, NAME, "_data", "q2")
    # by object id
    body = {"_what": "OBJECT", "_object_id": {"_object_name": b"x:y:z"}}
    (ev,) = c.receive(request("_query_request"), body, reply_to=REPLY)
    assert isinstance(ev, V2ObjectQueryRequested) and ev.object_id is not None
    assert ev.object_id.object_name == "x:y:z"


def test_schema_queries() -> None:
    c = core()
    (ev,) = c.receive(request("_query_request"), {"_what": "SCHEMA_ID"}, reply_to=REPLY,
                      correlation_id="s1")
    assert isinstance(ev, V2SchemaQueryRequested)
    (out,) = c.answer_schema_query(ev)
    assert out.headers["qmf.content"] == "_schema_id"
    assert sorted(i["_class_name"] for i in out.body) == ["alarm", "widget"]  # type: ignore
    widget_id = next(i for i in out.body if i["_class_name"] == "widget")  # type: ignore
    assert widget_id == {"_package_name": PKG, "_class_name": "widget", "_type": "_data",
                         "_hash": uuid.UUID(bytes=WIDGET.class_key.hash)}
    # SCHEMA for one class, by the id just received
    (ev,) = c.receive(request("_query_request"), {"_what": "SCHEMA", "_schema_id": widget_id},
                      reply_to=REPLY, correlation_id="s2")
    (out,) = c.answer_schema_query(ev)  # type: ignore[arg-type]
    (schema,) = out.body  # type: ignore[misc]
    assert out.headers["qmf.content"] == "_schema"
    assert schema["_schema_id"] == widget_id
    assert [(p["_name"], p["_type"]) for p in schema["_properties"]] == [
        ("name", "TYPE_STRING"), ("zone", "TYPE_STRING"), ("hits", "TYPE_INT")]
    assert schema["_properties"][0]["_index"] is True
    (add,) = schema["_methods"]
    assert [(a["_name"], a["_dir"]) for a in add["_arguments"]] == [
        ("a", "I"), ("b", "I"), ("label", "I"), ("sum", "O")]
    # a wrong hash selects nothing; SCHEMA without a schema id is an error
    wrong = {**widget_id, "_hash": uuid.UUID(int=1)}
    (ev,) = c.receive(request("_query_request"), {"_what": "SCHEMA", "_schema_id": wrong},
                      reply_to=REPLY)
    (out,) = c.answer_schema_query(ev)  # type: ignore[arg-type]
    assert out.body == []
    (ev,) = c.receive(request("_query_request"), {"_what": "SCHEMA"}, reply_to=REPLY)
    (out,) = c.answer_schema_query(ev)  # type: ignore[arg-type]
    msg = back(out)
    assert isinstance(msg, V2Exception) and msg.error_code == 4


def test_method_requests_and_answers() -> None:
    c = core()
    body = {"_object_id": {"_object_name": f"{PKG}:widget:w1", "_agent_name": NAME},
            "_method_name": b"add", "_arguments": {"a": 1, "b": 2, "label": b"x"}}
    (ev,) = c.receive(request("_method_request"), body, reply_to=REPLY, correlation_id="m1",
                      user_id="bob")
    assert isinstance(ev, V2MethodRequested)
    assert (ev.method, ev.object_id.object_name, ev.user_id) == ("add", f"{PKG}:widget:w1", "bob")
    assert ev.arguments == {"a": 1, "b": 2, "label": b"x"}  # as received
    msg = back(c.answer_method(ev.reply_to, ev.correlation_id, {"sum": 3}))
    assert msg == V2MethodResponse({"sum": 3}, None, NAME, "m1")
    msg = back(c.exception(ev.reply_to, ev.correlation_id, 2, "UnknownMethod: add"))
    assert isinstance(msg, V2Exception) and msg.agent == NAME and msg.correlation_id == "m1"
    assert (msg.error_code, msg.error_text) == (2, "UnknownMethod: add")
    # answering a request sent to an alias (the role answers ``broker``, as qpidd does)
    assert back(c.answer_method(REPLY, "m2", {}, agent="broker")).agent == "broker"
    assert back(c.exception(REPLY, "m3", 1, "x", agent="broker")).agent == "broker"
    (part,) = c.answer_query(REPLY, "q", [], agent="broker")
    assert back(part).agent == "broker"


@pytest.mark.parametrize(("opcode", "body", "match"), [
    ("_method_request", {"_object_id": {"_object_name": "x"}}, "_method_name"),
    ("_method_request", {"_method_name": "m"}, "_object_id"),
    ("_method_request", [1, 2], "must be a map"),
    ("_method_request", {"_method_name": "m", "_object_id": {"_object_name": "x"},
                         "_arguments": [1]}, "_arguments"),
    ("_query_request", {"_schema_id": {"_class_name": "queue"}}, "_what"),
    ("_query_request", {"_what": "OBJECT", "_schema_id": 5}, "_schema_id"),
    ("_query_request", {"_what": "AGENT"}, "not served"),
], ids=["no-method-name", "no-object-id", "list-body", "bad-arguments", "no-what",
        "bad-schema-id", "unknown-target"])
def test_malformed_requests_get_an_exception_back(opcode: str, body: Any, match: str) -> None:
    c = core()
    (ev,) = c.receive(request(opcode), body, reply_to=REPLY, correlation_id="bad")
    assert isinstance(ev, V2RequestRejected) and ev.opcode == opcode
    assert match in ev.error
    assert ev.answer is not None
    msg = back(ev.answer)
    assert isinstance(msg, V2Exception) and msg.correlation_id == "bad"
    assert msg.error_code == 4 and match in msg.error_text
    # without a reply address nothing can be answered
    (ev,) = c.receive(request(opcode), body, reply_to=None)
    assert isinstance(ev, V2RequestDropped) and "reply-to" in ev.why


def test_what_an_agent_does_not_serve_is_dropped() -> None:
    c = core()
    for headers in ({**REQUEST, "qmf.opcode": "_agent_heartbeat_indication"},
                    {**REQUEST, "qmf.opcode": "_query_response"}, {}, None, {"qmf.opcode": 5}):
        (ev,) = c.receive(headers, {}, reply_to=REPLY)
        assert isinstance(ev, V2RequestDropped)
    (ev,) = c.receive({}, None, body=b"garbage", reply_to=REPLY)
    assert isinstance(ev, V2RequestDropped) and "v1" in ev.why
    assert c.messages_in == 6


def test_requests_in_amqp_map_bytes_are_decoded_by_the_core() -> None:
    """Over AMQP 0-9-1 a request's map comes as ``amqp/map`` bytes, decoded here; bytes
    that do not decode get an exception back, and a map without an opcode is not
    taken for QMF v1."""
    c = core()
    body = {"_what": "OBJECT", "_schema_id": {"_class_name": "widget"}}
    content_type, raw = encode_v2_body(body)
    (ev,) = c.receive(request("_query_request"), None, body=raw, content_type=content_type,
                      reply_to=REPLY, correlation_id="q1")
    assert isinstance(ev, V2ObjectQueryRequested) and ev.correlation_id == "q1"
    assert c.select_schemas(ev.schema_id) == [WIDGET]  # type: ignore[arg-type]
    (ev,) = c.receive(request("_query_request"), None, body=raw[:-2],
                      content_type=content_type, reply_to=REPLY, correlation_id="q2")
    assert isinstance(ev, V2RequestRejected) and "runs past" in ev.error
    assert ev.answer is not None and back(ev.answer).correlation_id == "q2"
    (ev,) = c.receive({}, None, body=raw, content_type=content_type, reply_to=REPLY)
    assert isinstance(ev, V2RequestDropped) and ev.why == "no qmf.opcode"


def test_a_v1_schema_request_on_the_v2_address() -> None:
    """The classic console asks a v2 agent for a schema with a v1 ``S``."""
    c = core()
    body = encode(SchemaRequest(42, WIDGET.class_key))
    (ev,) = c.receive({}, None, body=body, reply_to="amq.direct/classic-1")
    assert ev == V2SchemaRequestedInV1("amq.direct/classic-1", 42, WIDGET.class_key)
    out = c.answer_schema_v1(ev)
    assert out is not None and (out.exchange, out.key) == ("amq.direct", "classic-1")
    assert out.headers == {"qmf.agent": NAME}
    assert isinstance(out.body, bytes)
    (answer,) = decode(out.body, SchemaRegistry())
    assert answer == SchemaResponse(42, WIDGET)
    unknown = ClassKey(PKG, "nope", bytes(16))
    (ev,) = c.receive({}, None, body=encode(SchemaRequest(1, unknown)), reply_to="r")
    assert c.answer_schema_v1(ev) is None  # type: ignore[arg-type]
    (ev,) = c.receive({}, None, body=encode(SchemaRequest(1, unknown)), reply_to=None)
    assert isinstance(ev, V2RequestDropped)


def test_argument_checks() -> None:
    add = WIDGET.method("add")
    ok = {"a": 1, "b": -2, "label": "abc"}
    assert check_arguments(add, ok) is None
    cases = [
        ({**ok, "a": 1 << 32}, "does not fit its type uint32"),
        ({**ok, "a": -1}, "does not fit"),
        ({**ok, "b": 128}, "does not fit its type int8"),
        ({**ok, "a": True}, "must be an integer"),
        ({**ok, "a": "1"}, "must be an integer"),
        ({**ok, "label": b"\xff"}, "must be sstr"),
        ({**ok, "label": "toolong"}, "longer than 4 bytes"),
        ({"a": 1, "b": 2}, "missing argument(s) label"),
        ({**ok, "c": 1}, "unknown argument(s) c"),
    ]
    for args, match in cases:
        error = check_arguments(add, args)
        assert error is not None and match in error, (args, error)


@pytest.mark.parametrize(("label", "event"), [
    ("query-broker", V2ObjectQueryRequested),
    ("query-by-object-id", V2ObjectQueryRequested),
    ("query-schema", V2SchemaQueryRequested),
    ("agent-locate", V2LocateRequested),
    ("query-no-what", V2RequestRejected),
    ("method-no-name", V2RequestRejected),
    ("method-echo", V2MethodRequested),
])
def test_requests_captured_from_a_real_console_session(label: str, event: type) -> None:
    """Requests as sent to qpidd 1.40 (AMQP 1.0): each becomes the event its kind
    asks for; the ones qpidd answered with an ``_exception`` are rejected here too."""
    lines = [json.loads(line) for line in CAPTURES.read_text().splitlines()]
    sent = next(d for d in lines if d["label"] == label and d["direction"] == "sent")
    msg = decode_amqp10_message(base64.b64decode(sent["message_b64"]))
    (ev,) = core().receive(msg.application_properties, msg.body, reply_to=msg.reply_to,
                           correlation_id=msg.correlation_id)
    assert isinstance(ev, event), ev
    answers = [d["application_properties"]["qmf.opcode"] for d in lines
               if d["label"] == label and d["direction"] == "received"]
    if isinstance(ev, V2RequestRejected):
        assert answers == ["_exception"]


def test_agent_options() -> None:
    for versions in ((), (3,), (1, 3)):
        with pytest.raises(UsageError, match="qmf_versions"):
            Agent("amqp://localhost", qmf_versions=versions)
    with pytest.raises(UsageError, match="vendor:product:instance"):
        Agent("amqp://localhost", v2_name="just-a-name")
    agent = Agent("amqp://localhost", label="a:b", system_id=uuid.UUID(int=5),
                  qmf_versions=[2])
    assert agent.v2_name == f"qmf-async:a_b:{uuid.UUID(int=5)}"
    assert agent.qmf_versions == {2} and not agent.v2_live
    assert Agent("amqp://localhost", qmf_versions=(1,)).v2_name is None
    assert Agent("amqp://localhost", v2_name="v:p:i").protocol_v2 is not None
