"""``qmf exporter --web.config.file``: the exporter-toolkit web configuration (TLS,
client certificates, basic auth with bcrypt, headers).

The file's checks (a bad file: one line, exit code 2), the server itself with the
certificates of tests/pki.py (a wrong password: 401; no client certificate, or one of
another CA, or a SAN not allowed: the TLS handshake refused), and a real Prometheus
(Debian's, ``scripts/prometheus.sh``) scraping ``qmf exporter`` on a genuine qpidd over
TLS with a client certificate and basic auth, beside two jobs it refuses: a wrong
password and no client certificate.
"""

from __future__ import annotations

import asyncio
import base64
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from qmf_async.exporter import WebConfig, WebConfigError, load_web_config, serve_metrics
from qmf_async.exporter._webconfig import parse_web_config

from .conftest import _unavailable
from .pki import Pki
from .prometheus_server import ExporterProcess, Prometheus, prometheus_binaries
from .qpidd import ROOT, Qpidd

bcrypt = pytest.importorskip("bcrypt")
pytest.importorskip("yaml")
pytest.importorskip("prometheus_client")

USER, PASSWORD = "prometheus", "s3cret-scrape-password"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    found = Pki(tmp_path_factory.mktemp("pki"))
    found.stranger = found._self_signed("stranger", "qmf-client", ca=False,
                                        san="DNS:qmf-client")
    found.other_client = found.issue("other-client", "someone", "DNS:someone",
                                     "clientAuth")
    return found


@pytest.fixture(scope="module")
def hashed() -> str:
    # cost 4: quick; $2y$ is what htpasswd -B writes (the same algorithm as $2b$)
    return str(bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(4)).decode()) \
        .replace("$2b$", "$2y$", 1)


def _config(pki: Pki, hashed: str, **tls: Any) -> str:
    lines = ["tls_server_config:", f"  cert_file: {pki.server[0]}",
             f"  key_file: {pki.server[1]}", f"  client_ca_file: {pki.ca[0]}",
             "  client_auth_type: RequireAndVerifyClientCert"]
    lines += [f"  {k}: {v}" for k, v in tls.items()]
    lines += ["http_server_config:", "  headers:", "    X-Frame-Options: deny",
              "    Strict-Transport-Security: max-age=31536000",
              "basic_auth_users:", f"  {USER}: '{hashed}'", ""]
    return "\n".join(lines)


# --------------------------------------------------------------------------- the file


def test_a_missing_or_empty_file(tmp_path: Path) -> None:
    with pytest.raises(WebConfigError, match=r"cannot read .*nope\.yml"):
        load_web_config(tmp_path / "nope.yml")
    empty = tmp_path / "empty.yml"
    empty.write_text("")
    assert load_web_config(empty) == WebConfig()
    plain = parse_web_config("http_server_config:\n  http2: false\n", tmp_path)
    assert plain.tls is None and plain.scheme == "http" and not plain.http2


def test_relative_files_are_relative_to_the_config(pki: Pki, hashed: str) -> None:
    root = Path(pki.ca[0]).parent
    config = root / "web.yml"
    config.write_text(f"tls_server_config:\n  cert_file: {Path(pki.server[0]).name}\n"
                      f"  key_file: {Path(pki.server[1]).name}\n"
                      f"basic_auth_users:\n  {USER}: '{hashed}'\n")
    loaded = load_web_config(config)
    assert loaded.scheme == "https" and set(loaded.users) == {USER}


