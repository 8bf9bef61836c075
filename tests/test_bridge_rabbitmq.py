"""The RabbitMQ bridge against the real RabbitMQ and its management API.

The module works in a fresh vhost (the QMF bus and the RabbitMQ objects both live
there, and the bridge serves only that vhost), so other tests' queues stay out of
sight.  Every wait polls with a deadline.  RabbitMQ's API refreshes its figures every
collect_statistics_interval (scripts/rabbitmq.sh sets 1 s), so "traffic within two
intervals" is measured from the moment the API shows the traffic.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import signal
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlsplit

import aiormq
import pytest

from qmf_async import MethodError, ObjectId, Session
from qmf_async.agent import Agent
from qmf_async.agent.broker import ManagementBroker
from qmf_async.bridge.rabbitmq import ApiError, RabbitApi, RabbitBridge

from ._util import private_vhost, qmf_in_process, rabbitmqctl_output, wait_until

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "org.apache.qpid.broker"
INTERVAL = 0.5
API_URL = os.environ.get("QMF_RABBITMQ_API", "http://guest:guest@localhost:15672/")
LABEL = "rabbitmq-bridge-test"


@pytest.fixture(scope="module")
def bus_url(amqp_url: str) -> Iterator[str]:
    """A private vhost with the QMF v2 exchanges (so the bridge's agent, on the default
    transport, which does not declare them, speaks v2 too)."""
    with private_vhost(amqp_url, "qmf-bridge") as url:
        if url == amqp_url:
            pytest.skip("needs a private vhost (local RabbitMQ with rabbitmqctl)")
        _declare_v2_exchanges(unquote(urlsplit(url).path[1:]))
        yield url


def _declare_v2_exchanges(vhost: str) -> None:
    """``qmf.default.direct`` and ``qmf.default.topic`` in ``vhost``, through the API."""
    import base64
    import urllib.request

    parts = urlsplit(API_URL)
    token = base64.b64encode(f"{unquote(parts.username or 'guest')}:"
                             f"{unquote(parts.password or 'guest')}".encode()).decode()
    base = f"{parts.scheme}://{parts.hostname}:{parts.port or 15672}/api"
    for name, kind in (("qmf.default.direct", "direct"), ("qmf.default.topic", "topic")):
        req = urllib.request.Request(
            f"{base}/exchanges/{_enc(vhost)}/{name}", method="PUT",
            data=json.dumps({"type": kind, "durable": True}).encode(),
            headers={"Authorization": f"Basic {token}", "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10.0):
            pass


@pytest.fixture(scope="module")
def vhost(bus_url: str) -> str:
    return unquote(urlsplit(bus_url).path[1:])


@pytest.fixture
async def api() -> AsyncIterator[RabbitApi]:
    client = RabbitApi(API_URL, timeout=5.0)
    try:
        await client.get("overview", columns="node")
    except Exception as exc:
        pytest.fail(f"RabbitMQ's management API does not answer at {API_URL} ({exc}); "
                    "run scripts/rabbitmq.sh", pytrace=False)
    yield client
    await client.close()


@pytest.fixture
async def role(bus_url: str) -> AsyncIterator[ManagementBroker]:
    """The management-broker role on the test bus (banks and labels for the tools)."""
    mb = ManagementBroker(bus_url, interval=INTERVAL)
    await mb.start()
    yield mb
    await mb.stop()


@pytest.fixture
async def bridge(bus_url: str, vhost: str, role: ManagementBroker
                 ) -> AsyncIterator[RabbitBridge]:
    agent = Agent(bus_url, label=LABEL, interval=INTERVAL)
    b = RabbitBridge(agent, RabbitApi(API_URL, timeout=5.0), interval=INTERVAL, vhost=vhost)
    await b.start()
    assert agent.attached
    assert b.last_error is None, b.last_error
    yield b
    await b.stop()


@pytest.fixture
async def session(bus_url: str, bridge: RabbitBridge) -> AsyncIterator[Session]:
    s = Session(timeout=5.0, broker_timeout=1.0)
    await s.add_broker(bus_url, timeout=5.0)
    await s.wait_for_agents(label=LABEL, timeout=5.0)
    yield s
    await s.close()


@pytest.fixture
async def amqp(bus_url: str) -> AsyncIterator[aiormq.abc.AbstractChannel]:
    conn = await aiormq.connect(bus_url)
    try:
        yield await conn.channel()
    finally:
        await conn.close()


async def queue_obj(session: Session, name: str) -> Any:
    found = await session.get_objects(_class="queue", _package=PACKAGE, name=name)
    return found[0] if found else None


async def api_queue(api: RabbitApi, vhost: str, name: str) -> dict[str, Any] | None:
    try:
        answer: dict[str, Any] = await api.get(f"queues/{_enc(vhost)}/{_enc(name)}")
        return answer
    except ApiError as exc:
        if exc.status == 404:
            return None
        raise


def _enc(name: str) -> str:
    from urllib.parse import quote

    return quote(name, safe="")


async def qmf(*args: str, url: str, timeout: float = 30.0) -> tuple[int, str, str]:
    """Run the ``qmf`` command line (in this process, on a thread): (exit code, stdout,
    stderr)."""
    return await asyncio.to_thread(qmf_in_process, *args, env={"QMF_URL": url},
                                   timeout=timeout)


# --------------------------------------------------------------------------- statistics


async def test_traffic_shows_within_two_intervals(
        session: Session, api: RabbitApi, vhost: str, amqp: Any, bus_url: str) -> None:
    await amqp.queue_declare("traffic.q", durable=True)
    for i in range(7):
        await amqp.basic_publish(b"m" * (50 + i), routing_key="traffic.q")

    async def api_shows() -> bool:
        q = await api_queue(api, vhost, "traffic.q")
        return bool(q and q.get("messages") == 7 and (q.get("message_bytes") or 0) > 0
                    and (q.get("message_stats") or {}).get("publish") == 7)

    await wait_until(api_shows, timeout=20, interval=0.05, message="RabbitMQ's API shows 7")
    seen_by_api = time.monotonic()

    async def qmf_shows() -> Any:
        q = await queue_obj(session, "traffic.q")
        return q if q is not None and q.msgDepth == 7 and q.msgTotalEnqueues == 7 \
            and q.byteDepth == 7 * 50 + 21 else None

    q = await wait_until(qmf_shows, timeout=2 * INTERVAL + 1.0, interval=0.05,
                         message="the queue's traffic over QMF")
    assert time.monotonic() - seen_by_api <= 2 * INTERVAL + 0.5
    assert q.durable is True and q.msgTotalDequeues == 0
    # the tools read the same figures: qmf stat -q --json
    code, out, err = await qmf("stat", "-q", "--json", "-L", "0", "--agent", LABEL, url=bus_url)
    assert code == 0, err
    rows = {r["queue"]: r for r in json.loads(out)}
    assert rows["traffic.q"]["msg"] == 7 and rows["traffic.q"]["msgIn"] == 7, rows["traffic.q"]
    assert rows["traffic.q"]["dur"] is True
    # a consumer takes 3 (acknowledged): dequeues follow, depth = enqueues - dequeues
    taken = 0
    for _ in range(3):
        msg = await amqp.basic_get("traffic.q", no_ack=True)
        taken += msg is not None and msg.delivery is not None
    assert taken == 3

    async def dequeued() -> bool:
        q = await queue_obj(session, "traffic.q")
        return bool(q is not None and q.msgDepth == 4 and q.msgTotalDequeues == 3)

    await wait_until(dequeued, timeout=20, interval=0.1, message="3 dequeues over QMF")
    # the same figure as rabbitmqctl's
    listing = await rabbitmqctl_output("list_queues", "-p", vhost, "name", "messages")
    if listing is not None:
        counts = dict(line.split("\t") for line in listing.splitlines() if "\t" in line)
        assert counts["traffic.q"] == "4", listing
    brokers = await session.get_objects(_class="broker", _package=PACKAGE)
    assert len(brokers) == 1 and brokers[0].version.startswith("RabbitMQ ")
    assert brokers[0].queueCount >= 1


# --------------------------------------------------------------------------- methods


async def test_qmf_config_creates_and_deletes_real_objects(
        session: Session, api: RabbitApi, vhost: str, bus_url: str) -> None:
    v = _enc(vhost)
    events = session.events(_package=PACKAGE)
    agent = ["--agent", LABEL]
    code, _, err = await qmf("config", *agent, "add", "queue", "cfg.q", "--durable",
                               "--max-queue-count", "5", url=bus_url)
    assert code == 0, err
    q = await api.get(f"queues/{v}/cfg.q")
    assert q["durable"] is True and q["arguments"] == {"x-max-length": 5}
    code, _, err = await qmf("config", *agent, "add", "exchange", "fanout", "cfg.ex", url=bus_url)
    assert code == 0, err
    ex = await api.get(f"exchanges/{v}/cfg.ex")
    assert ex["type"] == "fanout"
    code, _, err = await qmf("config", *agent, "bind", "cfg.ex", "cfg.q", "k1", url=bus_url)
    assert code == 0, err
    bindings = await api.get(f"bindings/{v}/e/cfg.ex/q/cfg.q")
    assert [b["routing_key"] for b in bindings] == ["k1"]

    # the bridge sees them and says so with qpidd's events
    got: dict[str, Any] = {}

    async def declared() -> bool:
        while not {"queueDeclare", "exchangeDeclare", "bind:cfg.ex", "bind:"} <= set(got):
            ev = await asyncio.wait_for(events.__anext__(), 10)
            args = ev.arguments
            if args.get("qName") == "cfg.q" or args.get("exName") == "cfg.ex":
                got[_event_key(ev.class_key.name, args)] = args
        return True

    await asyncio.wait_for(declared(), 15)
    assert got["queueDeclare"]["durable"] is True
    assert got["queueDeclare"]["args"] == {"x-max-length": 5}
    assert got["bind:cfg.ex"]["key"] == "k1" and got["bind:cfg.ex"]["qName"] == "cfg.q"
    assert got["bind:"]["key"] == "cfg.q"  # as on qpidd: the default exchange's binding
    assert got["exchangeDeclare"]["exType"] == "fanout"

    q_obj = await wait_until(lambda: queue_obj(session, "cfg.q"), timeout=5)
    assert q_obj.get_timestamps()[1] > 0  # its create time
    updates = session.object_updates(_class="queue", _package=PACKAGE)
    code, _, err = await qmf("config", *agent, "unbind", "cfg.ex", "cfg.q", "k1", url=bus_url)
    assert code == 0, err
    assert await api.get(f"bindings/{v}/e/cfg.ex/q/cfg.q") == []
    code, _, err = await qmf("config", *agent, "del", "queue", "cfg.q", url=bus_url)
    assert code == 0, err
    code, _, err = await qmf("config", *agent, "del", "exchange", "cfg.ex", url=bus_url)
    assert code == 0, err
    assert await api_queue(api, vhost, "cfg.q") is None
    with pytest.raises(ApiError) as exc:
        await api.get(f"exchanges/{v}/cfg.ex")
    assert exc.value.status == 404

    async def deleted() -> bool:
        while not {"queueDelete", "exchangeDelete", "unbind:cfg.ex", "unbind:"} <= set(got):
            ev = await asyncio.wait_for(events.__anext__(), 10)
            args = ev.arguments
            if args.get("qName") == "cfg.q" or args.get("exName") == "cfg.ex":
                got[_event_key(ev.class_key.name, args)] = args
        return True

    await asyncio.wait_for(deleted(), 15)

    # the deletion is published: the object once more, with its delete time
    async def deletion() -> Any:
        async for obj in updates:
            if obj.get("name") == "cfg.q" and obj.is_deleted():
                return obj
        return None

    gone = await asyncio.wait_for(deletion(), 10)
    assert gone.get_timestamps()[2] > 0
    # and a query no longer lists it
    assert await _missing(session, "cfg.q")
    updates.close()
    events.close()


def _event_key(name: str, args: dict[str, Any]) -> str:
    """An event's name, with the exchange for bind/unbind (a queue has several)."""
    return f"{name}:{args['exName']}" if name in ("bind", "unbind") else name


