"""Security on the real brokers: TLS verified by default, SASL PLAIN and EXTERNAL, and
the agent's authorization hook by the user id the broker validated.

RabbitMQ: a TLS listener made at run time on a free port (``tests/security_brokers.py``)
with a CA made by the tests; users made with rabbitmqctl on private vhosts and removed
after.  qpidd: its SSL listener (NSS database made with certutil/pk12util).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import shutil
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import quote, unquote

import pytest

from qmf_async import Session, wire
from qmf_async.agent import Agent, ManagedObject
from qmf_async.agent.broker import ManagementBroker
from qmf_async.errors import AuthenticationError, MethodError, QmfError, TransportError
from qmf_async.protocol import Reply
from qmf_async.tools.cli import main as qmf_main
from qmf_async.transport import AiormqTransport, Delivery, NativeAmqp10Transport, TlsOptions
from qmf_async.wire import V2Exception, V2MethodResponse

from ._util import private_vhost, wait_until
from .agent_v2_helpers import COUNTER, PKG, Driver
from .pki import Pki
from .qpidd import Qpidd, QpiddError, qpidd_home
from .security_brokers import (
    RabbitTls,
    RabbitTlsError,
    free_port,
    nss_database,
    rabbitmqctl,
    world_readable_dir,
)

pytestmark = pytest.mark.integration


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="session")
def rabbit_tls(amqp_url: str) -> Iterator[RabbitTls]:
    """The local RabbitMQ with a TLS listener on a free port (stopped at the end)."""
    if not any(h in amqp_url for h in ("@localhost", "@127.0.0.1", "//localhost",
                                       "//127.0.0.1")):
        pytest.skip("the TLS listener is made with rabbitmqctl: the test broker "
                    f"({amqp_url.rsplit('@', 1)[-1]}) is not local")
    root = world_readable_dir("qmf-rabbit-tls-")
    try:
        listener = RabbitTls.start(root)
    except RabbitTlsError as exc:
        shutil.rmtree(root, ignore_errors=True)
        pytest.skip(f"no RabbitMQ TLS listener: {exc}")
    yield listener
    listener.stop()
    shutil.rmtree(root, ignore_errors=True)


@contextlib.contextmanager
def rabbit_user(name: str, password: str | None, vhost: str = "/") -> Iterator[str]:
    """A RabbitMQ user (no password when None: EXTERNAL only) with every permission on
    ``vhost``; deleted afterwards.  Skips the test when rabbitmqctl cannot make it."""
    try:
        rabbitmqctl("add_user", name, password or uuid.uuid4().hex)
    except RabbitTlsError as exc:
        if "already exists" not in str(exc):  # (a retried add that had worked)
            pytest.skip(f"cannot make a RabbitMQ user: {exc}")
    try:
        if password is None:
            rabbitmqctl("clear_password", name)
        rabbitmqctl("set_permissions", "-p", vhost, name, ".*", ".*", ".*")
        yield name
    finally:
        rabbitmqctl("delete_user", name)


def run_tool(argv: list[str]) -> tuple[int, str, str]:
    """``qmf ARGV`` in this process (its own event loop: call it in a thread)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = qmf_main(argv)
    return rc, out.getvalue(), err.getvalue()


async def connected(url: str, **kw: Any) -> None:
    """A Session connects to ``url`` (then closes)."""
    async with Session.connect(url, timeout=10.0, broker_timeout=0.5,
                               _transport_factory=AiormqTransport, **kw) as session:
        assert session.brokers[0].connected


# --------------------------------------------------------------------------- RabbitMQ TLS


async def test_rabbitmq_amqps_is_verified_against_the_given_ca(rabbit_tls: RabbitTls) -> None:
    tls = TlsOptions(cafile=rabbit_tls.pki.ca[0])
    await connected(rabbit_tls.url(), tls=tls, sasl_mechanisms="PLAIN")


