"""TLS listeners for the security tests, on the real brokers, with a CA made by the tests.

* :class:`RabbitTls`: the local RabbitMQ (started by ``scripts/rabbitmq.sh``) gets a TLS
  listener on a free port *at run time* (``rabbitmqctl eval``:
  ``rabbit_networking:start_ssl_listener/3``), without a restart and without touching
  the plain 5672 listener other tests use.  The ``rabbitmq_auth_mechanism_ssl`` plugin
  is enabled (it ships with the package) and ``EXTERNAL`` added to the offered
  mechanisms (RabbitMQ offers it only on TLS connections with a client certificate),
  user names taken from the certificate's CN.  :meth:`RabbitTls.stop` stops the
  listener and restores the broker's settings as they were.
* :func:`nss_database`: the NSS certificate database qpidd's SSL listener reads
  (``certutil``/``pk12util`` from ``libnss3-tools``).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from .pki import Pki

__all__ = ["RabbitTls", "RabbitTlsError", "free_port", "nss_database", "rabbitmqctl",
           "rabbitmqctl_path", "world_readable_dir"]

#: the settings of the ``rabbit`` application the listener changes (restored by stop())
_SAVED = "qmf_async_tls_saved"


class RabbitTlsError(Exception):
    """The TLS listener could not be set up (the reason, in one line)."""


def rabbitmqctl_path() -> str | None:
    return shutil.which("rabbitmqctl") or shutil.which("rabbitmqctl", path="/usr/sbin:/sbin")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run(argv: list[str], timeout: float = 60.0) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RabbitTlsError(f"{' '.join(argv[:2])}: {exc}") from exc
    if done.returncode != 0:
        detail = " ".join((done.stderr.strip() or done.stdout.strip() or "?").split())
        raise RabbitTlsError(f"{' '.join(argv[:3])} failed: {detail[:400]}")
    return done.stdout


def rabbitmqctl(*args: str) -> str:
    """``rabbitmqctl -q ARGS``: what it printed.

    Raises:
        RabbitTlsError: rabbitmqctl is missing or failed.
    """
    ctl = rabbitmqctl_path()
    if ctl is None:
        raise RabbitTlsError("rabbitmqctl not found")
    # rabbitmqctl occasionally fails to reach a busy node: try again (twice), unless
    # the answer says what is wrong with the request itself
    for attempt in range(3):
        try:
            return _run([ctl, "-q", *args])
        except RabbitTlsError as exc:
            text = str(exc)
            if attempt == 2 or "already exists" in text or "does not exist" in text \
                    or "no_such" in text:
                raise
        time.sleep(1.0)
    raise AssertionError("unreachable")


def _erl(text: str) -> str:
    """An Erlang string literal."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


