"""The threading core of the classic API.

Each classic Session owns one event-loop thread that runs the asyncio core and one
dispatch thread that runs its Console callbacks.  A blocking call submits a coroutine
to the loop (``asyncio.run_coroutine_threadsafe``) and waits on the returned
``concurrent.futures.Future`` with a timeout: no polling.  Both threads are daemons and
every live session is closed, boundedly, at interpreter exit, so nothing hangs there.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import logging
import queue
import threading
import weakref
from collections.abc import Callable, Coroutine
from typing import Any, Protocol, TypeVar

from ..errors import QmfTimeout, UsageError

T = TypeVar("T")
log = logging.getLogger("qmf_async.classic")

#: how long a blocking call waits beyond the asyncio call's own timeout before it
#: gives up on the loop thread (the asyncio call times out first in practice)
MARGIN = 5.0


class LoopThread:
    """An event loop running forever on a daemon thread of its own."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()
        self._ready.wait(10.0)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(self._ready.set)
        try:
            self.loop.run_forever()
        finally:
            try:
                pending = [t for t in asyncio.all_tasks(self.loop) if not t.done()]
                for task in pending:
                    task.cancel()
                if pending:
                    self.loop.run_until_complete(
                        asyncio.wait(pending, timeout=1.0))
            except Exception:  # pragma: no cover - best effort at shutdown
                log.debug("tasks left at loop shutdown", exc_info=True)
            self.loop.close()

    def in_loop(self) -> bool:
        """True on the loop's own thread."""
        return threading.current_thread() is self._thread

    @property
    def alive(self) -> bool:
        return self._thread.is_alive() and not self.loop.is_closed()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Schedule ``coro`` on the loop; the future answers from any thread.

        Raises:
            UsageError: the loop has stopped (the session is closed).
        """
        if not self.alive:
            coro.close()
            raise UsageError("the session is closed")
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def call(self, coro: Coroutine[Any, Any, T], timeout: float | None) -> T:
        """Run ``coro`` on the loop and wait for its result (at most ``timeout`` s).

        Raises:
            UsageError: called on the loop thread itself, or the session is closed.
            QmfTimeout: no result in time (the coroutine is cancelled).
            Whatever ``coro`` raises.
        """
        if self.in_loop():
            coro.close()
            raise UsageError("a blocking classic call cannot run on the session's own "
                             "event-loop thread")
        fut = self.submit(coro)
        try:
            return fut.result(timeout)
        except concurrent.futures.TimeoutError:
            if fut.done() and not fut.cancelled() and fut.exception() is not None:
                raise fut.exception() from None  # type: ignore[misc]
            fut.cancel()
            raise QmfTimeout(f"no answer within {timeout}s") from None
        except concurrent.futures.CancelledError:
            raise QmfTimeout("the call was cancelled (the session closed)") from None

    def stop(self, timeout: float) -> None:
        """Stop the loop (its tasks are cancelled) and join the thread for ``timeout`` s."""
        if self.loop.is_closed():
            return
        try:
            self.loop.call_soon_threadsafe(self.loop.stop)
        except RuntimeError:  # closed meanwhile
            return
        if not self.in_loop():
            self._thread.join(timeout)


class Dispatcher:
    """Runs callbacks one at a time, in order, on a daemon thread of its own."""

    def __init__(self, name: str) -> None:
        self._queue: queue.SimpleQueue[tuple[Callable[..., Any], tuple[Any, ...]] | None] = (
            queue.SimpleQueue())
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._stopped = False
        self._thread.start()

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            fn, args = item
            try:
                fn(*args)
            except Exception:
                log.exception("console callback %s raised", getattr(fn, "__name__", fn))

    def on_thread(self) -> bool:
        return threading.current_thread() is self._thread

    def post(self, fn: Callable[..., Any], *args: Any) -> None:
        if not self._stopped:
            self._queue.put((fn, args))

    def flush(self, timeout: float) -> bool:
        """Wait until what was posted before has run; False when ``timeout`` passed."""
        if self._stopped or self.on_thread():
            return True
        done = threading.Event()
        self._queue.put((done.set, ()))
        return done.wait(timeout)

    def stop(self, timeout: float) -> None:
        """Let queued callbacks run, then end the thread (joined for ``timeout`` s)."""
        if self._stopped:
            return
        self._stopped = True
        self._queue.put(None)
        if not self.on_thread():
            self._thread.join(timeout)


class Closable(Protocol):
    def close(self) -> None: ...


_LIVE: weakref.WeakSet[Any] = weakref.WeakSet()


def track(session: Closable) -> None:
    """Close ``session`` at interpreter exit if it is still open then.

    Called again after each connect: the handler moves to the end of the atexit list,
    so it runs before the handlers of libraries imported since (python-qpid-proton
    releases its objects at exit, and a connection closed after that crashes).
    """
    _LIVE.add(session)
    atexit.unregister(_close_all)
    atexit.register(_close_all)


def untrack(session: Closable) -> None:
    _LIVE.discard(session)


def _close_all() -> None:
    for session in list(_LIVE):
        try:
            session.close()
        except Exception:  # pragma: no cover - exit must go on
            log.debug("closing a session at exit failed", exc_info=True)