async def test_rabbitmq_plain_login_over_tls(rabbit_tls: RabbitTls) -> None:
    """SASL PLAIN inside TLS: the broker lists the connection as TLS and PLAIN."""
    name = f"qmf-plain-{uuid.uuid4().hex[:8]}"
    with rabbit_user(name, "plain-over-tls"):
        transport = AiormqTransport(rabbit_tls.url(credentials=f"{name}:plain-over-tls@"),
                                    tls=TlsOptions(cafile=rabbit_tls.pki.ca[0]),
                                    sasl_mechanisms="PLAIN")
        await transport.connect(10.0)
        try:
            rows = await wait_until(
                lambda: [r for r in rabbit_tls.connections() if r["user"] == name],
                timeout=10.0, message="the connection in rabbitmqctl list_connections")
            assert [(r["ssl"], r["auth_mechanism"]) for r in rows] == [("true", "PLAIN")]
        finally:
            await transport.close()


async def test_rabbitmq_unknown_ca_fails_in_one_line(rabbit_tls: RabbitTls) -> None:
    """Verification is on by default: without the test CA (the system's CAs) and with
    another CA, the connection fails with one line naming the verification."""
    for tls in (None, TlsOptions(cafile=rabbit_tls.pki.selfsigned[0])):
        with pytest.raises(TransportError) as caught:
            await connected(rabbit_tls.url(), tls=tls)
        text = str(caught.value)
        assert "certificate verify failed" in text and "\n" not in text, text
        assert "guest:guest" not in text


async def test_rabbitmq_wrong_host_name_fails_unless_unchecked(rabbit_tls: RabbitTls) -> None:
    """The listener's certificate names localhost only: 127.0.0.1 is a wrong host name
    (one line), accepted with verify_hostname=False (the CA is still checked)."""
    url = rabbit_tls.url(host="127.0.0.1")
    with pytest.raises(TransportError) as caught:
        await connected(url, tls=TlsOptions(cafile=rabbit_tls.pki.ca[0]))
    text = str(caught.value)
    assert "certificate verify failed" in text and "127.0.0.1" in text and "\n" not in text
    await connected(url, tls=TlsOptions(cafile=rabbit_tls.pki.ca[0], verify_hostname=False))
    with pytest.raises(TransportError, match="certificate verify failed"):
        await connected(url, tls=TlsOptions(cafile=rabbit_tls.pki.selfsigned[0],
                                            verify_hostname=False))


async def test_rabbitmq_external_login_with_a_client_certificate(rabbit_tls: RabbitTls) -> None:
    """EXTERNAL: the broker's user is the certificate's CN (a user with no password);
    a certificate whose CN is no user is refused in one line."""
    pki = rabbit_tls.pki
    name = f"qmf-cert-{uuid.uuid4().hex[:8]}"
    cert = pki.issue(name, name, f"DNS:{name}", "clientAuth")
    stranger = pki.issue(f"{name}-x", f"{name}-stranger", f"DNS:{name}-x", "clientAuth")
    with rabbit_user(name, None):
        tls = TlsOptions(cafile=pki.ca[0], certfile=cert[0], keyfile=cert[1])
        async with Session.connect(rabbit_tls.url(credentials=""), tls=tls,
                                   sasl_mechanisms="EXTERNAL", timeout=10.0,
                                   broker_timeout=0.5,
                                   _transport_factory=AiormqTransport) as session:
            assert session.brokers[0].connected
            rows = await wait_until(
                lambda: [r for r in rabbit_tls.connections() if r["user"] == name],
                timeout=10.0, message="the EXTERNAL connection in list_connections")
            assert rows[0]["ssl"] == "true" and rows[0]["auth_mechanism"] == "EXTERNAL"
            assert f"CN={name}" in rows[0]["peer_cert_subject"]
        with pytest.raises(AuthenticationError) as caught:
            await connected(rabbit_tls.url(credentials=""), sasl_mechanisms="EXTERNAL",
                            tls=TlsOptions(cafile=pki.ca[0], certfile=stranger[0],
                                           keyfile=stranger[1]))
        text = str(caught.value)
        assert "client certificate (EXTERNAL)" in text and "\n" not in text, text


