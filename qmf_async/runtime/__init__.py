"""qmf_async.runtime."""

from __future__ import annotations

from ._backoff import retry_with_backoff

__all__ = [
    "retry_with_backoff",
]
