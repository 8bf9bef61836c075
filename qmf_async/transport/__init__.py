"""qmf_async.transport."""

from __future__ import annotations

from ._aiormq import Delivery, TlsOptions, Transport, parse_url

__all__ = [
    "Delivery",
    "TlsOptions",
    "Transport",
    "parse_url",
]
