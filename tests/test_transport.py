"""The AMQP 0-9-1 transport against the real RabbitMQ (scripts/rabbitmq.sh starts one)."""

from __future__ import annotations

import asyncio
import logging
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import AsyncIterator
from urllib.parse import urlsplit, urlunsplit

import pytest

from qmf_async.errors import (
    AuthenticationError,
    ConnectionLostError,
    NotConnectedError,
    QmfTimeout,
    TransportError,
    UsageError,
)
from qmf_async.transport._aiormq import Delivery, TlsOptions, Transport
from qmf_async.transport._base import ConnectionState, parse_url

from ._util import rabbitmqctl, wait_until

pytestmark = pytest.mark.integration


def _token() -> str:
    return uuid.uuid4().hex[:12]


def _with_password(url: str, password: str) -> str:
    parts = urlsplit(url)
    netloc = f"{parts.username or 'guest'}:{password}@{parts.hostname}"
    if parts.port:
        netloc += f":{parts.port}"
    return urlunsplit(parts._replace(netloc=netloc))


def _unused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Recorder:
    """A dispatcher that records every delivery."""

    def __init__(self) -> None:
        self.deliveries: list[Delivery] = []

    def __call__(self, delivery: Delivery) -> None:
        self.deliveries.append(delivery)

    def bodies(self, endpoint: str | None = None) -> list[bytes]:
        return [d.body for d in self.deliveries if endpoint is None or d.endpoint == endpoint]


@pytest.fixture
async def transport(amqp_url: str) -> AsyncIterator[Transport]:
    t = Transport(amqp_url, name=f"qmf-test-{_token()}")
    await t.connect()
    yield t
    await t.close()


# --------------------------------------------------------------------------- connect


async def test_connect_and_close(amqp_url: str) -> None:
    t = Transport(amqp_url)
    assert not t.is_open and t.state is ConnectionState.NEW
    await t.connect()
    assert t.is_open and t.state is ConnectionState.OPEN
    await t.close()
    assert not t.is_open and t.state is ConnectionState.CLOSED


async def test_async_with(amqp_url: str) -> None:
    async with Transport(amqp_url) as t:
        assert t.is_open
    assert not t.is_open


@pytest.mark.parametrize(
    "url",
    [
        "http://localhost:5672/",
        "amqp://",
        "amqp://localhost:notaport/",
        "amqp://localhost:99999/",
        "amqp://localhost/a/b",
        "localhost:5672",
    ],
)
async def test_bad_url_is_usage_error(url: str) -> None:
    with pytest.raises(UsageError):
        await Transport(url).connect()


async def test_tls_options_need_amqps(amqp_url: str) -> None:
    with pytest.raises(UsageError, match="amqps"):
        await Transport(amqp_url, tls=TlsOptions()).connect()


async def test_missing_ca_file_is_usage_error() -> None:
    t = Transport("amqps://localhost/", tls=TlsOptions(cafile="/nonexistent/ca.pem"))
    with pytest.raises(UsageError, match="TLS"):
        await t.connect()


async def test_tls_to_a_plain_port_is_transport_error(amqp_url: str) -> None:
    parts = urlsplit(amqp_url)
    url = urlunsplit(parts._replace(scheme="amqps", netloc=f"{parts.netloc}"))
    if parts.port is None:
        url = url.replace(parts.netloc, f"{parts.netloc}:5672", 1)
    t = Transport(url, tls=TlsOptions(verify_hostname=False))
    with pytest.raises(TransportError) as info:
        await t.connect(timeout=5.0)
    assert info.value.__cause__ is not None


async def test_wrong_password_is_authentication_error(amqp_url: str) -> None:
    t = Transport(_with_password(amqp_url, "wrong-" + _token()))
    with pytest.raises(TransportError, match="authentication failed") as info:
        await t.connect()
    assert type(info.value) is AuthenticationError
    assert info.value.__cause__ is not None  # the aiormq error, chained
    assert "wrong-" not in str(info.value)  # no password in messages
    assert not t.is_open


async def test_connection_refused_is_transport_error() -> None:
    t = Transport(f"amqp://guest:guest@127.0.0.1:{_unused_port()}/")
    with pytest.raises(TransportError, match="cannot connect") as info:
        await t.connect(timeout=5.0)
    assert isinstance(info.value.__cause__, Exception)