async def _missing(session: Session, name: str) -> bool:
    return await queue_obj(session, name) is None


async def test_method_errors_carry_rabbitmqs_reason(session: Session, bridge: RabbitBridge,
                                                    amqp: Any) -> None:
    (broker,) = await session.get_objects(_class="broker", _package=PACKAGE)
    await amqp.queue_declare("err.q")
    with pytest.raises(MethodError) as exc:
        await broker.create("queue", "err.q", {}, False)
    assert exc.value.status == 7 and "already exists" in str(exc.value)
    with pytest.raises(MethodError) as exc:
        await broker.delete("queue", "no.such.queue", {})
    assert exc.value.status == 7 and "not-found" in str(exc.value)
    assert "Not Found" in str(exc.value)  # RabbitMQ's own text
    with pytest.raises(MethodError) as exc:
        await broker.create("binding", "no.such.exchange/err.q/k", {}, False)
    assert exc.value.status == 7 and "not-found" in str(exc.value)
    with pytest.raises(MethodError) as exc:
        await broker.create("queue", "err.q2", {"qpid.policy_type": "flow_to_disk"}, True)
    assert exc.value.status == 4
    with pytest.raises(MethodError) as exc:
        await broker.create("queue", "err.q3", {"x-max-length": "lots"}, False)
    assert exc.value.status == 4 and "x-max-length" in str(exc.value)


