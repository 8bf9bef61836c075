"""NativeAmqp10Transport (AMQP 1.0) against the test broker of ``tests/amqp10_peer.py``:
publish and bindings, SASL, TLS, idle timeout, loss, credit and refusals."""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from .conftest import PROTON_PEER_REASON

pytest.importorskip("proton", reason=PROTON_PEER_REASON)

from qmf_async.errors import (
    AuthenticationError,
    ConnectionLostError,
    NotConnectedError,
    QmfTimeout,
    TransportError,
)
from qmf_async.transport import ConnectionState, Delivery, NativeAmqp10Transport, TlsOptions
from qmf_async.wire import Symbol, encode_amqp10_message, encode_amqp10_value

from .amqp10_peer import Amqp10Peer, Pki, wait_for

pytestmark = pytest.mark.proton_peer

DIRECT = "apache.org:legacy-amqp-direct-binding:string"
TOPIC = "apache.org:legacy-amqp-topic-binding:string"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    if shutil.which("openssl") is None:
        pytest.skip("no openssl command to make test certificates")
    return Pki(Path(tmp_path_factory.mktemp("pki")))


@pytest.fixture
async def peer() -> AsyncIterator[Amqp10Peer]:
    async with Amqp10Peer() as p:
        yield p


class Opened:
    """Transports opened by a test, closed at its end."""

    def __init__(self) -> None:
        self.transports: list[NativeAmqp10Transport] = []

    async def connect(self, url: str, **options: Any) -> NativeAmqp10Transport:
        transport = NativeAmqp10Transport(url, **options)
        self.transports.append(transport)
        await transport.connect(timeout=5.0)
        return transport


@pytest.fixture
async def opened() -> AsyncIterator[Opened]:
    o = Opened()
    yield o
    for transport in o.transports:
        await transport.close(timeout=1.0)


# ------------------------------------------------------------------ publish and bind


async def test_publish_and_receive_through_direct_and_topic_bindings(
        peer: Amqp10Peer, opened: Opened) -> None:
    t = await opened.connect(peer.url())
    got: list[Delivery] = []
    t.set_dispatcher(got.append)
    ep = await t.open_endpoint("ep1", bindings=[("amq.direct", "k1"),
                                                ("qpid.management", "console.*.#")])
    assert ep == "ep1"
    assert sorted((s.address, s.descriptor, s.key) for s in peer.subscriptions) == [
        ("amq.direct", DIRECT, "k1"), ("qpid.management", TOPIC, "console.*.#")]

    await t.publish(b"direct", exchange="amq.direct", routing_key="k1", reply_to="R",
                    headers={"qmf.opcode": "_query_request", "n": 7}, user_id="alice")
    await t.publish(b"wrong key", exchange="amq.direct", routing_key="k2")
    await t.publish(b"no match", exchange="qpid.management", routing_key="agent.ind.x")
    await t.publish(b"topic", exchange="qpid.management", routing_key="console.obj.1.2",
                    reply_to="amq.topic/X", content_type=None)
    await t.publish(b"direct end", exchange="amq.direct", routing_key="k1")
    await wait_for(lambda: len(got) >= 3, what="three deliveries")

    by_body = {d.body: d for d in got}
    assert sorted(by_body) == [b"direct", b"direct end", b"topic"]  # nothing else came
    first = by_body[b"direct"]
    assert (first.exchange, first.routing_key, first.endpoint) == ("amq.direct", "k1", "ep1")
    assert first.reply_to == "amq.direct/R"  # a bare reply key names amq.direct
    assert dict(first.headers) == {"qmf.opcode": "_query_request", "n": 7}
    assert first.content_type == "x-application/qmf"
    assert first.user_id == "alice"
    topic = by_body[b"topic"]
    assert (topic.exchange, topic.routing_key, topic.reply_to, topic.content_type) == (
        "qpid.management", "console.obj.1.2", "amq.topic/X", None)
    assert dict(topic.headers) == {}
    # what went on the wire, read by proton
    assert len(peer.received) == 5
    sent = peer.received[0]
    assert (sent.address, sent.message.subject, bytes(sent.message.body)) == (
        "amq.direct", "k1", b"direct")
    assert sent.message.reply_to == "amq.direct/R"
    assert sent.message.properties == {"qmf.opcode": "_query_request", "n": 7}
    assert sent.message.user_id == b"alice"


