"""The classic addBroker's TLS arguments (``ssl_trustfile``, ``ssl_certfile``,
``ssl_keyfile``, ``ssl_skip_hostname_check``) against the AMQP 1.0 test peer with
certificates made by the test: the server is verified, unlike the classic console."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from .conftest import PROTON_PEER_REASON

pytest.importorskip("proton", reason=PROTON_PEER_REASON)

from qmf_async import TransportError

from .amqp10_peer import Amqp10Peer, Pki

pytestmark = pytest.mark.proton_peer

@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    if shutil.which("openssl") is None:
        pytest.skip("no openssl command to make test certificates")
    return Pki(Path(tmp_path_factory.mktemp("pki")))


def _connect(url: str, **tls: object) -> BaseException | None:
    from qmf.console import Session
    sess = Session(timeout=2)
    try:
        sess.addBroker(url, timeout=2, **tls)
    except Exception as exc:  # the peer is no QMF broker: what counts is the login
        return exc
    finally:
        sess.close()
    return None


async def test_an_unknown_ca_is_refused(pki: Pki) -> None:
    async with Amqp10Peer(ssl_context=pki.server_context()) as peer:
        url = peer.url(scheme="amqps", host="localhost")
        exc = await asyncio.to_thread(_connect, url)
    assert isinstance(exc, TransportError) and "certificate verify failed" in str(exc)
    assert peer.sasl_log == []


async def test_client_certificate_login_with_the_classic_arguments(pki: Pki) -> None:
    async with Amqp10Peer(mechanisms=["EXTERNAL"],
                          ssl_context=pki.server_context(client_certs=True)) as peer:
        url = peer.url(scheme="amqps", host="localhost")
        await asyncio.to_thread(_connect, url, ssl_trustfile=pki.ca[0],
                                ssl_certfile=pki.client[0], ssl_keyfile=pki.client[1],
                                mechanisms="EXTERNAL")
    assert ("EXTERNAL", "qmf-client", True) in peer.sasl_log


async def test_the_hostname_check_can_be_skipped(pki: Pki) -> None:
    async with Amqp10Peer(ssl_context=pki.server_context("other")) as peer:
        url = peer.url(scheme="amqps", host="localhost")
        strict = await asyncio.to_thread(_connect, url, ssl_trustfile=pki.ca[0])
        assert isinstance(strict, TransportError) and "hostname" in str(strict).lower()
        assert peer.sasl_log == []
        await asyncio.to_thread(_connect, url, ssl_trustfile=pki.ca[0],
                                ssl_skip_hostname_check=True)
        assert peer.sasl_log  # the TLS handshake passed and the login began
