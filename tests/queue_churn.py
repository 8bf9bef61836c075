"""Queue churn on a genuine qpidd, as RPC clients make it: temporary reply queues
declared and deleted, with a plain AMQP 1.0 client (proton, not ours).

Each queue is a dynamic receiver's node (qpidd declares an auto-delete queue for it
and deletes it when the receiver closes).  Receivers are opened ``batch`` at a time
and closed once all of them are attached, so a thousand queues take a few seconds.
"""

from __future__ import annotations

from typing import Any

__all__ = ["churn_queues", "hold_queues"]


def hold_queues(address: str, count: int) -> Any:
    """Declare ``count`` temporary queues on the qpidd at ``address`` and keep them:
    they are deleted when the returned connection (proton's ``BlockingConnection``) is
    closed."""
    from proton.utils import BlockingConnection

    conn = BlockingConnection(address, timeout=10)
    try:
        for _ in range(count):
            conn.create_receiver(None, dynamic=True)
    except BaseException:
        conn.close()
        raise
    return conn


def churn_queues(address: str, count: int, *, batch: int = 100, timeout: float = 60.0) -> int:
    """Declare and delete ``count`` temporary queues on the qpidd at ``address``
    (``host:port``); returns how many were declared (and deleted).

    Raises:
        RuntimeError: the connection failed or the churn did not end within ``timeout``.
    """
    from proton.handlers import MessagingHandler
    from proton.reactor import Container, DynamicNodeProperties

    class _Churn(MessagingHandler):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__(prefetch=0)
            self.made = 0
            self.open: list[Any] = []
            self.attached = 0
            self.error: str | None = None

        def on_start(self, event: Any) -> None:
            self.conn = event.container.connect(address, reconnect=False)
            self._next_batch(event.container)

        def _next_batch(self, container: Any) -> None:
            n = min(batch, count - self.made)
            if n <= 0:
                self.conn.close()
                return
            self.attached = 0
            self.open = [container.create_receiver(
                self.conn, None, dynamic=True,
                options=DynamicNodeProperties({"lifetime-policy": "delete-on-close"}))
                for _ in range(n)]
            self.made += n

        def on_link_opened(self, event: Any) -> None:
            if event.receiver is None or event.receiver not in self.open:
                return
            self.attached += 1
            if self.attached == len(self.open):
                for r in self.open:
                    r.close()
                self._closed = 0

        def on_link_closed(self, event: Any) -> None:
            if event.receiver is None or event.receiver not in self.open:
                return
            self._closed += 1
            if self._closed == len(self.open):
                self._next_batch(event.container)

        def on_transport_error(self, event: Any) -> None:
            cond = event.transport.condition
            self.error = f"{cond.name}: {cond.description}" if cond else "transport error"
            event.connection.close()

    handler = _Churn()
    container = Container(handler)
    container.container_id = "queue-churn"
    container.timeout = timeout
    container.run()
    if handler.error is not None:
        raise RuntimeError(f"queue churn on {address}: {handler.error}")
    return handler.made


if __name__ == "__main__":  # python -m tests.queue_churn HOST:PORT COUNT
    import sys

    print(churn_queues(sys.argv[1], int(sys.argv[2])))