async def test_unbind_detaches_and_rebinding_works(peer: Amqp10Peer, opened: Opened) -> None:
    t = await opened.connect(peer.url())
    got: list[Delivery] = []
    t.set_dispatcher(got.append)
    ep = await t.open_endpoint(None, bindings=[("amq.topic", "a.#")])
    assert ep.startswith("qmf-")
    await t.bind(ep, "amq.topic", "a.#")  # the same binding again: no second link
    assert len(peer.subscriptions) == 1
    await t.unbind(ep, "amq.topic", "a.#")
    await wait_for(lambda: not peer.subscriptions, what="the detach")
    await t.bind(ep, "amq.topic", "b")
    await t.publish(b"a", exchange="amq.topic", routing_key="a.x")
    await t.publish(b"b", exchange="amq.topic", routing_key="b")
    await wait_for(lambda: got, what="a delivery")
    await wait_for(lambda: len(peer.received) == 2, what="both messages at the peer")
    assert [d.body for d in got] == [b"b"]


# ------------------------------------------------------------------ SASL


async def test_anonymous_without_credentials() -> None:
    async with Amqp10Peer(mechanisms=["PLAIN", "ANONYMOUS"], users={"u": "p"}) as peer:
        t = NativeAmqp10Transport(peer.url())
        await t.connect(timeout=5.0)
        await t.close()
    assert peer.sasl_log == [("ANONYMOUS", None, True)]


async def test_plain_with_url_credentials() -> None:
    async with Amqp10Peer(mechanisms=["PLAIN"], users={"alice": "s3:cr@t"}) as peer:
        t = NativeAmqp10Transport(peer.url(userinfo="alice:s3%3Acr%40t@"))
        await t.connect(timeout=5.0)
        assert t.is_open
        await t.close()
    assert peer.sasl_log == [("PLAIN", "alice", True)]


async def test_plain_with_wrong_password_is_an_authentication_error() -> None:
    async with Amqp10Peer(mechanisms=["PLAIN"], users={"alice": "right"}) as peer:
        t = NativeAmqp10Transport(peer.url(userinfo="alice:wrong@"))
        started = time.monotonic()
        with pytest.raises(AuthenticationError) as info:
            await t.connect(timeout=5.0)
        assert time.monotonic() - started < 0.5  # at the outcome, not at a later tick
        assert "alice" in str(info.value)
        assert "wrong" not in str(info.value)
        assert not t.is_open
        await t.close()
    assert peer.sasl_log == [("PLAIN", "alice", False)]


async def test_no_common_mechanism_is_an_authentication_error() -> None:
    async with Amqp10Peer(mechanisms=["PLAIN"], users={"alice": "right"}) as peer:
        t = NativeAmqp10Transport(peer.url())  # no password: ANONYMOUS only
        started = time.monotonic()
        with pytest.raises(AuthenticationError, match="unauthorized-access"):
            await t.connect(timeout=5.0)
        assert time.monotonic() - started < 0.5
        await t.close()
    assert peer.sasl_log == []  # the client gave up before choosing


async def test_external_with_a_client_certificate_over_tls(pki: Pki) -> None:
    ctx = pki.server_context(client_certs=True)
    async with Amqp10Peer(mechanisms=["EXTERNAL"], ssl_context=ctx) as peer:
        tls = TlsOptions(cafile=pki.ca[0], certfile=pki.client[0], keyfile=pki.client[1])
        t = NativeAmqp10Transport(peer.url(scheme="amqps", host="localhost"), tls=tls)
        await t.connect(timeout=5.0)
        assert t.is_open
        await t.close()
    assert peer.sasl_log == [("EXTERNAL", "qmf-client", True)]


async def test_external_required_without_a_client_certificate_fails(pki: Pki) -> None:
    ctx = pki.server_context(client_certs=True)
    async with Amqp10Peer(mechanisms=["EXTERNAL"], ssl_context=ctx) as peer:
        t = NativeAmqp10Transport(peer.url(scheme="amqps", host="localhost"),
                            tls=TlsOptions(cafile=pki.ca[0]))
        with pytest.raises(AuthenticationError):
            await t.connect(timeout=5.0)
        await t.close()


# ------------------------------------------------------------------ TLS


async def test_tls_with_the_right_ca(pki: Pki, opened: Opened) -> None:
    async with Amqp10Peer(ssl_context=pki.server_context()) as peer:
        t = await opened.connect(peer.url(scheme="amqps", host="localhost"),
                                 tls=TlsOptions(cafile=pki.ca[0]))
        got: list[Delivery] = []
        t.set_dispatcher(got.append)
        ep = await t.open_endpoint(None, bindings=[("amq.direct", "k")])
        await t.publish(b"over tls", exchange="amq.direct", routing_key="k")
        await wait_for(lambda: got, what="a delivery over TLS")
        assert got[0].body == b"over tls" and got[0].endpoint == ep
        await t.close()


