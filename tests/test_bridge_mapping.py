"""The RabbitMQ bridge without I/O: recorded management-API answers (tests/data/rabbitmq-api,
written by scripts/record_rabbitmq_api.py against RabbitMQ 3.10) mapped onto qpidd's
classes, the events of a change, the create arguments, and the agent's objects after
applying snapshots."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import pytest

from qmf_async import MethodError, ObjectId
from qmf_async.agent import Agent, ManagedObject
from qmf_async.bridge.rabbitmq import (
    RabbitApi,
    RabbitBridge,
    RawState,
    api_base,
    diff_events,
    exchange_arguments,
    load_schemas,
    map_state,
    queue_arguments,
)

DATA = Path(__file__).resolve().parent / "data" / "rabbitmq-api"
V = "bridge-record"


def raw(name: str) -> RawState:
    return RawState(**json.loads((DATA / f"{name}.json").read_text()))


#: the recorder's connection, "127.0.0.1:<its port> -> 127.0.0.1:5672"
CONN = raw("state1").connections[0]["name"]


@pytest.fixture(scope="module")
def state1() -> RawState:
    return raw("state1")


@pytest.fixture(scope="module")
def state2() -> RawState:
    return raw("state2")


def test_queues_carry_qpidd_names_and_rabbitmq_figures(state1: RawState) -> None:
    snap = map_state(state1, interval=1.0)
    orders = snap[("queue", V, "orders")]
    assert orders.props == {"name": "orders", "durable": True, "autoDelete": False,
                            "exclusive": False,
                            "arguments": {"x-dead-letter-exchange": "dead",
                                          "x-max-length": 1000}}
    s = orders.stats
    # 5 published, 2 acknowledged, 2 more delivered and unacknowledged
    assert (s["msgDepth"], s["msgTotalEnqueues"], s["msgTotalDequeues"]) == (3, 5, 2)
    assert s["byteDepth"] == 309  # bodies of 102, 103 and 104 bytes
    assert (s["acquires"], s["releases"], s["unackedMessages"]) == (4, 0, 2)
    assert (s["consumerCount"], s["consumerCountHigh"], s["consumerCountLow"]) == (1, 1, 1)
    assert s["bindingCount"] == 2  # the default exchange and events/order.#
    assert orders.refs == {"vhostRef": ("vhost", V), "altExchange": ("exchange", V, "dead")}
    audit = snap[("queue", V, "audit")]
    assert (audit.stats["msgDepth"], audit.stats["byteDepth"], audit.stats["bindingCount"],
            audit.stats["msgTotalDequeues"]) == (5, 510, 3, 0)
    assert audit.refs["altExchange"] is None


def test_exchanges_bindings_and_vhost(state1: RawState) -> None:
    snap = map_state(state1, interval=1.0)
    events = snap[("exchange", V, "events")]
    assert events.props["type"] == "topic" and events.props["durable"] is True
    assert events.refs["altExchange"] == ("exchange", V, "lost")
    assert (events.stats["msgReceives"], events.stats["msgRoutes"],
            events.stats["bindingCount"]) == (5, 10, 2)
    default = snap[("exchange", V, "")]
    assert default.props["type"] == "direct" and default.stats["bindingCount"] == 2
    bindings = {(m.key[2], m.key[3], m.props["bindingKey"]) for m in snap.values()
                if m.cls == "binding"}
    assert bindings == {("", "orders", "orders"), ("", "audit", "audit"),
                        ("amq.fanout", "audit", ""), ("events", "audit", "#"),
                        ("events", "orders", "order.#")}
    b = snap[("binding", V, "events", "orders", "order.%23")]
    assert b.refs == {"exchangeRef": ("exchange", V, "events"),
                      "queueRef": ("queue", V, "orders")}
    assert snap[("vhost", V)].refs == {"brokerRef": ("broker",)}


def test_broker_sums_the_queues(state1: RawState) -> None:
    snap = map_state(state1, interval=2.4)
    broker = snap[("broker",)]
    assert broker.props["name"] == "rabbit@vm"
    assert broker.props["version"] == "RabbitMQ 3.10.8"
    assert broker.props["port"] == 5672 and broker.props["mgmtPubInterval"] == 2
    assert broker.stats["queueCount"] == 2
    assert (broker.stats["msgDepth"], broker.stats["byteDepth"]) == (8, 819)
    assert broker.stats["msgTotalEnqueues"] == 10
    assert broker.stats["uptime"] == state1.nodes[0]["uptime"] * 1_000_000


def test_connections_sessions_subscriptions(state1: RawState) -> None:
    snap = map_state(state1, interval=1.0)
    conn = snap[("connection", CONN)]
    assert conn.props["address"] == CONN and conn.props["authIdentity"] == "guest"
    assert conn.props["remoteProcessName"] == "recorder"
    assert conn.props["saslMechanism"] == "PLAIN"
    assert conn.props["protocol"] == "AMQP 0-9-1"
    assert conn.props["remoteProperties"]["product"] == "aiormq"
    assert conn.created_ns == state1.connections[0]["connected_at"] * 1_000_000
    assert conn.stats["msgsFromClient"] == 6  # 5 to events, 1 unroutable
    assert conn.stats["bytesFromClient"] == state1.connections[0]["recv_oct"]
    sessions = sorted((m.props["channelId"], m.refs["connectionRef"]) for m in snap.values()
                      if m.cls == "session")
    assert sessions == [(1, ("connection", CONN)), (2, ("connection", CONN))]
    sub = snap[("subscription", f"{CONN} (2)", "recorder-1")]
    assert sub.props["acknowledged"] is True and sub.props["browsing"] is False
    assert sub.refs == {"sessionRef": ("session", f"{CONN} (2)"),
                        "queueRef": ("queue", V, "orders")}


def test_events_of_a_change_have_qpidd_arguments(state1: RawState, state2: RawState) -> None:
    before, after = map_state(state1, interval=1.0), map_state(state2, interval=1.0)
    events = diff_events(before, after)
    names = sorted(name for name, _ in events)
    assert names == ["clientDisconnect", "queueDelete", "unbind", "unbind", "unbind",
                     "unsubscribe"]
    args = dict((n, a) for n, a in events if n != "unbind")
    assert args["queueDelete"] == {"rhost": "", "user": "", "qName": "audit"}
    assert args["clientDisconnect"]["rhost"] == CONN.split(" -> ")[0]
    assert args["clientDisconnect"]["rhost"].startswith("127.0.0.1:")
    assert args["clientDisconnect"]["user"] == "guest"
    assert args["unsubscribe"]["dest"] == "recorder-1"
    unbinds = sorted((a["exName"], a["qName"], a["key"]) for n, a in events if n == "unbind")
    assert unbinds == [("", "audit", "audit"), ("amq.fanout", "audit", ""),
                       ("events", "audit", "#")]
    back = dict((n, a) for n, a in diff_events(after, before) if n != "bind")
    assert back["queueDeclare"] == {"rhost": "", "user": "", "qName": "audit", "durable": False,
                                    "excl": False, "autoDel": False, "altEx": "", "args": {},
                                    "disp": "created"}
    assert back["clientConnect"]["properties"]["connection_name"] == "recorder"
    assert back["subscribe"]["qName"] == "orders"
    assert diff_events(before, before) == []


def test_dequeues_are_what_consumers_took(state1: RawState) -> None:
    queues = [dict(q) for q in state1.queues]
    for q in queues:
        if q["name"] == "orders":
            q["message_stats"] = {**q["message_stats"], "deliver_no_ack": 3, "get_no_ack": 4}
    snap = map_state(attrs.evolve(state1, queues=queues), interval=1.0)
    assert snap[("queue", V, "orders")].stats["msgTotalDequeues"] == 2 + 3 + 4
    # a depth sampled before the counters does not make dequeues up
    for q in queues:
        q["messages"] = 0
    snap = map_state(attrs.evolve(state1, queues=queues), interval=1.0)
    assert snap[("queue", V, "audit")].stats["msgTotalDequeues"] == 0


def test_a_queue_before_any_traffic() -> None:
    state = RawState(overview={}, nodes=[], vhosts=[{"name": "/"}], exchanges=[], bindings=[],
                     connections=[], channels=[], consumers=[],
                     queues=[{"name": "q", "vhost": "/", "durable": False,
                              "auto_delete": False, "exclusive": None, "arguments": [],
                              "messages": None, "state": "running"}])
    q = map_state(state, interval=1.0)[("queue", "/", "q")]
    assert q.props["arguments"] == {} and q.props["exclusive"] is False
    assert q.stats["msgDepth"] == 0 and q.stats["msgTotalEnqueues"] == 0
    assert map_state(state, interval=1.0)[("broker",)].props["name"] == "rabbitmq"


def test_queue_create_properties() -> None:
    body = queue_arguments({"durable": True, "auto-delete": False, "alternate-exchange": "dlx",
                            "qpid.max_count": 10, "qpid.max_size": 2048,
                            "qpid.policy_type": "ring", "x-message-ttl": 60000}, strict=True)
    assert body == {"durable": True, "auto_delete": False, "arguments": {
        "x-dead-letter-exchange": "dlx", "x-max-length": 10, "x-max-length-bytes": 2048,
        "x-overflow": "drop-head", "x-message-ttl": 60000}}
    assert queue_arguments({"qpid.max_count": 0}, strict=True)["arguments"] == {}
    assert queue_arguments({"qpid.file_count": 8}, strict=False)["arguments"] == {}
    with pytest.raises(MethodError) as exc:
        queue_arguments({"qpid.file_count": 8}, strict=True)
    assert exc.value.status == 4 and "qpid.file_count" in str(exc.value)
    with pytest.raises(MethodError) as exc:
        queue_arguments({"exclusive": True}, strict=False)
    assert exc.value.status == 5
    with pytest.raises(MethodError) as exc:
        queue_arguments({"qpid.policy_type": "flow_to_disk"}, strict=False)
    assert exc.value.status == 4
    with pytest.raises(MethodError):
        queue_arguments({"qpid.max_count": "many"}, strict=False)


def test_exchange_create_properties() -> None:
    body = exchange_arguments({"exchange-type": "fanout", "durable": True,
                               "alternate-exchange": "lost"}, strict=True)
    assert body == {"type": "fanout", "durable": True, "auto_delete": False, "internal": False,
                    "arguments": {"alternate-exchange": "lost"}}
    assert exchange_arguments({}, strict=False)["type"] == "topic"  # qpidd's default
    with pytest.raises(MethodError):
        exchange_arguments({"qpid.msg_sequence": 1}, strict=True)


def test_api_urls() -> None:
    assert api_base("http://u:p%40ss@rabbit:15672/") == ("http://rabbit:15672/api", "u", "p@ss")
    assert api_base("localhost:15672/api/") == ("http://localhost:15672/api", "guest", "guest")
    with pytest.raises(Exception, match="http"):
        api_base("amqp://localhost/")


class RecordingAgent(Agent):
    """An agent never started: raised events are kept (after the schema's checks)."""

    def __init__(self) -> None:
        super().__init__("amqp://guest:guest@localhost:5672/", label="bridge-unit")
        self.raised: list[tuple[str, dict[str, Any]]] = []
        #: per publication, the objects it carried (changed or deleted)
        self.published: list[set[ManagedObject]] = []

    def publish_now(self) -> None:
        self.published.append({o for o in self._objects.values()
                               if o.props_changed or o.stats_changed or o.is_deleted})
        super().publish_now()

    def raise_event(self, event: Any, severity: int | None = None, *,
                    package: str | None = None, **arguments: Any) -> None:
        super().raise_event(event, severity, package=package, **arguments)
        self.raised.append((str(event), arguments))


def test_apply_builds_the_agents_objects(state1: RawState, state2: RawState) -> None:
    agent = RecordingAgent()
    bridge = RabbitBridge(agent, RabbitApi(), interval=1.0, vhost=V)
    assert bridge.apply(map_state(state1, interval=1.0)) > 0
    assert agent.raised == []  # the first snapshot is the starting state, not news
    queues = {o["name"]: o for o in agent.objects("queue")}
    assert set(queues) == {"orders", "audit"}
    orders = queues["orders"]
    assert orders["msgDepth"] == 3 and orders["byteDepth"] == 309
    vhost = agent.objects("vhost")[0]
    assert orders["vhostRef"] == vhost.object_id
    dead = next(o for o in agent.objects("exchange") if o["name"] == "dead")
    assert orders["altExchange"] == dead.object_id
    broker = agent.objects("broker")[0]
    assert vhost["brokerRef"] == broker.object_id
    conn = agent.objects("connection")[0]
    assert conn.created == state1.connections[0]["connected_at"] * 1_000_000
    sub = agent.objects("subscription")[0]
    assert sub["queueRef"] == orders.object_id
    session = next(o for o in agent.objects("session") if o.object_id == sub["sessionRef"])
    assert session["connectionRef"] == conn.object_id
    binding = next(o for o in agent.objects("binding") if o["bindingKey"] == "order.#")
    assert binding["queueRef"] == orders.object_id
    for obj in agent.objects():
        obj.props_changed = obj.stats_changed = False  # as after a publication

    snap2 = map_state(state2, interval=1.0)
    bridge.apply(snap2)
    assert audit_gone(agent) and queues["audit"].is_deleted
    assert agent.objects("connection") == [] and agent.objects("subscription") == []
    assert sorted(n for n, _ in agent.raised) == sorted(n for n, _ in diff_events(
        map_state(state1, interval=1.0), snap2))
    # only what changed is published: the deleted objects, the events exchange and the
    # default exchange (each lost a binding to audit), amq.fanout, orders (its consumer
    # left) and the broker (sums); the other exchanges stay quiet
    second = agent.published[1]
    names = {(o.schema.class_key.name, o.get("name")) for o in second}
    assert ("queue", "audit") in names and ("exchange", "events") in names
    assert ("queue", "orders") in names and ("broker", "rabbit@vm") in names
    assert ("exchange", "lost") not in names and ("exchange", "amq.topic") not in names
    events = next(o for o in agent.objects("exchange") if o["name"] == "events")
    assert events["bindingCount"] == 1
    # the same snapshot again changes nothing and publishes nothing
    assert bridge.apply(map_state(state2, interval=1.0)) == 0
    assert len(agent.published) == 2


def audit_gone(agent: Agent) -> bool:
    return all(o["name"] != "audit" for o in agent.objects("queue"))


def test_the_schema_has_the_bridge_classes() -> None:
    schemas = load_schemas()
    names = {s.class_key.name for s in schemas}
    assert {"broker", "vhost", "queue", "exchange", "binding", "connection", "session",
            "subscription", "queueDeclare", "queueDelete", "bind", "unbind", "clientConnect",
            "clientDisconnect"} <= names
    assert all(s.class_key.package == "org.apache.qpid.broker" for s in schemas)
    # no reference left unresolved in a mapped object of a real snapshot
    agent = RecordingAgent()
    bridge = RabbitBridge(agent, RabbitApi(), interval=1.0)
    bridge.apply(map_state(raw("state1"), interval=1.0))
    null = ObjectId(bytes(16))
    for obj in agent.objects():
        for p in obj.schema.properties:
            if p.name.endswith("Ref") and p.name != "systemRef":  # no system object
                assert obj[p.name] != null, (obj.schema.class_key.name, p.name)