async def test_unknown_vhost_is_transport_error(amqp_url: str) -> None:
    parts = urlsplit(amqp_url)
    t = Transport(urlunsplit(parts._replace(path="/no-such-vhost-" + _token())))
    with pytest.raises(TransportError, match="vhost"):
        await t.connect()


async def test_connect_timeout_on_a_silent_server() -> None:
    """A peer that accepts TCP but never speaks AMQP: QmfTimeout, socket closed."""
    writers: list[asyncio.StreamWriter] = []
    eof: list[bytes] = []

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writers.append(writer)
        eof.append(await reader.read())  # returns at EOF: the client closed its socket

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        t = Transport(f"amqp://guest:guest@127.0.0.1:{port}/")
        start = time.monotonic()
        with pytest.raises(QmfTimeout):
            await t.connect(timeout=0.3)
        assert time.monotonic() - start < 3.0
        assert not t.is_open
        await wait_until(lambda: eof)
        assert eof[0].startswith(b"AMQP")  # it got the protocol header, then EOF
    finally:
        for writer in writers:
            writer.close()
        server.close()
        await server.wait_closed()


async def test_connect_twice_is_usage_error(transport: Transport) -> None:
    with pytest.raises(UsageError):
        await transport.connect()


async def test_operations_before_connect_raise_not_connected(amqp_url: str) -> None:
    t = Transport(amqp_url)
    with pytest.raises(NotConnectedError):
        await t.publish(b"x", exchange="amq.direct", routing_key="nobody")
    with pytest.raises(NotConnectedError):
        await t.open_endpoint()
    await t.close()


# --------------------------------------------------------------------------- routing


async def test_publish_and_receive_all_fields(transport: Transport) -> None:
    rec = Recorder()
    transport.set_dispatcher(rec)
    ep = await transport.open_endpoint()
    await transport.bind(ep, "amq.direct", ep)
    body = b"AM2B\x00\x00\x00\x07" + bytes(range(256))
    await transport.publish(
        body,
        exchange="amq.direct",
        routing_key=ep,
        reply_to="reply-" + ep,
        headers={"qmf.agent": "org.example:agent:1", "n": 5},
        user_id="guest",
    )
    await wait_until(lambda: rec.deliveries)
    (d,) = rec.deliveries
    assert d.body == body
    assert d.exchange == "amq.direct"
    assert d.routing_key == ep
    assert d.reply_to == "reply-" + ep
    assert d.content_type == "x-application/qmf"
    assert dict(d.headers) == {"qmf.agent": "org.example:agent:1", "n": 5}
    assert d.user_id == "guest"
    assert d.endpoint == ep


async def test_delivery_without_optional_fields(transport: Transport) -> None:
    rec = Recorder()
    transport.set_dispatcher(rec)
    key = "plain-" + _token()
    ep = await transport.open_endpoint(bindings=[("amq.direct", key)])
    await transport.publish(b"", exchange="amq.direct", routing_key=key, content_type=None)
    await wait_until(lambda: rec.deliveries)
    (d,) = rec.deliveries
    # the user id is the connection's user: stamped by the transport, checked by RabbitMQ
    assert (d.body, d.reply_to, d.content_type, d.user_id) == (
        b"", None, None, parse_url(transport._url).user)
    assert dict(d.headers) == {}
    assert d.endpoint == ep


async def test_named_endpoint(transport: Transport) -> None:
    name = "qmf-test-reply-" + _token()
    assert await transport.open_endpoint(name, bindings=[("amq.direct", name)]) == name


async def test_topic_bindings_route_by_key(transport: Transport) -> None:
    """Bindings on qpid.management: each endpoint gets exactly the keys it asked for."""
    rec = Recorder()
    transport.set_dispatcher(rec)
    await transport.declare_management_exchange()
    await transport.declare_management_exchange()  # same arguments: idempotent
    bank = _token()  # a unique broker bank keeps other users of the broker out
    objects = await transport.open_endpoint(bindings=[("qpid.management", f"console.obj.{bank}.#")])
    events = await transport.open_endpoint(
        bindings=[
            ("qpid.management", f"console.event.{bank}.#"),
            ("qpid.management", f"console.heartbeat.{bank}.*"),
        ]
    )
    keys = [
        f"console.obj.{bank}.0.org.apache.qpid.broker.queue",
        f"console.event.{bank}.0.org.apache.qpid.broker.queueDeclare",
        f"console.heartbeat.{bank}.0",
        f"console.heartbeat.{bank}.0.extra",  # '*' is one word: not routed
        f"schema.package.{bank}",
        "broker",
        f"console.obj.{bank}.1.com.example.thing",
    ]
    for key in keys:
        await transport.publish(key.encode(), exchange="qpid.management", routing_key=key)
    await wait_until(lambda: len(rec.bodies(objects)) == 2 and len(rec.bodies(events)) == 2)
    assert rec.bodies(objects) == [keys[0].encode(), keys[6].encode()]
    assert rec.bodies(events) == [keys[1].encode(), keys[2].encode()]
    assert {d.exchange for d in rec.deliveries} == {"qpid.management"}
    assert [d.routing_key for d in rec.deliveries if d.endpoint == objects] == [keys[0], keys[6]]
    # the keys that matched nothing were published before the last one, which arrived
    assert len(rec.deliveries) == 4


