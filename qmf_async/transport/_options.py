"""TLS and SASL options of a command line, as the classic qpid tools spell them.

Every ``qmf`` tool, the management-broker role and the examples take the same flags::

    --ssl-certificate CERT     client certificate (PEM), for amqps:// brokers
    --ssl-key KEY              its private key (PEM), when not inside CERT
    --ssl-trustfile CA         CA certificates to trust (PEM; default: the system's)
    --ssl-skip-hostname-check  verify the certificate but not the host name in it
    --sasl-mechanism MECH      the login mechanism(s): EXTERNAL, PLAIN, ANONYMOUS, ...
    --sasl-service-name NAME   accepted for the classic command lines (GSSAPI only)
    --ha-admin                 accepted for the classic command lines

:func:`connection_arguments` turns them into the ``tls=`` and ``sasl_mechanisms=``
keywords of :meth:`Session.add_broker <qmf_async.Session.add_broker>`, ``Agent`` and
``ManagementBroker``.
"""

from __future__ import annotations

import argparse
from typing import Any

from ..errors import UsageError
from ._base import TlsOptions, sasl_mechanism_list

__all__ = ["add_connection_arguments", "connection_arguments"]


def add_connection_arguments(parser: argparse.ArgumentParser, *,
                             sasl_flag: str = "--sasl-mechanism") -> None:
    """Add the TLS and SASL flags (one argument group) to ``parser``.

    ``sasl_flag`` names the mechanism flag (``qmf route`` spells it
    ``--client-sasl-mechanism``, as qpid-route does); its dest is ``sasl_mechanism``.
    """
    group = parser.add_argument_group("TLS and SASL (as the qpid tools take them)")
    group.add_argument("--ssl-certificate", metavar="CERT", default=None,
                       help="client certificate (PEM), for amqps:// brokers")
    group.add_argument("--ssl-key", metavar="KEY", default=None,
                       help="private key of the client certificate (PEM), when not in CERT")
    group.add_argument("--ssl-trustfile", metavar="CA", default=None,
                       help="CA certificates to trust (PEM; default: the system's)")
    group.add_argument("--ssl-skip-hostname-check", action="store_true",
                       help="verify the broker's certificate but not the host name in it")
    group.add_argument(sasl_flag, dest="sasl_mechanism", metavar="MECH", default=None,
                       help="SASL mechanism(s) to log in with, e.g. EXTERNAL (the client "
                            "certificate), PLAIN (user and password of the address), "
                            "ANONYMOUS; several separated by spaces (default: chosen "
                            "from what is given)")
    group.add_argument("--sasl-service-name", metavar="NAME", default=None,
                       help="accepted for qpid tool command lines; only GSSAPI uses it, "
                            "which qmf-async does not speak")
    group.add_argument("--ha-admin", action="store_true",
                       help="accepted for qpid tool command lines; has no effect")


def connection_arguments(args: argparse.Namespace) -> dict[str, Any]:
    """The ``tls`` and ``sasl_mechanisms`` keywords from parsed flags (absent flags
    give ``None``, so the transport's defaults apply).

    Raises:
        UsageError: ``--ssl-key`` without ``--ssl-certificate``, or a malformed
            mechanism name.
    """
    cert = getattr(args, "ssl_certificate", None)
    key = getattr(args, "ssl_key", None)
    trust = getattr(args, "ssl_trustfile", None)
    skip = bool(getattr(args, "ssl_skip_hostname_check", False))
    if key and not cert:
        raise UsageError("--ssl-key needs --ssl-certificate (the certificate it belongs to)")
    tls = None
    if cert or trust or skip:
        tls = TlsOptions(cafile=trust, certfile=cert, keyfile=key, verify_hostname=not skip)
    return {"tls": tls,
            "sasl_mechanisms": sasl_mechanism_list(getattr(args, "sasl_mechanism", None))}