async def test_purge_empties_a_real_queue(session: Session, api: RabbitApi, vhost: str,
                                          amqp: Any) -> None:
    await amqp.queue_declare("purge.q")
    for _ in range(5):
        await amqp.basic_publish(b"p", routing_key="purge.q")
    q = await wait_until(lambda: queue_obj(session, "purge.q"), timeout=5)
    await q.purge(2)  # n messages: taken off without requeueing
    # RabbitMQ's own count (rabbitmqctl would say the same): the queue's processes
    # answer at once through basic.get, the API's figures lag
    left = await amqp.queue_declare("purge.q", passive=True)
    assert left.message_count == 3
    await q.purge(0)
    left = await amqp.queue_declare("purge.q", passive=True)
    assert left.message_count == 0

    async def qmf_empty() -> bool:
        q = await queue_obj(session, "purge.q")
        return bool(q is not None and q.msgDepth == 0)

    await wait_until(qmf_empty, timeout=20, interval=0.1)
    with pytest.raises(MethodError) as exc:
        await q.purge(0, {"header": "x"})
    assert exc.value.status == 5


async def test_outside_changes_become_events_and_deletions(
        session: Session, bus_url: str) -> None:
    events = session.events(_package=PACKAGE)
    conn = await aiormq.connect(bus_url, client_properties={"connection_name": "outsider"})
    ch = await conn.channel()
    await ch.queue_declare("outside.q")
    await ch.basic_consume("outside.q", lambda m: None, consumer_tag="outside-1")  # type: ignore[arg-type,return-value]
    want = {"queueDeclare", "clientConnect", "subscribe"}
    got: dict[str, Any] = {}

    async def collect(names: set[str]) -> None:
        while not names <= set(got):
            ev = await asyncio.wait_for(events.__anext__(), 10)
            a = ev.arguments
            if (a.get("qName") == "outside.q" or a.get("dest") == "outside-1"
                    or (a.get("properties") or {}).get("connection_name") == "outsider"):
                got[ev.class_key.name] = a

    await asyncio.wait_for(collect(want), 15)
    assert got["clientConnect"]["user"] == "guest"
    assert got["subscribe"]["qName"] == "outside.q"
    conns = await session.get_objects(_class="connection", _package=PACKAGE)
    mine = [c for c in conns if c.remoteProcessName == "outsider"]
    assert len(mine) == 1 and mine[0].authIdentity == "guest"

    async def linked() -> Any:
        # RabbitMQ lists a consumer and its channel from different samples: the
        # subscription's sessionRef is null until the bridge has seen both
        subs = await session.get_objects(_class="subscription", _package=PACKAGE,
                                         name="outside-1")
        if len(subs) != 1 or subs[0].sessionRef == ObjectId(bytes(16)):
            return None
        found = await session.get_objects(_objectId=subs[0].sessionRef)
        return found[0] if found else None

    sess = await wait_until(linked, timeout=10, interval=0.2, message="subscription's session")
    assert sess.connectionRef == mine[0].get_object_id()
    # connection.close acts on RabbitMQ: the connection goes, its queue stays
    await mine[0].close()
    await wait_until(lambda: conn.is_closed, timeout=10, message="connection closed by QMF")
    await asyncio.wait_for(collect({"clientDisconnect", "unsubscribe"}), 15)
    # delete the queue outside QMF: queueDelete, and the object is gone
    async with await aiormq.connect(bus_url) as other:
        await (await other.channel()).queue_delete("outside.q")
    await asyncio.wait_for(collect({"queueDelete"}), 15)
    await wait_until(lambda: _missing(session, "outside.q"), timeout=5)
    events.close()