def _watermark() -> str | None:
    """RabbitMQ's memory high watermark as ``rabbitmqctl eval`` prints it, or None."""
    ctl = shutil.which("rabbitmqctl") or shutil.which("rabbitmqctl", path="/usr/sbin:/sbin")
    if ctl is None:
        return None
    out = subprocess.run([ctl, "-q", "eval", "vm_memory_monitor:get_vm_memory_high_watermark()."],
                         capture_output=True, text=True, timeout=60, check=False)
    value = out.stdout.strip()
    return value if out.returncode == 0 and value.replace(".", "", 1).isdigit() else None


async def test_close_waits_until_a_blocked_broker_has_read_every_publish(
        amqp_url: str, transport: Transport) -> None:
    """Bodies published (no confirms) into a broker that stopped reading (a memory
    alarm) are not lost by ``close``: it waits for a round trip on the publish channel
    (bounded by its timeout) before closing the socket, which aiormq alone does 2 s
    after its Connection.Close whether the broker has read that far or not."""
    configured = _watermark()
    if configured is None or ("localhost" not in amqp_url and "127.0.0.1" not in amqp_url):
        pytest.skip("needs rabbitmqctl for the local broker (to raise a memory alarm)")
    rec = Recorder()
    transport.set_dispatcher(rec)
    ep = await transport.open_endpoint()
    await transport.bind(ep, "amq.direct", ep)
    sender = Transport(amqp_url, name=f"qmf-test-{_token()}")
    await sender.connect()
    n = 5_000
    await sender.publish(b"0", exchange="amq.direct", routing_key=ep)
    await wait_until(lambda: rec.deliveries, 10.0)
    assert rabbitmqctl("set_vm_memory_high_watermark", "absolute", "1MB")
    try:
        for i in range(1, n):
            await sender.publish(b"%d" % i + b"." * 200, exchange="amq.direct", routing_key=ep)
        closing = asyncio.create_task(sender.close(30.0))
        # the broker reads nothing for longer than aiormq waits for Close-Ok
        await asyncio.sleep(3.5)
    finally:
        assert rabbitmqctl("set_vm_memory_high_watermark", configured)
    await closing
    await wait_until(lambda: len(rec.deliveries) >= n, 30.0)
    assert [int(b.split(b".")[0]) for b in rec.bodies(ep)] == list(range(n))


async def test_unbind_stops_delivery(transport: Transport) -> None:
    rec = Recorder()
    transport.set_dispatcher(rec)
    key, sentinel = "unbind-" + _token(), "sentinel-" + _token()
    ep = await transport.open_endpoint(bindings=[("amq.direct", key), ("amq.direct", sentinel)])
    await transport.publish(b"1", exchange="amq.direct", routing_key=key)
    await wait_until(lambda: rec.bodies() == [b"1"])
    await transport.unbind(ep, "amq.direct", key)
    await transport.publish(b"2", exchange="amq.direct", routing_key=key)
    await transport.publish(b"end", exchange="amq.direct", routing_key=sentinel)
    await wait_until(lambda: b"end" in rec.bodies())
    assert rec.bodies() == [b"1", b"end"]
    await transport.bind(ep, "amq.direct", key)
    await transport.publish(b"3", exchange="amq.direct", routing_key=key)
    await wait_until(lambda: rec.bodies() == [b"1", b"end", b"3"])


async def test_bind_to_missing_exchange_keeps_the_transport_usable(transport: Transport) -> None:
    rec = Recorder()
    transport.set_dispatcher(rec)
    key = "after-error-" + _token()
    ep = await transport.open_endpoint(bindings=[("amq.direct", key)])
    with pytest.raises(TransportError, match="no-such-exchange"):
        await transport.bind(ep, "no-such-exchange-" + _token(), "x")
    assert transport.is_open
    await transport.bind(ep, "amq.direct", key + ".2")  # control channel reopened
    await transport.publish(b"a", exchange="amq.direct", routing_key=key)
    await transport.publish(b"b", exchange="amq.direct", routing_key=key + ".2")
    await wait_until(lambda: rec.bodies() == [b"a", b"b"])


