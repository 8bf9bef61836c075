"""The classic API (qmf.console) against a genuine qpidd, with the classic console
itself (Python 2.7, ../shared/classic-tools/lib) as the oracle: the same script on the
same qpidd prints the same lines through both."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import _python27
from tests.qpidd import Qpidd, send_messages

pytestmark = pytest.mark.qpidd

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = Path(__file__).resolve().parent / "classic_scripts"
CLASSIC_LIB = ROOT.parent / "shared" / "classic-tools" / "lib"


@pytest.fixture(scope="module")
def classic_python(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., str]:
    """``run(script, *args) -> stdout`` with Python 2.7 and the classic console."""
    py2 = _python27()
    if py2 is None or not CLASSIC_LIB.exists():
        pytest.skip("the classic console needs Python 2.7 and ../shared/classic-tools/lib")
    lib = tmp_path_factory.mktemp("classic") / "lib"
    shutil.copytree(CLASSIC_LIB, lib)  # the 0-10 spec cache is written beside the spec

    def run(script: str, *args: str) -> str:
        done = subprocess.run([py2, str(SCRIPTS / script), *args], capture_output=True,
                              text=True, timeout=90, env={**os.environ, "PYTHONPATH": str(lib)},
                              check=False)
        assert done.returncode == 0, done.stderr
        return done.stdout

    return run


def run_ours(script: str, *args: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, str(SCRIPTS / script), *args], capture_output=True,
                          text=True, timeout=90, env=env, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _py2_text(out: str) -> str:
    """Python 2's unicode literals print as u'...': the only difference print syntax makes."""
    return out.replace("u'", "'").replace('u"', '"')


def _make_queues(qpidd: Qpidd, prefix: str, depths: list[int]) -> None:
    from qmf.console import Session
    with Session() as sess:
        sess.addBroker(qpidd.address)
        (br,) = sess.getObjects(_class="broker")
        for i, depth in enumerate(depths):
            name = f"{prefix}-{i}"
            assert br.create("queue", name, {}, False).status == 0
            if depth:
                send_messages(qpidd.address, name, depth)


@pytest.mark.parametrize("mgmt", ["stock", "v1"])
def test_the_tutorial_session_prints_what_the_classic_console_prints(
        mgmt: str, request: pytest.FixtureRequest, classic_python: Callable[..., str]) -> None:
    # a stock qpidd (QMF v2 only) and one with QMF v1 on too: both consoles speak v2
    qpidd: Qpidd = request.getfixturevalue("qpidd_stock" if mgmt == "stock" else "qpidd_v1")
    prefix = f"oracle-{uuid.uuid4().hex[:8]}"
    _make_queues(qpidd, prefix, [0, 3, 1])
    classic = _py2_text(classic_python("oracle_session.py", qpidd.address, prefix))
    ours = run_ours("oracle_session.py", qpidd.address, prefix)
    assert f"{prefix}-1 3 False False False" in ours
    assert ours.splitlines() == classic.splitlines()


def test_a_console_subclass_sees_events_and_may_call_back(qpidd_stock: Qpidd) -> None:
    prefix = f"watch-{uuid.uuid4().hex[:8]}"
    out = run_ours("watch_events.py", qpidd_stock.address, prefix)
    assert "connected True" in out
    assert "create 0" in out
    assert f"event queueDeclare {prefix}-ev" in out
    # the classic console's event line: UTC time, severity, class, broker, arguments
    line = re.compile(r"^line \w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4} INFO  "
                      r"org\.apache\.qpid\.broker:queueDeclare broker=127\.0\.0\.1:\d+ "
                      rf".*\bqName={prefix}-ev\b.* durable=F\b", re.M)
    assert line.search(out), out
    assert "seen True" in out


def test_queue_depths_by_regular_expression(qpidd_stock: Qpidd) -> None:
    from qmf.console import Session
    prefix = f"depth-{uuid.uuid4().hex[:8]}"
    _make_queues(qpidd_stock, prefix, [2, 0, 5])
    sess = Session()
    try:
        sess.addBroker(qpidd_stock.address)
        pattern = re.compile(rf"^{prefix}-\d$")
        depths = {q.name: q.msgDepth for q in sess.getObjects(_class="queue")
                  if pattern.match(q.name)}
        assert depths == {f"{prefix}-0": 2, f"{prefix}-1": 0, f"{prefix}-2": 5}
        (q,) = sess.getObjects(_class="queue", name=f"{prefix}-2")
        r = q.purge(2)
        assert (r.status, r.text) == (0, "OK")
        q.update()
        assert q.msgDepth == 3
    finally:
        sess.close()