@pytest.mark.parametrize("login", ["PLAIN", "EXTERNAL"])
async def test_tools_over_the_rabbitmq_tls_listener(rabbit_tls: RabbitTls, login: str) -> None:
    """``qmf events`` with the qpid tools' TLS flags; an untrusted CA is exit 3."""
    pki = rabbit_tls.pki
    name = f"qmf-tool-{uuid.uuid4().hex[:8]}"
    cert = pki.issue(name, name, f"DNS:{name}", "clientAuth")
    flags = ["--ssl-trustfile", pki.ca[0], "--duration", "0.3", "--quiet"]
    if login == "EXTERNAL":
        url = rabbit_tls.url(credentials="")
        flags += ["--ssl-certificate", cert[0], "--ssl-key", cert[1],
                  "--sasl-mechanism", "EXTERNAL"]
    else:
        url = rabbit_tls.url(credentials=f"{name}:tool-pw@")
        flags += ["--sasl-mechanism", "PLAIN"]
    with rabbit_user(name, "tool-pw" if login == "PLAIN" else None):
        rc, out, err = await asyncio.to_thread(run_tool, ["events", "-b", url, *flags])
        assert rc == 0, (out, err)
        rc, out, err = await asyncio.to_thread(run_tool, [
            "events", "-b", url, "--ssl-trustfile", pki.selfsigned[0], "--duration", "0.3"])
        assert rc == 3 and out == "" and len(err.strip().splitlines()) == 1, (rc, out, err)
        assert "certificate verify failed" in err and "tool-pw" not in err


# --------------------------------------------------------------------------- authorization


@contextlib.asynccontextmanager
async def guarded_agent(url: str, allowed: set[str], seen: list[tuple[str | None, str]]
                        ) -> AsyncIterator[Agent]:
    """A counter agent (v1 and v2) whose ``add`` only users in ``allowed`` may call;
    every question the hook is asked is appended to ``seen``."""

    async def authorize(user: str | None, obj: ManagedObject, method: str,
                        args: Any) -> bool:
        await asyncio.sleep(0)  # an awaitable verdict, as a lookup elsewhere would be
        seen.append((user, method))
        return user in allowed

    agent = Agent(url, label=f"authz-{uuid.uuid4().hex[:8]}", schemas=[COUNTER],
                  interval=0.5, transport_factory=AiormqTransport, qmf_versions=(1, 2),
                  authorize=authorize)
    agent.create_object("counter", name="guarded", count=0)

    @agent.method("counter", "add")
    def add(obj: ManagedObject, amount: int) -> dict[str, int]:
        obj.inc("count", amount)
        return {"total": obj["count"]}

    async with agent:
        yield agent


def _count(agent: Agent) -> int:
    (obj,) = agent.objects("counter")
    return int(obj["count"])


class AuthzBus(NamedTuple):
    """A private vhost with two users: ``url`` logs in as the test broker's user."""

    url: str
    host: str  # host:port/vhost
    alice: str
    bob: str


@pytest.fixture(scope="module")
def authz_bus(amqp_url: str) -> Iterator[AuthzBus]:
    """A private vhost and two RabbitMQ users on it (alice and bob, passwords
    ``alice-pw`` and ``bob-pw``), made with rabbitmqctl and removed after."""
    tag = uuid.uuid4().hex[:8]
    alice, bob = f"qmf-alice-{tag}", f"qmf-bob-{tag}"
    with private_vhost(amqp_url, "qmf-authz") as url:
        vhost = url.rsplit("/", 1)[-1]
        if vhost == amqp_url.rsplit("/", 1)[-1]:
            pytest.skip("no private vhost (rabbitmqctl could not make one)")
        with rabbit_user(alice, "alice-pw", vhost=unquote(vhost)), \
                rabbit_user(bob, "bob-pw", vhost=unquote(vhost)):
            yield AuthzBus(url, url.split("@", 1)[1], alice, bob)