# --------------------------------------------------------------------------- failures


async def test_bad_credentials_or_no_api_keep_the_bus_and_retry(
        bus_url: str, vhost: str, role: ManagementBroker,
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR, logger="qmf_async.bridge")
    bad = urlsplit(API_URL)._replace(netloc=f"guest:wrong@{urlsplit(API_URL).hostname}:"
                                     f"{urlsplit(API_URL).port or 15672}").geturl()
    agent = Agent(bus_url, label="bridge-bad-api", interval=0.2)
    b = RabbitBridge(agent, RabbitApi(bad, timeout=5.0), interval=0.2, vhost=vhost)
    await b.start()
    connection = agent._transport  # the bus connection: the same one all along
    assert connection is not None
    session = Session(timeout=5.0, broker_timeout=1.0)
    try:
        assert b.last_error is not None and "401" in b.last_error and "guest" in b.last_error
        await wait_until(lambda: b.failures >= 4, timeout=10)
        errors = [r for r in caplog.records if r.name == "qmf_async.bridge"]
        assert len(errors) == 1, [r.getMessage() for r in errors]  # one clear line
        # the agent is on the bus all along
        await session.add_broker(bus_url, timeout=5.0)
        await session.wait_for_agents(label="bridge-bad-api", timeout=5.0)
        assert await session.get_objects(_class="queue", _package=PACKAGE) == []
        # nothing answers at the API's address: one more line, still retrying
        await b.api.close()
        b.api = RabbitApi("http://127.0.0.1:1/", timeout=2.0)
        before = b.failures
        await wait_until(lambda: b.failures >= before + 3, timeout=10)
        assert b.last_error is not None and "unreachable" in b.last_error
        errors = [r for r in caplog.records if r.name == "qmf_async.bridge"]
        assert len(errors) == 2, [r.getMessage() for r in errors]
        # the right address: the objects come
        await b.api.close()
        b.api = RabbitApi(API_URL, timeout=5.0)
        await wait_until(lambda: b.last_error is None and agent.objects("queue") != [],
                         timeout=10)
        found = await session.get_objects(_class="broker", _package=PACKAGE)
        assert len(found) == 1 and found[0].get_agent().label == "bridge-bad-api"
        assert agent._transport is connection
    finally:
        await session.close()
        await b.stop()