@pytest.mark.parametrize(("text", "error"), [
    ("tls_server_config: [", "not YAML"),
    ("- a\n- b\n", "the file must be a mapping"),
    ("tls_config:\n  cert_file: x\n", "unknown key 'tls_config' in the file"),
    ("tls_server_config:\n  cert_fil: x\n", "unknown key 'cert_fil' in tls_server_config"),
    ("http_server_config:\n  headers:\n    X-Powered-By: me\n", "unknown key 'X-Powered-By'"),
    ("http_server_config:\n  headers:\n    X-Frame-Options: allow\n", "not one of deny"),
    ("http_server_config:\n  http2: maybe\n", "must be true or false"),
    ("basic_auth_users:\n  u: plaintext\n", "basic_auth_users.u: not a bcrypt hash"),
    ("basic_auth_users:\n  u: '$2y$10$x'\n  u: '$2y$10$y'\n", "key 'u' given twice"),
    ("rate_limit:\n  interval: 1s\n  burst: 2\n", "rate_limit is not supported"),
    ("tls_server_config:\n  key_file: {key}\n", "missing one of cert or cert_file"),
    ("tls_server_config:\n  cert_file: {cert}\n", "missing one of key or key_file"),
    ("tls_server_config:\n  cert_file: /nonexistent.pem\n  key_file: {key}\n",
     "cannot load the certificate and key"),
    ("tls_server_config:\n  cert_file: {ca}\n  key_file: {key}\n",
     "cannot load the certificate and key"),  # a key that is not the certificate's
    ("{tls}  client_ca_file: {ca}\n", "client CAs are given without a client_auth_type"),
    ("{tls}  client_auth_type: RequireAndVerifyClientCert\n", "needs client_ca_file"),
    ("{tls}  client_auth_type: RequireAnyClientCert\n", "is not supported"),
    ("{tls}  client_auth_type: Sometimes\n", "unknown 'Sometimes'"),
    ("{tls}  client_ca_file: /nonexistent.pem\n  client_auth_type: VerifyClientCertIfGiven\n",
     "cannot load the client CAs"),
    ("{tls}  client_allowed_sans: [a]\n  client_ca_file: {ca}\n"
     "  client_auth_type: VerifyClientCertIfGiven\n", "needs client_auth_type Require"),
    ("{tls}  min_version: TLS14\n", "unknown 'TLS14'"),
    ("{tls}  min_version: TLS13\n  max_version: TLS12\n", "min_version is above"),
    ("{tls}  cipher_suites: [TLS_INVENTED_WITH_NOTHING]\n", "unknown cipher"),
    ("{tls}  curve_preferences: [CurveP999]\n", "unknown curve"),
    ("{tls}  cert: inline\n", "give cert or cert_file, not both"),
])
def test_a_bad_file_is_one_clear_error(pki: Pki, text: str, error: str) -> None:
    tls = f"tls_server_config:\n  cert_file: {pki.server[0]}\n  key_file: {pki.server[1]}\n"
    text = text.format(tls=tls, cert=pki.server[0], key=pki.server[1], ca=pki.ca[0])
    with pytest.raises(WebConfigError) as caught:
        parse_web_config(text, Path(pki.ca[0]).parent)
    message = str(caught.value)
    assert error in message and "\n" not in message, message


def test_every_documented_tls_key(pki: Pki, hashed: str) -> None:
    inline = Path(pki.server[0]).read_text(), Path(pki.server[1]).read_text()
    text = ("tls_server_config:\n"
            "  cert: |\n" + "".join(f"    {line}\n" for line in inline[0].splitlines())
            + "  key: |\n" + "".join(f"    {line}\n" for line in inline[1].splitlines())
            + "  client_ca: |\n"
            + "".join(f"    {line}\n" for line in Path(pki.ca[0]).read_text().splitlines())
            + "  client_auth_type: RequireAndVerifyClientCert\n"
              "  client_allowed_sans: [qmf-client]\n"
              "  min_version: TLS12\n  max_version: TLS13\n"
              "  cipher_suites: [TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, "
              "TLS_AES_128_GCM_SHA256]\n"
              "  prefer_server_cipher_suites: false\n"
              "  curve_preferences: [CurveP256, X25519]\n"
              "http_server_config:\n  http2: true\n  headers:\n"
              "    X-Content-Type-Options: nosniff\n    Content-Security-Policy: ''\n")
    loaded = parse_web_config(text, Path(pki.ca[0]).parent)
    assert loaded.tls is not None and loaded.tls.allowed_sans == ("qmf-client",)
    assert loaded.headers == (("X-Content-Type-Options", "nosniff"),)  # blank: unset


def test_the_command_exits_2_with_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "web.yml"
    bad.write_text("tls_server_config:\n  certfile: server.pem\n")
    for path in (bad, tmp_path / "missing.yml"):
        done = subprocess.run(
            [sys.executable, "-m", "qmf_async.tools.cli", "exporter", "--listen",
             "127.0.0.1:0", "-b", "127.0.0.1:1", "--web.config.file", str(path)],
            capture_output=True, text=True, timeout=60, cwd=ROOT)
        assert done.returncode == 2, done
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(
            f"qmf exporter: error: --web.config.file {path}: "), done.stderr