@pytest.mark.parametrize("qmf_version", [1, 2])
async def test_authorization_by_the_rabbitmq_user(authz_bus: AuthzBus, qmf_version: int
                                                  ) -> None:
    """Two RabbitMQ users call the same method through the management-broker role:
    the allowed one runs it, the other gets status 6 and the handler never runs; the
    hook saw the user ids RabbitMQ validated (the console stamps its login user)."""
    alice, bob, url = authz_bus.alice, authz_bus.bob, authz_bus.url
    seen: list[tuple[str | None, str]] = []
    async with ManagementBroker(url, interval=0.5, transport_factory=AiormqTransport), \
            guarded_agent(url, {alice}, seen) as agent:
        for user, password, allowed in ((alice, "alice-pw", True), (bob, "bob-pw", False)):
            async with Session.connect(f"amqp://{user}:{password}@{authz_bus.host}",
                                       qmf_version=qmf_version, timeout=10.0,
                                       _transport_factory=AiormqTransport) as s:
                async def counter(s: Session = s) -> Any:
                    found = await s.get_objects(_class="counter", _package=PKG,
                                                _timeout=5.0)
                    return found[0] if found else None
                obj = await wait_until(counter, timeout=15.0, interval=0.2,
                                       message="the guarded counter")
                before = _count(agent)
                if allowed:
                    assert (await obj.add(5)).total == before + 5
                else:
                    with pytest.raises(MethodError) as caught:
                        await obj.add(5)
                    assert caught.value.status == 6, caught.value
                    assert f"not authorized: user {bob!r} may not call counter.add" \
                        in str(caught.value)
                    assert _count(agent) == before
    assert seen == [(alice, "add"), (bob, "add")]


async def test_a_forged_user_id_never_reaches_the_hook(authz_bus: AuthzBus) -> None:
    """A request from bob's connection claiming to be alice is dropped by RabbitMQ
    (it checks the user id against the connection's user); bob's own requests reach
    the hook as bob and are refused."""
    alice, bob = authz_bus.alice, authz_bus.bob
    seen: list[tuple[str | None, str]] = []
    registry = wire.SchemaRegistry([COUNTER])
    async with guarded_agent(authz_bus.url, {alice}, seen) as agent:
        (obj,) = agent.objects("counter")
        bob_link = AiormqTransport(f"amqp://{bob}:bob-pw@{authz_bus.host}")
        await bob_link.connect(10.0)
        answers: dict[int, Any] = {}

        def on_reply(d: Delivery) -> None:
            for msg in wire.decode(d.body, registry):
                answers[msg.seq] = msg
        bob_link.set_dispatcher(on_reply)
        try:
            await bob_link.declare_management_exchange()
            queue = await bob_link.open_endpoint(None)
            await bob_link.bind(queue, "amq.direct", queue)

            async def call(seq: int, user_id: str | None) -> None:
                body = wire.encode(wire.MethodRequest(
                    seq, obj.object_id, COUNTER.class_key, "add", {"amount": 5}), registry)
                with contextlib.suppress(TransportError):
                    await bob_link.publish(body, exchange="qpid.management",
                                           routing_key=agent.agent_key, reply_to=queue,
                                           user_id=user_id)
            await call(1, alice)  # forged: RabbitMQ closes the publish channel
            seqs = iter(range(2, 1000))

            async def bob_answered() -> bool:
                if answers:
                    return True
                await call(next(seqs), None)  # the transport stamps bob
                return False
            await wait_until(bob_answered, timeout=15.0, interval=0.3,
                             message="an answer to bob's own request")
        finally:
            await bob_link.close()
        assert 1 not in answers
        assert {m.status for m in answers.values()} == {6}, answers
        assert _count(agent) == 0
    assert seen and set(seen) == {(bob, "add")}, seen


# --------------------------------------------------------------------------- credentials

#: distinctive passwords (with characters a URL must percent-encode)
SECRET = "Zq7-s3cret:/@%pw"
WRONG = "Wr0ng-Zq9:/@%pw"


def _texts_of(exc: BaseException) -> list[str]:
    """str and repr of an exception and of everything chained to it."""
    out: list[str] = []
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        out += [str(e), repr(e), *(repr(a) for a in e.args)]
        todo += [e.__cause__, e.__context__]
    return out