# --------------------------------------------------------------------------- scale


async def test_scale_benchmark_smoke(bus_url: str, vhost: str, amqp_url: str) -> None:
    code, out, err = await _run(sys.executable, str(ROOT / "benchmarks" / "bridge_scale.py"),
                                "--queues", "60", "--amqp", amqp_url, "--api", API_URL,
                                "--json")
    assert code == 0, err
    result = json.loads(out.strip().splitlines()[-1])
    assert result["queues"] == 60 and result["listed"] >= 60
    assert result["poll_seconds"] > 0 and result["seen_by_console"] >= 60


async def _run(*cmd: str, timeout: float = 120.0) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        *cmd, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    out, err = await asyncio.wait_for(proc.communicate(), timeout)
    return proc.returncode or 0, out.decode(), err.decode()


# --------------------------------------------------------------------------- commands


async def _start(*cmd: str, bus_url: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, *cmd, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT), "QMF_URL": bus_url})


async def _stop(proc: asyncio.subprocess.Process) -> tuple[int, str]:
    if proc.returncode is None:
        proc.send_signal(signal.SIGTERM)
    try:
        _, err = await asyncio.wait_for(proc.communicate(), 15)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    return proc.returncode or 0, err.decode()


async def test_qmf_bridge_rabbitmq_command(bus_url: str, vhost: str, role: ManagementBroker,
                                           amqp: Any) -> None:
    await amqp.queue_declare("command.q")
    await amqp.basic_publish(b"c", routing_key="command.q")
    proc = await _start("-m", "qmf_async", "bridge", "rabbitmq", "--api", API_URL, "--vhost",
                        vhost, "--interval", "0.5", "--label", "bridge-command",
                        bus_url=bus_url)
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 20)).decode()
        assert "rabbitmq bridge 'bridge-command' ready" in line, line

        async def listed() -> bool:
            code, out, _ = await qmf("stat", "-q", "--json", "-L", "0", "--agent",
                                     "bridge-command", url=bus_url)
            rows = {r["queue"]: r for r in json.loads(out)} if code == 0 else {}
            return rows.get("command.q", {}).get("msg") == 1

        await wait_until(listed, timeout=30, interval=0.5, message="command.q in qmf stat")
    finally:
        code, err = await _stop(proc)
    assert code == 0, err


async def test_module_command_with_wrong_credentials_reports_once(
        bus_url: str, vhost: str, role: ManagementBroker) -> None:
    bad = urlsplit(API_URL)._replace(netloc=f"guest:wrong@{urlsplit(API_URL).hostname}:"
                                     f"{urlsplit(API_URL).port or 15672}").geturl()
    proc = await _start("-m", "qmf_async.bridge.rabbitmq", "--api", bad, "--vhost", vhost,
                        "--interval", "0.2", "--label", "bridge-wrong", bus_url=bus_url)
    session = Session(timeout=5.0, broker_timeout=1.0)
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 20)).decode()
        assert "ready" in line and "API unavailable, retrying" in line, line
        # the agent is on the bus while the API refuses it, through many polls
        await session.add_broker(bus_url, timeout=5.0)
        (remote,) = await session.wait_for_agents(label="bridge-wrong", timeout=5.0)
        # it answers queries (with nothing: the API never answered)
        assert await session.get_objects(_class="queue", _package=PACKAGE, _agent=remote) == []
    finally:
        await session.close()
        code, err = await _stop(proc)
    assert code == 0, err
    lines = [x for x in err.splitlines() if "refused user" in x]
    assert len(lines) == 1, err
    assert "401" in lines[0] and "retrying every 0.2s" in lines[0]


def test_command_usage_errors() -> None:
    from qmf_async.tools.cli import main

    env_url = os.environ.pop("QMF_URL", None)
    aiormq_level = logging.getLogger("aiormq").level  # qmf's main quiets aiormq
    try:
        assert main(["bridge", "rabbitmq", "--api", "http://localhost:15672/"]) == 2
        assert main(["bridge", "rabbitmq", "-b", "amqp://localhost/", "--api", "ftp://x/"]) == 2
        assert main(["bridge", "rabbitmq", "-b", "amqp://localhost/", "--interval", "0"]) == 2
        with pytest.raises(SystemExit) as exc:
            main(["bridge"])  # a kind is required
        assert exc.value.code == 2
    finally:
        logging.getLogger("aiormq").setLevel(aiormq_level)
        if env_url is not None:
            os.environ["QMF_URL"] = env_url


