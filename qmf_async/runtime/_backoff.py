"""Reconnecting with exponential backoff and jitter (shared by console and agents)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from ..errors import QmfTimeout, TransportError

__all__ = ["retry_with_backoff"]


async def retry_with_backoff(attempt: Callable[[], Awaitable[None]], *,
                             running: Callable[[], bool],
                             on_failure: Callable[[BaseException, float], None],
                             min_delay: float = 0.2, max_delay: float = 10.0,
                             retry_on: tuple[type[BaseException], ...] = (TransportError,
                                                                          QmfTimeout, OSError)
                             ) -> bool:
    """Call ``attempt`` until it succeeds (True) or ``running()`` turns False (False).

    After each failure of a ``retry_on`` type, ``on_failure(exc, delay)`` is called
    and the next try waits ``delay`` scaled by a random factor in [0.5, 1.5); the delay
    doubles up to ``max_delay``.  Other exceptions propagate.
    """
    delay = min_delay
    while running():
        try:
            await attempt()
        except retry_on as exc:
            on_failure(exc, delay)
            import random  # here: a connection that never fails never loads it

            await asyncio.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, max_delay)
            continue
        return True
    return False
