"""The QMF v2 console core without I/O: messages in, events out, requests returned as
values, time passed in.  No event loop runs here.

The messages fed in are a real qpidd 1.40's (tests/data/qmf2/qpidd-1.40-v2.jsonl, see
tests/test_v2_codec.py), their correlation ids replaced by the ones the core handed out.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from qmf_async.errors import AgentGoneError, ConnectionLostError, ProtocolError, UsageError
from qmf_async.protocol import (
    BROKER_ADDRESS,
    LOCATE_SUBJECT,
    V2_DIRECT_EXCHANGE,
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
    QueryDone,
    Reply,
    RequestExpired,
    RequestFailed,
    texts_from_schema,
)
from qmf_async.wire import (
    ClassKey,
    ClassKind,
    QmfType,
    SchemaArgument,
    SchemaClass,
    SchemaMethod,
    SchemaProperty,
    SchemaStatistic,
    V2AgentHeartbeat,
    V2Data,
    V2Event,
    V2Exception,
    V2MethodRequest,
    V2MethodResponse,
    V2ObjectId,
    V2QueryRequest,
    V2QueryResponse,
    V2SchemaId,
    decode_amqp10_message,
    decode_v2,
    encode_v2,
    encode_v2_body,
)

pytestmark = pytest.mark.filterwarnings("ignore:Generating overly large repr")

GOLDEN = Path(__file__).parent / "data" / "qmf2" / "qpidd-1.40-v2.jsonl"
QPIDD = "apache.org:qpidd:5d1d7403-ec4c-4a5c-a9f1-656feb6dfd7a"
BROKER_OID = V2ObjectId("org.apache.qpid.broker:broker:amqp-broker")


class Captured:
    """One message of the capture: application properties, body, subject, label."""

    def __init__(self, raw: dict[str, Any]) -> None:
        m = decode_amqp10_message(base64.b64decode(raw["message_b64"]))
        self.label: str = raw["label"]
        self.direction: str = raw["direction"]
        self.props: dict[str, Any] = dict(m.application_properties)
        self.body = m.body
        self.subject: str | None = m.subject
        self.correlation_id = m.correlation_id


def _load() -> list[Captured]:
    with GOLDEN.open() as fh:
        return [Captured(json.loads(line)) for line in fh if line.strip()]


CAPTURE = _load()


def received(label: str) -> list[Captured]:
    out = [c for c in CAPTURE if c.label == label and c.direction == "received"]
    assert out, label
    return out


def topic(opcode: str, content: str | None = None) -> list[Captured]:
    return [c for c in CAPTURE if c.label == "topic" and c.props["qmf.opcode"] == opcode
            and c.props.get("qmf.content") == content]


def feed(core: ConsoleProtocolV2, msg: Captured, cid: str | None, now: float = 0.0,
         props: dict[str, Any] | None = None, body: Any = None) -> list[Any]:
    """``msg`` into ``core`` as if it answered ``cid``."""
    return core.receive(msg.props if props is None else props,
                        msg.body if body is None else body,
                        subject=msg.subject, correlation_id=cid, now=now)


def names(items: list[Any]) -> list[str]:
    return [item.object_id.object_name for item in items]


def queue_query(core: ConsoleProtocolV2, deadline: float | None = None) -> str:
    out = core.send_query(None, schema_id=V2SchemaId("", "queue"), deadline=deadline)
    assert out.correlation_id is not None
    return out.correlation_id


# ------------------------------------------------------------------ requests out

def test_query_request_is_what_qpidd_was_sent() -> None:
    core = ConsoleProtocolV2()
    out = core.send_query(None, schema_id=V2SchemaId("", "queue"))
    assert (out.exchange, out.key) == (V2_DIRECT_EXCHANGE, BROKER_ADDRESS)
    assert out.headers == {"x-amqp-0-10.app-id": "qmf2", "qmf.opcode": "_query_request",
                           "method": "request"}
    sent = next(c for c in CAPTURE if c.label == "query-queue" and c.direction == "sent")
    assert sent.subject == out.key
    assert out.body == sent.body
    assert isinstance(out.correlation_id, str)
    # the body decodes back to the request with this correlation id
    msg = decode_v2(out.headers, out.body, correlation_id=out.correlation_id)
    assert msg == V2QueryRequest("OBJECT", None, V2SchemaId("", "queue"), None,
                                 out.correlation_id)


def test_requests_address_agents_and_ids_are_unique() -> None:
    core = ConsoleProtocolV2()
    cids = set()
    a = core.send_query(QPIDD, object_id=BROKER_OID, where=["eq", "name", ["quote", "x"]])
    assert a.key == QPIDD and a.exchange == V2_DIRECT_EXCHANGE
    assert isinstance(a.body, dict)
    assert a.body["_where"] == ["eq", "name", ["quote", "x"]]
    assert a.body["_object_id"] == {"_object_name": BROKER_OID.object_name}
    m = core.send_method("broker", BROKER_OID, "echo", {"sequence": 7, "body": "hi"})
    assert m.key == BROKER_ADDRESS
    assert decode_v2(m.headers, m.body, correlation_id=m.correlation_id) == V2MethodRequest(
        BROKER_OID, "echo", {"sequence": 7, "body": "hi"}, None, m.correlation_id)
    loc = core.send_locate(0.0)
    assert (loc.exchange, loc.key) == (V2_TOPIC_EXCHANGE, LOCATE_SUBJECT)
    assert loc.headers["qmf.opcode"] == "_agent_locate_request"
    assert loc.body == {}
    for out in (a, m, loc):
        cids.add(out.correlation_id)
    assert len(cids) == 3
    assert core.pending() == [a.correlation_id, m.correlation_id]  # untracked locate
    assert len(core) == 2
    with pytest.raises(UsageError):
        core.send_query("")
    with pytest.raises(UsageError):
        core.send_method(None, BROKER_OID, "", {})
    assert len(core) == 2


# ------------------------------------------------------------------ query answers

def test_query_in_two_parts_gives_one_answer_in_order() -> None:
    core = ConsoleProtocolV2()
    cid = queue_query(core)
    first, last = received("query-queue")
    assert "partial" in first.props and "partial" not in last.props
    assert feed(core, first, cid) == []
    assert cid in core
    events = feed(core, last, cid)
    assert len(events) == 1
    answer = events[0]
    assert isinstance(answer, QueryDone)
    assert answer.request == cid and answer.agent == "broker"
    expected = [decode_v2(m.props, m.body) for m in (first, last)]
    assert isinstance(expected[0], V2QueryResponse) and isinstance(expected[1], V2QueryResponse)
    assert names(answer.items) == names(expected[0].items + expected[1].items)
    assert len(answer.items) == 107
    assert all(isinstance(i, V2Data) for i in answer.items)
    assert cid not in core and len(core) == 0
    # a duplicate of the last part is an answer nobody waits for
    assert feed(core, last, cid) == [] and core.dropped == 1


def test_two_queries_interleaved_keep_their_parts_apart() -> None:
    core = ConsoleProtocolV2()
    q = queue_query(core)
    b = core.send_query(None, schema_id=V2SchemaId("", "binding")).correlation_id
    q1, q2 = received("query-queue")
    b1, b2 = received("query-binding")
    events = feed(core, q1, q) + feed(core, b1, b) + feed(core, b2, b) + feed(core, q2, q)
    assert [type(e) for e in events] == [QueryDone, QueryDone]
    assert events[0].request == b and len(events[0].items) == 109
    assert events[1].request == q and len(events[1].items) == 107
    assert names(events[0].items)[0].startswith("org.apache.qpid.broker:binding:")


def test_an_empty_answer_is_an_answer() -> None:
    core = ConsoleProtocolV2()
    cid = core.send_query(None, schema_id=V2SchemaId("", "no-such-class")).correlation_id
    props, body, _ = encode_v2(V2QueryResponse([], agent="broker"))
    assert core.receive(props, body, correlation_id=cid, now=0.0) == [
        QueryDone(cid, [], agent="broker")]


def test_query_exception_fails_the_query() -> None:
    core = ConsoleProtocolV2()
    cid = core.send_query(None, what="SCHEMA_ID").correlation_id
    (exc,) = received("query-schema")
    assert feed(core, exc, cid) == [
        QueryDone(cid, [], 1, "Query for _what => 'SCHEMA_ID' not supported", QPIDD)]
    assert len(core) == 0


def test_unknown_and_cancelled_answers_are_dropped_and_counted() -> None:
    core = ConsoleProtocolV2()
    first, last = received("query-queue")
    assert feed(core, last, "no-such-cid") == []
    assert feed(core, last, None) == []
    assert core.dropped == 2
    cid = queue_query(core)
    assert feed(core, first, cid) == []
    assert core.cancel(cid) is True
    assert core.cancel(cid) is False
    assert feed(core, last, cid) == []
    assert core.dropped == 3
    # an answer of the wrong kind for a live request is dropped, the request stays
    m = core.send_method(None, BROKER_OID, "echo", {}).correlation_id
    assert feed(core, last, m) == [] and m in core and core.dropped == 4


def test_max_items_fails_the_query_and_drains_the_rest() -> None:
    core = ConsoleProtocolV2(max_query_items=50)
    cid = queue_query(core)
    first, last = received("query-queue")
    events = feed(core, first, cid)
    assert len(events) == 1 and isinstance(events[0], RequestFailed)
    assert events[0].request == cid and isinstance(events[0].error, ProtocolError)
    assert "max_query_items=50" in str(events[0].error)
    assert cid not in core and len(core) == 0
    # the rest of that answer is read and dropped; the next query is answered cleanly
    nxt = core.send_query(None, object_id=BROKER_OID).correlation_id
    assert feed(core, first, cid) == []  # (as if qpidd had sent a third part)
    assert feed(core, last, cid) == []
    assert (core.drained, core.dropped) == (2, 0)
    assert core.pending() == [nxt]
    (broker,) = received("query-by-object-id")
    (answer,) = feed(core, broker, nxt)
    assert isinstance(answer, QueryDone) and len(answer.items) == 1
    # once the last part came, the draining entry is gone: a duplicate is just dropped
    assert feed(core, last, cid) == []
    assert (core.drained, core.dropped) == (2, 1)


def test_max_items_reached_on_the_last_part_keeps_what_was_gathered() -> None:
    core = ConsoleProtocolV2(max_query_items=100)
    cid = queue_query(core)
    first, last = received("query-queue")
    assert feed(core, first, cid) == []
    (failed,) = feed(core, last, cid)
    assert isinstance(failed, RequestFailed) and len(failed.items) == 100
    assert feed(core, last, cid) == [] and (core.drained, core.dropped) == (0, 1)


def test_expiry_reports_the_partial_answer() -> None:
    core = ConsoleProtocolV2()
    cid = queue_query(core, deadline=5.0)
    other = core.send_query(None, object_id=BROKER_OID, deadline=50.0).correlation_id
    first, last = received("query-queue")
    feed(core, first, cid, now=1.0)
    assert core.expired(4.9) == []
    (exp,) = core.expired(5.0)
    assert exp == RequestExpired(cid, "query", exp.items)
    assert names(exp.items) == names(decode_v2(first.props, first.body).items)  # type: ignore[union-attr]
    assert core.pending() == [other]
    assert feed(core, last, cid, now=6.0) == [] and core.dropped == 1
    assert core.expired(6.0) == []


def test_draining_query_is_released_at_its_deadline() -> None:
    core = ConsoleProtocolV2(max_query_items=10)
    cid = queue_query(core, deadline=5.0)
    first, _ = received("query-queue")
    (failed,) = feed(core, first, cid)
    assert isinstance(failed, RequestFailed)
    assert core.expired(10.0) == []  # already failed: nothing more to report
    assert core.cancel(cid) is False


# ------------------------------------------------------------------ methods

def test_method_answer_and_exceptions() -> None:
    core = ConsoleProtocolV2()
    ok = core.send_method(None, BROKER_OID, "echo", {"sequence": 7, "body": "hello v2"})
    (resp,) = received("method-echo")
    (answered,) = feed(core, resp, ok.correlation_id)
    assert isinstance(answered, Reply) and answered.request == ok.correlation_id
    assert isinstance(answered.message, V2MethodResponse)
    assert answered.message.arguments == {"sequence": 7, "body": b"hello v2"}
    assert answered.message.agent == "broker"
    for label, code, text in [
            ("method-create-bad-type", 7, "unknown object type: no-such-type"),
            ("method-no-name", 4, "InvalidParameter")]:
        cid = core.send_method(None, BROKER_OID, "create", {}).correlation_id
        (exc,) = received(label)
        (failed,) = feed(core, exc, cid)
        assert isinstance(failed, Reply) and failed.request == cid
        assert isinstance(failed.message, V2Exception)
        assert (failed.message.error_code, failed.message.error_text) == (code, text)
        assert failed.message.agent == "broker"
    (exc,) = received("method-unknown-object")
    assert feed(core, exc, "gone") == [] and core.dropped == 1
    assert len(core) == 0


def test_method_expiry_and_connection_loss() -> None:
    core = ConsoleProtocolV2()
    a = core.send_method(None, BROKER_OID, "echo", {}, deadline=1.0).correlation_id
    b = core.send_method(None, BROKER_OID, "echo", {}).correlation_id
    q = queue_query(core)
    first, _ = received("query-queue")
    feed(core, first, q)
    assert core.expired(2.0) == [RequestExpired(a, "method", [])]
    feed(core, received("agent-locate")[0], None)
    error = ConnectionLostError("broker went away")
    events = core.connection_lost(error)
    failed = [e for e in events if isinstance(e, RequestFailed)]
    assert [(e.request, e.error) for e in failed] == [(b, error), (q, error)]
    assert len(failed[1].items) == 100
    assert [e for e in events if isinstance(e, AgentLeft)] == [
        AgentLeft(QPIDD, "connection lost: broker went away")]
    assert len(core) == 0 and core.agents == {}
    assert core.close(error) == []


# ------------------------------------------------------------------ agents

def heartbeat(epoch: int, interval: int = 1) -> tuple[dict[str, Any], Any]:
    """A captured heartbeat with another epoch/interval (re-encoded)."""
    (hb,) = topic("_agent_heartbeat_indication")
    msg = decode_v2(hb.props, hb.body)
    assert isinstance(msg, V2AgentHeartbeat)
    values = dict(msg.values, _epoch=epoch, _heartbeat_interval=interval)
    props, body, _ = encode_v2(V2AgentHeartbeat(msg.agent, values))
    return props, body


def test_heartbeats_aging_and_restart() -> None:
    core = ConsoleProtocolV2()
    (hb,) = topic("_agent_heartbeat_indication")
    arrived, beat = core.receive(hb.props, hb.body, subject=hb.subject, now=100.0)
    assert arrived == AgentArrived(QPIDD, QPIDD, "apache.org", "qpidd",
                                   "5d1d7403-ec4c-4a5c-a9f1-656feb6dfd7a", 1, 1.0)
    info = core.agents[QPIDD]
    assert (info.epoch, info.interval, info.last_seen) == (1, 1.0, 100.0)
    assert info.timestamp is not None and info.timestamp > 0
    # every heartbeat is told (a console's heartbeat callback), the first one too
    assert beat == HeartbeatReceived(QPIDD, info.timestamp)
    # the same heartbeat again: only the beat, last seen moves
    assert core.receive(hb.props, hb.body, subject=hb.subject, now=101.0) == [beat]
    assert core.agents[QPIDD].last_seen == 101.0
    # another epoch: a restart
    props, body = heartbeat(epoch=2, interval=2)
    assert core.receive(props, body, subject=hb.subject, now=102.0) == [
        AgentRestarted(QPIDD, 1, 2), beat]
    assert (core.agents[QPIDD].epoch, core.agents[QPIDD].interval) == (2, 2.0)
    # silence: 3 x 2 s allowed
    pending = core.send_query(QPIDD, schema_id=V2SchemaId("", "queue")).correlation_id
    to_broker = queue_query(core)
    assert core.age(108.0) == []
    events = core.age(108.5)
    left = events[0]
    assert isinstance(left, AgentLeft) and left.agent == QPIDD
    assert "no heartbeat" in left.why
    assert len(events) == 2 and isinstance(events[1], RequestFailed)
    assert events[1].request == pending and isinstance(events[1].error, AgentGoneError)
    assert core.pending() == [to_broker]
    assert QPIDD not in core.agents
    # back again: it arrives anew
    again, _ = core.receive(props, body, subject=hb.subject, now=120.0)
    assert isinstance(again, AgentArrived) and again.epoch == 2


def test_any_message_from_a_known_agent_keeps_it_alive() -> None:
    core = ConsoleProtocolV2(missed=2)
    (hb,) = topic("_agent_heartbeat_indication")
    core.receive(hb.props, hb.body, subject=hb.subject, now=0.0)
    ind = topic("_data_indication", "_data")[0]
    core.receive(ind.props, ind.body, subject=ind.subject, now=1.5)
    assert core.age(3.0) == []
    assert [type(e) for e in core.age(3.6)] == [AgentLeft]


def test_locate_answers_fill_the_directory_and_the_locate_entry() -> None:
    core = ConsoleProtocolV2()
    out = core.send_locate(0.0, deadline=2.0)
    (resp,) = received("agent-locate")
    (arrived,) = feed(core, resp, out.correlation_id, now=0.5)
    assert isinstance(arrived, AgentArrived) and arrived.agent == QPIDD
    assert arrived.vendor == "apache.org" and arrived.product == "qpidd"
    assert core.expired(1.0) == []
    assert core.expired(2.0) == [RequestExpired(out.correlation_id, "locate", [QPIDD])]
    # a locate answer nobody tracks still counts as a sighting
    (hb,) = topic("_agent_heartbeat_indication")
    assert feed(core, resp, "untracked", now=3.0) == []
    assert core.agents[QPIDD].last_seen == 3.0
    assert [type(e) for e in core.receive(hb.props, hb.body, subject=hb.subject,
                                          now=3.0)] == [HeartbeatReceived]


@pytest.mark.parametrize(("interval", "expected"), [
    (10**400, 86_400.0), (0, 10.0), (-5, 10.0), (None, 10.0), (1, 1.0)])
def test_odd_heartbeat_intervals(interval: Any, expected: float) -> None:
    core = ConsoleProtocolV2(agent_interval=10.0)
    values = {"_epoch": 1} if interval is None else {"_epoch": 1,
                                                     "_heartbeat_interval": interval}
    props, body, _ = encode_v2(V2AgentHeartbeat("a:b:c", values))
    ev, beat = core.receive(props, body, now=0.0)
    assert isinstance(ev, AgentArrived) and ev.interval == expected
    assert beat == HeartbeatReceived("a:b:c", None)


def test_directory_is_bounded() -> None:
    core = ConsoleProtocolV2(max_agents=1)
    (hb,) = topic("_agent_heartbeat_indication")
    core.receive(hb.props, hb.body, subject=hb.subject, now=0.0)
    props, body, _ = encode_v2(V2AgentHeartbeat("other:agent:1", {"_epoch": 1}))
    assert core.receive(props, body, now=0.0) == []
    assert core.agents_refused == 1 and list(core.agents) == [QPIDD]


# ------------------------------------------------------------------ indications

def test_data_indications() -> None:
    core = ConsoleProtocolV2()
    inds = topic("_data_indication", "_data")
    total = 0
    for ind in inds:
        (ev,) = core.receive(ind.props, ind.body, subject=ind.subject, now=0.0)
        assert isinstance(ev, ObjectUpdate) and ev.agent == QPIDD and ev.record is None
        assert ev.items and all(isinstance(i, V2Data) for i in ev.items)
        total += len(ev.items)
    assert total == sum(len(ind.body) for ind in inds)


def test_event_indications() -> None:
    core = ConsoleProtocolV2()
    seen: list[V2Event] = []
    for ind in topic("_data_indication", "_event"):
        events = core.receive(ind.props, ind.body, subject=ind.subject, now=0.0)
        assert events and all(isinstance(e, EventReceived) for e in events)
        seen.extend(e.message for e in events)  # type: ignore[union-attr]
    assert [e.schema_id.class_name for e in seen] == [
        "subscribe", "queueDeclare", "subscribe", "queueDeclare", "bind"]
    assert all(isinstance(e, V2Event) and e.schema_id.type == "_event" for e in seen)


# ------------------------------------------------------------------ malformed

@pytest.mark.parametrize(("props", "body", "opcode"), [
    ({"qmf.opcode": "_query_response", "qmf.content": "_data"}, {"not": "a list"},
     "_query_response"),
    ({"qmf.opcode": "_query_response", "qmf.content": "_data"}, [{"_values": 3}],
     "_query_response"),
    ({"qmf.opcode": "_agent_heartbeat_indication"}, {"_values": {}},
     "_agent_heartbeat_indication"),
    ({"qmf.opcode": "_method_response"}, [1, 2], "_method_response"),
    ({"qmf.opcode": "_exception"}, {}, "_exception"),
    ({"qmf.opcode": 7}, {}, None),
    ({}, {}, None),
    (None, None, None),
    ("not a map", b"", None),
])
def test_malformed_messages_become_events(props: Any, body: Any, opcode: str | None) -> None:
    core = ConsoleProtocolV2()
    cid = queue_query(core)
    (ev,) = core.receive(props, body, subject="s", correlation_id=cid, now=0.0)
    assert isinstance(ev, BodyMalformed)
    assert (ev.routing_key, ev.opcode) == ("s", opcode)
    assert core.malformed == 1
    assert cid in core  # a malformed message completes nothing


def test_an_answer_in_amqp_map_bytes_is_decoded_by_the_core() -> None:
    """Over AMQP 0-9-1 the transport hands up the ``amqp/list`` bytes as they came: the
    core decodes them, and the answer is the same as from the decoded value."""
    (first, *_) = [c for c in CAPTURE if c.props.get("qmf.opcode") == "_query_response"
                   and not c.props.get("partial")]
    content_type, raw = encode_v2_body(first.body)
    by_value, by_bytes = ConsoleProtocolV2(), ConsoleProtocolV2()
    want = feed(by_value, first, queue_query(by_value))
    cid = queue_query(by_bytes)
    got = by_bytes.receive(first.props, None, body=raw, content_type=content_type,
                           subject=first.subject, correlation_id=cid, now=0.0)
    assert got and [type(e) for e in got] == [type(e) for e in want]
    assert [e.items for e in got] == [e.items for e in want]  # type: ignore[union-attr]
    # malformed bytes: one malformed event, the query still waits
    cid = queue_query(by_bytes)
    (ev,) = by_bytes.receive(first.props, None, body=raw[:-3], content_type=content_type,
                             subject="s", correlation_id=cid, now=0.0)
    assert isinstance(ev, BodyMalformed) and ev.opcode == "_query_response"
    assert "truncated" in str(ev.error) and cid in by_bytes and by_bytes.malformed == 1


def test_unknown_opcodes_and_requests_are_unhandled() -> None:
    core = ConsoleProtocolV2()
    (ev,) = core.receive({"qmf.opcode": "_subscribe_refresh_indication"}, {}, now=0.0)
    assert isinstance(ev, MessageUnhandled)
    sent = next(c for c in CAPTURE if c.label == "query-queue" and c.direction == "sent")
    (ev,) = feed(core, sent, "x")
    assert isinstance(ev, MessageUnhandled) and isinstance(ev.message, V2QueryRequest)
    assert core.unhandled == 2


def test_correlation_id_as_bytes_is_accepted() -> None:
    core = ConsoleProtocolV2()
    cid = core.send_query(None, object_id=BROKER_OID).correlation_id
    (resp,) = received("query-by-object-id")
    (ev,) = feed(core, resp, cid.encode())  # type: ignore[arg-type]
    assert isinstance(ev, QueryDone) and ev.request == cid


_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=8),
                     st.binary(max_size=8), st.floats(allow_nan=False))
_values = st.recursive(_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4),
    st.dictionaries(st.one_of(st.text(max_size=8), st.binary(max_size=4)), inner,
                    max_size=4)), max_leaves=12)
_keys = st.sampled_from(["qmf.opcode", "qmf.content", "qmf.agent", "partial", "method",
                         "_values", "_object_id", "_arguments", "_schema_id", "x",
                         "_epoch", "_heartbeat_interval", "_timestamp", "_name",
                         "_object_name", "_class_name", "error_code", "error_text"])
_opcodes = st.sampled_from(["_query_response", "_method_response", "_exception",
                            "_agent_locate_response", "_agent_heartbeat_indication",
                            "_data_indication", "_query_request", "other"])
_bodies = st.one_of(_values, st.lists(st.dictionaries(_keys, _values, max_size=5),
                                      max_size=3),
                    st.dictionaries(_keys, _values, max_size=5),
                    st.dictionaries(_keys, st.dictionaries(_keys, _values, max_size=5),
                                    max_size=3))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(opcode=_opcodes, extra=st.dictionaries(_keys, _values, max_size=4), body=_bodies,
       use_cid=st.booleans(), raw_props=st.one_of(st.none(), _values))
def test_random_messages_never_raise(opcode: str, extra: dict[str, Any], body: Any,
                                     use_cid: bool, raw_props: Any) -> None:
    core = ConsoleProtocolV2(max_query_items=3)
    cids = [queue_query(core), core.send_method(None, BROKER_OID, "m", {}).correlation_id]
    props = dict(extra, **{"qmf.opcode": opcode})
    for headers in (props, raw_props):
        for cid in cids if use_cid else [None]:
            events = core.receive(headers, body, subject=None, correlation_id=cid, now=1.0)
            assert isinstance(events, list)
    core.age(1e9)
    core.expired(1e9)


# ------------------------------------------------------------------ texts_from_schema

QUEUE_SCHEMA = SchemaClass(
    ClassKind.OBJECT, ClassKey("org.apache.qpid.broker", "queue", b"\0" * 16),
    properties=[SchemaProperty("name", QmfType.SSTR, index=True),
                SchemaProperty("creator", QmfType.LSTR),
                SchemaProperty("exclusiveMarker", QmfType.UUID),
                SchemaProperty("arguments", QmfType.MAP)],
    statistics=[SchemaStatistic("msgDepth", QmfType.UINT64),
                SchemaStatistic("note", QmfType.SSTR)])


def test_texts_from_schema_decodes_string_elements_only() -> None:
    first, _ = received("query-queue")
    msg = decode_v2(first.props, first.body)
    assert isinstance(msg, V2QueryResponse)
    raw = dict(msg.items[0].values)
    raw["exclusiveMarker"] = b"\xff\x00binary"
    raw["note"] = b"\xff not utf-8"
    raw["opaque"] = b"kept"
    out = texts_from_schema(raw, QUEUE_SCHEMA)
    assert out["name"] == "qmf2-raw-893d599c_replies"
    assert out["creator"] == "anonymous"
    assert out["exclusiveMarker"] == b"\xff\x00binary"  # not a string type
    assert out["note"] == b"\xff not utf-8"  # not text: left as received
    assert out["opaque"] == b"kept"  # unknown to the schema
    assert out["redirectPeer"] == b""  # not in this schema
    assert out["msgDepth"] == raw["msgDepth"]
    assert raw["name"] == b"qmf2-raw-893d599c_replies"  # the input is not changed


def test_texts_from_schema_for_methods_and_events() -> None:
    echo = SchemaMethod("echo", [SchemaArgument("sequence", QmfType.UINT32, direction="IO"),
                                 SchemaArgument("body", QmfType.LSTR, direction="IO")])
    (resp,) = received("method-echo")
    assert texts_from_schema(resp.body["_arguments"], echo) == {"sequence": 7,
                                                                "body": "hello v2"}
    declare = SchemaClass(ClassKind.EVENT, ClassKey("org.apache.qpid.broker", "queueDeclare",
                                                    b"\0" * 16),
                          arguments=[SchemaArgument("qName", QmfType.SSTR),
                                     SchemaArgument("user", QmfType.SSTR)])
    ind = next(c for c in topic("_data_indication", "_event")
               if c.subject is not None and ".queueDeclare." in c.subject)
    (ev,) = ConsoleProtocolV2().receive(ind.props, ind.body, subject=ind.subject, now=0.0)
    assert isinstance(ev, EventReceived)
    assert isinstance(ev.message.values["qName"], bytes)
    out = texts_from_schema(ev.message.values, declare)
    assert isinstance(out["qName"], str) and out["qName"].encode() == ev.message.values["qName"]
    assert isinstance(out["user"], str)



def test_an_agent_owing_an_answer_gets_the_busy_grace() -> None:
    core = ConsoleProtocolV2(missed=2, busy_grace=5.0)
    (hb,) = topic("_agent_heartbeat_indication")
    core.receive(hb.props, hb.body, subject=hb.subject, now=0.0)  # interval 1 s
    cid = core.send_query(QPIDD, schema_id=V2SchemaId("", "queue")).correlation_id
    assert core.age(6.9) == []  # 2 x 1 s + 5 s
    left, failed = core.age(7.1)
    assert isinstance(left, AgentLeft) and isinstance(failed, RequestFailed)
    assert failed.request == cid
    # without a request outstanding the grace does not apply
    core.receive(hb.props, hb.body, subject=hb.subject, now=10.0)
    assert [type(e) for e in core.age(12.1)] == [AgentLeft]
