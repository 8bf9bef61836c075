"""A plain blocking AMQP 1.0 client for the tests, on the project's sans-I/O engine
(``Amqp10Connection``) and a blocking socket: no asyncio, no transport, no QMF.

It replaces the raw python-qpid-proton clients the qpidd tests used to make traffic
(queues created on demand, messages sent and consumed, temporary queues held and churned,
raw QMF v2 requests), so that the suite needs no proton.  It speaks only what those
tests need: SASL ANONYMOUS (PLAIN with a password in the URL), one session, senders that
wait for the broker's outcome, receivers with credit (dynamic ones too), and errors as
:class:`LinkDetached` (the broker refused or detached a link) and :class:`Timeout`.
"""

from __future__ import annotations

import contextlib
import select
import socket
import time
import uuid
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from qmf_async.transport._amqp10_engine import (
    Amqp10Connection,
    Attached,
    Closed,
    CreditGranted,
    Detached,
    Event,
    Lost,
    MessageReceived,
    SessionBegun,
    SessionEnded,
    Settled,
    Source,
    Target,
)
from qmf_async.transport._amqp10_qmf import url_password
from qmf_async.transport._base import broker_url, parse_url
from qmf_async.wire import (
    Amqp10Message,
    Described,
    Symbol,
    decode_amqp10_message,
    encode_amqp10_message,
)

__all__ = ["BlockingClient", "LinkDetached", "Receiver", "Sender", "Timeout"]

_TARGET = 0x29


class Timeout(TimeoutError):
    """Nothing arrived in time."""


class LinkDetached(ConnectionError):
    """The broker refused (attached and detached) or later detached a link."""


class _CreateOnDemand:
    """A target asking qpidd to create the queue when the sender attaches (the
    ``create-on-demand`` capability)."""

    def __init__(self, address: str) -> None:
        self.address = address

    def encode(self) -> Described:
        return Described(_TARGET, [self.address, None, None, None, None, None,
                                   Symbol("create-on-demand")])


class _Link:
    def __init__(self, client: BlockingClient, handle: int, name: str) -> None:
        self.client = client
        self.handle = handle
        self.name = name
        self.attached = False
        self.address: str | None = None
        self.detached: str | None = None

    def _check(self) -> None:
        if self.detached is not None:
            raise LinkDetached(f"link {self.name!r} detached: {self.detached}")

    def close(self) -> None:
        """Detach the link and wait for the broker's detach."""
        if self.detached is not None:
            return
        engine = self.client.engine
        with contextlib.suppress(Exception):
            engine.detach(self.handle)
            self.client.wait_for(lambda: self.detached is not None, "the detach")


class Sender(_Link):
    """A sending link (made by :meth:`BlockingClient.create_sender`)."""

    anonymous = False

    def send(self, body: Any = None, *, subject: str | None = None,
             properties: Mapping[str, Any] | None = None, reply_to: str | None = None,
             correlation_id: Any = None, encoded: bytes | None = None,
             settled: bool = False) -> None:
        """Send one message: ``body`` (``bytes`` as a data section, anything else as an
        amqp-value) or the message's own ``encoded`` bytes.  Unsettled (the default), it
        waits for the broker's outcome.

        Raises:
            LinkDetached: the link was detached; RuntimeError: the broker did not accept.
            Timeout: no credit or no outcome in time.
        """
        self._check()
        client = self.client
        client.wait_for(lambda: self.detached is not None or client.engine.can_send(self.handle),
                        f"credit to send on {self.name!r}")
        self._check()
        if encoded is None:
            is_data = isinstance(body, (bytes, bytearray))
            encoded = encode_amqp10_message(
                body, subject=subject, reply_to=reply_to, correlation_id=correlation_id,
                application_properties=properties, body_kind="data" if is_data else "value")
        client.tag += 1
        did = client.engine.send(self.handle, encoded, tag=client.tag.to_bytes(8, "big"),
                                 settled=settled)
        client.pump(0)
        if settled:
            return
        client.wait_for(lambda: did in client.outcomes or self.detached is not None,
                        f"the outcome of a message on {self.name!r}")
        self._check()
        outcome = client.outcomes.pop(did)
        if outcome != "accepted":
            raise RuntimeError(f"the broker did not accept a message on {self.name!r}: "
                               f"{outcome}")