@pytest.mark.parametrize("which", ["selfsigned", "server"])
async def test_tls_unknown_ca_fails_verification(pki: Pki, which: str) -> None:
    # "server" is issued by the test CA, which the system trust store does not know
    async with Amqp10Peer(ssl_context=pki.server_context(which)) as peer:
        t = NativeAmqp10Transport(peer.url(scheme="amqps", host="localhost"), tls=TlsOptions())
        with pytest.raises(TransportError, match="certificate verify failed") as info:
            await t.connect(timeout=5.0)
        assert not isinstance(info.value, QmfTimeout)
        await t.close()


async def test_tls_hostname_mismatch(pki: Pki, opened: Opened) -> None:
    async with Amqp10Peer(ssl_context=pki.server_context("other")) as peer:
        url = peer.url(scheme="amqps", host="localhost")
        t = NativeAmqp10Transport(url, tls=TlsOptions(cafile=pki.ca[0]))
        with pytest.raises(TransportError, match=r"certificate verify failed.*[Hh]ostname"):
            await t.connect(timeout=5.0)
        await t.close()
        t = await opened.connect(url, tls=TlsOptions(cafile=pki.ca[0], verify_hostname=False))
        assert t.is_open
        # verify_hostname=False still verifies the chain
        async with Amqp10Peer(ssl_context=pki.server_context("selfsigned")) as other:
            t2 = NativeAmqp10Transport(other.url(scheme="amqps", host="localhost"),
                                 tls=TlsOptions(cafile=pki.ca[0], verify_hostname=False))
            with pytest.raises(TransportError, match="certificate verify failed"):
                await t2.connect(timeout=5.0)
            await t2.close()


# ------------------------------------------------------------------ loss


async def test_idle_timeout_declares_a_stalled_peer_lost(peer: Amqp10Peer,
                                                         opened: Opened) -> None:
    t = await opened.connect(peer.url(), idle_timeout=1.0, operation_timeout=30.0)
    # proton announces half its timeout, so that the peer's heartbeats come in time
    assert 0.0 < peer.connections[0].remote_idle_timeout <= 1.0
    lost: list[tuple[float, BaseException]] = []
    t.on_lost(lambda exc: lost.append((time.monotonic(), exc)))
    ep = await t.open_endpoint(None)
    peer.silent.add("amq.topic")  # never answers attaches there
    await t.publish(b"warm", exchange="amq.direct", routing_key="k")
    peer.stall()
    stalled_at = time.monotonic()
    bind = asyncio.ensure_future(t.bind(ep, "amq.topic", "k"))
    publish = asyncio.ensure_future(t.publish(b"x", exchange="amq.fanout", routing_key=""))
    await wait_for(lambda: lost, timeout=5.0, what="on_lost")
    when, exc = lost[0]
    assert isinstance(exc, ConnectionLostError)
    assert "idle" in str(exc).lower()
    # the last heartbeat came up to a quarter of the timeout before the stall
    assert 0.5 <= when - stalled_at < 3.0
    for pending in (bind, publish):
        with pytest.raises(TransportError):
            await asyncio.wait_for(pending, 1.0)
    assert not t.is_open
    with pytest.raises(NotConnectedError):
        await t.publish(b"y", exchange="amq.direct", routing_key="k")
    await asyncio.sleep(0)  # a second loss report would be scheduled by now
    assert len(lost) == 1


async def test_heartbeats_keep_an_idle_connection_open(peer: Amqp10Peer,
                                                       opened: Opened) -> None:
    t = await opened.connect(peer.url(), idle_timeout=0.8)
    lost: list[BaseException] = []
    t.on_lost(lost.append)
    quiet_until = time.monotonic() + 1.8  # more than two idle timeouts, no traffic
    while time.monotonic() < quiet_until:
        assert t.is_open and not lost
        await asyncio.sleep(0.05)
    await t.publish(b"still here", exchange="amq.direct", routing_key="k")
    await wait_for(lambda: peer.received, what="the message")


