"""What the upstream conformance suites found in the classic layer (issue 35), checked
on a genuine qpidd with QMF v1 on and on a stock one: text in method results at every
depth, ``Broker.getSessionId()``, ``qpidtoollibs`` sessions and their connections, and
``qmf.client`` (URL text or object, queues, methods, a forked child)."""

from __future__ import annotations

import os
import uuid
from typing import Any

import pytest

from tests.qpidd import Qpidd, send_messages

pytestmark = pytest.mark.qpidd


@pytest.fixture(params=["stock", "v1"])
def qpidd(request: pytest.FixtureRequest) -> Qpidd:
    broker: Qpidd = request.getfixturevalue(f"qpidd_{request.param}")
    return broker


def test_method_results_carry_text_at_every_depth(qpidd: Qpidd) -> None:
    from qmf.console import Session
    name = f"groups-{uuid.uuid4().hex[:8]}"
    with Session() as sess:
        sess.addBroker(qpidd.address)
        (br,) = sess.getObjects(_class="broker")
        # a text argument given as bytes (a Python 2 str) goes out as its text
        assert br.echo(7, b"ping").outArgs == {"sequence": 7, "body": "ping"}
        args = {"qpid.group_header_key": "THE-GROUP", "qpid.shared_msg_group": 1}
        assert br.create("queue", name, args, False).status == 0
        try:
            send_messages(qpidd.address, name, 2)  # no group header: the default group
            result = br.query("queue", name)
            info = result.outArgs["results"]["qpid.message_group_queue"]
            assert info["group_header_key"] == "THE-GROUP"
            (group,) = info["group_state"]
            assert group == {"group_id": "qpid.no-group", "msg_count": 2, "consumer": "",
                             "timestamp": group["timestamp"]}
            (queue,) = sess.getObjects(_class="queue", name=name)
            assert queue.arguments == {"qpid.group_header_key": "THE-GROUP",
                                       "qpid.shared_msg_group": 1}
        finally:
            br.delete("queue", name, {})


def test_the_session_id_names_this_console_s_session_on_the_broker(qpidd: Qpidd) -> None:
    from qmf.console import ObjectId, Session
    from qmf_async.wire import ObjectId as WireObjectId
    with Session() as sess:
        broker = sess.addBroker(qpidd.address)
        sid = broker.getSessionId()
        names = [s.name for s in sess.getObjects(_class="session")]
        assert [n for n in names if n.endswith(sid)] == [sid], (sid, names)
        # a null reference (a link not yet connected) names no object: [] at once
        null = ObjectId(WireObjectId.from_ints(0, 0))
        assert sess.getObjects(_objectId=null, _timeout=5) == []


def test_broker_agent_sessions_lead_to_their_connections(qpidd: Qpidd) -> None:
    from qpidtoollibs import BrokerAgent
    agent = BrokerAgent(qpidd.address)
    try:
        sessions = agent.getAllSessions()
        assert sessions, "no session listed"
        for s in sessions:
            conn = agent.getConnection(s.connectionRef)
            assert conn is not None and conn.address == s.connectionRef
    finally:
        agent.close()


def test_qmf_client_broker_agent_manages_queues_and_survives_a_fork(qpidd_stock: Qpidd) -> None:
    from qmf.client import BrokerAgent, ConnectionException

    class Url:  # what the upstream tests pass: qpid.util.URL
        scheme, user, password, host, port = None, None, None, "127.0.0.1", qpidd_stock.port

    name = f"qc-{uuid.uuid4().hex[:8]}"
    agent = BrokerAgent.connect(Url())
    try:
        assert agent.getBroker().name == "amqp-broker"
        assert agent.echo(3, "é") == {"sequence": 3, "body": "é"}
        agent.addQueue(name)
        queue = agent.getQueue(name)
        assert queue is not None and queue.name == name
        assert queue.getObjectId() == f"org.apache.qpid.broker:queue:{name}"
        pid = os.fork()
        if pid == 0:  # the child connects its own agent; the parent's stays usable
            try:
                child = BrokerAgent.connect(qpidd_stock.address)
                child.delQueue(name)
                child.addQueue(f"{name}-child")
                child.close()
            finally:
                os._exit(0)
        assert os.waitpid(pid, 0) == (pid, 0)
        assert agent.getQueue(name) is None
        assert agent.getQueue(f"{name}-child").name == f"{name}-child"
        agent.delQueue(f"{name}-child")
        with pytest.raises(Exception, match="No such queue"):
            agent.delQueue(name)
    finally:
        agent.close()
    with pytest.raises(ConnectionException):
        BrokerAgent.connect(f"127.0.0.1:{qpidd_stock.port + 7}", timeout=2)


def test_records_carry_the_parts_that_arrived_and_merge_as_the_classic_ones(
        qpidd_v1: Qpidd) -> None:
    import threading

    from qmf.console import Console, Session

    props: list[Any] = []
    stats: list[Any] = []
    both = threading.Event()
    lasting = ("broker",)  # an object that stays, with statistics

    class Records(Console):
        def objectProps(self, broker: object, record: Any) -> None:
            if record.getClassKey().getClassName() in lasting:
                props.append(record)
            if props and stats:
                both.set()

        def objectStats(self, broker: object, record: Any) -> None:
            stats.append(record)
            if props and stats:
                both.set()

    with Session(Records(), qmf_version=1) as sess:
        sess.addBroker(qpidd_v1.address)
        assert both.wait(15), (len(props), len(stats))
        p, s = props[0], stats[0]
        assert p.getProperties() and p.getStatistics() == [] and p._statistics == []
        assert s.getStatistics() and s.getProperties() == [] and s._properties == []
        assert p._objectId == p.getObjectId() and p._currentTime == p.getTimestamps()[0]
        assert (p._createTime, p._deleteTime) == p.getTimestamps()[1:]
        assert p._session is sess and p._broker is sess.brokers[0]
        attrs = vars(p)  # what scripts print or read: the classic console's attributes
        assert sorted(attrs) == ["_agent", "_broker", "_createTime", "_currentTime",
                                 "_deleteTime", "_objectId", "_properties", "_schema",
                                 "_session", "_statistics"]
        assert attrs["_properties"] == p.getProperties() and attrs["_statistics"] == []
        (fresh,) = sess.getObjects(_objectId=p.getObjectId())
        assert fresh.getProperties() and fresh.getStatistics()
        p.mergeUpdate(fresh)
        assert p.getProperties() and p.getStatistics()
        assert p.getTimestamps() == fresh.getTimestamps()
