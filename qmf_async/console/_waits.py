"""The asyncio side of request correlation: a future per outstanding request and
the timers that time them out.

The protocol core (:class:`~qmf_async.protocol.ConsoleProtocol`) keeps the
requests as plain data; a :class:`Waits` table keeps, under the same sequence
numbers, what a task awaits.  Waits that share a timeout value share one loop
timer (:class:`_Lane`).
"""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["Wait", "Waits"]

#: distinct timeout values served by shared timers; more fall back to a timer per wait
_MAX_LANES = 8


class Wait:
    """What a task awaits for one request: ``future`` gets the reply or the error."""

    __slots__ = ("future", "seq", "timer")

    def __init__(self, seq: int, future: asyncio.Future[Any]) -> None:
        self.seq = seq
        self.future = future
        self.timer: _Lane | asyncio.TimerHandle | None = None

    def __repr__(self) -> str:
        return f"<Wait seq={self.seq} done={self.future.done()}>"


class _Lane:
    """The expiry of waits that share one timeout value.

    Their deadlines (start + timeout, on the loop's monotonic clock) come in the order
    they were added, so one loop timer, armed for the oldest wait still in the lane,
    serves them all: adding and removing a wait is a dict operation, not a timer heap
    push and pop.  Each wait still fails at its own deadline.
    """

    __slots__ = ("handle", "lanes", "loop", "timeout", "waits")

    def __init__(self, loop: asyncio.AbstractEventLoop, timeout: float,
                 lanes: dict[float, _Lane]) -> None:
        self.loop = loop
        self.timeout = timeout
        self.lanes = lanes
        self.waits: dict[Wait, float] = {}  # insertion order = deadline order
        self.handle: asyncio.TimerHandle | None = None

    def add(self, wait: Wait) -> None:
        deadline = self.loop.time() + self.timeout
        self.waits[wait] = deadline
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
                future.set_exception(TimeoutError())
        if self.lanes.get(self.timeout) is self:  # idle: forget it
            del self.lanes[self.timeout]


class Waits:
    """Sequence number -> :class:`Wait` of one connection, with shared timers."""

    __slots__ = ("_lanes", "_waits")

    def __init__(self) -> None:
        self._waits: dict[int, Wait] = {}
        self._lanes: dict[float, _Lane] = {}

    def __len__(self) -> int:
        return len(self._waits)

    def __contains__(self, seq: int) -> bool:
        return seq in self._waits

    def open(self, seq: int) -> Wait:
        """A new wait for request ``seq`` (on the running loop)."""
        wait = Wait(seq, asyncio.get_running_loop().create_future())
        self._waits[seq] = wait
        return wait

    def get(self, seq: int) -> Wait | None:
        return self._waits.get(seq)

    def finish(self, seq: int) -> Wait | None:
        """Take the wait of ``seq`` out (its request completed); its timer stops."""
        wait = self._waits.pop(seq, None)
        if wait is not None and wait.timer is not None:
            self._stop_timer(wait)
        return wait

    def discard(self, wait: Wait) -> bool:
        """Drop ``wait`` (timeout, cancellation, done); an undone future is cancelled.

        Returns whether it was still registered (its request still outstanding).
        """
        registered = self._waits.get(wait.seq) is wait
        if registered:
            del self._waits[wait.seq]
        if wait.timer is not None:
            self._stop_timer(wait)
        if not wait.future.done():
            wait.future.cancel()
        return registered

    def expire_after(self, wait: Wait, timeout: float) -> None:
        """Fail ``wait``'s future with ``TimeoutError`` in ``timeout`` seconds.

        The timer stops when the wait is finished or discarded.  Waits with the same
        timeout share one loop timer (see :class:`_Lane`).
        """
        if wait.timer is not None:
            self._stop_timer(wait)
        lane = self._lanes.get(timeout)
        loop = asyncio.get_running_loop()
        if lane is None or lane.loop is not loop:
            if lane is None and len(self._lanes) >= _MAX_LANES:
                future = wait.future

                def expire() -> None:
                    wait.timer = None
                    if not future.done():
                        future.set_exception(TimeoutError())

                wait.timer = loop.call_later(timeout, expire)
                return
            lane = self._lanes[timeout] = _Lane(loop, timeout, self._lanes)
        lane.add(wait)
        wait.timer = lane

    def fail_all(self, exc: BaseException) -> None:
        """Fail every wait with ``exc`` and forget them."""
        for wait in self._waits.values():
            if wait.timer is not None:
                self._stop_timer(wait)
            if not wait.future.done():
                wait.future.set_exception(exc)
        self._waits.clear()

    @staticmethod
    def _stop_timer(wait: Wait) -> None:
        timer = wait.timer
        wait.timer = None
        if isinstance(timer, _Lane):
            timer.waits.pop(wait, None)
        elif timer is not None:
            timer.cancel()