class RabbitTls:
    """A TLS listener of the local RabbitMQ on ``port``, with ``pki``'s CA: server
    certificate for ``DNS:localhost`` only (so ``127.0.0.1`` is a wrong host name),
    client certificates verified when sent (not required)."""

    def __init__(self, pki: Pki, port: int, ctl: str) -> None:
        self.pki = pki
        self.port = port
        self.ctl = ctl
        self.cert = pki.issue("rabbit", "localhost", "DNS:localhost", "serverAuth")

    @classmethod
    def start(cls, root: Path) -> RabbitTls:
        """Make the CA and certificates in ``root`` (readable by the broker's user)
        and start the listener; wait until it accepts connections.

        Raises:
            RabbitTlsError: no rabbitmqctl/openssl, the plugin or listener failed.
        """
        ctl = rabbitmqctl_path()
        if ctl is None:
            raise RabbitTlsError("rabbitmqctl not found")
        if shutil.which("openssl") is None:
            raise RabbitTlsError("no openssl command to make test certificates")
        root.mkdir(parents=True, exist_ok=True)
        root.chmod(0o755)
        pki = Pki(root)
        self = cls(pki, free_port(), ctl)
        for path in root.iterdir():  # the broker runs as its own user: let it read them
            path.chmod(0o644)
        plugins = shutil.which("rabbitmq-plugins") or shutil.which(
            "rabbitmq-plugins", path="/usr/sbin:/sbin")
        if plugins is None:
            raise RabbitTlsError("rabbitmq-plugins not found")
        _run([plugins, "-q", "enable", "rabbitmq_auth_mechanism_ssl"])
        cert, key = self.cert
        opts = (f"[{{cacertfile, {_erl(pki.ca[0])}}}, {{certfile, {_erl(cert)}}}, "
                f"{{keyfile, {_erl(key)}}}, {{verify, verify_peer}}, "
                "{fail_if_no_peer_cert, false}]")
        # rabbit_auth_mechanism_ssl refuses EXTERNAL unless ssl_options says verify_peer
        out = self.eval(
            f"Opts = {opts},"
            f" case persistent_term:get({_SAVED}, undefined) of"
            f"   undefined -> persistent_term:put({_SAVED}, [{{K, application:get_env(rabbit, K)}}"
            "       || K <- [ssl_options, ssl_cert_login_from, auth_mechanisms]]);"
            "   _ -> ok end,"
            " application:set_env(rabbit, ssl_options, Opts),"
            " application:set_env(rabbit, ssl_cert_login_from, common_name),"
            " {ok, Mechs} = application:get_env(rabbit, auth_mechanisms),"
            " application:set_env(rabbit, auth_mechanisms,"
            "   Mechs ++ ['EXTERNAL' || not lists:member('EXTERNAL', Mechs)]),"
            f" rabbit_networking:start_ssl_listener({self.port}, Opts, 1).")
        if out.strip() != "ok":
            raise RabbitTlsError(f"start_ssl_listener answered {out.strip()!r}")
        deadline = time.monotonic() + 15.0
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1.0):
                    return self
            except OSError as exc:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RabbitTlsError(f"the TLS listener on port {self.port} does not "
                                         f"accept connections: {exc}") from exc
                time.sleep(0.1)

    def eval(self, expression: str) -> str:
        """``rabbitmqctl eval EXPRESSION``: what it printed."""
        return _run([self.ctl, "-q", "eval", expression])

    def stop(self) -> None:
        """Stop the listener (its connections too) and restore the settings."""
        self.eval(
            f"catch rabbit_networking:stop_tcp_listener({self.port}),"
            f" case persistent_term:get({_SAVED}, undefined) of"
            "   undefined -> ok;"
            "   Saved -> [case V of {ok, X} -> application:set_env(rabbit, K, X);"
            "                       undefined -> application:unset_env(rabbit, K) end"
            "             || {K, V} <- Saved],"
            f"            persistent_term:erase({_SAVED}) end, ok.")

    def url(self, *, host: str = "localhost", credentials: str = "guest:guest@",
            vhost: str = "") -> str:
        return f"amqps://{credentials}{host}:{self.port}/{vhost}"

    def connections(self) -> list[dict[str, str]]:
        """The broker's connections to this listener: ``user``, ``ssl``,
        ``auth_mechanism``, ``peer_cert_subject``."""
        out = rabbitmqctl("list_connections", "port", "user", "ssl", "auth_mechanism",
                           "peer_cert_subject", "--no-table-headers")
        rows = []
        for line in out.splitlines():
            cols = line.split("\t")
            if len(cols) >= 5 and cols[0] == str(self.port):
                rows.append(dict(zip(("port", "user", "ssl", "auth_mechanism",
                                      "peer_cert_subject"), cols, strict=False)))
        return rows


def nss_database(pki: Pki, server: tuple[str, str], directory: Path,
                 name: str = "qpidd-server") -> tuple[str, str]:
    """An NSS database in ``directory`` holding the ``server`` certificate (with its
    key) under ``name`` and trusting ``pki.ca`` for client certificates:
    ``(db, password_file)``
    for qpidd's ``--ssl-cert-db`` and ``--ssl-cert-password-file``.

    Raises:
        RabbitTlsError: certutil/pk12util missing (libnss3-tools) or failing.
    """
    for tool in ("certutil", "pk12util"):
        if shutil.which(tool) is None:
            raise RabbitTlsError(f"{tool} not found (Debian package libnss3-tools; "
                                 "`scripts/qpidd.sh install` installs it)")
    directory.mkdir(parents=True, exist_ok=True)
    password = directory / "password"
    password.write_text("qmf-test-nss\n")
    p12 = directory / "server.p12"
    _run(["openssl", "pkcs12", "-export", "-in", server[0], "-inkey", server[1],
          "-certfile", pki.ca[0], "-name", name, "-out", str(p12),
          "-passout", "pass:qmf-test-p12"])
    db = f"sql:{directory}"
    _run(["certutil", "-N", "-d", db, "-f", str(password)])
    _run(["pk12util", "-i", str(p12), "-d", db, "-k", str(password), "-W", "qmf-test-p12"])
    _run(["certutil", "-A", "-d", db, "-n", "qmf-test-ca", "-t", "CT,,", "-a",
          "-i", pki.ca[0], "-f", str(password)])
    return db, str(password)


def world_readable_dir(prefix: str) -> Path:
    """A new directory the broker's user can read (pytest's own are private)."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    os.chmod(path, 0o755)
    return path
