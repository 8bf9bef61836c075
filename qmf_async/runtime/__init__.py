"""qmf_async.runtime: the peer runtime shared by the agent, the role and the console."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # at run time each name is imported on first use (__getattr__)
    from ._backoff import retry_with_backoff
    from ._correlation import RequestFutures
    from ._peer import PeerRuntime

__all__ = [
    "RequestFutures",
    "PeerRuntime",
    "retry_with_backoff",
]


#: each public name -> the module it is imported from on first use (``module:name``
#: when it is renamed here)
_LAZY: dict[str, str] = {
    "retry_with_backoff": "._backoff",
    "RequestFutures": "._correlation",
    "PeerRuntime": "._peer",
}


if not TYPE_CHECKING:  # type checkers read the imports above; this is the run time
    from ..lazy import lazy_names

    __getattr__, __dir__ = lazy_names(globals(), _LAZY)
    del lazy_names
