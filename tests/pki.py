"""Certificates for the TLS tests, made with the ``openssl`` command.

Shared by the AMQP 1.0 test peer (``tests/amqp10_peer.py``), the RabbitMQ TLS listener
and the qpidd SSL listener of ``tests/test_security.py``.
"""

from __future__ import annotations

import ssl
import subprocess
from pathlib import Path

__all__ = ["Pki"]


class Pki:
    """Certificates made with the ``openssl`` command in ``root``: a CA, a server
    certificate for localhost/127.0.0.1 and one for another host (both from the CA), a
    self-signed localhost certificate, and a client certificate (CN ``qmf-client``).
    :meth:`issue` makes more from the same CA."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.ca = self._self_signed("ca", "qmf-test-ca", ca=True)
        self.server = self.issue("server", "localhost", "DNS:localhost,IP:127.0.0.1",
                                 "serverAuth")
        self.other = self.issue("other", "other.example", "DNS:other.example", "serverAuth")
        self.selfsigned = self._self_signed("selfsigned", "localhost", ca=False,
                                            san="DNS:localhost,IP:127.0.0.1")
        self.client = self.issue("client", "qmf-client", "DNS:qmf-client", "clientAuth")

    def _run(self, *args: str) -> None:
        subprocess.run(["openssl", *args], cwd=self.root, check=True, capture_output=True,
                       timeout=30)

    def _self_signed(self, name: str, cn: str, *, ca: bool, san: str | None = None,
                     ) -> tuple[str, str]:
        ext = ["-addext", "basicConstraints=critical,CA:TRUE",
               "-addext", "keyUsage=critical,keyCertSign,cRLSign"] if ca else \
            ["-addext", f"subjectAltName={san}", "-addext", "basicConstraints=CA:FALSE"]
        self._run("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                  "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.pem", "-days", "2",
                  "-subj", f"/CN={cn}", *ext)
        return str(self.root / f"{name}.pem"), str(self.root / f"{name}.key")

    def issue(self, name: str, cn: str, san: str, usage: str) -> tuple[str, str]:
        """A certificate from the CA: ``(cert.pem, key.pem)`` paths in ``root``, named
        ``name``, for subject ``CN=cn``, subjectAltName ``san`` and extended key usage
        ``usage`` (``serverAuth``, ``clientAuth`` or both, comma-separated)."""
        self._run("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                  "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={cn}")
        (self.root / f"{name}.ext").write_text(
            f"subjectAltName={san}\nbasicConstraints=CA:FALSE\nextendedKeyUsage={usage}\n"
            "keyUsage=critical,digitalSignature,keyEncipherment\n")
        self._run("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                  "-CAcreateserial", "-out", f"{name}.pem", "-days", "2",
                  "-extfile", f"{name}.ext")
        return str(self.root / f"{name}.pem"), str(self.root / f"{name}.key")

    def server_context(self, which: str = "server", *, client_certs: bool = False,
                       ) -> ssl.SSLContext:
        """A server SSLContext with the ``which`` certificate; asking for (not
        requiring) client certificates from the CA when ``client_certs``."""
        cert, key = getattr(self, which)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)
        if client_certs:
            ctx.load_verify_locations(self.ca[0])
            ctx.verify_mode = ssl.CERT_OPTIONAL
        return ctx