async def test_publish_to_missing_exchange_does_not_stop_consumption(
    transport: Transport,
) -> None:
    """The broker closes the publish channel; the next publishes reopen it."""
    rec = Recorder()
    transport.set_dispatcher(rec)
    key = "probe-" + _token()
    await transport.open_endpoint(bindings=[("amq.direct", key)])
    await transport.publish(b"lost", exchange="no-such-exchange-" + _token(), routing_key="x")

    async def probe_arrives() -> bool:
        await transport.publish(b"probe", exchange="amq.direct", routing_key=key)
        await asyncio.sleep(0.05)
        return b"probe" in rec.bodies()

    await wait_until(probe_arrives, timeout=5.0)
    assert transport.is_open


async def test_bad_header_value_is_usage_error(transport: Transport) -> None:
    with pytest.raises(UsageError):
        await transport.publish(
            b"x", exchange="amq.direct", routing_key="k", headers={"bad": object()}
        )
    with pytest.raises(UsageError):
        await transport.publish(b"x", exchange="amq.direct", routing_key="k" * 300)
    assert transport.is_open


# --------------------------------------------------------------------------- flow


async def test_max_length_keeps_the_newest_and_dead_letters_the_rest(amqp_url: str) -> None:
    """A paused consumer (no dispatcher yet, prefetch 1) on a 5-message queue.

    The first message is delivered at once and held unacknowledged; the queue then
    keeps only the newest 5 ready messages and dead-letters the oldest to amq.topic.
    """
    key = "capped-" + _token()
    slow = Transport(amqp_url, prefetch=1, name="qmf-test-slow")
    watcher = Transport(amqp_url, name="qmf-test-dlx")
    await slow.connect()
    await watcher.connect()
    try:
        dead = Recorder()
        watcher.set_dispatcher(dead)
        await watcher.open_endpoint(bindings=[("amq.topic", key)])
        await slow.open_endpoint(
            bindings=[("amq.direct", key)],
            max_length=5,
            dead_letter_exchange="amq.topic",
            no_ack=False,
        )
        for i in range(20):
            await watcher.publish(str(i).encode(), exchange="amq.direct", routing_key=key)
        expected_dead = [str(i).encode() for i in range(1, 15)]
        await wait_until(lambda: dead.bodies() == expected_dead)
        assert slow.backlog == 1  # the first one, waiting for a dispatcher
        kept = Recorder()
        slow.set_dispatcher(kept)
        expected = [b"0"] + [str(i).encode() for i in range(15, 20)]
        await wait_until(lambda: kept.bodies() == expected)
        assert dead.deliveries[0].routing_key == key
        assert "x-death" in dead.deliveries[0].headers
    finally:
        await slow.close()
        await watcher.close()


@pytest.mark.parametrize(("no_ack", "prefetch"), [(True, 1000), (False, 50)])
async def test_order_preserved_across_5000_messages(
    amqp_url: str, no_ack: bool, prefetch: int
) -> None:
    t = Transport(amqp_url, prefetch=prefetch)
    await t.connect()
    try:
        seen: list[int] = []
        t.set_dispatcher(lambda d: seen.append(int(d.body)))
        key = "order-" + _token()
        await t.open_endpoint(bindings=[("amq.direct", key)], no_ack=no_ack)
        n = 5000
        for i in range(n):
            await t.publish(b"%d" % i, exchange="amq.direct", routing_key=key)
        await wait_until(lambda: len(seen) >= n, timeout=15.0)
        assert seen == list(range(n))
        assert t.backlog == 0
    finally:
        await t.close()


