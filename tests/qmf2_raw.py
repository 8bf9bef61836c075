"""A raw QMF v2 client: plain AMQP 1.0 on a blocking socket (``tests/amqp10_client.py``,
the project's sans-I/O engine with no transport, session or QMF layer of qmf_async).

Used to capture qpidd's real v2 traffic (``scripts/capture_qmf2.py``) and by the live
codec tests.  It keeps every received message as the exact bytes of its transfer, so
the project's AMQP 1.0 decoder sees what qpidd sent, not a re-encoding.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from qmf_async.wire import Described, Symbol, encode_amqp10_message

from .amqp10_client import BlockingClient

TOPIC_FILTER = "apache.org:legacy-amqp-topic-binding:string"


class RawV2Client:
    """One AMQP 1.0 connection to qpidd: a sender to ``qmf.default.direct``, a dynamic
    reply receiver (``replies``) and, when ``topic_key`` is given, a receiver on
    ``qmf.default.topic`` with that topic binding key (``topic``)."""

    def __init__(self, host: str, port: int, *, topic_key: str | None = None,
                 timeout: float = 10.0) -> None:
        self.timeout = timeout
        self.conn = BlockingClient(f"{host}:{port}", timeout=timeout,
                                   container_id=f"qmf2-raw-{uuid.uuid4().hex[:8]}")
        self.container_id = self.conn.container_id
        self.replies: list[bytes] = []
        self.topic: list[bytes] = []
        try:
            self._reply_link = self.conn.create_receiver(
                None, dynamic=True, credit=1000, name="replies", sink=self.replies)
            self.sender = self.conn.create_sender("qmf.default.direct")
            if topic_key is not None:
                self.conn.create_receiver(
                    "qmf.default.topic", credit=1000, name="topic", sink=self.topic,
                    filter={"qmf-binding": Described(Symbol(TOPIC_FILTER), topic_key)})
        except BaseException:
            self.conn.close()
            raise
        assert self._reply_link.address is not None
        self.reply_to: str = self._reply_link.address

    def wait_for(self, condition: Callable[[], bool], what: str,
                 timeout: float | None = None) -> None:
        """Pump the connection until ``condition()`` holds; raises TimeoutError."""
        self.conn.wait_for(condition, what, timeout)

    def send_encoded(self, encoded: bytes) -> None:
        """Send one message given as its AMQP 1.0 encoding (pre-settled)."""
        self.sender.send(encoded=encoded, settled=True)

    def send(self, opcode: str, body: Any, *, subject: str = "broker",
             correlation_id: str | None = None) -> str:
        """Send one v2 request (``method`` = ``request``); returns its correlation id."""
        cid = correlation_id or uuid.uuid4().hex
        self.send_encoded(encode_amqp10_message(
            body, subject=subject, reply_to=self.reply_to, correlation_id=cid,
            application_properties={"x-amqp-0-10.app-id": "qmf2", "qmf.opcode": opcode,
                                    "method": "request"}, body_kind="value"))
        return cid

    def close(self) -> None:
        self.conn.close()