@pytest.mark.parametrize("abrupt", [False, True])
async def test_peer_closing_the_connection_fails_everything_at_once(
        abrupt: bool, opened: Opened) -> None:
    async with Amqp10Peer(credit=0, auto_credit=False, silent=["amq.topic"]) as peer:
        t = await opened.connect(peer.url(), operation_timeout=30.0)
        lost: list[BaseException] = []
        t.on_lost(lost.append)
        ep = await t.open_endpoint(None)
        bind = asyncio.ensure_future(t.bind(ep, "amq.topic", "k"))
        publish = asyncio.ensure_future(t.publish(b"x", exchange="amq.direct",
                                                  routing_key="k"))
        await wait_for(lambda: peer.connections[0].senders, what="the sender attach")
        started = time.monotonic()
        if abrupt:
            peer.connections[0].abort()
        else:
            peer.close_connections("amqp:connection:forced", "broker shutting down")
        for pending in (bind, publish):
            with pytest.raises(TransportError):
                await asyncio.wait_for(pending, 2.0)
        assert time.monotonic() - started < 2.0
        await wait_for(lambda: lost, what="on_lost")
        assert isinstance(lost[0], ConnectionLostError)
        if not abrupt:
            assert "broker shutting down" in str(lost[0])
        assert not t.is_open and t.state is ConnectionState.LOST
        late: list[BaseException] = []
        t.on_lost(late.append)  # registered after the loss: told at once
        await wait_for(lambda: late, what="the late on_lost")
        assert late[0] is lost[0]
        await t.close()
        assert len(lost) == 1


async def test_close_is_idempotent_and_bounded_when_the_peer_does_not_answer() -> None:
    async with Amqp10Peer(answer_close=False) as peer:
        t = NativeAmqp10Transport(peer.url())
        await t.connect(timeout=5.0)
        lost: list[BaseException] = []
        t.on_lost(lost.append)
        started = time.monotonic()
        await asyncio.gather(t.close(timeout=0.3), t.close(timeout=0.3))
        assert 0.25 <= time.monotonic() - started < 2.0
        assert peer.connections[0].closed_by_client
        assert not t.is_open
        started = time.monotonic()
        await t.close()
        assert time.monotonic() - started < 0.1
        with pytest.raises(NotConnectedError):
            await t.publish(b"x", exchange="amq.direct", routing_key="k")
        assert lost == []  # close is not a loss


async def test_close_with_an_answering_peer_is_quick(peer: Amqp10Peer) -> None:
    t = NativeAmqp10Transport(peer.url())
    assert t.state is ConnectionState.NEW
    await t.connect(timeout=5.0)
    assert t.state is ConnectionState.OPEN
    started = time.monotonic()
    await t.close(timeout=5.0)
    assert time.monotonic() - started < 1.0
    assert t.state is ConnectionState.CLOSED


# ------------------------------------------------------------------ credit


async def test_one_credit_at_a_time_loses_nothing(opened: Opened) -> None:
    async with Amqp10Peer(credit=1) as peer:
        t = await opened.connect(peer.url())
        got: list[Delivery] = []
        t.set_dispatcher(got.append)
        await t.open_endpoint(None, bindings=[("amq.direct", "k")])
        bodies = [f"m{i}".encode() for i in range(40)]
        await asyncio.gather(*(t.publish(b, exchange="amq.direct", routing_key="k")
                               for b in bodies))
        await wait_for(lambda: len(got) == len(bodies), what="every message")
        assert [d.body for d in got] == bodies
        assert [r.raw for r in peer.received] and len(peer.received) == len(bodies)
        assert peer.max_credit_given == 1


async def test_publish_waits_for_credit(opened: Opened) -> None:
    async with Amqp10Peer(credit=0, auto_credit=False) as peer:
        t = await opened.connect(peer.url(), operation_timeout=0.3)
        with pytest.raises(QmfTimeout, match="no credit"):
            await t.publish(b"never sent", exchange="amq.direct", routing_key="k")
        t2 = await opened.connect(peer.url(), operation_timeout=30.0)
        first = asyncio.ensure_future(t2.publish(b"one", exchange="amq.direct",
                                                 routing_key="k"))
        await wait_for(lambda: len(peer.connections) == 2 and peer.connections[1].senders,
                       what="the sender attach")
        peer.connections[1].grant(1)
        await asyncio.wait_for(first, 5.0)
        await wait_for(lambda: peer.received, what="the message")
        assert [r.raw for r in peer.received if r.message.body] and \
            [bytes(r.message.body) for r in peer.received] == [b"one"]