async def test_replies_and_acked_deliveries_together_lose_nothing(amqp_url: str) -> None:
    """A no_ack endpoint (dispatched in the consumer callback when nothing is buffered)
    and an acked one with a small prefetch (always through the reader) on one transport:
    each keeps its order and nothing is lost."""
    t = Transport(amqp_url, prefetch=20)
    await t.connect()
    try:
        seen: dict[str, list[int]] = {}
        t.set_dispatcher(lambda d: seen.setdefault(d.endpoint, []).append(int(d.body)))
        key = "mixed-" + _token()
        replies = await t.open_endpoint(bindings=[("amq.direct", key + "-r")], no_ack=True)
        acked = await t.open_endpoint(bindings=[("amq.direct", key + "-a")], no_ack=False)
        n = 2000
        for i in range(n):
            await t.publish(b"%d" % i, exchange="amq.direct", routing_key=key + "-r")
            await t.publish(b"%d" % i, exchange="amq.direct", routing_key=key + "-a")
        await wait_until(lambda: sum(map(len, seen.values())) >= 2 * n, timeout=15.0)
        assert seen[replies] == list(range(n))
        assert seen[acked] == list(range(n))
        assert t.backlog == 0
    finally:
        await t.close()


async def test_dispatcher_exception_does_not_stop_later_deliveries(
    transport: Transport, caplog: pytest.LogCaptureFixture
) -> None:
    seen: list[bytes] = []

    def dispatch(d: Delivery) -> None:
        if d.body.startswith(b"boom"):
            raise RuntimeError("dispatcher bug")
        seen.append(d.body)

    transport.set_dispatcher(dispatch)
    key = "boom-" + _token()
    await transport.open_endpoint(bindings=[("amq.direct", key)], no_ack=False)
    with caplog.at_level(logging.ERROR, logger="qmf_async.transport"):
        for body in (b"a", b"boom1", b"b", b"boom2", b"c"):
            await transport.publish(body, exchange="amq.direct", routing_key=key)
        await wait_until(lambda: seen == [b"a", b"b", b"c"])
    errors = [r for r in caplog.records if r.name == "qmf_async.transport"]
    assert len(errors) == 2
    assert errors[0].exc_info is not None
    assert transport.is_open


# --------------------------------------------------------------------------- close, loss


async def test_close_is_idempotent_bounded_and_shielded(amqp_url: str) -> None:
    t = Transport(amqp_url)
    await t.connect()
    await t.open_endpoint(bindings=[("amq.direct", "close-" + _token())])
    start = time.monotonic()
    closer = asyncio.ensure_future(t.close(timeout=2.0))
    await asyncio.sleep(0)
    closer.cancel()  # cancelling the caller does not interrupt the cleanup
    with pytest.raises(asyncio.CancelledError):
        await closer
    await asyncio.gather(t.close(), t.close())
    await t.close()
    assert time.monotonic() - start < 3.0
    assert not t.is_open
    with pytest.raises(NotConnectedError):
        await t.publish(b"x", exchange="amq.direct", routing_key="x")
    with pytest.raises(NotConnectedError):
        await t.bind("q", "amq.direct", "x")


async def test_close_before_connect(amqp_url: str) -> None:
    t = Transport(amqp_url)
    await t.close()
    with pytest.raises(UsageError):
        await t.connect()