async def test_the_bridge_demo_example(bus_url: str, bridge: RabbitBridge,
                                       api: RabbitApi, vhost: str) -> None:
    """examples/rabbitmq_bridge_demo.py (run by scripts/demo.sh): a real queue filled
    with aiormq, its depth and enqueues read back over QMF, deleted through QMF."""
    queue = f"demo-real-{time.monotonic_ns() % 10**9}"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(ROOT / "examples" / "rabbitmq_bridge_demo.py"), "--url", bus_url,
        "--queue", queue, "--count", "25", "--bridge-label", LABEL, "--timeout", "20",
        "--delete", cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    text = out.decode()
    assert f"queue {queue!r} msgDepth=25 msgTotalEnqueues=25" in text, text
    assert f"deleted {queue!r} through QMF" in text, text
    # gone from RabbitMQ itself
    names = {q["name"] for q in await api.list(f"queues/{quote(vhost, safe='')}", ["name"])}
    assert queue not in names


# --------------------------------------------------------------------------- the tools on it


async def test_shell_and_dashboard_see_and_purge_rabbitmqs_queue(
        session: Session, api: RabbitApi, vhost: str, amqp: Any, bus_url: str) -> None:
    """The shell and the web dashboard on a RabbitMQ bus show RabbitMQ's own queue with
    its depth, and a purge from the dashboard empties the real queue."""
    from aiohttp.test_utils import TestClient, TestServer

    from ._util import import_example

    await amqp.queue_declare("tools.q")
    for _ in range(5):
        await amqp.basic_publish(b"t", routing_key="tools.q")

    async def five() -> bool:
        q = await queue_obj(session, "tools.q")
        return q is not None and q.msgDepth == 5

    await wait_until(five, timeout=20, interval=0.1, message="tools.q with 5 over QMF")
    # the shell, as a user runs it (commands on stdin)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "QMF_URL": bus_url}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "qmf_async", "shell", stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env)
    out, err = await asyncio.wait_for(proc.communicate(b"list queue\nquit\n"), 60)
    assert proc.returncode == 0, err.decode()
    (line,) = [x for x in out.decode().splitlines() if "tools.q" in x]
    # "  143  23:26:01  -          161:tools.q": an id, created, not destroyed, the index
    assert re.fullmatch(r"\s*\d+\s+\d\d:\d\d:\d\d\s+-\s+\S+:tools\.q", line), line
    # the dashboard: the queue, then a purge of the real queue
    dashboard = import_example("web_dashboard", ROOT / "examples" / "web_dashboard" / "app.py")
    app = dashboard.create_app(bus_url, request_timeout=5.0)
    async with TestClient(TestServer(app)) as client:
        async def listed() -> Any:
            resp = await client.get("/api/objects/queue")
            if resp.status != 200:
                return None
            found = [q for q in await resp.json() if q["properties"]["name"] == "tools.q"]
            return found[0] if found and found[0]["statistics"]["msgDepth"] == 5 else None

        mine = await wait_until(listed, timeout=20, interval=0.2,
                                message="the dashboard lists tools.q with 5")
        assert mine["agent_label"] == LABEL
        origin = str(client.make_url("/").origin())  # a write from the dashboard's page
        resp = await client.post(f"/api/object/{mine['object_id']}/methods/purge",
                                 json={"request": 0}, headers={"Origin": origin})
        assert resp.status == 200, await resp.text()

    async def emptied() -> bool:
        q = await api_queue(api, vhost, "tools.q")
        return q is not None and q.get("messages") == 0

    await wait_until(emptied, timeout=20, interval=0.1, message="RabbitMQ's tools.q purged")


