"""The AMQP 1.0 transport in pure Python: the sans-I/O client of ``_amqp10_engine.py``
driven from an asyncio stream, TLS from :mod:`ssl`.  It is the only AMQP 1.0 transport
(python-qpid-proton is not used at run time).

How the QMF terms of :class:`~qmf_async.transport.TransportProtocol` map onto AMQP 1.0
(qpidd's addressing of its exchanges, ``../shared/spec/amqp-1.0-legacy-filters-and-selectors.txt``):

- an *endpoint* is a name chosen here; each of its bindings ``(exchange, key)`` is one
  receiving link from source ``exchange`` with the filter
  ``apache.org:legacy-amqp-direct-binding:string`` (direct exchanges) or
  ``apache.org:legacy-amqp-topic-binding:string`` (the others) set to ``key``.  qpidd
  gives each such link its own exclusive, auto-deleted subscription queue, so two
  bindings of one endpoint that both match a message deliver it twice.
- ``publish(exchange=X, routing_key=K)`` sends on a link to target ``X`` with subject
  ``K``; a reply key ``R`` becomes ``reply_to = "amq.direct/R"`` (a value with a ``/``
  is sent as it is).  A received ``reply_to`` with a ``/`` is handed on as it is
  (``"amq.direct/R"``; the agent side splits it at the first ``/`` into exchange and
  subject); one without is an AMQP 1.0 node address (a queue, often a client's dynamic
  reply queue) and is handed on as ``"NODE/"``: answers go to that node itself.
- backpressure is link credit: each receiving link gets ``prefetch`` credit, topped up
  as the dispatcher takes deliveries; sends wait for credit.
- ``max_length`` and dead-lettering of endpoints have no AMQP 1.0 equivalent on qpidd:
  the subscription queue follows the broker's default queue policy and the link credit
  bounds what this process holds.

SASL: EXTERNAL (with a client certificate over TLS), PLAIN (with a password in the URL)
and ANONYMOUS, in that order when not restricted; SCRAM and GSSAPI are not supported
(asking for them raises :class:`~qmf_async.errors.UsageError`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from .. import names
from ..errors import (
    AuthenticationError,
    ConnectionLostError,
    EncodeError,
    NotConnectedError,
    ProtocolError,
    ProtocolMismatchError,
    QmfTimeout,
    TransportError,
    UsageError,
)
from ._amqp10_engine import (
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
    Source,
)
from ._amqp10_qmf import (
    binding_source,
    connect_error,
    connection_properties,
    default_mechanisms,
    outgoing_message,
    outgoing_reply_to,
    url_password,
)
from ._base import (
    AMQP10_CAPABILITIES,
    MANAGEMENT_EXCHANGE,
    QMF_CONTENT_TYPE,
    Body,
    BrokerAddress,
    Delivery,
    TlsOptions,
    TransportFactory,
    censor_url,
    check_prefetch,
    parse_url,
    sasl_mechanism_list,
    url_heartbeat,
)
from ._base import ConnectionState as _S
from ._base import Transport as TransportProtocol
from ._native_inbox import Inbox
from ._native_links import Links, Sender
from ._tls import ssl_context as _ssl_context

__all__ = ["Amqp10ConnectionError", "NativeAmqp10Transport"]

_log: Final = logging.getLogger("qmf_async.transport.amqp10")

_READ_SIZE: Final = 256 * 1024
_WRITE_HIGH_WATER: Final = 1 << 20
_UNLIMITED_CREDIT: Final = 10_000


class Amqp10ConnectionError(TransportError):
    """A connection failure as the APIs that mirror proton's blocking client
    (``qmf.client``) raise it: a plain :class:`~qmf_async.errors.TransportError`, with
    no proton behind it."""


class NativeAmqp10Transport:
    """One AMQP 1.0 connection carrying a QMF bus, in pure Python (conforms to
    :class:`~qmf_async.transport.TransportProtocol`)."""

    protocol: Final = "1.0"
    server_selectors: Final = True
    capabilities: Final = AMQP10_CAPABILITIES
    #: what ``qmf.client`` raises for a connection failure on this transport
    connection_error: Final = Amqp10ConnectionError

    def __init__(
        self,
        url: str,
        *,
        tls: TlsOptions | None = None,
        prefetch: int = 1000,
        name: str = "qmf-async",
        idle_timeout: float = 30.0,
        sasl_mechanisms: str | Sequence[str] | None = None,
        operation_timeout: float = 10.0,
    ) -> None:
        """Prepare a transport; nothing is sent before :meth:`connect`.  ``prefetch`` is
        each receiving link's credit (0: unlimited, in practice 10,000); ``name`` the
        connection's name shown by the broker; ``idle_timeout``: a broker silent that
        long is lost (half of it is announced to the broker; ``heartbeat=N`` in the URL
        makes it ``2 N``); ``sasl_mechanisms`` restricts the mechanisms tried;
        ``operation_timeout`` bounds each attach and each wait for credit.

        Raises:
            UsageError: a bad ``prefetch``, ``idle_timeout``, ``operation_timeout``, or a
                SASL mechanism this client does not speak (SCRAM, GSSAPI, ...).
        """
        check_prefetch(prefetch)
        if idle_timeout < 0 or operation_timeout <= 0:
            raise UsageError("idle_timeout must be >= 0 and operation_timeout positive")
        self._url = url
        self._tls = tls
        self._inbox = Inbox(prefetch or _UNLIMITED_CREDIT,
                            lambda: self._state in (_S.OPEN, _S.CONNECTING), lambda: self.where)
        self._name = name
        heartbeat = url_heartbeat(url)
        self._idle = float(idle_timeout) if heartbeat is None else 2.0 * heartbeat
        self._op_timeout = operation_timeout
        wanted = sasl_mechanism_list(sasl_mechanisms)
        self._mechanisms = list(wanted) if wanted is not None else None
        if wanted is not None:  # check now, as the engine would at connect
            Amqp10Connection(container_id="x", sasl_mechanisms=wanted)
        self._state = _S.NEW
        self._target: BrokerAddress | None = None
        self._engine: Amqp10Connection | None = None
        self._stream: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._opened: asyncio.Future[None] | None = None
        self._remote_closed: asyncio.Future[None] | None = None
        self._reader: asyncio.Task[None] | None = None
        self._ticker: asyncio.Task[None] | None = None
        self._links = Links()
        self._lost_callbacks: list[Callable[[BaseException], None]] = []
        self._lost_exc: ConnectionLostError | None = None
        self._lost_fired = False
        self._close_task: asyncio.Task[None] | None = None
        self._error: str | None = None

    # ------------------------------------------------------------------ properties

    @property
    def state(self) -> _S:
        """Where the connection is in its life."""
        return self._state

    @property
    def is_open(self) -> bool:
        """True while connected and not closing."""
        return self._state == _S.OPEN

    @property
    def where(self) -> str:
        """The broker address without credentials."""
        target = self._target
        if target is None:
            return censor_url(self._url) if isinstance(self._url, str) else repr(self._url)
        return target.server_where

    @property
    def local_address(self) -> str | None:
        """``host:port`` of this end of the connection's socket (None when not open);
        the broker names the connection after it."""
        writer = self._writer
        if writer is None or self._state not in (_S.OPEN, _S.CLOSING):
            return None
        name = writer.get_extra_info("sockname")
        if not isinstance(name, tuple) or len(name) < 2:
            return None
        return f"{name[0]}:{name[1]}"

    @property
    def backlog(self) -> int:
        """Deliveries received but not yet handed to the dispatcher."""
        return len(self._inbox.held)

    @property
    def malformed(self) -> int:
        """Messages dropped because they could not be decoded."""
        return self._inbox.malformed

    @property
    def unsupported(self) -> int:
        """Messages dropped because their body is not QMF's."""
        return self._inbox.unsupported

    @property
    def remote_properties(self) -> dict[str, Any]:
        """The broker's connection properties (``product``, ``version``, ...)."""
        return dict(self._engine.remote_properties) if self._engine is not None else {}

    # ------------------------------------------------------------------ connect

    async def connect(self, timeout: float = 10.0) -> None:
        """Open the TCP (TLS for ``amqps://``) connection, SASL, the AMQP connection and
        a session; may be called once.

        Raises:
            UsageError: malformed URL, bad TLS files, TLS options on an ``amqp://`` URL,
                or called twice.
            AuthenticationError: SASL failed.
            ProtocolMismatchError: the broker does not speak AMQP 1.0.
            TransportError: the broker cannot be reached or refused (cause chained).
            QmfTimeout: no open connection within ``timeout`` seconds.
        """
        if self._state != _S.NEW:
            raise UsageError(f"connect() called on a transport that is {self._state}")
        target = parse_url(self._url)
        if self._tls is not None and target.scheme != "amqps":
            raise UsageError("TLS options given for an amqp:// URL; use amqps://")
        tls = self._tls or TlsOptions()
        context = _ssl_context(tls) if target.scheme == "amqps" else None
        self._target = target
        self._state = _S.CONNECTING
        loop = asyncio.get_running_loop()
        self._opened = loop.create_future()
        self._remote_closed = loop.create_future()
        try:
            async with asyncio.timeout(timeout):
                await self._open(target, context, tls)
        except TimeoutError as exc:
            await self._abandon()
            raise QmfTimeout(f"no AMQP 1.0 connection to {target.where} within {timeout} s") \
                from exc
        except (OSError, ssl.SSLError) as exc:
            await self._abandon()
            raise TransportError(f"cannot connect to {target.where}: {exc}") from exc
        except BaseException:
            await self._abandon()
            raise
        self._state = _S.OPEN

    async def _open(self, target: BrokerAddress, context: ssl.SSLContext | None,
                    tls: TlsOptions) -> None:
        reader, writer = await asyncio.open_connection(
            target.host, target.port, ssl=context,
            server_hostname=target.host if context is not None else None, limit=_READ_SIZE)
        self._stream, self._writer = reader, writer
        password = url_password(self._url)
        mechanisms = self._mechanisms
        if mechanisms is None:
            mechanisms = default_mechanisms(bool(tls.certfile) and context is not None,
                                            password is not None)
        engine = Amqp10Connection(
            container_id=names.container_id(self._name),
            hostname=target.host,
            properties=connection_properties(self._name),
            sasl_mechanisms=mechanisms, user=target.user, password=password,
            idle_timeout=self._idle / 2)
        self._engine = self._inbox.engine = engine
        loop = asyncio.get_running_loop()
        engine.start(loop.time())
        self._flush()
        self._reader = loop.create_task(self._read_loop(), name=f"qmf-amqp10 reader {target.where}")
        self._ticker = loop.create_task(self._tick_loop(), name=f"qmf-amqp10 ticker {target.where}")
        assert self._opened is not None
        await asyncio.shield(self._opened)

    async def _abandon(self) -> None:
        self._state = _S.CLOSED
        await self._teardown()

    # ------------------------------------------------------------------ engine pump

    def _flush(self) -> None:
        engine, writer = self._engine, self._writer
        if engine is None or writer is None:
            return
        data = engine.data_to_send()
        if data and not writer.is_closing():
            writer.write(data)

    async def _read_loop(self) -> None:
        reader, engine = self._stream, self._engine
        assert reader is not None and engine is not None
        loop = asyncio.get_running_loop()
        cause: BaseException | None = None
        try:
            while True:
                data = await reader.read(_READ_SIZE)
                if not data:
                    break
                events = engine.receive_data(data, loop.time())
                self._handle(events)
                self._flush()
                writer = self._writer
                if writer is not None and writer.transport.get_write_buffer_size() \
                        > _WRITE_HIGH_WATER:
                    await writer.drain()
        except asyncio.CancelledError:
            raise
        except (AuthenticationError, ProtocolMismatchError) as exc:
            self._flush()
            self._fail_open(exc)
            cause = exc
        except ProtocolError as exc:
            self._flush()
            self._error = f"AMQP 1.0 protocol error: {exc}"
            cause = exc
        except (OSError, ssl.SSLError) as exc:
            cause = exc
        except Exception as exc:  # a bug here must not hang the callers
            _log.exception("AMQP 1.0 reader of %s failed", self.where)
            cause = exc
        self._mark_lost(cause, self._error or "the broker closed the connection")

    async def _tick_loop(self) -> None:
        loop = asyncio.get_running_loop()
        engine = self._engine
        assert engine is not None
        while self._state in (_S.CONNECTING, _S.OPEN, _S.CLOSING):
            events = engine.tick(loop.time())
            if events:
                self._handle(events)
            self._flush()
            deadline = engine.next_tick()
            delay = deadline - loop.time() if deadline is not None else 1.0
            await asyncio.sleep(min(max(delay, 0.01), 1.0))

    def _handle(self, events: list[Event]) -> None:
        engine = self._engine
        assert engine is not None
        unsettled: list[int] = []
        rejected: list[int] = []
        for event in events:
            if isinstance(event, MessageReceived):
                self._inbox.receive(event, self._links.receivers.get(event.handle),
                                    unsettled, rejected)
            elif isinstance(event, CreditGranted):
                self._links.credit(event)
            elif isinstance(event, Attached):
                self._links.attached(event)
            elif isinstance(event, Detached):
                why = self._links.detached(event, self.where)
                if why is not None and self._state == _S.OPEN:
                    self._mark_lost(None, why)
            elif isinstance(event, SessionBegun):
                if self._opened is not None and not self._opened.done():
                    self._opened.set_result(None)
            elif isinstance(event, Closed):
                self._on_closed(event)
            elif isinstance(event, SessionEnded):
                self._error = f"the broker ended the session: {event.error or 'no reason given'}"
                self._mark_lost(None, self._error)
            elif isinstance(event, Lost):
                self._error = event.reason
                self._fail_open(TransportError(f"cannot connect to {self.where}: {event.reason}"))
                self._mark_lost(None, event.reason)
        if self._state in (_S.OPEN, _S.CONNECTING):
            with contextlib.suppress(UsageError):
                if unsettled:
                    engine.settle(unsettled, "accepted")
                if rejected:
                    engine.settle(rejected, "rejected")

    def _fail_open(self, exc: BaseException) -> None:
        opened = self._opened
        if opened is not None and not opened.done():
            user = self._target.user if self._target else "?"
            opened.set_exception(connect_error(exc, self.where, user,
                                               self._mechanisms == ["EXTERNAL"]))

    def _on_closed(self, event: Closed) -> None:
        closed = self._remote_closed
        if closed is not None and not closed.done():
            closed.set_result(None)
        self._flush()
        if self._state == _S.CLOSING:
            return
        self._error = f"the broker closed the connection: {event.error or 'no reason given'}"
        self._fail_open(TransportError(f"{self.where} refused the connection: "
                                       f"{event.error or 'no reason given'}"))
        self._mark_lost(None, self._error)

    # ------------------------------------------------------------------ endpoints

    async def declare_management_exchange(self) -> None:
        """Attach the sender to ``qpid.management`` (checking that it exists).

        Raises:
            NotConnectedError: not open.
            TransportError: the broker has no such exchange.
        """
        await self._sender(MANAGEMENT_EXCHANGE)

    async def declare_exchange(self, name: str, kind: str = "topic") -> None:
        """qpidd has its exchanges (the QMF v2 ones included): attach the sender to
        ``name``, checking that it exists (``kind`` is not checked).

        Raises:
            NotConnectedError: not open.
            TransportError: the broker has no such exchange.
        """
        await self._sender(name)

    async def open_endpoint(
        self,
        name: str | None = None,
        *,
        bindings: Sequence[tuple[str, str]] = (),
        max_length: int | None = None,
        dead_letter_exchange: str | None = None,
        dead_letter_routing_key: str | None = None,
        no_ack: bool = True,
    ) -> str:
        """Name an endpoint (``qmf-<random>`` when ``name`` is None) and attach one
        receiving link per binding; returns the name.  ``max_length`` and the
        dead-letter options are accepted and not enforced (see the module docstring).

        Raises:
            UsageError: the name is in use or ``max_length`` is not positive.
            NotConnectedError: not open.
            TransportError: the broker refused a binding.
        """
        self._check_open()
        if max_length is not None and max_length < 1:
            raise UsageError(f"max_length must be positive, not {max_length!r}")
        endpoint = name or f"qmf-{uuid.uuid4().hex}"
        self._links.add_endpoint(endpoint, no_ack)
        await asyncio.gather(*(self.bind(endpoint, ex, key) for ex, key in bindings))
        return endpoint

    async def bind(self, endpoint: str, exchange: str, routing_key: str, *,
                   selector: str | None = None) -> None:
        """Attach a receiving link from ``exchange`` filtered on ``routing_key`` (and the
        JMS ``selector``, applied by the broker).

        Raises:
            UsageError: an unknown endpoint.
            NotConnectedError: not open.
            TransportError: the broker refused (no such exchange, ...).
            QmfTimeout: the broker did not answer the attach in time.
        """
        self._check_open()
        links = self._links
        bindings = links.bindings.get(endpoint)
        if bindings is None:
            raise UsageError(f"no endpoint {endpoint!r} on this transport")
        what = f"binding {exchange!r} {routing_key!r}"
        existing = bindings.get((exchange, routing_key, selector))
        if existing is not None:
            receiver = links.receivers.get(existing)
            if receiver is not None:
                await self._wait_attach(receiver.opened, what)
            return
        engine = self._engine
        assert engine is not None
        receiver = links.attach_receiver(
            engine, endpoint, binding_source(exchange, routing_key, selector),
            (exchange, routing_key, selector), links.no_ack.get(endpoint, True), self._inbox.credit)
        self._flush()
        try:
            await self._wait_attach(receiver.opened, what)
        except BaseException:
            links.drop_receiver(receiver.handle, self._engine)
            raise

    async def open_dynamic_endpoint(self, name: str | None = None) -> str:
        """Open an endpoint on a node the broker creates for this link alone (an AMQP
        1.0 dynamic source: on qpidd a temporary queue deleted with the link) and
        return the node's address; deliveries from it go to the dispatcher under the
        endpoint ``name`` (``qmf-<random>`` when None).  A ``reply_to`` equal to the
        address is sent as it is by :meth:`publish` (answers go to the node itself).

        Raises:
            UsageError: the name is in use.
            NotConnectedError: not open.
            TransportError: the broker refused the link; QmfTimeout: no attach in time.
        """
        self._check_open()
        endpoint = name or f"qmf-{uuid.uuid4().hex}"
        links = self._links
        links.add_endpoint(endpoint, True)
        engine = self._engine
        assert engine is not None
        receiver = links.attach_receiver(engine, endpoint, Source(dynamic=True), ("", "", None),
                                         True, self._inbox.credit)
        self._flush()
        try:
            await self._wait_attach(receiver.opened, "a dynamic reply node")
        except BaseException:
            links.drop_receiver(receiver.handle, self._engine)
            raise
        address = receiver.address
        if not address:
            links.drop_receiver(receiver.handle, self._engine)
            raise TransportError(f"{self.where} attached a dynamic node with no address")
        links.dynamic.add(address)
        return address

    async def unbind(self, endpoint: str, exchange: str, routing_key: str, *,
                     selector: str | None = None) -> None:
        """Detach the link of a binding made by :meth:`bind` (nothing when absent).

        Raises:
            NotConnectedError: not open.
        """
        self._check_open()
        handle = self._links.bindings.get(endpoint, {}).get((exchange, routing_key, selector))
        if handle is not None:
            self._links.drop_receiver(handle, self._engine)
            self._flush()

    async def _wait_attach(self, opened: asyncio.Future[None], what: str) -> None:
        try:
            async with asyncio.timeout(self._op_timeout):
                await asyncio.shield(opened)
        except TimeoutError as exc:
            raise QmfTimeout(f"{self.where} did not answer the attach of {what} "
                             f"within {self._op_timeout} s") from exc

    # ------------------------------------------------------------------ publish

    async def _sender(self, address: str) -> Sender:
        self._check_open()
        sender = self._links.senders.get(address)
        if sender is None:
            engine = self._engine
            assert engine is not None
            sender = self._links.attach_sender(engine, address)
            self._flush()
        if not sender.opened.done() or sender.opened.exception() is not None:
            await self._wait_attach(sender.opened, f"a sender to {address!r}")
        return sender

    async def publish(
        self,
        body: Body,
        *,
        exchange: str,
        routing_key: str,
        reply_to: str | None = None,
        content_type: str | None = QMF_CONTENT_TYPE,
        headers: Mapping[str, Any] | None = None,
        user_id: str | None = None,
        correlation_id: str | None = None,
    ) -> None:
        """Send ``body`` to ``exchange`` with subject ``routing_key``: bytes in a data
        section, a dict or list (QMF v2) as an amqp-value; waits for link credit.

        Raises:
            UsageError: something in the message cannot be encoded.
            NotConnectedError: not open (never opened, closed or lost).
            TransportError: the broker refused a sender to ``exchange``.
            QmfTimeout: no credit within the operation timeout.
        """
        sender = self._links.senders.get(exchange)
        if sender is None or not sender.opened.done() or self._state != _S.OPEN:
            sender = await self._sender(exchange)
        engine = self._engine
        assert engine is not None
        while not engine.can_send(sender.handle):
            sender.credit.clear()
            try:
                async with asyncio.timeout(self._op_timeout):
                    await sender.credit.wait()
            except TimeoutError as exc:
                raise QmfTimeout(f"{self.where} gave no credit to send to {exchange!r} "
                                 f"within {self._op_timeout} s") from exc
            self._check_open()
            if self._links.sender_handles.get(sender.handle) is not sender:
                sender = await self._sender(exchange)
        if reply_to not in self._links.dynamic:  # a dynamic node's address is sent as it is
            reply_to = outgoing_reply_to(reply_to)
        try:
            data = outgoing_message(body, routing_key, reply_to, content_type, headers,
                                    user_id, correlation_id)
        except EncodeError as exc:
            raise UsageError(f"cannot send this message: {exc}") from exc
        sender.tag += 1
        engine.send(sender.handle, data, tag=sender.tag.to_bytes(8, "big"))
        self._flush()
        writer = self._writer
        if writer is not None and writer.transport.get_write_buffer_size() > _WRITE_HIGH_WATER:
            try:
                await writer.drain()
            except (OSError, ssl.SSLError) as exc:
                raise ConnectionLostError(f"connection to {self.where} lost: {exc}") from exc

    def _check_open(self) -> None:
        if self._state != _S.OPEN:
            if self._lost_exc is not None:
                raise NotConnectedError(f"not connected to {self.where}: {self._lost_exc}")
            raise NotConnectedError(f"not connected to {self.where} ({self._state})")

    # ------------------------------------------------------------------ dispatch

    def set_dispatcher(self, dispatch: Callable[[Delivery], None]) -> None:
        """Hand every delivery to ``dispatch``; held deliveries go first, in order.

        Raises:
            Nothing: it does not raise.
        """
        self._inbox.set_dispatcher(dispatch, list(self._links.receivers.values()))
        self._flush()

    def on_lost(self, callback: Callable[[BaseException], None]) -> None:
        """Call ``callback(ConnectionLostError)`` once if the connection drops (not after
        :meth:`close`); at once (soon) if it already did.

        Raises:
            Nothing: it does not raise.
        """
        self._lost_callbacks.append(callback)
        if self._lost_fired and self._lost_exc is not None:
            asyncio.get_running_loop().call_soon(_call_lost, callback, self._lost_exc)

    def _mark_lost(self, cause: BaseException | None, what: str) -> None:
        if self._state not in (_S.CONNECTING, _S.OPEN):
            return
        was_open = self._state == _S.OPEN
        self._state = _S.LOST
        exc = ConnectionLostError(f"connection to {self.where} lost: {what}")
        if cause is not None:
            exc.__cause__ = cause
        self._lost_exc = exc
        opened = self._opened
        if opened is not None and not opened.done():
            opened.set_exception(TransportError(f"cannot connect to {self.where}: {what}"))
        self._links.fail_waiters(exc)
        writer = self._writer
        if writer is not None:
            writer.close()
        if was_open and not self._lost_fired:
            self._lost_fired = True
            loop = asyncio.get_running_loop()
            for callback in list(self._lost_callbacks):
                loop.call_soon(_call_lost, callback, exc)

    # ------------------------------------------------------------------ close

    async def close(self, timeout: float = 5.0) -> None:
        """Close the AMQP connection (waiting up to ``timeout`` for the broker's close)
        and the socket; idempotent, shielded from cancellation.

        Raises:
            Nothing: it does not raise.
        """
        if self._close_task is None:
            self._close_task = asyncio.get_running_loop().create_task(self._shutdown(timeout))
        with contextlib.suppress(Exception):
            await asyncio.shield(self._close_task)

    async def _shutdown(self, timeout: float) -> None:
        state = self._state
        if state == _S.CLOSED:
            return
        self._state = _S.CLOSING
        self._links.fail_waiters(NotConnectedError(f"transport to {self.where} closed"))
        engine, closed = self._engine, self._remote_closed
        if state == _S.OPEN and engine is not None and closed is not None:
            with contextlib.suppress(Exception):
                engine.close()
                self._flush()
                async with asyncio.timeout(timeout):
                    await asyncio.shield(closed)
        self._state = _S.CLOSED
        await self._teardown()

    async def _teardown(self) -> None:
        current = asyncio.current_task()
        for task in (self._reader, self._ticker):
            if task is not None and task is not current and not task.done():
                task.cancel()
                with contextlib.suppress(BaseException):
                    await asyncio.wait_for(task, 1.0)
        writer = self._writer
        if writer is not None:
            writer.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer.wait_closed(), 1.0)
        if self._opened is not None and not self._opened.done():
            self._opened.cancel()

    async def __aenter__(self) -> NativeAmqp10Transport:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"<NativeAmqp10Transport {self.where} {self._state}>"


def _call_lost(callback: Callable[[BaseException], None], exc: BaseException) -> None:
    try:
        callback(exc)
    except Exception:
        _log.exception("on_lost callback failed")


def _conforms(factory: type[NativeAmqp10Transport]) -> None:
    """Type-level check (mypy): the class is a TransportFactory making Transports."""
    _factory: TransportFactory = factory
    _transport: TransportProtocol = factory("amqp://localhost/")
    del _factory, _transport
