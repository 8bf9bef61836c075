"""A raw QMF v2 client on python-qpid-proton's engine, independent of qmf_async.

Used to capture qpidd's real v2 traffic (``scripts/capture_qmf2.py``) and by the live
codec tests.  It drives ``proton.Transport``/``Connection``/``Collector`` over a blocking
socket (proton's reactor did not report qpidd's pre-settled topic deliveries here), and
keeps every received message as the exact bytes of its transfer, so the project's
AMQP 1.0 decoder sees what qpidd sent, not a re-encoding.
"""

from __future__ import annotations

import select
import socket
import time
import uuid
from collections.abc import Callable
from typing import Any

from proton import Collector, Connection, Delivery, Described, Event, Message, symbol
from proton import Transport as PnTransport

TOPIC_FILTER = "apache.org:legacy-amqp-topic-binding:string"


class RawV2Client:
    """One AMQP 1.0 connection to qpidd: a sender to ``qmf.default.direct``, a dynamic
    reply receiver (``replies``) and, when ``topic_key`` is given, a receiver on
    ``qmf.default.topic`` with that topic binding key (``topic``)."""

    def __init__(self, host: str, port: int, *, topic_key: str | None = None,
                 timeout: float = 10.0) -> None:
        self.timeout = timeout
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setblocking(False)
        self.transport = PnTransport()
        self.conn = Connection()
        self.collector = Collector()
        self.conn.collect(self.collector)
        self.transport.sasl().allowed_mechs("ANONYMOUS")
        self.conn.container = f"qmf2-raw-{uuid.uuid4().hex[:8]}"
        self.conn.hostname = host
        self.transport.bind(self.conn)
        self.conn.open()
        self.session = self.conn.session()
        self.session.open()
        self.replies: list[bytes] = []
        self.topic: list[bytes] = []
        self._sinks: dict[str, list[bytes]] = {}
        rcv = self.session.receiver("replies")
        rcv.source.dynamic = True
        rcv.target.address = "replies"
        self._sinks["replies"] = self.replies
        rcv.open()
        rcv.flow(1000)
        self._reply_link = rcv
        self.sender = self.session.sender("requests")
        self.sender.target.address = "qmf.default.direct"
        self.sender.open()
        if topic_key is not None:
            trcv = self.session.receiver("topic")
            trcv.source.address = "qmf.default.topic"
            trcv.source.filter.put_dict(
                {symbol("qmf-binding"): Described(symbol(TOPIC_FILTER), topic_key)})
            trcv.target.address = "topic"
            self._sinks["topic"] = self.topic
            trcv.open()
            trcv.flow(1000)
        self.wait_for(lambda: rcv.remote_source.address is not None
                      and self.sender.credit > 0, "reply address and sender credit")
        self.reply_to: str = rcv.remote_source.address
        self._tag = 0

    # ------------------------------------------------------------------ engine pump
    def _pump(self, wait: float) -> None:
        pending = self.transport.pending()
        if pending > 0:
            try:
                sent = self.sock.send(self.transport.peek(pending))
                self.transport.pop(sent)
            except BlockingIOError:
                pass
        want_write = self.transport.pending() > 0
        readable, _, _ = select.select([self.sock], [self.sock] if want_write else [], [], wait)
        capacity = self.transport.capacity()
        if readable and capacity > 0:
            data = self.sock.recv(capacity)
            if not data:
                raise ConnectionError("qpidd closed the connection")
            self.transport.push(data)
        while True:
            event = self.collector.peek()
            if event is None:
                break
            self._handle(event)
            self.collector.pop()

    def _handle(self, event: Event) -> None:
        if event.type == Event.DELIVERY:
            dlv: Delivery = event.delivery
            link = dlv.link
            if link.is_sender:
                if dlv.remote_state or dlv.settled:
                    dlv.settle()
                return
            if not dlv.readable or dlv.partial:
                return
            self._sinks[link.name].append(link.recv(dlv.pending))
            link.advance()
            if not dlv.settled:
                dlv.update(Delivery.ACCEPTED)
            dlv.settle()
            if link.credit < 500:
                link.flow(1000 - link.credit)
        elif event.type in (Event.CONNECTION_REMOTE_CLOSE, Event.LINK_REMOTE_CLOSE):
            cond = event.context.remote_condition
            raise ConnectionError(f"qpidd closed {event.type}: {cond}")

    def wait_for(self, condition: Callable[[], bool], what: str,
                 timeout: float | None = None) -> None:
        """Pump the connection until ``condition()`` holds; raises TimeoutError."""
        limit = timeout or self.timeout
        deadline = time.monotonic() + limit
        while not condition():
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no {what} within {limit}s")
            self._pump(min(left, 0.1))

    # ------------------------------------------------------------------ sending
    def send_encoded(self, encoded: bytes) -> None:
        """Send one message given as its AMQP 1.0 encoding (pre-settled)."""
        self.wait_for(lambda: self.sender.credit > 0, "credit to send")
        self._tag += 1
        dlv = self.sender.delivery(str(self._tag).encode())
        self.sender.send(encoded)
        self.sender.advance()
        dlv.settle()
        self._pump(0)

    def send(self, opcode: str, body: Any, *, subject: str = "broker",
             correlation_id: str | None = None) -> str:
        """Send one v2 request (``method`` = ``request``), encoded by proton; returns
        its correlation id."""
        cid = correlation_id or uuid.uuid4().hex
        msg = Message(
            body=body, subject=subject, reply_to=self.reply_to, correlation_id=cid,
            properties={"x-amqp-0-10.app-id": "qmf2", "qmf.opcode": opcode,
                        "method": "request"})
        self.send_encoded(msg.encode())
        return cid

    def close(self) -> None:
        self.conn.close()
        try:
            self._pump(0)
        except OSError:
            pass
        self.sock.close()