def _rabbitmqctl_close(connection_name: str) -> bool:
    """Close the connection named ``connection_name`` from the broker side."""
    ctl = shutil.which("rabbitmqctl") or shutil.which("rabbitmqctl", path="/usr/sbin:/sbin")
    if ctl is None:
        return False
    try:
        listing = subprocess.run(
            [ctl, "-q", "-s", "list_connections", "pid", "client_properties"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
        # one line per connection: "<rabbit@host.1.2.3>\t[...{"connection_name",longstr,"..."}...]"
        pids = [
            line.split("\t", 1)[0]
            for line in listing.stdout.splitlines()
            if f'"{connection_name}"' in line
        ]
        if len(pids) != 1:
            return False
        subprocess.run(
            [ctl, "-q", "close_connection", pids[0], "qmf-async test: forced close"],
            capture_output=True,
            timeout=30,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return True


async def test_on_lost_fires_once_when_the_broker_closes_the_connection(
    amqp_url: str,
) -> None:
    name = "qmf-test-lost-" + _token()
    t = Transport(amqp_url, name=name)
    await t.connect()
    try:
        rec = Recorder()
        t.set_dispatcher(rec)
        lost: list[BaseException] = []
        t.on_lost(lost.append)
        ep = await t.open_endpoint()
        by_broker = await asyncio.to_thread(_rabbitmqctl_close, name)
        if not by_broker:
            # rabbitmqctl unusable here (not root, remote broker): close the aiormq
            # connection under the transport instead
            await t._conn.close(ConnectionError("forced close"))  # type: ignore[union-attr]
        await wait_until(lambda: lost, timeout=10.0)
        assert len(lost) == 1
        assert isinstance(lost[0], ConnectionLostError)
        if by_broker:
            assert "CONNECTION_FORCED" in str(lost[0])
            assert lost[0].__cause__ is not None
        assert not t.is_open and t.state is ConnectionState.LOST
        with pytest.raises(NotConnectedError):
            await t.publish(b"x", exchange="amq.direct", routing_key=ep)
        with pytest.raises(NotConnectedError):
            await t.bind(ep, "amq.direct", "x")
        late: list[BaseException] = []
        t.on_lost(late.append)  # registered after the loss: called soon, with the same error
        await wait_until(lambda: late)
        assert late[0] is lost[0]
    finally:
        await t.close()
    assert len(lost) == 1
    assert t.state is ConnectionState.LOST  # closing a lost transport keeps what happened


async def test_on_lost_not_called_on_close(transport: Transport) -> None:
    lost: list[BaseException] = []
    transport.on_lost(lost.append)
    await transport.open_endpoint()
    await transport.close()
    await asyncio.sleep(0)  # give a wrongly scheduled callback its chance
    assert lost == []


class _ListHandler(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


async def test_aiormq_lines_about_a_forced_close_stay_off_the_users_handlers(
    amqp_url: str,
) -> None:
    """The broker closes the connection: the user's handlers (on the root logger) get our
    one warning, and neither aiormq's "Unexpected connection close from remote ..." nor
    its "reader exited abnormally" traceback; those go to qmf_async.transport.aiormq at
    DEBUG, for whoever turns it on."""
    name = "qmf-test-quiet-" + _token()
    root = logging.getLogger()
    ours = logging.getLogger("qmf_async.transport.aiormq")
    user = _ListHandler()
    root.addHandler(user)
    old_level = ours.level
    ours.setLevel(logging.DEBUG)
    t = Transport(amqp_url, name=name)
    try:
        await t.connect()
        lost: list[BaseException] = []
        t.on_lost(lost.append)
        await t.open_endpoint()
        if not await asyncio.to_thread(_rabbitmqctl_close, name):
            pytest.skip("rabbitmqctl cannot close the connection from the broker side here")
        await wait_until(lambda: lost, timeout=10.0)
        # aiormq's reader closes the connection after reporting the loss: let it finish
        conn = t._conn
        assert conn is not None
        await wait_until(lambda: conn.is_closed and conn._reader_task.done(), timeout=10.0)
    finally:
        await t.close()
        root.removeHandler(user)
        ours.setLevel(old_level)
    from_aiormq = [r for r in user.records if r.name.startswith("aiormq")]
    assert from_aiormq == []
    # only the records of the transport layers: the root handler also sees whatever
    # else the process logs meanwhile (tasks of earlier tests winding down)
    mine = [r for r in user.records if r.name.startswith(("qmf_async.transport", "aiormq"))]
    assert not [r for r in mine if r.exc_info and r.levelno >= logging.WARNING]
    warnings = [r for r in mine if r.levelno >= logging.WARNING]
    assert [r.name for r in warnings] == ["qmf_async.transport"]
    assert "CONNECTION_FORCED" in warnings[0].getMessage()
    demoted = [r.getMessage() for r in user.records if r.name == "qmf_async.transport.aiormq"]
    assert any("Unexpected connection close from remote" in m for m in demoted)
    assert all(r.levelno == logging.DEBUG for r in user.records
               if r.name == "qmf_async.transport.aiormq")


async def test_a_refused_connect_is_one_error_and_no_aiormq_line() -> None:
    user = _ListHandler()
    root = logging.getLogger()
    root.addHandler(user)
    try:
        t = Transport(f"amqp://guest:guest@127.0.0.1:{_unused_port()}/")
        with pytest.raises(TransportError, match="cannot connect"):
            await t.connect(timeout=5.0)
        await t.close()
    finally:
        root.removeHandler(user)
    assert [r for r in user.records
            if r.name.startswith("aiormq") and r.levelno >= logging.WARNING] == []


async def test_a_silent_broker_is_lost_after_two_heartbeat_intervals() -> None:
    from qmf_async.transport._aiormq import _Connection
    for heartbeat in (1, 2, 10):
        conn = _Connection(f"amqp://guest:guest@127.0.0.1:1/?heartbeat={heartbeat}")
        assert conn.heartbeat_grace == 2 * heartbeat
    # heartbeats off: aiormq's own value stays (it is never checked)
    assert _Connection("amqp://guest:guest@127.0.0.1:1/?heartbeat=0").heartbeat_grace == 2