def test_async_method_calls_answer_through_method_response(qpidd_stock: Qpidd) -> None:
    from qmf.console import Console, Session

    answers: dict[int, object] = {}
    done = threading.Event()

    class Responses(Console):
        def methodResponse(self, broker, seq, response):  # type: ignore[no-untyped-def]
            answers[seq] = response
            if len(answers) == 20:
                done.set()

    sess = Session(Responses(), rcvObjects=False, rcvEvents=False, rcvHeartbeats=False)
    try:
        sess.addBroker(qpidd_stock.address)
        (br,) = sess.getObjects(_class="broker")
        seqs = {br.echo(i, f"body-{i}", _async=True): i for i in range(20)}
        assert len(seqs) == 20 and all(isinstance(s, int) for s in seqs)
        assert done.wait(20)
        for seq, i in seqs.items():
            result = answers[seq]
            assert (result.status, result.sequence, result.body) == (0, i, f"body-{i}")
    finally:
        sess.close()


def test_concurrent_threads_never_see_each_others_results(qpidd_stock: Qpidd) -> None:
    from qmf.console import Session
    sess = Session()
    errors: list[str] = []
    try:
        sess.addBroker(qpidd_stock.address)
        (br,) = sess.getObjects(_class="broker")

        def worker(n: int) -> None:
            for i in range(15):
                r = br.echo(n * 1000 + i, f"t{n}-{i}")
                if (r.sequence, r.body) != (n * 1000 + i, f"t{n}-{i}"):
                    errors.append(f"{n}/{i}: {r}")

        threads = [threading.Thread(target=worker, args=(n,)) for n in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert not any(t.is_alive() for t in threads)
        assert errors == []
    finally:
        sess.close()


def test_manage_connections_across_a_broker_restart(
        qpidd_fresh: Callable[[bool], Qpidd]) -> None:
    from qmf.console import Console, Session
    broker = qpidd_fresh(False)
    events: list[str] = []

    class Watch(Console):
        def brokerConnected(self, b):  # type: ignore[no-untyped-def]
            events.append("up")

        def brokerDisconnected(self, b):  # type: ignore[no-untyped-def]
            events.append("down")

    sess = Session(Watch(), manageConnections=True, reconnect_min_delay=0.1,
                   reconnect_max_delay=0.5)
    try:
        b = sess.addBroker(broker.address)
        deadline = time.monotonic() + 10
        while not b.isConnected() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert b.isConnected()
        broker.restart()
        deadline = time.monotonic() + 30
        while events.count("up") < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert events[:1] == ["up"] and "down" in events and events.count("up") >= 2
        deadline = time.monotonic() + 10
        found: list[object] = []
        while not found and time.monotonic() < deadline:
            try:
                found = sess.getObjects(_class="broker", _timeout=5)
            except Exception:
                time.sleep(0.1)
        assert len(found) == 1
    finally:
        t0 = time.monotonic()
        sess.close()
        assert time.monotonic() - t0 < 10


def test_broker_agent_manages_queues_exchanges_and_bindings(qpidd_stock: Qpidd) -> None:
    from qpidtoollibs import BrokerAgent
    name = f"tl-{uuid.uuid4().hex[:8]}"

    class Conn:  # what callers pass today: a connection object with host and port
        host, port = "127.0.0.1", qpidd_stock.port

    agent = BrokerAgent(Conn())
    try:
        assert agent.echo(5, "ping") == {"sequence": 5, "body": "ping"}
        agent.addQueue(name, {"qpid.max_count": 10})
        agent.addExchange("topic", f"{name}-x")
        agent.bind(f"{name}-x", name, "k.#")
        send_messages(qpidd_stock.address, name, 4)
        q = agent.getQueue(name)
        assert q is not None and (q.name, q.msgDepth) == (name, 4)
        assert q.arguments == {"qpid.max_count": 10}
        assert q.vhostRef == "org.apache.qpid.broker:broker:amqp-broker,/"
        assert q.getObjectId() == f"org.apache.qpid.broker:queue:{name}"
        assert [repr(b) for b in agent.getAllBindings() if b.bindingKey == "k.#"] == [
            "Binding key: k.#"]
        agent.addQueue(f"{name}-2")
        agent.queueMoveMessages(name, f"{name}-2", 3)
        q.update()
        assert q.msgDepth == 1
        q.purge(0)
        q.update()
        assert q.msgDepth == 0
        assert agent.getLogLevel()["level"]
        assert agent.getExchange(f"{name}-x").type == "topic"
        assert agent.getBroker().name == "amqp-broker"
        agent.unbind(f"{name}-x", name, "k.#")
        agent.delQueue(f"{name}-2", if_empty=False)
        agent.delQueue(name)
        agent.delExchange(f"{name}-x")
        assert agent.getQueue(name) is None
    finally:
        agent.close()


def test_qmf_v1_objects_read_and_call_the_same(qpidd_v1: Qpidd) -> None:
    from qmf.console import Session
    prefix = f"v1-{uuid.uuid4().hex[:8]}"
    _make_queues(qpidd_v1, prefix, [2])
    sess = Session(qmf_version=1)
    try:
        sess.addBroker(qpidd_v1.address)
        (q,) = sess.getObjects(_class="queue", name=f"{prefix}-0")
        oid = q.getObjectId()
        assert not oid.isV2 and repr(oid).startswith("0-") and oid.getObject().isdigit()
        assert repr(q) == f"org.apache.qpid.broker:queue[{oid!r}] {q.getIndex()}"
        assert q.getIndex().endswith(f":{prefix}-0")
        assert [p.name for p, _ in q.getProperties()][:2] == ["vhostRef", "name"]
        assert q.msgDepth == 2 and q._vhostRef_.name == "/"
        (same,) = sess.getObjects(_objectId=oid)
        assert same.getObjectId() == oid and hash(same.getObjectId()) == hash(oid)
        (br,) = sess.getObjects(_class="broker")
        r = br.echo(3, "v1")
        assert (r.status, r.sequence, r.body) == (0, 3, "v1")
        assert [repr(a) for a in sess.getAgents()][:1] == ["Agent(v1) at bank 1.0 (BrokerAgent)"]
    finally:
        sess.close()


def test_an_unreachable_broker_with_managed_connections_never_blocks() -> None:
    import socket

    from qmf.console import Console, Session
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    failed = threading.Event()

    class Watch(Console):
        def brokerConnectionFailed(self, broker):  # type: ignore[no-untyped-def]
            failed.set()

    sess = Session(Watch(), manageConnections=True, reconnect_min_delay=0.1)
    t0 = time.monotonic()
    b = sess.addBroker(f"127.0.0.1:{port}", timeout=2)
    assert time.monotonic() - t0 < 5
    assert not b.isConnected() and repr(b) == "Disconnected Broker"
    assert failed.wait(5)
    t0 = time.monotonic()
    sess.delBroker(b)
    sess.close()
    assert time.monotonic() - t0 < 5


def test_user_bindings_deliver_only_the_bound_class(qpidd_stock: Qpidd) -> None:
    from qmf.console import Console, DebugConsole, Session
    classes: list[str] = []
    agents: list[str] = []

    called: list[object] = []
    # this test's own queue: another test's queue may be deleted (its update() then
    # raises ObjectGoneError) between its statistics and the callback's update()
    busy = f"bound-{uuid.uuid4().hex[:8]}"

    class Objects(Console):
        def objectProps(self, broker, record):  # type: ignore[no-untyped-def]
            classes.append(record.getClassKey().getClassName())

        def objectStats(self, broker, record):  # type: ignore[no-untyped-def]
            classes.append(record.getClassKey().getClassName())
            assert record.name  # statistics come with the properties known
            if not called and record.name == busy:  # a callback calls back into the
                # session: no deadlock
                record.update()
                (br,) = broker.session.getObjects(_class="broker")
                called.append((record.name, br.echo(1, "from a callback").body))

        def newAgent(self, agent):  # type: ignore[no-untyped-def]
            agents.append(repr(agent))

    assert isinstance(DebugConsole(), Console)
    sess = Session(Objects(), userBindings=True, rcvEvents=False)
    try:
        sess.addBroker(qpidd_stock.address)
        sess.bindClass("org.apache.qpid.broker", "queue")
        # qpidd publishes the statistics of changed objects only (every second here):
        # a queue of this test's own gets traffic, whatever the shared broker holds
        (br,) = sess.getObjects(_class="broker")
        br.create("queue", busy, {}, False)
        deadline = time.monotonic() + 15
        while (len(classes) < 3 or not called) and time.monotonic() < deadline:
            send_messages(qpidd_stock.address, busy, 1)
            time.sleep(0.3)
        assert len(classes) >= 3 and set(classes) == {"queue"}
        assert called and called[0][1] == "from a callback"
        assert "Agent(v2) at bank 1.0 (BrokerAgent)" in agents
        key = sess.getClasses("org.apache.qpid.broker")
        (queue_key,) = [k for k in key if k.getClassName() == "queue"]
        assert sess.getSchema(repr(queue_key)).getKey() == queue_key  # the text form too
        assert sess.getObjects(_key=repr(queue_key))
        made = sess.makeObject(queue_key, name="draft", durable=True)
        assert (made.name, made.durable, made.isManaged()) == ("draft", True, False)
        assert repr(made).startswith("org.apache.qpid.broker:queue[unmanaged]")
    finally:
        sess.close()


def test_exit_with_an_open_connection_closes_cleanly(qpidd_stock: Qpidd) -> None:
    # a script that never calls close(): the session is closed at exit, before the
    # AMQP 1.0 library releases its objects (closing after that crashed the process)
    code = ("import sys\n"
            "from qmf.console import Session\n"
            "s = Session()\n"
            "s.addBroker(sys.argv[1])\n"
            "print(len(s.getObjects(_class='broker')))\n")
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, "-c", code, qpidd_stock.address],
                          capture_output=True, text=True, timeout=30, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "1" and "Fatal" not in done.stderr
    assert time.monotonic() - t0 < 20