@pytest.mark.slow
async def test_collect_and_pipeline_on_rabbitmqs_queue(
        session: Session, amqp: Any, bus_url: str, tmp_path: Path, spark: Any) -> None:
    """``qmf collect`` then the pipeline (``qmf pipeline``'s job, on the run's shared
    SparkSession: the command itself is tested in test_pipeline.py) on a RabbitMQ bus:
    the enqueue rate of a real queue filled with aiormq at a known pace comes out of the
    Spark job."""
    from qmf_async.tools.pipeline import run_pipeline

    await amqp.queue_declare("rate.q")
    out = tmp_path / "dataset"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "QMF_URL": bus_url}
    collect = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "qmf_async", "collect", "--out", str(out), "--duration", "12",
        "--batch-seconds", "1", "--class", "queue", "--quiet",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env)
    try:
        # 20 messages a second for 8 s, paced by the clock
        start = time.monotonic()
        sent = 0
        while (elapsed := time.monotonic() - start) < 8.0:
            while sent < int(elapsed * 20):
                await amqp.basic_publish(b"r", routing_key="rate.q")
                sent += 1
            await asyncio.sleep(0.01)
        _, err = await asyncio.wait_for(collect.communicate(), 60)
    finally:
        if collect.returncode is None:
            collect.kill()
            await collect.wait()
    assert collect.returncode == 0, err.decode()
    report = tmp_path / "report"
    await asyncio.to_thread(run_pipeline, spark, str(out), str(report))
    import pyarrow.dataset as ds

    rates = ds.dataset(report / "rates", format="parquet").to_table().to_pylist()
    mine = [r for r in rates if r["name"] == "rate.q" and r["statistic"] == "msgTotalEnqueues"]
    assert mine, "no rate of rate.q"
    total = sum(r["delta"] for r in mine)
    seconds = sum(r["dt_seconds"] for r in mine)
    # every message sent is counted once; the rate over the steps that saw traffic is the
    # pace of the sender, within what the 1 s statistics of RabbitMQ can resolve
    assert total <= sent
    assert 10.0 <= total / seconds <= 30.0, (total, seconds)


# --------------------------------------------------------------------------- authorization

#: the issue's limited user: QMF's own names are configurable, read and write on all
LOW_CONFIGURE = r"^(qpid\..*|qmf.*|amq\..*)$"


@pytest.fixture(scope="module")
def low_url(bus_url: str, vhost: str) -> Iterator[str]:
    """The bus as a RabbitMQ user (made with rabbitmqctl, removed after) that may use
    QMF but configure nothing else: ``configure`` on LOW_CONFIGURE, read/write on all,
    no tags."""
    from .security_brokers import RabbitTlsError, rabbitmqctl

    name = f"qmf-low-{uuid.uuid4().hex[:8]}"
    try:
        rabbitmqctl("add_user", name, "low-pw")
    except RabbitTlsError as exc:
        pytest.skip(f"cannot make a RabbitMQ user: {exc}")
    try:
        rabbitmqctl("set_permissions", "-p", vhost, name, LOW_CONFIGURE, ".*", ".*")
        parts = urlsplit(bus_url)
        yield parts._replace(netloc=f"{name}:low-pw@{parts.netloc.rsplit('@', 1)[-1]}").geturl()
    finally:
        rabbitmqctl("delete_user", name)


async def test_a_limited_user_is_refused_what_rabbitmq_refuses_it(
        session: Session, bridge: RabbitBridge, low_url: str, amqp: Any, bus_url: str,
        caplog: pytest.LogCaptureFixture) -> None:
    """The escalation of issue 34: a user RabbitMQ refuses to delete ``important-q``
    is refused the same through the bridge (status 6, over the tool, QMF v1 and v2),
    and the queue stays; what its permissions allow goes through; an administrator
    (guest) still deletes the queue through the bridge."""
    low = unquote(urlsplit(low_url).username or "")
    await amqp.queue_declare("important-q")
    await amqp.basic_publish(b"keep me", routing_key="important-q")
    # RabbitMQ itself refuses the user
    conn = await aiormq.connect(low_url)
    try:
        ch = await conn.channel()
        with pytest.raises(aiormq.exceptions.ChannelAccessRefused):
            await ch.queue_delete("important-q")
    finally:
        await conn.close()
    caplog.set_level(logging.WARNING, logger="qmf_async.bridge")
    assert bridge.agent.v2_live  # (the module's vhost has the v2 exchanges)
    for version in (1, 2):
        async with Session.connect(low_url, qmf_version=version, timeout=10.0) as s:
            (broker,) = await wait_until(
                lambda s=s: s.get_objects(_class="broker", _package=PACKAGE, _timeout=5.0),
                timeout=15.0, interval=0.2, message=f"the bridge over QMF v{version}")
            with pytest.raises(MethodError) as exc:
                await broker.delete("queue", "important-q", {})
            assert exc.value.status == 6
            assert str(exc.value.text).startswith(
                f"unauthorized-access: user {low!r} has no configure permission on queue "
                f"'important-q'"), exc.value
            with pytest.raises(MethodError) as exc:
                await broker.create("queue", f"other-{version}", {}, False)
            assert exc.value.status == 6
            await broker.create("queue", f"qmf.low-{version}", {}, False)  # allowed
            # closing another user's connection takes the administrator tag
            outsider = await wait_until(
                lambda s=s: s.get_objects(_class="connection", _package=PACKAGE,
                                          authIdentity="guest", _timeout=5.0),
                timeout=15.0, interval=0.2, message="guest's connections")
            with pytest.raises(MethodError) as exc:
                await outsider[0].close()
            assert exc.value.status == 6 and "only its own connections" in exc.value.text
    assert f"refused delete queue 'important-q' to user {low!r}" in caplog.text
    # the command line (last: the tool takes over the process's logging)
    code, out, err = await qmf("config", "--agent", LABEL, "del", "queue", "important-q",
                               "--force", url=low_url)
    assert code != 0 and "deleted" not in out, (code, out, err)
    assert (f"qmf config: error: delete failed: unauthorized-access: user {low!r} has no "
            f"configure permission on queue 'important-q'") in err, err
    assert err.rstrip().endswith("(delete queue 'important-q') (status 6)"), err
    left = await amqp.queue_declare("important-q", passive=True)
    assert left.message_count == 1
    for version in (1, 2):
        await amqp.queue_declare(f"qmf.low-{version}", passive=True)
    # the administrator
    (broker,) = await session.get_objects(_class="broker", _package=PACKAGE)
    await broker.delete("queue", "important-q", {})
    ch = await amqp.connection.channel()
    with pytest.raises(aiormq.exceptions.ChannelNotFoundEntity):
        await ch.queue_declare("important-q", passive=True)


