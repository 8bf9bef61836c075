"""Known traffic on a qpidd queue, for the ground-truth test of the pipeline
(tests/test_pipeline_qpidd.py) and the docs' pictures (scripts/telemetry_images.py): a plain
AMQP 1.0 client (``tests/amqp10_client.py``: the sans-I/O engine on a blocking socket,
no transport or session of ours) that sends
``rate_in`` and receives (accepts) ``rate_out`` messages a second, paced by the clock:
at every moment it has sent ``rate_in * elapsed`` messages (and received ``rate_out *
elapsed``), however long each call took.  It notes the wall-clock time of every message
sent and received, which is the truth the pipeline's rates are compared with, and
reconnects (with a deadline) when the broker goes away.
"""

from __future__ import annotations

import bisect
import threading
import time
from typing import Any

from tests.amqp10_client import BlockingClient, Timeout

#: seconds between the pacing loop's turns at most (it sleeps until the next message)
_TICK = 0.02


class Traffic:
    """Send ``rate_in``/s to and receive ``rate_out``/s from ``queue`` in a thread."""

    def __init__(self, address: str, queue: str, rate_in: float, rate_out: float,
                 *, reconnect_s: float = 30.0) -> None:
        self.address = address
        self.queue = queue
        self.rate_in = rate_in
        self.rate_out = rate_out
        self.reconnect_s = reconnect_s
        self.sent: list[float] = []       # wall-clock time of each message sent
        self.received: list[float] = []   # ... and of each one received and accepted
        self.reconnects = 0
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="truth-traffic", daemon=True)

    # -- control
    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 20.0) -> None:
        """Stop and join; raises what the thread died of.

        Raises:
            TimeoutError: the thread did not end within ``timeout``.
        """
        self._stop.set()
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TimeoutError(f"the traffic thread did not stop within {timeout}s")
        if self.error is not None:
            raise self.error

    # -- truth
    def count(self, times: list[float], start: float, end: float) -> int:
        """Messages of ``times`` (sent or received) in ``[start, end)``."""
        return bisect.bisect_left(times, end) - bisect.bisect_left(times, start)

    # -- the thread
    def _connect(self) -> tuple[Any, Any, Any]:
        deadline = time.monotonic() + self.reconnect_s
        while True:
            try:
                conn = BlockingClient(self.address, timeout=5)
                try:
                    sender = conn.create_sender(self.queue, create=True)
                    receiver = conn.create_receiver(self.queue, credit=10)
                except BaseException:
                    conn.close()
                    raise
                return conn, sender, receiver
            except Exception:
                if time.monotonic() > deadline or self._stop.is_set():
                    raise
                time.sleep(0.2)

    def _run(self) -> None:
        try:
            conn, sender, receiver = self._connect()
            t0 = time.monotonic()
            # the phase is kept across reconnects: messages missed while the broker was
            # away are not made up for in a burst
            skipped_in = skipped_out = 0
            while not self._stop.is_set():
                elapsed = time.monotonic() - t0
                try:
                    while len(self.sent) + skipped_in < int(self.rate_in * elapsed):
                        sender.send(b"x" * 32)
                        self.sent.append(time.time())
                    while len(self.received) + skipped_out < int(self.rate_out * elapsed):
                        try:
                            receiver.receive(timeout=1.0)
                        except Timeout:
                            break
                        receiver.accept()
                        self.received.append(time.time())
                except Exception:
                    self.reconnects += 1
                    try:
                        conn.close()
                    except Exception:
                        pass
                    conn, sender, receiver = self._connect()
                    elapsed = time.monotonic() - t0
                    skipped_in = int(self.rate_in * elapsed) - len(self.sent)
                    skipped_out = int(self.rate_out * elapsed) - len(self.received)
                    continue
                due_in = (len(self.sent) + skipped_in + 1) / self.rate_in
                due_out = (len(self.received) + skipped_out + 1) / self.rate_out
                wait = min(due_in, due_out) - (time.monotonic() - t0)
                if wait > 0:
                    self._stop.wait(min(wait, _TICK))
            conn.close()
        except BaseException as exc:  # handed to stop()
            self.error = exc
