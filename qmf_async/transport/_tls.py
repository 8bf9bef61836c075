"""The client TLS context every transport builds from :class:`TlsOptions` (standard
library :mod:`ssl` only, so a transport imports no other transport to get it)."""

from __future__ import annotations

import ssl

from ..errors import UsageError
from ._base import TlsOptions

__all__ = ["ssl_context"]


def ssl_context(tls: TlsOptions) -> ssl.SSLContext:
    """A verifying client SSLContext from ``tls``: the CA file (else the system's
    store), the client certificate and key if given, hostname checking as asked.

    Raises:
        UsageError: a CA, certificate or key file cannot be loaded, or a key file is
            given without a certificate.
    """
    try:
        ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=tls.cafile)
        if tls.certfile:
            ctx.load_cert_chain(tls.certfile, tls.keyfile)
        elif tls.keyfile:
            raise UsageError("TlsOptions.keyfile given without certfile")
    except (OSError, ssl.SSLError) as exc:
        raise UsageError(f"cannot load TLS files: {exc}") from exc
    ctx.check_hostname = tls.verify_hostname
    return ctx
