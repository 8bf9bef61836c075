"""qmf_async.runtime: the peer runtime shared by the agent, the role and the console."""

from __future__ import annotations

from ._backoff import retry_with_backoff
from ._correlation import RequestFutures
from ._peer import PeerRuntime

__all__ = [
    "RequestFutures",
    "PeerRuntime",
    "retry_with_backoff",
]
