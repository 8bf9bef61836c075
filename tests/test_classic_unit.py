"""The classic API's values and threading core, without a broker."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from qmf_async import QmfTimeout, RemoteAgent, UsageError
from qmf_async.classic import BrokerURL, ClassKey, MethodResult, ObjectId
from qmf_async.classic._loop import Dispatcher, LoopThread
from qmf_async.wire import ClassKey as WireClassKey
from qmf_async.wire import ObjectId as WireObjectId

ROOT = Path(__file__).resolve().parent.parent
HASH = uuid.UUID("84ce326e-2cbd-6899-80d7-6267d3327e0f")


def test_class_key_prints_and_parses_as_the_classic_one() -> None:
    key = ClassKey(WireClassKey("org.apache.qpid.broker", "queue", HASH.bytes), 1)
    text = "org.apache.qpid.broker:queue:_data(84ce326e-2cbd-6899-80d7-6267d3327e0f)"
    assert repr(key) == text
    assert ClassKey(text) == key and hash(ClassKey(text)) == hash(key)
    untyped = ClassKey("org.apache.qpid.broker:queue(84ce326e-2cbd-6899-80d7-6267d3327e0f)")
    assert untyped == key and untyped.getType() is None
    assert (key.getPackageName(), key.getClassName(), key.getHash()) == (
        "org.apache.qpid.broker", "queue", HASH)
    assert key.wire().hash == HASH.bytes
    with pytest.raises(UsageError):
        ClassKey("not a key")


def test_object_ids_compare_equal_by_value() -> None:
    a = ObjectId.create("0", "org.apache.qpid.broker:queue:q1", 1)
    b = ObjectId({"_object_name": "org.apache.qpid.broker:queue:q1", "_agent_name": "0",
                  "_agent_epoch": 1})
    assert repr(a) == "0-1-1-0-org.apache.qpid.broker:queue:q1"
    assert a == b and hash(a) == hash(b) and {a: 1}[b] == 1
    assert a == "0-1-1-0-org.apache.qpid.broker:queue:q1"
    assert a != ObjectId.create("0", "org.apache.qpid.broker:queue:q2", 1)
    v1 = ObjectId(WireObjectId.make(sequence=3, broker_bank=1, agent_bank=2, object=26))
    assert repr(v1) == "0-3-1-2-26" and v1.getAgentBank() == "2" and v1.getObject() == "26"
    assert v1 == ObjectId(None, v1.wire().first, v1.wire().second)
    assert sorted([b, v1])[0] is v1  # ordered by object name first, as the classic ids


def test_broker_url_takes_the_classic_forms() -> None:
    u = BrokerURL("amqps://admin/secret@broker.example:5999")
    assert (u.scheme, u.authName, u.authPass, u.host, u.port) == (
        "amqps", "admin", "secret", "broker.example", 5999)
    assert str(u) == "amqps://admin/secret@broker.example:5999"
    assert u.url() == "amqps://admin:secret@broker.example:5999"
    assert BrokerURL("localhost").port == 5672 and BrokerURL("amqps://h").port == 5671
    assert str(BrokerURL(host="10.0.0.1", port=5672)) == "10.0.0.1:5672"
    with pytest.raises(UsageError):
        BrokerURL("amqp://")


def test_method_result_reads_as_the_classic_one() -> None:
    r = MethodResult(0, "OK", {"body": "hello"})
    assert repr(r) == "OK (0) - {'body': 'hello'}"
    assert (r.status, r.text, r.outArgs, r.body, r.missing) == (0, "OK", {"body": "hello"},
                                                                 "hello", None)


def test_blocking_calls_wait_with_their_timeout_and_cancel_on_expiry() -> None:
    loop = LoopThread("test-loop")
    cancelled = threading.Event()
    try:
        async def slow() -> None:
            try:
                await asyncio.sleep(30)
            finally:
                cancelled.set()

        async def answer() -> int:
            return 42

        assert loop.call(answer(), 1.0) == 42
        t0 = time.monotonic()
        with pytest.raises(QmfTimeout):
            loop.call(slow(), 0.2)
        assert time.monotonic() - t0 < 2.0
        assert cancelled.wait(2.0)

        async def inside() -> None:
            coro = answer()
            with pytest.raises(UsageError):
                loop.call(coro, 1.0)

        loop.call(inside(), 1.0)
    finally:
        loop.stop(2.0)
    with pytest.raises(UsageError):
        loop.call(asyncio.sleep(0), 1.0)


def test_dispatcher_runs_callbacks_in_order_and_survives_errors() -> None:
    d = Dispatcher("test-dispatch")
    seen: list[int] = []

    def boom() -> None:
        raise RuntimeError("callback bug")

    try:
        for i in range(5):
            d.post(seen.append, i)
            d.post(boom)
        assert d.flush(2.0)
        assert seen == [0, 1, 2, 3, 4]
    finally:
        d.stop(2.0)


def test_user_bindings_need_a_console() -> None:
    from qmf.console import Session
    with pytest.raises(UsageError):
        Session(userBindings=True)


def test_interpreter_exit_with_an_open_session_does_not_hang() -> None:
    code = ("from qmf.console import Session\n"
            "s = Session()\n"
            "print(s)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=20, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "QMF Console Session Manager (brokers: 0)"


def test_the_classic_modules_are_thin_re_exports() -> None:
    import qmf.console
    import qmf_async.classic
    import qpidtoollibs
    assert qmf.console.Session is qmf_async.classic.Session
    assert qpidtoollibs.BrokerAgent.__module__ == "qmf_async.classic.toollibs"
    assert qpidtoollibs.EventHelper().eventAddress("org.apache.qpid.broker", "queueDeclare") == (
        "qmf.default.topic/agent.ind.event.org_apache_qpid_broker.queueDeclare.*.#")
    assert qpidtoollibs.Commas(1234567) == "1,234,567" and qpidtoollibs.YN(0) == "N"


def test_values_survive_copy_and_pickle() -> None:
    import copy
    import pickle
    r = MethodResult(0, "OK", {"body": "x"})
    assert pickle.loads(pickle.dumps(r)).body == "x" and copy.deepcopy(r).outArgs == r.outArgs
    oid = ObjectId.create("0", "org.apache.qpid.broker:queue:q1", 1)
    assert pickle.loads(pickle.dumps(oid)) == oid
    key = ClassKey("org.apache.qpid.broker:queue:_data(84ce326e-2cbd-6899-80d7-6267d3327e0f)")
    assert copy.copy(key) == key


def test_closed_sessions_leave_no_threads_behind() -> None:
    from qmf.console import Session
    before = {t.name for t in threading.enumerate()}
    for _ in range(5):
        s = Session()
        assert any(t.name == "qmf-classic-loop" for t in threading.enumerate())
        s.close()
        s.close()  # idempotent
    left = [t for t in threading.enumerate()
            if t.name.startswith("qmf-classic") and t.name not in before]
    assert left == []
    with pytest.raises(UsageError):
        s.getPackages()  # a closed session refuses calls at once


class _Broker:
    """What the classic wrappers read of a broker connection."""

    url = "amqp://127.0.0.1:5672/"
    where = "127.0.0.1:5672"
    connected = True
    error = None


def test_an_agent_that_left_leaves_the_wrapper_cache() -> None:
    """A v1 agent restarted gets other banks: each time newAgent and delAgent get the
    same wrapper, as from the classic console, and the wrapper leaves the session's
    cache when the agent leaves (one kept per restart before)."""
    from qmf.console import Console, Session

    seen: list[tuple[str, object]] = []

    class Watch(Console):
        def newAgent(self, agent):  # type: ignore[no-untyped-def]
            seen.append(("new", agent))

        def delAgent(self, agent):  # type: ignore[no-untyped-def]
            seen.append(("del", agent))

    sess = Session(Watch())
    try:
        adapter = sess.wrapped.console
        broker = _Broker()
        for bank in range(2, 22):
            agent = RemoteAgent(broker, 1, bank, label="app")  # type: ignore[arg-type]
            adapter.new_agent(agent)  # type: ignore[union-attr]
            adapter.del_agent(agent)  # type: ignore[union-attr]
        assert sess.dispatch.flush(5.0)
        assert len(seen) == 40
        for (added, first), (left, second) in zip(seen[::2], seen[1::2], strict=True):
            assert (added, left) == ("new", "del") and first is second
        assert len({id(agent) for _, agent in seen}) == 20
        assert sess._agents == {}
    finally:
        sess.close()
