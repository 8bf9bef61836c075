"""The qpid tools' TLS and SASL flags on every ``qmf`` tool, down to the wire.

Against the AMQP 1.0 test peer (``tests/amqp10_peer.py``) with certificates made by the
test: ``--ssl-certificate/--ssl-key/--ssl-trustfile`` with ``--sasl-mechanism EXTERNAL``
log in with the client certificate; a CA the tool is not told about fails verification
in one line.  Against the real RabbitMQ: ``--sasl-mechanism PLAIN`` logs in, and a
mechanism RabbitMQ does not offer is one clear authentication error (exit 4).  The
flags are parsed the same way by every tool, the role, the demo agent and the dashboard.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from qmf_async.errors import UsageError
from qmf_async.transport import (
    NativeAmqp10Transport,
    TlsOptions,
    add_connection_arguments,
    connection_arguments,
    sasl_mechanism_list,
    url_heartbeat,
    with_heartbeat,
)
from qmf_async.transport._aiormq import AiormqTransport

from .conftest import need_proton
from .pki import Pki

ROOT = Path(__file__).resolve().parent.parent


def _peer() -> Any:
    """``Amqp10Peer`` (tests/amqp10_peer.py, on proton: the proton_peer tier only)."""
    need_proton()
    from .amqp10_peer import Amqp10Peer

    return Amqp10Peer

#: a command line of each tool that connects, with what makes it stop quickly
TOOLS = {
    "events": ["events", "--duration", "0.3", "--quiet"],
    "stat": ["stat", "--timeout", "2", "--discover", "0.5"],
    "config": ["config", "--timeout", "2", "--discover", "0.5", "queues"],
    "queue-stats": ["queue-stats", "--timeout", "2", "--discover", "0.5", "--count", "1"],
    "collect": ["collect", "--duration", "0.3", "--quiet", "--out", "{tmp}"],
}


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    if shutil.which("openssl") is None:
        pytest.skip("no openssl command to make test certificates")
    return Pki(Path(tmp_path_factory.mktemp("pki")))


async def run_tool(argv: list[str]) -> tuple[int, str, str]:
    """``qmf ARGV`` as a process (the tools set up the process's logging their way)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "qmf_async", *argv, cwd=ROOT,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        out, err = await asyncio.wait_for(proc.communicate(), 60)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


# --------------------------------------------------------------------------- parsing


def test_flags_become_tls_options_and_mechanisms() -> None:
    parser = argparse.ArgumentParser()
    add_connection_arguments(parser)
    args = parser.parse_args(["--ssl-certificate", "c.pem", "--ssl-key", "k.pem",
                              "--ssl-trustfile", "ca.pem", "--ssl-skip-hostname-check",
                              "--sasl-mechanism", "external plain", "--ha-admin",
                              "--sasl-service-name", "qpidd"])
    assert connection_arguments(args) == {
        "tls": TlsOptions(cafile="ca.pem", certfile="c.pem", keyfile="k.pem",
                          verify_hostname=False),
        "sasl_mechanisms": ("EXTERNAL", "PLAIN")}
    assert connection_arguments(parser.parse_args([])) == {"tls": None, "sasl_mechanisms": None}
    with pytest.raises(UsageError, match="--ssl-key needs --ssl-certificate"):
        connection_arguments(parser.parse_args(["--ssl-key", "k.pem"]))
    with pytest.raises(UsageError, match="not a SASL mechanism"):
        connection_arguments(parser.parse_args(["--sasl-mechanism", "PL@IN"]))


@pytest.mark.parametrize("value, expected", [
    ("PLAIN", ("PLAIN",)), ("external, plain", ("EXTERNAL", "PLAIN")),
    (["ANONYMOUS"], ("ANONYMOUS",)), (None, None)])
def test_mechanism_lists(value: object, expected: object) -> None:
    assert sasl_mechanism_list(value) == expected  # type: ignore[arg-type]


def test_empty_mechanism_list_is_refused() -> None:
    with pytest.raises(UsageError, match="no SASL mechanism"):
        sasl_mechanism_list(" ")


@pytest.mark.parametrize("command", [
    [sys.executable, "-m", "qmf_async.agent.broker", "--help"],
    [sys.executable, str(ROOT / "examples" / "demo_agent.py"), "--help"],
    [sys.executable, str(ROOT / "examples" / "web_dashboard" / "app.py"), "--help"],
    *([sys.executable, "-m", "qmf_async", tool, "--help"]
      for tool in ("stat", "config", "events", "queue-stats", "collect", "shell", "repl",
                   "route")),
])
def test_every_program_takes_the_flags(command: list[str]) -> None:
    import subprocess
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    for flag in ("--ssl-certificate", "--ssl-key", "--ssl-trustfile", "--ha-admin",
                 "--sasl-service-name"):
        assert flag in done.stdout, (command, flag)
    sasl = "--client-sasl-mechanism" if "route" in command else "--sasl-mechanism"
    assert sasl in done.stdout


def test_heartbeat_in_the_url() -> None:
    url = with_heartbeat("guest/guest@localhost:5673", 5)
    assert url_heartbeat(url) == 5.0
    assert url_heartbeat(with_heartbeat(url, 7)) == 7.0  # replaced, not added
    assert url_heartbeat("amqp://localhost/") is None
    with pytest.raises(UsageError, match="heartbeat"):
        url_heartbeat("amqp://localhost/?heartbeat=soon")
    # AMQP 1.0: an idle timeout of twice the heartbeat (proton announces half of it)
    assert NativeAmqp10Transport(url)._idle == 10.0
    assert NativeAmqp10Transport("amqp://localhost/")._idle == 30.0


# --------------------------------------------------------------------------- TLS, AMQP 1.0


@pytest.mark.proton_peer
@pytest.mark.parametrize("tool", sorted(TOOLS))
async def test_external_login_with_a_client_certificate(pki: Pki, tool: str,
                                                        tmp_path: Path) -> None:
    ctx = pki.server_context(client_certs=True)
    async with _peer()(mechanisms=["EXTERNAL"], ssl_context=ctx) as peer:
        argv = [word.replace("{tmp}", str(tmp_path / "ds")) for word in TOOLS[tool]]
        argv += ["-b", peer.url(scheme="amqps", host="localhost"),
                 "--ssl-certificate", pki.client[0], "--ssl-key", pki.client[1],
                 "--ssl-trustfile", pki.ca[0], "--sasl-mechanism", "EXTERNAL"]
        rc, _out, err = await run_tool(argv)
        # the peer is no QMF agent: what counts is that the login went through
        assert rc not in (3, 4), err
        assert ("EXTERNAL", "qmf-client", True) in peer.sasl_log, (rc, err)


@pytest.mark.proton_peer
async def test_unknown_ca_is_one_line_and_exit_3(pki: Pki) -> None:
    async with _peer()(ssl_context=pki.server_context()) as peer:
        rc, out, err = await run_tool([
            "stat", "-b", peer.url(scheme="amqps", host="localhost"), "--timeout", "3"])
    assert rc == 3, err
    assert out == "" and len(err.strip().splitlines()) == 1, err
    assert "certificate verify failed" in err
    assert peer.sasl_log == []


@pytest.mark.proton_peer
async def test_hostname_check_can_be_skipped(pki: Pki) -> None:
    async with _peer()(ssl_context=pki.server_context("other")) as peer:
        url = peer.url(scheme="amqps", host="localhost")
        strict = await run_tool([
            "events", "-b", url, "--ssl-trustfile", pki.ca[0], "--duration", "0.2"])
        assert strict[0] == 3 and "hostname" in strict[2].lower(), strict
        relaxed = await run_tool([
            "events", "-b", url, "--ssl-trustfile", pki.ca[0], "--ssl-skip-hostname-check",
            "--duration", "0.2", "--quiet"])
        assert relaxed[0] == 0, relaxed


async def test_tls_flags_on_a_plain_address_are_a_usage_error(pki: Pki) -> None:
    rc, _out, err = await run_tool([
        "stat", "-b", "127.0.0.1:1", "--ssl-trustfile", pki.ca[0]])
    assert rc == 2 and "amqps://" in err, err


# --------------------------------------------------------------------------- RabbitMQ


@pytest.mark.integration
async def test_plain_and_a_refused_mechanism_on_rabbitmq(amqp_url: str) -> None:
    ok = await run_tool([
        "events", amqp_url, "--sasl-mechanism", "PLAIN", "--duration", "0.2", "--quiet"])
    assert ok[0] == 0, ok
    rc, out, err = await run_tool([
        "events", amqp_url, "--sasl-mechanism", "EXTERNAL", "--duration", "0.2"])
    assert rc == 4, err
    assert out == "" and len(err.strip().splitlines()) == 1, err
    assert "SASL mechanism EXTERNAL is not available" in err and "PLAIN" in err, err
    assert "guest" not in err.replace("guest@", "")  # no password in the message


@pytest.mark.integration
async def test_heartbeat_reaches_rabbitmq(amqp_url: str) -> None:
    transport = AiormqTransport(with_heartbeat(amqp_url, 5))
    await transport.connect(10.0)
    try:
        conn = transport._conn
        assert conn is not None
        assert conn.connection_tune.heartbeat == 5
    finally:
        await transport.close()