async def test_deliveries_before_the_dispatcher_are_held_in_order(opened: Opened) -> None:
    async with Amqp10Peer() as peer:
        t = await opened.connect(peer.url(), prefetch=2)
        await t.open_endpoint("held", bindings=[("amq.direct", "k")])
        bodies = [f"h{i}".encode() for i in range(7)]
        for b in bodies:
            await t.publish(b, exchange="amq.direct", routing_key="k")
        await wait_for(lambda: t.backlog == 2, what="two held deliveries")
        sub = peer.subscriptions[0]
        await wait_for(lambda: len(sub.queue) == 5, what="the rest waiting at the peer")
        got: list[Delivery] = []
        t.set_dispatcher(got.append)
        assert [d.body for d in got] == bodies[:2]  # the held ones, at once
        await wait_for(lambda: len(got) == len(bodies), what="every delivery")
        assert [d.body for d in got] == bodies
        assert t.backlog == 0


# ------------------------------------------------------------------ refusals


async def test_refused_links_name_the_address(peer: Amqp10Peer, opened: Opened) -> None:
    t = await opened.connect(peer.url())
    ep = await t.open_endpoint(None)
    with pytest.raises(TransportError, match=r"'no\.such\.exchange'.*amqp:not-found"):
        await t.bind(ep, "no.such.exchange", "k")
    with pytest.raises(TransportError, match=r"'missing'.*amqp:not-found"):
        await t.publish(b"x", exchange="missing", routing_key="k")
    with pytest.raises(TransportError, match="'gone'"):
        await t.open_endpoint(None, bindings=[("amq.direct", "ok"), ("gone", "k")])
    assert t.is_open  # a refused link does not take the connection down
    await t.declare_management_exchange()
    got: list[Delivery] = []
    t.set_dispatcher(got.append)
    await t.bind(ep, "amq.direct", "after")
    await t.publish(b"fine", exchange="amq.direct", routing_key="after")
    await wait_for(lambda: got, what="a delivery after the refusals")


async def test_attach_without_answer_times_out(opened: Opened) -> None:
    async with Amqp10Peer(silent=["amq.topic"]) as peer:
        t = await opened.connect(peer.url(), operation_timeout=0.3)
        ep = await t.open_endpoint(None)
        with pytest.raises(QmfTimeout, match="attach"):
            await t.bind(ep, "amq.topic", "k")
        assert t.is_open


async def test_connect_to_nothing_is_a_transport_error() -> None:
    async with Amqp10Peer() as peer:
        url = peer.url()
    t = NativeAmqp10Transport(url)
    with pytest.raises(TransportError) as info:
        await t.connect(timeout=5.0)
    assert not isinstance(info.value, QmfTimeout)
    assert t.state is ConnectionState.CLOSED
    await t.close()


# ------------------------------------------------------------------ what the peer sends


async def test_malformed_and_sequence_messages_are_counted_not_dispatched(
        peer: Amqp10Peer, opened: Opened) -> None:
    t = await opened.connect(peer.url())
    got: list[Delivery] = []
    t.set_dispatcher(got.append)
    await t.open_endpoint("ep", bindings=[("amq.direct", "k")])
    conn, sub = peer.connections[0], peer.subscriptions[0]
    conn.send_raw(sub, b"\x00\x53\x75\xb0\xff")  # a data section cut short
    conn.send_raw(sub, encode_amqp10_message({"a": 1}, body_kind="value", subject="k"))
    conn.send_raw(sub, b"\x00\x53\x76" + encode_amqp10_value([1, 2]))  # amqp-sequence
    conn.send_raw(sub, encode_amqp10_message(b"as value", body_kind="value", subject="k"))
    conn.send_raw(sub, encode_amqp10_message(
        b"data", subject="k", content_type="x-application/qmf",
        application_properties={"x": Symbol("y")}))
    await wait_for(lambda: len(got) == 3, what="the three good deliveries")
    # a map (QMF v2) arrives decoded in ``value``; binary values and data as bodies
    assert [(d.body, d.value, d.routing_key) for d in got] == [
        (b"", {"a": 1}, "k"), (b"as value", None, "k"), (b"data", None, "k")]
    assert dict(got[2].headers) == {"x": "y"}
    assert (t.malformed, t.unsupported) == (1, 1)  # the cut data section; the sequence
    assert t.is_open


async def test_the_peer_detaching_a_binding_is_a_loss(peer: Amqp10Peer, opened: Opened) -> None:
    t = await opened.connect(peer.url())
    lost: list[BaseException] = []
    t.on_lost(lost.append)
    await t.open_endpoint("ep", bindings=[("qpid.management", "console.#")])
    peer.connections[0].detach(peer.subscriptions[0])
    await wait_for(lambda: lost, what="on_lost")
    assert isinstance(lost[0], ConnectionLostError)
    assert "'qpid.management'" in str(lost[0]) and "resource-deleted" in str(lost[0])
    assert not t.is_open
