"""Test helpers shared by the test modules."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any


async def wait_until(
    predicate: Callable[[], Any | Awaitable[Any]],
    timeout: float = 5.0,
    interval: float = 0.01,
    message: str | None = None,
) -> Any:
    """Poll ``predicate`` (sync or async) until it returns a truthy value.

    Returns that value.

    Raises:
        AssertionError: the predicate stayed falsy for ``timeout`` seconds; the message
            names the predicate (or uses ``message``) and its last value.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if time.monotonic() >= deadline:
            what = message or getattr(predicate, "__qualname__", repr(predicate))
            raise AssertionError(
                f"condition not met within {timeout} s: {what} (last value: {value!r})"
            )
        await asyncio.sleep(interval)