@pytest.mark.slow
async def test_credentials_stay_out_of_reprs_errors_logs_and_tool_output(
        amqp_url: str, caplog: pytest.LogCaptureFixture) -> None:
    """The console, an agent, the management-broker role and the tools, with a
    distinctive password in the URL, through success, a wrong password, an unreachable
    broker and a connection closed by the broker, with DEBUG logging: the password (as
    is and percent-encoded) is in no repr, exception text, log record or tool output."""
    import logging

    caplog.set_level(logging.DEBUG)
    user = f"qmf-leak-{uuid.uuid4().hex[:8]}"
    texts: list[str] = []
    with private_vhost(amqp_url, "qmf-leak") as base:
        vhost = base.rsplit("/", 1)[-1]
        if vhost == amqp_url.rsplit("/", 1)[-1]:
            pytest.skip("no private vhost (rabbitmqctl could not make one)")
        host = base.split("@", 1)[1].split("/", 1)[0]
        good = f"amqp://{user}:{quote(SECRET, safe='')}@{host}/{vhost}"
        bad = f"amqp://{user}:{quote(WRONG, safe='')}@{host}/{vhost}"
        unreachable = f"amqp://{user}:{quote(SECRET, safe='')}@127.0.0.1:1/{vhost}"
        qpid_form = f"{user}/{SECRET}@127.0.0.1:1"  # the qpid tools' address form
        with rabbit_user(user, SECRET, vhost=unquote(vhost)):
            # success, then the broker closes every connection of the user
            async with ManagementBroker(good, interval=0.5,
                                        transport_factory=AiormqTransport) as role, \
                    guarded_agent(good, {user}, []) as agent, \
                    Session.connect(good, manage_connections=True, timeout=10.0,
                                    _transport_factory=AiormqTransport) as session:
                broker = session.brokers[0]
                texts += [repr(session), repr(broker), str(broker), repr(role),
                          repr(agent), repr(agent._runtime), repr(broker.transport)]
                obj = await wait_until(
                    lambda: session.get_objects(_class="counter", _package=PKG, _timeout=5.0),
                    timeout=15.0, interval=0.2, message="the counter")
                texts += [repr(obj[0]), str(obj[0])]
                rabbitmqctl("close_all_user_connections", user, "qmf-async leak test")
                await wait_until(lambda: not broker.connected, timeout=10.0,
                                 message="the session noticing the closed connection")
                await wait_until(lambda: broker.connected, timeout=15.0,
                                 message="the session reconnecting")
                texts += [repr(broker), repr(broker.transport)]
            # wrong password, unreachable broker (URL and qpid forms)
            for url in (bad, unreachable, qpid_form):
                with pytest.raises(TransportError) as caught:
                    await connected(url)
                texts += _texts_of(caught.value)
                failing = Agent(url, reconnect=False, connect_timeout=5.0,
                                transport_factory=AiormqTransport)
                texts.append(repr(failing))
                with pytest.raises(TransportError) as caught:
                    await failing.start()
                texts += _texts_of(caught.value)
                with pytest.raises(QmfError) as caught:  # the role takes amqp:// URLs only
                    async with ManagementBroker(url, connect_timeout=5.0,
                                                transport_factory=AiormqTransport):
                        pass
                texts += _texts_of(caught.value)
            for url in (good, bad, unreachable, qpid_form):
                for argv in (["events", "-b", url, "--duration", "0.3"],
                             ["stat", "-b", url, "--timeout", "3", "--discover", "0.3"]):
                    rc, out, err = await asyncio.to_thread(run_tool, argv)
                    texts += [out, err]
                    if url is good:  # connected (stat finds no management broker: 7)
                        assert rc not in (2, 3, 4), (argv, out, err)
                    else:
                        assert rc in (3, 4), (argv, rc, out, err)
    formatter = logging.Formatter()
    records = caplog.records
    assert records, "nothing was logged at DEBUG"
    for record in records:
        texts.append(record.getMessage())
        if record.exc_info:
            texts.append(formatter.formatException(record.exc_info))
    for secret in (SECRET, WRONG):
        for form in {secret, quote(secret, safe=""), quote(secret)}:
            leaks = [t for t in texts if form in t]
            assert not leaks, f"{form!r} found in: {leaks[:3]}"


# --------------------------------------------------------------------------- qpidd SSL


class QpiddSsl:
    """A qpidd with an SSL listener (certificate for localhost only, from the test CA)
    and, when ``require_client_cert``, ``--ssl-require-client-authentication``."""

    def __init__(self, broker: Qpidd, ssl_port: int, pki: Pki) -> None:
        self.broker = broker
        self.port = ssl_port
        self.pki = pki

    def url(self, *, host: str = "localhost", credentials: str = "") -> str:
        return f"amqps://{credentials}{host}:{self.port}/"


