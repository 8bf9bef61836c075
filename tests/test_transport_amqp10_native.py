"""The pure-Python AMQP 1.0 transport and its sans-I/O core on real peers: qpidd
(genuine) in clear and through a TLS terminator (socat, a self-signed CA, a client
certificate), and RabbitMQ 3.10's ``rabbitmq_amqp1_0`` plugin (enabled on this run's
private node only) for connect, attach, transfer and settlement.

It is the only AMQP 1.0 transport: the whole qpidd set runs on it."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from qmf_async import Session
from qmf_async.errors import AuthenticationError, ProtocolMismatchError, UsageError
from qmf_async.transport import Delivery, TlsOptions, parse_url
from qmf_async.transport._amqp10_engine import (
    Amqp10Connection,
    Attached,
    CreditGranted,
    Event,
    MessageReceived,
    SessionBegun,
    Settled,
    Source,
    Target,
)
from qmf_async.transport._native import NativeAmqp10Transport
from qmf_async.wire import decode_amqp10_message, encode_amqp10_message

from ._util import wait_until
from .pki import Pki
from .qpidd import Qpidd, port_accepts
from .security_brokers import free_port


async def round_trip(t: NativeAmqp10Transport) -> Delivery:
    got: list[Delivery] = []
    t.set_dispatcher(got.append)
    key = f"k-{uuid.uuid4().hex[:8]}"
    await t.open_endpoint(None, bindings=[("amq.direct", key)])
    await t.publish(b"ping", exchange="amq.direct", routing_key=key, reply_to="r1")
    await wait_until(lambda: bool(got), timeout=10, message="the message back")
    return got[0]


async def test_qpidd_clear_session_and_v1_messages(qpidd_stock: Qpidd) -> None:
    t = NativeAmqp10Transport(qpidd_stock.url)
    await t.connect(10)
    try:
        assert t.remote_properties["product"] == "qpid-cpp"
        d = await round_trip(t)
        assert (d.body, d.reply_to, d.exchange) == (b"ping", "amq.direct/r1", "amq.direct")
    finally:
        await t.close()
    async with Session.connect(qpidd_stock.url, timeout=10.0,
                               _transport_factory=NativeAmqp10Transport) as session:
        (broker,) = await session.get_objects(_class="broker", _timeout=10.0)
        assert broker.name


async def test_sasl_choices_on_qpidd(qpidd_stock: Qpidd) -> None:
    bad = NativeAmqp10Transport(qpidd_stock.url, sasl_mechanisms="EXTERNAL")
    with pytest.raises(AuthenticationError, match="EXTERNAL"):
        await bad.connect(10)
    with pytest.raises(UsageError, match="SCRAM"):
        NativeAmqp10Transport(qpidd_stock.url, sasl_mechanisms="SCRAM-SHA-256")


# ------------------------------------------------------------------ TLS terminator


@pytest.fixture(scope="module")
def terminator(qpidd_stock: Qpidd, tmp_path_factory: pytest.TempPathFactory,
               ) -> Iterator[tuple[str, Pki]]:
    socat = shutil.which("socat")
    if socat is None:
        pytest.skip("socat is not installed (apt-get install socat)")
    pki = Pki(tmp_path_factory.mktemp("tls-terminator"))
    port = free_port()
    cert, key = pki.server
    target = parse_url(qpidd_stock.url)
    proc = subprocess.Popen(
        [socat, f"OPENSSL-LISTEN:{port},bind=127.0.0.1,reuseaddr,fork,cert={cert},key={key},"
         f"cafile={pki.ca[0]},verify=1", f"TCP:127.0.0.1:{target.port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = 100
        while not port_accepts(port) and deadline:
            deadline -= 1
            if proc.poll() is not None:
                pytest.fail("socat did not start")
            subprocess.run(["sleep", "0.05"], check=False)
        yield f"amqps://localhost:{port}/", pki
    finally:
        proc.terminate()
        proc.wait(10)


async def test_qpidd_through_a_tls_terminator_with_a_client_certificate(
        terminator: tuple[str, Pki]) -> None:
    url, pki = terminator
    cert, key = pki.client
    t = NativeAmqp10Transport(url, tls=TlsOptions(cafile=pki.ca[0], certfile=cert,
                                                  keyfile=key))
    await t.connect(10)
    try:
        assert (await round_trip(t)).body == b"ping"
    finally:
        await t.close()
    # the terminator requires a client certificate: none, no connection
    refused = NativeAmqp10Transport(url, tls=TlsOptions(cafile=pki.ca[0]))
    with pytest.raises(Exception, match=r"cannot connect|lost|closed|refused"):
        await refused.connect(10)
    await refused.close()


async def test_tools_over_tls_terminator(terminator: tuple[str, Pki]) -> None:
    url, pki = terminator
    cert, key = pki.client
    env = dict(os.environ)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "qmf_async.tools.cli", "stat", "-q",
        "-b", url, "--ssl-trustfile", pki.ca[0], "--ssl-certificate", cert,
        "--ssl-key", key, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    assert b"queue" in out.lower() or b"Queues" in out


# ------------------------------------------------------------------ RabbitMQ


class Driver:
    """The sans-I/O connection on an asyncio stream (what the tests need of it)."""

    def __init__(self, conn: Amqp10Connection, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter) -> None:
        self.conn, self.reader, self.writer = conn, reader, writer
        self.events: list[Event] = []

    def flush(self) -> None:
        self.writer.write(self.conn.data_to_send())

    async def until(self, kind: type, **match: Any) -> Any:
        async with asyncio.timeout(10):
            while True:
                for event in self.events:
                    if isinstance(event, kind) and all(
                            getattr(event, k) == v for k, v in match.items()):
                        self.events.remove(event)
                        return event
                data = await self.reader.read(65536)
                assert data, "the peer closed the connection"
                self.events += self.conn.receive_data(data, asyncio.get_running_loop().time())
                self.flush()


async def test_qpidd_dynamic_node_and_unsettled_transfer(qpidd_stock: Qpidd) -> None:
    """The core alone on qpidd: a dynamic receiving node (qpidd names it in its attach),
    an unsettled send to it (accepted), the message received unsettled and settled."""
    target = parse_url(qpidd_stock.url)
    conn = Amqp10Connection(container_id="qmf-dynamic", hostname="localhost",
                            sasl_mechanisms=["ANONYMOUS"], idle_timeout=30)
    reader, writer = await asyncio.open_connection(target.host, target.port)
    d = Driver(conn, reader, writer)
    try:
        conn.start(0.0)
        d.flush()
        await d.until(SessionBegun)
        r = conn.attach_receiver("dyn", Source(dynamic=True), Target(), settled=False)
        conn.flow(r, 10)
        d.flush()
        node = (await d.until(Attached, handle=r)).address
        assert node
        s = conn.attach_sender("to-dyn", Target(node), settled=False)
        d.flush()
        await d.until(CreditGranted, handle=s)
        did = conn.send(s, encode_amqp10_message(b"x" * 100_000), tag=b"1", settled=False)
        d.flush()
        assert (await d.until(Settled, delivery_id=did)).outcome == "accepted"
        got = await d.until(MessageReceived, handle=r)
        assert decode_amqp10_message(got.payload).body == b"x" * 100_000
        conn.settle([got.delivery_id])
        conn.close()
        d.flush()
    finally:
        writer.close()


@pytest.fixture
async def rabbitmq_amqp10(amqp_url: str) -> AsyncIterator[str]:
    if not os.environ.get("PYTEST_XDIST_WORKER") or os.environ.get("QMF_TEST_SHARED_BROKER"):
        pytest.skip("enables a plugin: only on this run's private RabbitMQ node (-n 1)")
    plugins = shutil.which("rabbitmq-plugins") or shutil.which(
        "rabbitmq-plugins", path="/usr/sbin:/sbin")
    if plugins is None:
        pytest.skip("rabbitmq-plugins not found")
    done = await asyncio.to_thread(subprocess.run, [plugins, "-q", "enable",
                                                    "rabbitmq_amqp1_0"],
                                   capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        pytest.skip(f"cannot enable rabbitmq_amqp1_0: {done.stderr.strip()[-300:]}")
    try:
        yield amqp_url
    finally:  # other modules on this node expect a broker that speaks 0-9-1 only
        await asyncio.to_thread(subprocess.run, [plugins, "-q", "disable", "rabbitmq_amqp1_0"],
                                capture_output=True, text=True, timeout=120)


async def test_rabbitmq_amqp1_0_plugin(rabbitmq_amqp10: str) -> None:
    target = parse_url(rabbitmq_amqp10)
    conn = Amqp10Connection(container_id="qmf-interop", hostname="localhost",
                            sasl_mechanisms=["PLAIN"], user=target.user, password="guest",
                            idle_timeout=30)
    reader, writer = await asyncio.open_connection(target.host, target.port)
    d = Driver(conn, reader, writer)
    try:
        conn.start(0.0)
        d.flush()
        await d.until(SessionBegun)
        queue = f"/queue/qmf-interop-{uuid.uuid4().hex[:8]}"
        s = conn.attach_sender("s", Target(queue), settled=False)
        d.flush()
        assert (await d.until(Attached, handle=s)).address == queue
        await d.until(CreditGranted, handle=s)
        body = b"x" * 200_000  # several frames at RabbitMQ's max-frame-size
        did = conn.send(s, encode_amqp10_message(body, subject="k"), tag=b"1", settled=False)
        d.flush()
        assert (await d.until(Settled, delivery_id=did)).outcome == "accepted"
        r = conn.attach_receiver("r", Source(queue), Target("here"), settled=False)
        conn.flow(r, 5)
        d.flush()
        await d.until(Attached, handle=r)
        got = await d.until(MessageReceived, handle=r)
        assert decode_amqp10_message(got.payload).body == body and not got.settled
        conn.settle([got.delivery_id])
        conn.detach(r)
        conn.close()
        d.flush()
    finally:
        writer.close()
    bad = NativeAmqp10Transport(rabbitmq_amqp10.replace("guest:guest", "guest:wrong"))
    with pytest.raises(AuthenticationError):
        await bad.connect(10)


async def test_a_0_9_1_broker_is_a_protocol_mismatch() -> None:
    """What RabbitMQ without the plugin answers to an AMQP 1.0 header: its own."""
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readexactly(8)
        writer.write(b"AMQP\x00\x00\x09\x01")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        t = NativeAmqp10Transport(f"amqp://127.0.0.1:{port}/")
        with pytest.raises(ProtocolMismatchError, match="RabbitMQ speaks 0-9-1"):
            await t.connect(10)
    finally:
        server.close()


def test_the_built_in_transport_is_the_only_amqp10_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """No proton transport and no switch to one: ``QMF_AMQP10`` (which used to pick
    python-qpid-proton's) is not read, and the package names no ``ProtonTransport``."""
    from qmf_async import transport
    from qmf_async.transport import AutoTransport

    for value in ("proton", "native", "uamqp"):
        monkeypatch.setenv("QMF_AMQP10", value)
        made = AutoTransport("amqp://localhost/", protocol="1.0")._make("1.0")
        assert type(made) is NativeAmqp10Transport
    for gone in ("ProtonTransport", "ProtonConnectionError", "amqp10_class",
                 "AMQP10_IMPL_ENV"):
        assert not hasattr(transport, gone), gone
    with pytest.raises(ImportError):
        import qmf_async.transport._proton  # noqa: F401


async def test_qpidd_sees_a_one_word_container_our_process_and_a_dynamic_reply_node(
        qpidd_stock: Qpidd) -> None:
    """What the former proton transport had, on this transport: a container id with no blank
    (qpidd names link queues after it), the ``qpid.client_process``/``pid`` open
    properties (qmf stat -c's cproc, cpid), ``local_address`` (the end of qpidd's
    connection address), and a dynamic node whose address goes out as the reply_to
    as it is, so the broker's QMF answer comes back to it."""
    from qmf_async import names
    from qmf_async.classic._values import classic_text
    from qmf_async.transport import client_process_properties

    t = NativeAmqp10Transport(qpidd_stock.url, name="qmf-async console")
    await t.connect(10)
    got: list[Delivery] = []
    try:
        assert t.where == parse_url(qpidd_stock.url).server_where
        local = t.local_address
        assert local is not None and local.count(":") == 1, local
        t.set_dispatcher(got.append)
        node = await t.open_dynamic_endpoint("parity-reply")
        assert node and "/" not in node, node
        assert node.startswith("qmf-async-console-") and " " not in node, node  # container id
        with pytest.raises(UsageError):
            await t.open_dynamic_endpoint("parity-reply")
        await t.publish({"_what": "OBJECT", "_schema_id": {"_class_name": "connection"}},
                        exchange=names.V2_DIRECT_EXCHANGE, routing_key="broker",
                        reply_to=node, correlation_id="c1",
                        headers={"qmf.opcode": "_query_request", "x-amqp-0-10.app-id": "qmf2",
                                 "method": "request"})
        await wait_until(lambda: any(d.correlation_id == "c1" for d in got), timeout=10,
                         message="qpidd's answer on the dynamic node")
        rows = [classic_text(row["_values"]) for d in got if d.correlation_id == "c1"
                for row in (d.value or [])]
        ours = [r for r in rows if str(r.get("address", "")).endswith("-" + local)]
        assert len(ours) == 1, rows
        conn = ours[0]
        proc = client_process_properties()["qpid.client_process"]
        assert conn["remotePid"] == os.getpid()
        assert conn["remoteProcessName"] == proc, conn
    finally:
        await t.close()
    assert t.local_address is None
    assert names.container_id("qmf-async console").startswith("qmf-async-console-")


_QMF_CLIENT_ON_NATIVE = """
import sys
from qmf.client import BrokerAgent, ConnectionException
from qmf_async import TransportError
from qmf_async.transport import Amqp10ConnectionError
assert ConnectionException is Amqp10ConnectionError
assert issubclass(ConnectionException, TransportError)
try:
    BrokerAgent.connect("127.0.0.1:1", timeout=2)
except ConnectionException as exc:
    print("refused:", type(exc).__name__)
with BrokerAgent.connect(sys.argv[1], timeout=10) as agent:
    agent.addQueue("native-client-q")
    print("queue:", agent.getQueue("native-client-q").name)
    agent.delQueue("native-client-q")
    print("broker:", bool(agent.getBroker().name))
print("proton loaded:", sorted(m for m in sys.modules if m.split(".")[0] in ("proton", "_cproton")))
"""


def test_qmf_client_on_the_native_transport_loads_no_proton(qpidd_stock: Qpidd) -> None:
    """``qmf.client`` (BrokerAgent, a dynamic reply node) on the pure-Python transport:
    it manages a queue on qpidd, a refused connection raises its ConnectionException
    (a TransportError, not proton's class), and proton is never imported."""
    address = parse_url(qpidd_stock.url)
    out = subprocess.run(
        [sys.executable, "-c", _QMF_CLIENT_ON_NATIVE, f"{address.host}:{address.port}"],
        capture_output=True, text=True, timeout=60,
        env=dict(os.environ))
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "refused: Amqp10ConnectionError", "queue: native-client-q", "broker: True",
        "proton loaded: []"], out.stdout