# --------------------------------------------------------------------------- the server


def _client(pki: Pki, cert: tuple[str, str] | None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=pki.ca[0])
    if cert is not None:
        ctx.load_cert_chain(*cert)
    return ctx


async def _get(port: int, ctx: ssl.SSLContext | None, authorization: str | None
               ) -> tuple[int, bytes, bytes]:
    """(status, head, body) of GET /metrics; raises what the TLS handshake raises."""
    reader, writer = await asyncio.wait_for(asyncio.open_connection(
        "127.0.0.1", port, ssl=ctx, server_hostname="localhost" if ctx else None), 10)
    try:
        auth = f"Authorization: {authorization}\r\n" if authorization else ""
        writer.write(f"GET /metrics HTTP/1.1\r\nHost: x\r\n{auth}\r\n".encode())
        answer = await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()
    if not answer:
        raise ConnectionResetError("the server closed the connection without an answer")
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split()[1]), head, body


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


async def test_tls_client_certificates_and_basic_auth(pki: Pki, hashed: str) -> None:
    root = Path(pki.ca[0]).parent
    config = parse_web_config(_config(pki, hashed), root)
    server = await serve_metrics(lambda: b"x_total 1\n", "127.0.0.1", 0, web_config=config)
    port = server.address[1]
    good = _client(pki, pki.client)
    try:
        assert server.scheme == "https"
        status, head, body = await _get(port, good, _basic(USER, PASSWORD))
        assert (status, body) == (200, b"x_total 1\n")
        assert b"X-Frame-Options: deny" in head and b"Strict-Transport-Security" in head
        # wrong credentials: 401 with a Basic challenge (the answer is cached: twice)
        for authorization in (_basic(USER, "wrong"), _basic(USER, "wrong"),
                              _basic("nobody", PASSWORD), _basic(USER, PASSWORD + "x"),
                              "Basic !!!not-base64", f"Bearer {PASSWORD}", None):
            status, head, _ = await _get(port, good, authorization)
            assert status == 401, authorization
            assert b'WWW-Authenticate: Basic realm="qmf exporter"' in head
        # no client certificate, or one of another CA: the handshake is refused
        for cert in (None, pki.stranger):
            with pytest.raises((ssl.SSLError, ConnectionError)):
                await _get(port, _client(pki, cert), _basic(USER, PASSWORD))
        # plain HTTP on the TLS port gets nothing
        with pytest.raises((ConnectionError, ValueError, IndexError)):
            await _get(port, None, _basic(USER, PASSWORD))
        # and the right one still works after all that
        assert (await _get(port, good, _basic(USER, PASSWORD)))[0] == 200
    finally:
        await server.close()


async def test_client_allowed_sans(pki: Pki, hashed: str) -> None:
    config = parse_web_config(_config(pki, hashed, client_allowed_sans="[qmf-client]"),
                              Path(pki.ca[0]).parent)
    server = await serve_metrics(lambda: b"x_total 1\n", "127.0.0.1", 0, web_config=config)
    try:
        port = server.address[1]
        assert (await _get(port, _client(pki, pki.client), _basic(USER, PASSWORD)))[0] == 200
        # from the same CA, but its SAN is not on the list
        with pytest.raises((ssl.SSLError, ConnectionError)):
            await _get(port, _client(pki, pki.other_client),
                       _basic(USER, PASSWORD))
    finally:
        await server.close()


async def test_a_client_stalled_in_the_handshake_holds_no_one_up(pki: Pki,
                                                                 hashed: str) -> None:
    config = parse_web_config(_config(pki, hashed), Path(pki.ca[0]).parent)
    server = await serve_metrics(lambda: b"x_total 1\n", "127.0.0.1", 0, web_config=config)
    try:
        port = server.address[1]
        _, silent = await asyncio.open_connection("127.0.0.1", port)  # sends no ClientHello
        try:
            status = (await _get(port, _client(pki, pki.client), _basic(USER, PASSWORD)))[0]
            assert status == 200
        finally:
            silent.close()
    finally:
        await server.close()


