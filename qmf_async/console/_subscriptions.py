"""Bounded async iterators over unsolicited data (events, updates, agents)."""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from ..errors import ConnectionLostError, QmfTimeout, UsageError
from ._waits import within

__all__ = ["Subscription"]

T = TypeVar("T")


class Subscription(Generic[T]):
    """An async iterator with a bounded buffer.

    When the buffer is full the oldest item is dropped and counted in
    ``dropped``; the iterator never blocks the session.  Use as
    ``async with session.events() as events: async for ev in events: ...`` or call
    :meth:`close`.  ``get(timeout)`` waits for one item.

    When the session says the broker(s) it follows are gone for good (:meth:`fail`),
    the items already received are still handed out, then the iterator raises
    :class:`~qmf_async.ConnectionLostError` (the transport's error as its cause).
    """

    def __init__(self, maxsize: int, accept: Callable[[T], bool] | None = None,
                 on_close: Callable[[Subscription[T]], None] | None = None) -> None:
        if maxsize < 1:
            raise UsageError("maxsize must be at least 1")
        self._items: collections.deque[T] = collections.deque()
        self._maxsize = maxsize
        self._accept = accept
        self._on_close = on_close
        self._waiter: asyncio.Future[None] | None = None
        self._closed = False
        #: why the subscription ended (raised once its items are handed out)
        self._error: ConnectionLostError | None = None
        #: items dropped because the consumer was slower than the bus
        self.dropped = 0
        #: the binding changes (over QMF v2) that bring this subscription's items
        self._binding: list[asyncio.Task[None]] = []

    def deliver(self, item: T) -> None:
        """Take ``item`` (the session calls this for each one received): dropped when
        closed or not accepted; past ``maxsize`` the oldest is dropped and counted.
        Raises nothing (a filter that raises drops the item)."""
        if self._closed:
            return
        if self._accept is not None:
            try:
                if not self._accept(item):
                    return
            except Exception:
                return
        if len(self._items) >= self._maxsize:
            self._items.popleft()
            self.dropped += 1
        self._items.append(item)
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)

    def on_close(self, callback: Callable[[Subscription[T]], None]) -> None:
        """Call ``callback`` with this subscription when it is closed (in place of the
        one given at construction)."""
        self._on_close = callback

    def binding(self, tasks: list[asyncio.Task[None]]) -> None:
        """The binding changes (over QMF v2) that bring this subscription's items:
        :meth:`ready` waits for them."""
        self._binding = tasks

    def fail(self, error: ConnectionLostError) -> None:
        """End the subscription because what it follows is gone: no more items are
        taken; once those received are handed out, the iterator raises ``error``.
        Ignored when already closed (raises nothing)."""
        if self._closed:
            return
        self._error = error
        self.close()

    @property
    def error(self) -> ConnectionLostError | None:
        """Why the subscription ended, when the broker(s) it follows were lost (None
        while it runs, and after :meth:`close`)."""
        return self._error

    def close(self) -> None:
        """Stop receiving; a waiting ``async for`` ends."""
        if self._closed:
            return
        self._closed = True
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)
        if self._on_close is not None:
            self._on_close(self)

    @property
    def closed(self) -> bool:
        return self._closed

    def __len__(self) -> int:
        return len(self._items)

    def __aiter__(self) -> Subscription[T]:
        return self

    async def __anext__(self) -> T:
        while not self._items:
            if self._closed:
                if self._error is not None:
                    raise self._error.with_traceback(None)
                raise StopAsyncIteration
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        return self._items.popleft()

    async def get(self, timeout: float | None = None) -> T:
        """The next item.

        Raises:
            QmfTimeout: none arrived within ``timeout`` (also a ``TimeoutError``).
            StopAsyncIteration: the subscription is closed and empty.
            ConnectionLostError: the broker(s) it follows were lost (with
                ``manage_connections=False``) and every item received was handed out.
        """
        try:
            return await within(self.__anext__(), timeout)
        except TimeoutError:
            raise QmfTimeout(f"no item arrived within {timeout}s") from None

    async def ready(self, timeout: float | None = 10.0) -> None:
        """Wait until the broker passes what this subscription follows.

        Over QMF v2 a new subscription changes the session's bindings in the
        background; what is published before they are in place is not seen (qpidd
        publishes an unchanged object once).  Await this before causing what you want
        to see.  Over QMF v1 the bindings are made at connection: nothing to wait for.
        A binding the broker refused is logged, not raised.

        Raises:
            QmfTimeout: the bindings were not in place within ``timeout`` seconds.
        """
        pending = [t for t in self._binding if not t.done()]
        if pending:
            try:  # the bindings go on past the deadline (shielded)
                await within(asyncio.shield(asyncio.gather(*pending, return_exceptions=True)),
                             timeout)
            except TimeoutError:
                raise QmfTimeout(f"the subscription's bindings were not in place "
                                 f"within {timeout}s") from None
        self._binding = []

    async def __aenter__(self) -> Subscription[T]:
        try:
            await self.ready()
        except BaseException:
            self.close()  # never entered: nothing else would close it
            raise
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.close()