def test_a_qpidtoollibs_script_prints_what_the_classic_library_prints(
        qpidd_stock: Qpidd, classic_python: Callable[..., str]) -> None:
    name = f"otl-{uuid.uuid4().hex[:8]}"  # each run creates and deletes it
    classic = _py2_text(classic_python("oracle_toollibs.py", qpidd_stock.address, name))
    ours = run_ours("oracle_toollibs.py", qpidd_stock.address, name)
    assert f"{name} False False False 0 org.apache.qpid.broker:broker:amqp-broker,/" in ours
    assert ours.splitlines() == classic.splitlines()


@pytest.mark.parametrize("mgmt", ["stock", "v1"])
def test_a_query_answer_lists_the_statistics_the_classic_console_lists(
        mgmt: str, request: pytest.FixtureRequest, classic_python: Callable[..., str]) -> None:
    # the layer reads qpidd's agent over QMF v1 (its fast path: every statistic of the
    # schema), the classic console over v2, where qpidd names the latency statistics
    # messageLatencyCount/Avg: their schema names Samples/Average never arrive there
    qpidd: Qpidd = request.getfixturevalue("qpidd_stock" if mgmt == "stock" else "qpidd_v1")
    prefix = f"qe-{uuid.uuid4().hex[:8]}"
    _make_queues(qpidd, prefix, [2])
    ours = run_ours("query_elements.py", qpidd.address, f"{prefix}-0")
    assert "query unlisted: messageLatencyAverage=None messageLatencySamples=None" in ours
    assert classic_python("query_elements.py", qpidd.address, f"{prefix}-0") == ours


def test_a_qmf_v1_session_lists_every_statistic_as_the_classic_console_over_v1(
        qpidd_v1: Qpidd) -> None:
    from qmf.console import Session
    with Session(qmf_version=1) as sess:
        sess.addBroker(qpidd_v1.address)
        (broker,) = sess.getObjects(_class="broker")
        assert broker.create("queue", "qe-v1", {}, False).status == 0
        try:
            (queue,) = sess.getObjects(_class="queue", name="qe-v1")
            listed = {s.name for s, _ in queue.getStatistics()}
            assert {"messageLatencySamples", "messageLatencyAverage"} <= listed
            assert queue.messageLatencySamples == 0
        finally:
            broker.delete("queue", "qe-v1", {})