def test_basic_auth_without_tls_works_and_warns(tmp_path: Path, hashed: str) -> None:
    config = tmp_path / "web.yml"
    config.write_text(f"basic_auth_users:\n  {USER}: '{hashed}'\n")
    exporter = ExporterProcess("-b", "guest/bus-password-x9@127.0.0.1:1",
                               "--web.config.file", str(config))
    try:
        url = f"http://{exporter.target}/metrics"
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(url, timeout=10)
        assert refused.value.code == 401
        request = urllib.request.Request(url, headers={"Authorization": _basic(USER, PASSWORD)})
        with urllib.request.urlopen(request, timeout=10) as answer:
            body = answer.read()
            assert answer.status == 200 and b"qpidd_up" in body
            assert b"bus-password-x9" not in body  # its broker credentials never show
    finally:
        err = exporter.stop()
    assert "warning: basic auth without TLS" in err, err


# --------------------------------------------------------------------------- Prometheus


@pytest.fixture(scope="module")
def binaries() -> tuple[str, str]:
    found = prometheus_binaries()
    if found is None:
        _unavailable("prometheus/promtool not found (bash scripts/prometheus.sh installs them)")
    return found


def _job(name: str, target: str, pki: Pki, *, cert: bool, password: str) -> str:
    client = (f"        cert_file: {pki.client[0]}\n        key_file: {pki.client[1]}\n"
              if cert else "")
    return (f"  - job_name: {name}\n    scrape_timeout: 1s\n    scheme: https\n"
            f"    tls_config:\n        ca_file: {pki.ca[0]}\n{client}"
            f"    basic_auth:\n        username: {USER}\n        password: {password}\n"
            f"    static_configs:\n      - targets: ['{target}']\n")


@pytest.fixture(scope="module")
def scraped(pki: Pki, hashed: str, binaries: tuple[str, str], qpidd_stock: Qpidd,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("web")
    config = root / "web.yml"
    config.write_text(_config(pki, hashed))
    exporter = ExporterProcess("-b", qpidd_stock.address, "--tick", "0.2",
                               "--web.config.file", str(config))
    try:
        jobs = (_job("tls", exporter.target, pki, cert=True, password=PASSWORD)
                + _job("wrong-password", exporter.target, pki, cert=True, password="nope")
                + _job("no-client-cert", exporter.target, pki, cert=False, password=PASSWORD))
        # the default job scrapes plain HTTP: refused as well
        prom = Prometheus(binaries[0], root / "prom", [exporter.target], job="plain",
                          jobs=jobs)
        try:
            yield {"prom": prom, "broker": qpidd_stock.address, "exporter": exporter}
        finally:
            prom.stop()
    finally:
        exporter.stop()


def _poll(check: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout}s (last {value!r})")
        time.sleep(0.25)


@pytest.mark.qpidd
def test_prometheus_scrapes_over_tls_with_basic_auth(scraped: dict[str, Any]) -> None:
    prom: Prometheus = scraped["prom"]
    broker = scraped["broker"]
    _poll(lambda: prom.value(f'qpidd_up{{job="tls",broker="{broker}"}}') == 1, 30,
          "qpidd_up 1 scraped over TLS")
    # qpidd's own objects came through, over TLS
    _poll(lambda: (prom.value('qmf_exporter_updates_received_total{job="tls"}') or 0) > 0,
          30, "object updates scraped over TLS")
    assert prom.query('qpidd_broker_info{job="tls"}'), "no broker series over TLS"
    assert prom.value('up{job="tls"}') == 1

    def refused() -> dict[str, Any] | None:
        targets = prom.targets()
        jobs = ("wrong-password", "no-client-cert", "plain")
        done = all(targets.get(j, {}).get("health") == "down" for j in jobs)
        return targets if done else None

    targets = _poll(refused, 30, "the other jobs refused")
    assert "401" in targets["wrong-password"]["lastError"], targets["wrong-password"]
    no_cert = targets["no-client-cert"]["lastError"]
    # refused in the handshake: the alert names the certificate, or (TLS 1.3, where the
    # client's certificate is checked after its Finished) the connection is reset
    assert any(word in no_cert.lower() for word in ("certificate", "tls", "connection reset")), \
        no_cert
    assert "401" not in no_cert, no_cert
    assert targets["tls"]["health"] == "up", targets["tls"]
    for job in ("wrong-password", "no-client-cert", "plain"):
        assert not prom.query(f'qpidd_up{{job="{job}"}}'), job