def _start_qpidd_ssl(root: Path, pki: Pki, *, require_client_cert: bool) -> QpiddSsl:
    if qpidd_home() is None:
        pytest.skip("qpidd not found (../shared/qpidd or QPIDD_HOME)")
    try:
        server = pki.issue("qpidd", "localhost", "DNS:localhost", "serverAuth")
        db, password = nss_database(pki, server, root / "nss")
    except RabbitTlsError as exc:
        pytest.skip(f"no NSS database for qpidd's SSL listener: {exc}")
    port = free_port()
    extra = ["--ssl-port", str(port), "--ssl-cert-db", db, "--ssl-cert-name", "qpidd-server",
             "--ssl-cert-password-file", password]
    if require_client_cert:
        extra.append("--ssl-require-client-authentication")
    try:
        broker = Qpidd.start(qmf1=False, directory=root / "qpidd", extra=extra)
    except QpiddError as exc:
        pytest.skip(f"qpidd with an SSL listener did not start: {exc}")
    return QpiddSsl(broker, port, pki)


@pytest.fixture(scope="module")
def qpidd_pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    if shutil.which("openssl") is None:
        pytest.skip("no openssl command to make test certificates")
    return Pki(tmp_path_factory.mktemp("qpidd-pki"))


@pytest.fixture(scope="module")
def qpidd_ssl(qpidd_pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[QpiddSsl]:
    listener = _start_qpidd_ssl(tmp_path_factory.mktemp("qpidd-ssl"), qpidd_pki,
                                require_client_cert=False)
    yield listener
    listener.broker.stop()


async def qpidd_connected(url: str, **kw: Any) -> Session:
    """A QMF session over AMQP 1.0 that finds qpidd's broker object (then closes)."""
    async with Session.connect(url, timeout=10.0, _transport_factory=NativeAmqp10Transport,
                               **kw) as session:
        (broker,) = await session.get_objects(_class="broker", _timeout=10.0)
        assert broker.name
        return session


async def test_qpidd_ssl_is_verified_against_the_given_ca(qpidd_ssl: QpiddSsl) -> None:
    await qpidd_connected(qpidd_ssl.url(), tls=TlsOptions(cafile=qpidd_ssl.pki.ca[0]))


async def test_qpidd_ssl_unknown_ca_and_wrong_host_name(qpidd_ssl: QpiddSsl) -> None:
    """Verification on by default (system CAs), another CA, and 127.0.0.1 with a
    certificate for localhost: one line each; verify_hostname=False lets the last in."""
    ca = qpidd_ssl.pki.ca[0]
    for url, tls in ((qpidd_ssl.url(), None),
                     (qpidd_ssl.url(), TlsOptions(cafile=qpidd_ssl.pki.selfsigned[0])),
                     (qpidd_ssl.url(host="127.0.0.1"), TlsOptions(cafile=ca))):
        with pytest.raises(TransportError) as caught:
            await qpidd_connected(url, tls=tls)
        text = str(caught.value)
        assert "certificate verify failed" in text and "\n" not in text, text
    await qpidd_connected(qpidd_ssl.url(host="127.0.0.1"),
                          tls=TlsOptions(cafile=ca, verify_hostname=False))


async def test_qpidd_plain_over_ssl_and_no_external(qpidd_ssl: QpiddSsl) -> None:
    """SASL PLAIN inside TLS logs in.  This qpidd build has no SASL library (``--auth
    no``): it offers ANONYMOUS and PLAIN only and does not check PLAIN's password
    (qpid-cpp's NullSaslServer), so EXTERNAL cannot log in there: one clear line."""
    pki = qpidd_ssl.pki
    tls = TlsOptions(cafile=pki.ca[0])
    await qpidd_connected(qpidd_ssl.url(credentials="alice:alice-pw@"), tls=tls,
                          sasl_mechanisms="PLAIN")
    await qpidd_connected(qpidd_ssl.url(credentials="alice:not-her-password@"), tls=tls,
                          sasl_mechanisms="PLAIN")  # accepted: nothing is checked
    with pytest.raises(AuthenticationError) as caught:
        await qpidd_connected(qpidd_ssl.url(), sasl_mechanisms="EXTERNAL",
                              tls=TlsOptions(cafile=pki.ca[0], certfile=pki.client[0],
                                             keyfile=pki.client[1]))
    text = str(caught.value)
    assert "client certificate (EXTERNAL)" in text and "\n" not in text, text


async def test_qpidd_requires_a_client_certificate(qpidd_pki: Pki, tmp_path: Path) -> None:
    """``--ssl-require-client-authentication``: the TLS handshake needs a certificate
    from the CA; with one, the QMF session works (the login itself is ANONYMOUS)."""
    listener = _start_qpidd_ssl(tmp_path, qpidd_pki, require_client_cert=True)
    try:
        pki = qpidd_pki
        await qpidd_connected(listener.url(), tls=TlsOptions(
            cafile=pki.ca[0], certfile=pki.client[0], keyfile=pki.client[1]))
        with pytest.raises(TransportError):
            await qpidd_connected(listener.url(), tls=TlsOptions(cafile=pki.ca[0]))
    finally:
        listener.broker.stop()


async def test_tools_over_the_qpidd_ssl_listener(qpidd_ssl: QpiddSsl) -> None:
    pki = qpidd_ssl.pki
    rc, out, err = await asyncio.to_thread(run_tool, [
        "events", "-b", qpidd_ssl.url(), "--ssl-trustfile", pki.ca[0], "--duration", "0.3",
        "--quiet"])
    assert rc == 0, (out, err)
    rc, out, err = await asyncio.to_thread(run_tool, [
        "stat", "-b", qpidd_ssl.url(), "--ssl-trustfile", pki.ca[0], "-g", "--timeout", "5"])
    assert rc == 0 and "uptime" in out.lower(), (out, err)
    rc, out, err = await asyncio.to_thread(run_tool, [
        "events", "-b", qpidd_ssl.url(host="127.0.0.1"), "--ssl-trustfile", pki.ca[0],
        "--duration", "0.3"])
    assert rc == 3 and len(err.strip().splitlines()) == 1, (rc, out, err)
    assert "certificate verify failed" in err


async def test_qpidd_without_authentication_passes_any_user_id(qpidd_ssl: QpiddSsl) -> None:
    """What the authorization hook can trust on qpidd: with ``--auth no`` qpidd checks
    no user id (qpid-cpp verifies it only when authenticating), so a caller that
    writes someone else's user id reaches the hook under that name."""
    seen: list[tuple[str | None, str]] = []
    pki = qpidd_ssl.pki
    tls = TlsOptions(cafile=pki.ca[0])

    async def authorize(user: str | None, obj: ManagedObject, method: str, args: Any) -> bool:
        seen.append((user, method))
        return user == "alice"

    agent = Agent(qpidd_ssl.url(), tls=tls, label=f"authz-{uuid.uuid4().hex[:8]}",
                  schemas=[COUNTER], interval=0.5, transport_factory=NativeAmqp10Transport,
                  qmf_versions=(2,), authorize=authorize)
    agent.create_object("counter", name="guarded", count=0)

    @agent.method("counter", "add")
    def add(obj: ManagedObject, amount: int) -> dict[str, int]:
        obj.inc("count", amount)
        return {"total": obj["count"]}

    async with agent:
        core = agent.protocol_v2
        assert core is not None and agent.v2_name is not None
        link = NativeAmqp10Transport(qpidd_ssl.url(), tls=tls)
        await link.connect(10.0)
        try:
            driver = Driver(link)
            await driver.open()
            oid = core.object_id(f"{PKG}:counter:guarded")
            answers = []
            for claimed in ("alice", None):
                out = driver.core.send_method(agent.v2_name, oid, "add", {"amount": 5})
                await link.publish(out.body, exchange=out.exchange, routing_key=out.key,
                                   reply_to=driver.reply, correlation_id=out.correlation_id,
                                   headers=out.headers, user_id=claimed)
                assert out.correlation_id is not None
                answers.append(await driver.answer(out.correlation_id))
        finally:
            await link.close()
    assert seen == [("alice", "add"), (None, "add")]
    assert isinstance(answers[0], Reply) and isinstance(answers[0].message, V2MethodResponse)
    assert answers[0].message.arguments == {"total": 5}
    failed = answers[1]
    assert isinstance(failed, Reply) and isinstance(failed.message, V2Exception), failed
    assert failed.message.error_code == 6, failed
    assert "not authorized: a caller without a user id" in failed.message.error_text
