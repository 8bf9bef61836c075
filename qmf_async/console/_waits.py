"""The console's one request primitive, its one wait type and its one timeout
mechanism.

The protocol cores (:class:`~qmf_async.protocol.ConsoleProtocol`,
:class:`~qmf_async.protocol.ConsoleProtocolV2`) keep the requests as plain data; a
:class:`Waits` table keeps, under the same keys (a v1 sequence number, a v2
correlation id), what a task awaits: a :class:`Wait`.  Every request of a broker
connection goes through a table:

- :meth:`Waits.request`: register, publish, await under one deadline, clean up on
  every exit (answer, timeout, cancellation, loss): one call for a one-reply request
  (a method call, ``B``, ``S``, ``P``, ``Q``);
- :meth:`Waits.start` then :meth:`Wait.result`: the same in two halves, for a query
  whose records stream to a sink and whose caller awaits several at once (each
  armed with :meth:`Waits.expire_at` under the caller's one deadline).

A wait ends in :meth:`Wait.close`, whatever happened: it leaves its table, its timer
stops, its request leaves the core (the table's ``cancel``) when still outstanding,
and what computes its answer (``on_close``: a task, a stream) is stopped.

Timers: waits that share a deadline rule (the same timeout, or the same absolute
deadline) share one loop timer (:class:`_Lane`).  The other waits of the console (a
wait for an event, for a task) go through :func:`within`, and timed callbacks through
:func:`later`: this module holds every timer of the console.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from typing import Any, TypeVar

from ..errors import QmfError
from ..protocol import Outgoing

__all__ = ["Expired", "Wait", "Waits", "later", "within"]

T = TypeVar("T")


class Expired(TimeoutError):
    """What a wait's future fails with at its deadline (told apart from a
    ``TimeoutError`` raised by anything else; callers turn it into their
    :class:`~qmf_async.QmfTimeout`)."""


class Wait:
    """What a task awaits for one request: ``future`` gets the answer or the error.

    ``key`` is the request's key in its table (None: registered under none, as a
    query computed by a task of its own); ``on_close`` stops what computes the
    answer (called once, at :meth:`close`); ``stream`` is what a streamed answer's
    parts go to (the table's owner reads it)."""

    __slots__ = ("future", "key", "on_close", "stream", "table", "timer")

    def __init__(self, key: Hashable | None, future: asyncio.Future[Any], table: Waits) -> None:
        self.key = key
        self.future = future
        self.table = table
        self.timer: _Lane | None = None
        self.on_close: Callable[[], None] | None = None
        self.stream: Any = None

    def __repr__(self) -> str:
        return f"<Wait key={self.key!r} done={self.future.done()}>"

    def close(self) -> bool:
        """End the wait (done, timed out, cancelled): see :meth:`Waits.close`."""
        return self.table.close(self)

    async def result(self, timeout: float | None,
                     timed_out: Callable[[], QmfError] | None = None) -> Any:
        """The answer, within ``timeout`` seconds from now (None: the deadline it has,
        if any); the wait is closed on every exit.

        Raises:
            QmfError: ``timed_out()`` at the deadline, or the request's own error.
            Expired: at the deadline, when no ``timed_out`` is given.
        """
        try:
            if timeout is not None:
                self.table.expire_after(self, timeout)
            return await self.future
        except Expired:
            if timed_out is None:
                raise
            raise timed_out() from None
        finally:
            self.table.close(self)


class _Lane:
    """The expiry of waits that share one deadline rule.

    Their deadlines (on the loop's monotonic clock) come in the order they were
    added (the same timeout from now, or the same absolute deadline), so one loop
    timer, armed for the oldest wait still in the lane, serves them all: adding and
    removing a wait is a dict operation, not a timer heap push and pop.  Each wait
    still fails at its own deadline.
    """

    __slots__ = ("handle", "key", "lanes", "loop", "waits")

    def __init__(self, loop: asyncio.AbstractEventLoop, key: Hashable,
                 lanes: dict[Hashable, _Lane]) -> None:
        self.loop = loop
        self.key = key
        self.lanes = lanes
        self.waits: dict[Wait, float] = {}  # insertion order = deadline order
        self.handle: asyncio.TimerHandle | None = None

    def add(self, wait: Wait, deadline: float) -> None:
        self.waits[wait] = deadline
        wait.timer = self
        if self.handle is None:
            self.handle = self.loop.call_at(deadline, self._expire)

    def _expire(self) -> None:
        self.handle = None
        waits = self.waits
        now = self.loop.time()
        while waits:
            wait = next(iter(waits))
            deadline = waits[wait]
            if deadline > now:
                self.handle = self.loop.call_at(deadline, self._expire)
                return
            del waits[wait]
            wait.timer = None
            future = wait.future
            if not future.done():
                future.set_exception(Expired())
        if self.lanes.get(self.key) is self:  # idle: forget it
            del self.lanes[self.key]


class Waits:
    """Key -> :class:`Wait` of one connection (or of one QMF v2 side of it), with
    shared timers.

    ``publish`` sends what a core built (raising at once when not connected);
    ``cancel`` makes the core forget the request of a key whose wait ended before
    its answer came (None: nothing to forget)."""

    __slots__ = ("_cancel", "_lanes", "_publish", "_waits")

    def __init__(self, publish: Callable[[Outgoing], Awaitable[None]] | None = None,
                 cancel: Callable[[Any], Any] | None = None) -> None:
        self._waits: dict[Hashable, Wait] = {}
        self._lanes: dict[Hashable, _Lane] = {}
        self._publish = publish
        self._cancel = cancel

    def __len__(self) -> int:
        return len(self._waits)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._waits

    def open(self, key: Hashable | None) -> Wait:
        """A new wait for request ``key`` (on the running loop); None: a wait under
        no key (its answer is computed by whoever holds it)."""
        wait = Wait(key, asyncio.get_running_loop().create_future(), self)
        if key is not None:
            self._waits[key] = wait
        return wait

    def get(self, key: Hashable) -> Wait | None:
        return self._waits.get(key)

    async def request(self, key: Hashable, out: Outgoing, timeout: float,
                      timed_out: Callable[[], QmfError] | None = None) -> Any:
        """The request primitive: register ``key``, publish ``out``, await the answer
        within ``timeout`` seconds, and close the wait on every exit.

        Raises:
            QmfError: ``timed_out()`` when no answer came in time; the request's
                error (the connection lost: ConnectionLostError).
            Expired: no answer in time, when no ``timed_out`` is given (the caller
                raises its own error: no closure is built per request).
            NotConnectedError, TransportError: not sent.
        """
        # open() and expire_after() written out: this is every method call's path
        loop = asyncio.get_running_loop()
        wait = Wait(key, loop.create_future(), self)
        self._waits[key] = wait
        try:
            await self._publish(out)  # type: ignore[misc]
            lanes = self._lanes
            lane = lanes.get(timeout)
            if lane is None or lane.loop is not loop:
                lane = lanes[timeout] = _Lane(loop, timeout, lanes)
            lane.add(wait, loop.time() + timeout)
            return await wait.future
        except Expired:
            if timed_out is None:
                raise
            raise timed_out() from None
        finally:
            # answered: finished (out of the table, its timer stopped), its result or
            # error taken above; anything else is closed
            if wait.timer is not None or not wait.future.done() or key in self._waits:
                self.close(wait)

    async def start(self, key: Hashable, out: Outgoing) -> Wait:
        """The first half of :meth:`request`: register ``key`` and publish ``out``;
        the caller awaits the wait (:meth:`Wait.result`, or its future under a
        deadline armed with :meth:`expire_at`) and closes it.

        Raises:
            NotConnectedError, TransportError: not sent (the wait is closed).
        """
        return await self.send(self.open(key), out)

    async def send(self, wait: Wait, out: Outgoing) -> Wait:
        """Publish ``out``, the request of ``wait`` (opened, and given its
        ``stream`` and ``on_close``, before: its answer may come before the publish
        returns); as :meth:`start`.

        Raises:
            NotConnectedError, TransportError: not sent (the wait is closed).
        """
        try:
            await self._publish(out)  # type: ignore[misc]
        except BaseException:
            self.close(wait)
            raise
        return wait

    def finish(self, key: Hashable) -> Wait | None:
        """Take the wait of ``key`` out (its request completed); its timer stops."""
        wait = self._waits.pop(key, None)
        if wait is not None and wait.timer is not None:
            self._stop_timer(wait)
        return wait

    def close(self, wait: Wait) -> bool:
        """End ``wait`` (answered, timed out, cancelled, lost): it leaves the table
        (its request leaves the core when it was still outstanding), its timer stops,
        ``on_close`` runs, an undone future is cancelled, an error left on it is
        retrieved.  Idempotent; raises nothing of its own.

        Returns whether it was still registered (its request still outstanding).
        """
        key = wait.key
        registered = key is not None and self._waits.get(key) is wait
        if registered:
            del self._waits[key]
            if self._cancel is not None:
                self._cancel(key)
        if wait.timer is not None:
            self._stop_timer(wait)
        on_close, wait.on_close = wait.on_close, None
        if on_close is not None:
            on_close()
        future = wait.future
        if not future.done():
            future.cancel()
        elif not future.cancelled():
            future.exception()  # retrieved: no "never retrieved" warning
        return registered

    def expire_after(self, wait: Wait, timeout: float) -> None:
        """Fail ``wait``'s future with :class:`Expired` in ``timeout`` seconds.

        The timer stops when the wait is finished or closed.  Waits with the same
        timeout share one loop timer (see :class:`_Lane`).
        """
        loop = asyncio.get_running_loop()
        self._arm(wait, loop, timeout, loop.time() + timeout)  # a float: not an "at" rule

    def expire_at(self, wait: Wait, deadline: float) -> None:
        """Fail ``wait``'s future with :class:`Expired` at ``deadline`` (the running
        loop's clock): the waits of one deadline share one loop timer."""
        self._arm(wait, asyncio.get_running_loop(), ("at", deadline), deadline)

    def _arm(self, wait: Wait, loop: asyncio.AbstractEventLoop, rule: Hashable,
             deadline: float) -> None:
        if wait.timer is not None:
            self._stop_timer(wait)
        lane = self._lanes.get(rule)
        if lane is None or lane.loop is not loop:
            lane = self._lanes[rule] = _Lane(loop, rule, self._lanes)
        lane.add(wait, deadline)

    def fail_all(self, exc: BaseException) -> None:
        """Fail every registered wait with ``exc`` and forget them (their requests
        are gone with the core's state: nothing is cancelled there)."""
        waits, self._waits = list(self._waits.values()), {}
        for wait in waits:
            if wait.timer is not None:
                self._stop_timer(wait)
            on_close, wait.on_close = wait.on_close, None
            if on_close is not None:
                on_close()
            if not wait.future.done():
                wait.future.set_exception(exc)

    @staticmethod
    def _stop_timer(wait: Wait) -> None:
        timer = wait.timer
        wait.timer = None
        if timer is not None:
            timer.waits.pop(wait, None)


async def within(aw: Awaitable[T], timeout: float | None) -> T:
    """``aw``'s result within ``timeout`` seconds (None: no limit); ``aw`` is
    cancelled at the deadline.  The console's one wait that is not a request's.

    Raises:
        TimeoutError: the deadline passed; whatever ``aw`` raises.
    """
    return await asyncio.wait_for(aw, timeout)


def later(delay: float, callback: Callable[..., object], *args: Any) -> asyncio.TimerHandle:
    """Call ``callback(*args)`` in ``delay`` seconds on the running loop (cancel the
    handle to stop it): the console's one timed callback."""
    return asyncio.get_running_loop().call_later(delay, callback, *args)