class Receiver(_Link):
    """A receiving link (made by :meth:`BlockingClient.create_receiver`); ``address``
    is the source's address in the broker's attach (a dynamic node's name)."""

    def __init__(self, client: BlockingClient, handle: int, name: str, credit: int,
                 sink: list[bytes] | None = None) -> None:
        super().__init__(client, handle, name)
        self.credit = credit
        #: when given, every delivery's payload is appended here as it arrives (and
        #: accepted, the credit kept up) instead of waiting for :meth:`receive`
        self.sink = sink
        self.raw: deque[tuple[int, bytes, bool]] = deque()
        self._last: tuple[int, bool] | None = None

    def receive_raw(self, timeout: float = 10.0) -> bytes:
        """The next delivery's payload (the message's exact bytes); tops the credit up.

        Raises:
            Timeout: nothing within ``timeout`` seconds; LinkDetached: detached.
        """
        self._check()
        self.client.wait_for(lambda: bool(self.raw) or self.detached is not None,
                             f"a message on {self.name!r}", timeout)
        if not self.raw:
            self._check()
        did, payload, settled = self.raw.popleft()
        self._last = (did, settled)
        engine = self.client.engine
        if engine.link_credit(self.handle) < max(1, self.credit // 2):
            engine.flow(self.handle, self.credit)
            self.client.pump(0)
        return payload

    def receive(self, timeout: float = 10.0) -> Amqp10Message:
        """The next message, decoded (see :meth:`receive_raw`).

        Raises:
            Timeout: nothing within ``timeout`` seconds; LinkDetached: detached.
        """
        return decode_amqp10_message(self.receive_raw(timeout))

    def accept(self) -> None:
        """Accept (settle) the last message received."""
        if self._last is not None and not self._last[1]:
            self.client.engine.settle([self._last[0]], "accepted")
            self.client.pump(0)
        self._last = None


class BlockingClient:
    """One AMQP 1.0 connection with one session to ``address`` (``host:port`` or an
    ``amqp://`` URL); opened by the constructor.

    Raises (constructor):
        ConnectionError: refused or closed; Timeout: not open within ``timeout``.
    """

    def __init__(self, address: str, *, timeout: float = 10.0,
                 container_id: str | None = None) -> None:
        url = broker_url(address)
        target = parse_url(url)
        self.timeout = timeout
        self.container_id = container_id or f"blocking-{uuid.uuid4().hex[:8]}"
        password = url_password(url)
        self.engine = Amqp10Connection(
            container_id=self.container_id, hostname=target.host,
            sasl_mechanisms=("PLAIN",) if password else ("ANONYMOUS",),
            user=target.user, password=password)
        self.sock = socket.create_connection((target.host, target.port), timeout=timeout)
        self.sock.setblocking(False)
        self.tag = 0
        self.outcomes: dict[int, str | None] = {}
        self.links: dict[int, _Link] = {}
        self.closed: str | None = None
        self._begun = False
        self._seq = 0
        self.engine.start(time.monotonic())
        try:
            self.wait_for(lambda: self._begun, "the connection to open")
        except BaseException:
            self.sock.close()
            raise

    # ------------------------------------------------------------------ pump

    def pump(self, wait: float) -> None:
        """Write what is queued, read what arrives within ``wait`` seconds, handle it.

        Raises:
            ConnectionError: the broker closed the connection.
        """
        out = self.engine.data_to_send()
        if out:
            self.sock.setblocking(True)
            try:
                self.sock.sendall(out)
            finally:
                self.sock.setblocking(False)
        readable, _, _ = select.select([self.sock], [], [], wait)
        if not readable:
            return
        try:
            data = self.sock.recv(1 << 18)
        except BlockingIOError:
            return
        if not data:
            self.closed = self.closed or "the broker closed the socket"
            raise ConnectionError(f"AMQP 1.0 connection lost: {self.closed}")
        self._handle(self.engine.receive_data(data, time.monotonic()))
        out = self.engine.data_to_send()
        if out:
            self.sock.setblocking(True)
            try:
                self.sock.sendall(out)
            finally:
                self.sock.setblocking(False)

    def _handle(self, events: list[Event]) -> None:
        for event in events:
            if isinstance(event, SessionBegun):
                self._begun = True
            elif isinstance(event, MessageReceived):
                link = self.links.get(event.handle)
                if isinstance(link, Receiver) and link.sink is not None:
                    link.sink.append(event.payload)
                    if not event.settled:
                        self.engine.settle([event.delivery_id], "accepted")
                    if self.engine.link_credit(link.handle) < max(1, link.credit // 2):
                        self.engine.flow(link.handle, link.credit)
                elif isinstance(link, Receiver):
                    link.raw.append((event.delivery_id, event.payload, event.settled))
            elif isinstance(event, Attached):
                link = self.links.get(event.handle)
                if link is not None and event.present:
                    link.attached = True
                    link.address = event.address
            elif isinstance(event, Detached):
                link = self.links.pop(event.handle, None)
                if link is not None:
                    link.detached = str(event.error) if event.error else "no reason given"
            elif isinstance(event, Settled):
                self.outcomes[event.delivery_id] = event.outcome
            elif isinstance(event, (Closed, SessionEnded)):
                self.closed = str(event.error) if event.error else "closed by the broker"
                raise ConnectionError(f"the broker closed the AMQP 1.0 connection: "
                                      f"{self.closed}")
            elif isinstance(event, Lost):
                self.closed = event.reason
                raise ConnectionError(event.reason)
            elif isinstance(event, CreditGranted):
                pass

    def wait_for(self, condition: Callable[[], bool], what: str,
                 timeout: float | None = None) -> None:
        """Pump until ``condition()`` holds.

        Raises:
            Timeout: not within ``timeout`` (the client's timeout when None).
            ConnectionError: the connection was lost meanwhile.
        """
        limit = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + limit
        while not condition():
            left = deadline - time.monotonic()
            if left <= 0:
                raise Timeout(f"no {what} within {limit} s")
            self.pump(min(left, 0.1))

    # ------------------------------------------------------------------ links

    def _name(self, kind: str) -> str:
        self._seq += 1
        return f"{self.container_id}-{kind}-{self._seq}"

    def _attached(self, link: _Link) -> None:
        self.links[link.handle] = link
        self.pump(0)
        anonymous = isinstance(link, Sender) and link.anonymous
        self.wait_for(lambda: (link.attached and (link.address is not None or anonymous))
                      or link.detached is not None, f"the attach of {link.name!r}")
        link._check()

    def create_sender(self, address: str | None, *, create: bool = False) -> Sender:
        """A sender to ``address`` (None: the anonymous relay, messages name their
        ``to``; ``create``: qpidd creates the queue on demand).

        Raises:
            LinkDetached: the broker refused it; Timeout: no attach in time.
        """
        target: Any = _CreateOnDemand(address or "") if create else Target(address=address)
        name = self._name("sender")
        handle = self.engine.attach_sender(name, target, settled=False)
        sender = Sender(self, handle, name)
        sender.anonymous = address is None
        self._attached(sender)
        return sender

    def create_receiver(self, address: str | None = None, *, credit: int = 10,
                        dynamic: bool = False, filter: Mapping[str, Any] | None = None,
                        name: str | None = None, sink: list[bytes] | None = None) -> Receiver:
        """A receiver from ``address`` (or from a dynamic node the broker makes, its
        name in ``.address``) with ``credit`` (0: none granted), ``filter`` the
        source's filters.  Deliveries come unsettled (:meth:`Receiver.accept`), or go
        to ``sink`` as they arrive (see :class:`Receiver`).

        Raises:
            LinkDetached: the broker refused it; Timeout: no attach in time.
        """
        name = name or self._name("receiver")
        source = Source(address=address, dynamic=dynamic, filter=filter)
        handle = self.engine.attach_receiver(name, source, Target(address=name),
                                             settled=False)
        receiver = Receiver(self, handle, name, credit, sink)
        if credit:
            self.engine.flow(handle, credit)
        self._attached(receiver)
        return receiver

    def close(self) -> None:
        """Close the connection (waiting briefly for the broker's close) and the socket."""
        try:
            if self.closed is None:
                self.engine.close()
                with contextlib.suppress(Exception):
                    self.wait_for(lambda: self.closed is not None, "the close", 2.0)
        finally:
            self.sock.close()

    def __enter__(self) -> BlockingClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
