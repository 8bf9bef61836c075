"""Queue churn on a genuine qpidd, as RPC clients make it: temporary reply queues
declared and deleted, with a plain blocking AMQP 1.0 client (``tests/amqp10_client.py``,
on the sans-I/O engine; not a transport).

Each queue is a dynamic receiver's node (qpidd declares an auto-delete queue for it
and deletes it when the receiver closes).  Receivers are opened ``batch`` at a time
and closed once all of them are attached, so a thousand queues take a few seconds.
"""

from __future__ import annotations

import time

from .amqp10_client import BlockingClient, Receiver

__all__ = ["churn_queues", "hold_queues"]


def hold_queues(address: str, count: int) -> BlockingClient:
    """Declare ``count`` temporary queues on the qpidd at ``address`` and keep them:
    they are deleted when the returned connection is closed."""
    conn = BlockingClient(address, timeout=10)
    try:
        _open_batch(conn, count)
    except BaseException:
        conn.close()
        raise
    return conn


def _open_batch(conn: BlockingClient, count: int) -> list[Receiver]:
    """Attach ``count`` dynamic receivers at once and wait for all of them."""
    from qmf_async.transport._amqp10_engine import Source, Target

    made = []
    for _ in range(count):
        name = conn._name("churn")
        handle = conn.engine.attach_receiver(name, Source(dynamic=True), Target(address=name),
                                             settled=True)
        receiver = Receiver(conn, handle, name, 0)
        conn.links[handle] = receiver
        made.append(receiver)
    conn.wait_for(lambda: all(r.attached or r.detached is not None for r in made),
                  f"the attach of {count} dynamic receivers")
    for receiver in made:
        receiver._check()
    return made


def churn_queues(address: str, count: int, *, batch: int = 100, timeout: float = 60.0) -> int:
    """Declare and delete ``count`` temporary queues on the qpidd at ``address``
    (``host:port``); returns how many were declared (and deleted).

    Raises:
        RuntimeError: the connection failed or the churn did not end within ``timeout``.
    """
    deadline = time.monotonic() + timeout
    made = 0
    try:
        with BlockingClient(address, timeout=timeout, container_id="queue-churn") as conn:
            while made < count:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"the churn did not end within {timeout} s")
                receivers = _open_batch(conn, min(batch, count - made))
                made += len(receivers)
                for receiver in receivers:
                    conn.engine.detach(receiver.handle)
                conn.wait_for(lambda rs=receivers: all(r.detached is not None for r in rs),
                              "the detach of a batch")
    except (OSError, TimeoutError) as exc:
        raise RuntimeError(f"queue churn on {address}: {exc}") from exc
    return made


if __name__ == "__main__":  # python -m tests.queue_churn HOST:PORT COUNT
    import sys

    print(churn_queues(sys.argv[1], int(sys.argv[2])))