async def test_a_forged_or_missing_user_id_is_refused(
        bridge: RabbitBridge, low_url: str, amqp: Any) -> None:
    """A request claiming to come from guest over the limited user's connection is
    refused by RabbitMQ itself (the channel is closed, nothing reaches the bridge); one
    with no user id at all reaches the bridge and is answered status 6."""
    from qmf_async import wire

    await amqp.queue_declare("important2-q")
    agent = bridge.agent
    (broker,) = agent.objects("broker")
    assert broker.object_id is not None

    def request(seq: int) -> bytes:
        return wire.encode(wire.MethodRequest(
            seq, broker.object_id, broker.schema.class_key, "delete",
            {"type": "queue", "name": "important2-q", "options": {}}), agent.registry)

    answers: dict[int, Any] = {}
    conn = await aiormq.connect(low_url)
    try:
        ch = await conn.channel()
        reply = f"qmf-raw-{uuid.uuid4().hex[:8]}"
        await ch.queue_declare(reply, exclusive=True)
        await ch.queue_bind(reply, "amq.direct", routing_key=reply)

        async def on_message(msg: aiormq.abc.DeliveredMessage) -> None:
            for m in wire.decode(msg.body, agent.registry):
                answers[m.seq] = m
        await ch.basic_consume(reply, on_message, no_ack=True)
        forger = await conn.channel()  # publisher confirms: the refusal is the answer
        with pytest.raises(aiormq.exceptions.ChannelPreconditionFailed,
                           match="user_id property set to 'guest' but authenticated user"):
            await asyncio.wait_for(forger.basic_publish(
                request(1), exchange="qpid.management", routing_key=agent.agent_key,
                properties=aiormq.spec.Basic.Properties(
                    reply_to=reply, user_id="guest", content_type="x-application/qmf")), 15.0)
        await ch.basic_publish(
            request(2), exchange="qpid.management", routing_key=agent.agent_key,
            properties=aiormq.spec.Basic.Properties(reply_to=reply,
                                                    content_type="x-application/qmf"))
        await wait_until(lambda: 2 in answers, timeout=15.0, interval=0.05,
                         message="the bridge's answer")
    finally:
        await conn.close()
    assert 1 not in answers
    assert answers[2].status == 6
    assert answers[2].text.startswith(
        "unauthorized-access: the request carries no validated user id"), answers[2]
    await amqp.queue_declare("important2-q", passive=True)  # still there


async def test_a_bus_user_reads_other_users_requests(
        session: Session, bridge: RabbitBridge, low_url: str) -> None:
    """What the bus does not hide, shown: a user with read on ``qpid.management`` (every
    console needs it for the publications) binds a queue of its own under ``agent.#``
    and receives other users' method requests, arguments and user id included."""
    from qmf_async import wire

    seen: list[tuple[str | None, Any]] = []
    conn = await aiormq.connect(low_url)
    try:
        ch = await conn.channel()
        spy = f"qmf-spy-{uuid.uuid4().hex[:8]}"
        await ch.queue_declare(spy, exclusive=True)
        await ch.queue_bind(spy, "qpid.management", routing_key="agent.#")

        async def on_message(msg: aiormq.abc.DeliveredMessage) -> None:
            for m in wire.decode(msg.body, bridge.agent.registry):
                if isinstance(m, wire.MethodRequest):
                    seen.append((msg.header.properties.user_id, m.arguments))
        await ch.basic_consume(spy, on_message, no_ack=True)
        (broker,) = await session.get_objects(_class="broker", _package=PACKAGE)
        assert (await broker.echo(7, "guest's secret")).body == "guest's secret"
        await wait_until(lambda: seen, timeout=10.0, interval=0.05, message="the copy")
    finally:
        await conn.close()
    assert seen == [("guest", {"sequence": 7, "body": "guest's secret"})]
