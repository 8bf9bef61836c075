"""AMQP 0-9-1 transport: with its aiormq helpers (``_aiormq_glue.py``), the only module
of qmf-async that imports aiormq (and pamqp).

It speaks QMF terms (endpoints, bindings, publish a body with a reply key, deliveries)
and no aiormq type crosses its interface, so a second transport (AMQP 1.0 to qpidd) can
offer the same surface.

Design notes:

* Three channels: one consumes (all endpoints), one publishes, one runs declarations and
  bindings.  A broker error that closes a channel (publishing to a missing exchange, a bad
  binding) therefore never stops consumption; the publish and control channels are
  reopened on next use.
* aiormq starts one task per delivery, in arrival order.  Our consumer callback never
  awaits.  A delivery of a ``no_ack=True`` endpoint that finds the buffer empty (and
  the transport open, with a dispatcher) is dispatched at once, inside that callback:
  every earlier delivery has then been dispatched already, so the order holds, and no
  reader wake-up is spent on it.  Any other delivery is appended to one FIFO buffer, and
  one reader task hands the buffer to the dispatcher, in arrival order, one delivery at
  a time.  On endpoints opened with ``no_ack=False`` the reader acknowledges after
  dispatch (``multiple=True``, once per batch), so ``basic_qos`` prefetch bounds what the
  buffer holds and the broker keeps the rest (and applies ``x-max-length`` to it).  On
  ``no_ack=True`` endpoints the broker pushes without limit; they are meant for replies,
  whose volume the requester controls.
* Nothing here cancels an aiormq RPC: control operations run as shielded tasks, the
  connect timeout closes the whole connection instead of leaving a half-open channel.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import ssl
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any, Final, TypeVar

import aiormq
import yarl
from pamqp import commands as spec

from ..errors import (
    ConnectionLostError,
    EncodeError,
    NotConnectedError,
    QmfError,
    QmfTimeout,
    TransportError,
    UsageError,
)
from ..wire import encode_v2_body
from ._aiormq_glue import (
    SASL_MECHANISMS,
    abort,
    connect_error,
    message_id,
    publishes_through,
    queue_arguments,
    quiet_aiormq_loggers,
    retrieve,
    to_delivery,
)
from ._aiormq_glue import HeartbeatConnection as _Connection
from ._base import (
    AMQP091_CAPABILITIES,
    MANAGEMENT_EXCHANGE,
    QMF_CONTENT_TYPE,
    Body,
    BrokerAddress,
    Delivery,
    TlsOptions,
    TransportFactory,
    censor_url,
    check_prefetch,
    client_process_properties,
    parse_url,
    sasl_mechanism_list,
)
from ._base import ConnectionState as _S
from ._base import Transport as TransportProtocol
from ._tls import ssl_context as _ssl_context

__all__ = ["AiormqTransport", "Delivery", "TlsOptions", "Transport", "parse_url"]

log = logging.getLogger("qmf_async.transport")

_T = TypeVar("_T")

#: most deliveries handed to the dispatcher between two acks / two yields to the loop
_MAX_BATCH: Final = 256


class AiormqTransport:
    """One AMQP 0-9-1 connection carrying a QMF bus (conforms to
    :class:`~qmf_async.transport.Transport`).

    Lifecycle: ``connect()`` once, then ``declare_management_exchange()``,
    ``open_endpoint()``, ``bind()``, ``publish()``; ``close()`` at the end.  Every
    delivery of every endpoint goes to the one dispatcher given to
    :meth:`set_dispatcher`; deliveries wait (unacknowledged) until one is set.
    """

    #: the AMQP version this transport speaks
    protocol: Final = "0-9-1"
    #: bind(selector=...) is ignored: AMQP 0-9-1 has no message selectors
    server_selectors: Final = False
    #: what it can do (the console reads this)
    capabilities: Final = AMQP091_CAPABILITIES

    def __init__(
        self,
        url: str,
        *,
        tls: TlsOptions | None = None,
        prefetch: int = 1000,
        name: str = "qmf-async",
        sasl_mechanisms: str | Sequence[str] | None = None,
    ) -> None:
        """Prepare a transport; nothing is sent before :meth:`connect`.

        ``prefetch`` is the ``basic_qos`` prefetch count of acknowledging endpoints
        (0 = unlimited); ``name`` is shown by the broker as the connection name;
        ``sasl_mechanisms``: the first of these that AMQP 0-9-1 here supports (PLAIN,
        EXTERNAL) is used (default PLAIN, with the URL's user and password).

        Raises:
            UsageError: ``prefetch`` is negative or not an int, or a malformed
                mechanism name.
        """
        check_prefetch(prefetch)
        quiet_aiormq_loggers()
        wanted = sasl_mechanism_list(sasl_mechanisms)
        self._mechanism: str | None = None
        if wanted is not None:
            usable = [m for m in wanted if m in SASL_MECHANISMS]
            # none usable: ask for the first anyway, so the broker's refusal names it
            self._mechanism = usable[0] if usable else wanted[0]
        self._url = url
        self._tls = tls
        self._prefetch = prefetch
        self._name = name
        self._batch = min(_MAX_BATCH, max(1, prefetch // 2)) if prefetch else _MAX_BATCH

        self._state = _S.NEW
        self._target: BrokerAddress | None = None
        self._user_id: str | None = None
        self._conn: aiormq.Connection | None = None
        self._consume_ch: Any = None
        self._publish_ch: Any = None
        self._control_ch: Any = None
        self._publish_lock = asyncio.Lock()
        self._control_lock = asyncio.Lock()
        self._endpoints: dict[str, str] = {}  # endpoint -> consumer tag

        self._buffer: collections.deque[tuple[Delivery, int]] = collections.deque()
        self._dispatch: Callable[[Delivery], None] | None = None
        self._wakeup: asyncio.Future[None] | None = None
        self._reader: asyncio.Task[None] | None = None
        self._stop_reader = False

        self._lost_callbacks: list[Callable[[BaseException], None]] = []
        self._lost_exc: ConnectionLostError | None = None
        self._lost_fired = False
        self._setup_task: asyncio.Task[None] | None = None
        self._close_task: asyncio.Task[None] | None = None
        self._background: set[asyncio.Task[Any]] = set()

    # ------------------------------------------------------------------ properties

    @property
    def state(self) -> _S:
        """Where the connection is in its life."""
        return self._state

    @property
    def is_open(self) -> bool:
        """True while connected and not closing."""
        conn = self._conn
        return self._state == _S.OPEN and conn is not None and not conn.is_closed

    @property
    def where(self) -> str:
        """The broker address without credentials (for messages and logs)."""
        if self._target is None:
            return censor_url(self._url) if isinstance(self._url, str) else repr(self._url)
        return self._target.where

    @property
    def backlog(self) -> int:
        """Deliveries received but not yet handed to the dispatcher."""
        return len(self._buffer)

    @property
    def local_address(self) -> None:
        """None: RabbitMQ does not name a connection's QMF objects after its address."""
        return None

    # ------------------------------------------------------------------ connect

    async def connect(self, timeout: float = 10.0) -> None:
        """Open the connection and its channels; may be called once.

        Raises:
            UsageError: malformed URL, bad TLS files, TLS options on an ``amqp://``
                URL, or the transport was already connected or closed.
            TransportError: the broker refused the connection (unreachable, wrong
                credentials, unknown vhost, ...); the cause is chained.
            QmfTimeout: no connection within ``timeout`` seconds.
        """
        if self._state != _S.NEW:
            raise UsageError(f"connect() called on a transport that is {self._state}")
        target = parse_url(self._url)
        if self._tls is not None and target.scheme != "amqps":
            raise UsageError("TLS options given for an amqp:// URL; use amqps://")
        context = _ssl_context(self._tls or TlsOptions()) if target.scheme == "amqps" else None
        self._target = target
        # the user RabbitMQ will know this connection as: stamped on every message
        # (RabbitMQ refuses a user id that is not the connection's user, so a receiver
        # can trust it); with EXTERNAL the broker names the user from the certificate
        external = self._mechanism == "EXTERNAL" or (
            self._mechanism is None and "auth=external" in self._url.lower())
        self._user_id = None if external else target.user
        self._state = _S.CONNECTING

        setup = asyncio.get_running_loop().create_task(self._open(target, context))
        self._setup_task = setup
        try:
            done, _ = await asyncio.wait({setup}, timeout=timeout)
        except asyncio.CancelledError:
            setup.cancel()
            await asyncio.shield(self._abandon_setup(setup))
            raise
        if not done:
            setup.cancel()
            await asyncio.shield(self._abandon_setup(setup))
            raise QmfTimeout(f"no connection to {target.where} within {timeout} s")
        if setup.cancelled() or self._state != _S.CONNECTING:  # close() ran meanwhile
            await asyncio.shield(self._abandon_setup(setup))
            raise NotConnectedError(f"transport to {target.where} closed while connecting")
        exc = setup.exception()
        if exc is None and (self._conn is None or self._conn.is_closed):
            exc = ConnectionLostError(f"connection to {target.where} closed during setup")
        if exc is not None:
            await asyncio.shield(self._abandon_setup(setup))
            if isinstance(exc, QmfError):
                raise exc
            raise connect_error(exc, target, self._mechanism) from exc
        self._state = _S.OPEN
        self._reader = asyncio.get_running_loop().create_task(
            self._read_loop(), name=f"qmf-transport-reader {target.where}"
        )

    async def _open(self, target: BrokerAddress, context: ssl.SSLContext | None) -> None:
        url = yarl.URL(self._url)
        if self._mechanism is not None:
            url = url.update_query(auth=self._mechanism.lower())
        conn = _Connection(url, context=context)
        conn.vhost = target.vhost  # our parsing of the URL path is authoritative
        self._conn = conn
        await conn.connect(client_properties={"connection_name": self._name,
                                              **client_process_properties()})
        self._consume_ch = await conn.channel(publisher_confirms=False)
        self._publish_ch = await conn.channel(publisher_confirms=False)
        self._control_ch = await conn.channel(publisher_confirms=False)
        if self._prefetch:
            await self._consume_ch.basic_qos(prefetch_count=self._prefetch)
        conn.closing.add_done_callback(self._on_connection_closed)
        self._consume_ch.closing.add_done_callback(self._on_consume_channel_closed)
        callbacks = getattr(self._consume_ch, "on_consumer_cancel_callbacks", None)
        if callbacks is not None:
            callbacks.add(self._on_consumer_cancelled)

    async def _abandon_setup(self, setup: asyncio.Task[None]) -> None:
        """Wait for a cancelled or failed setup, then close what it opened."""
        await asyncio.gather(setup, return_exceptions=True)
        conn, self._conn = self._conn, None
        self._consume_ch = self._publish_ch = self._control_ch = None
        if self._state == _S.CONNECTING:
            self._state = _S.CLOSED
        if conn is not None and not conn.is_closed:
            try:
                await asyncio.wait_for(conn.close(None), timeout=5.0)
            except Exception as exc:  # best effort cleanup
                log.debug("closing a failed connection attempt: %r", exc)

    # ------------------------------------------------------------------ declarations

    async def declare_management_exchange(self) -> None:
        """Declare the durable topic exchange ``qpid.management`` (always the same way).

        Raises:
            NotConnectedError: the transport is not open.
            TransportError: the broker refused (e.g. it exists with other arguments).
        """
        await self._control(
            "exchange.declare qpid.management",
            lambda ch: ch.exchange_declare(
                exchange=MANAGEMENT_EXCHANGE,
                exchange_type="topic",
                durable=True,
                auto_delete=False,
                internal=False,
            ),
        )

    async def declare_exchange(self, name: str, kind: str = "topic") -> None:
        """Declare the durable exchange ``name`` of type ``kind`` (``topic``,
        ``direct``); the QMF v2 exchanges on RabbitMQ, as qpidd has them.

        Raises:
            NotConnectedError: the transport is not open.
            TransportError: the broker refused (e.g. it exists with another type).
        """
        await self._control(
            f"exchange.declare {name}",
            lambda ch: ch.exchange_declare(
                exchange=name, exchange_type=kind, durable=True, auto_delete=False,
                internal=False),
        )

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
        """Declare an exclusive auto-delete queue, bind it and consume from it.

        ``name=None`` lets the broker name the queue.  ``max_length`` caps the ready
        messages, dropping the oldest (to ``dead_letter_exchange`` when given); it
        only bites with ``no_ack=False``, where unacknowledged deliveries are limited
        by ``prefetch``.  Returns the queue name.

        Raises:
            UsageError: bad ``max_length`` or bindings.
            NotConnectedError: the transport is not open.
            TransportError: the broker refused the declaration or a binding.
        """
        if max_length is not None and (
            not isinstance(max_length, int) or isinstance(max_length, bool) or max_length < 0
        ):
            raise UsageError(f"max_length must be an int >= 0, not {max_length!r}")
        pairs = [(str(ex), str(key)) for ex, key in bindings]
        arguments = queue_arguments(max_length, dead_letter_exchange, dead_letter_routing_key)

        async def run(ch: Any) -> str:
            ok = await ch.queue_declare(
                queue=name or "",
                exclusive=True,
                auto_delete=True,
                arguments=arguments or None,
            )
            queue: str = ok.queue
            for exchange, key in pairs:
                await ch.queue_bind(queue, exchange, routing_key=key)
            consume_ch = self._consume_ch
            if consume_ch is None or consume_ch.is_closed:
                raise NotConnectedError(f"transport to {self.where} is not open")
            consume_ok = await consume_ch.basic_consume(
                queue, self._consumer(queue, no_ack), no_ack=no_ack
            )
            self._endpoints[queue] = consume_ok.consumer_tag
            return queue

        return await self._control(f"open endpoint {name or '(server-named)'}", run)

    async def bind(self, endpoint: str, exchange: str, routing_key: str, *,
                   selector: str | None = None) -> None:
        """Bind ``endpoint`` to ``exchange`` with ``routing_key``.

        Raises:
            NotConnectedError: the transport is not open.
            TransportError: the broker refused (unknown exchange or queue).
        """
        await self._control(
            f"queue.bind {endpoint} -> {exchange}/{routing_key}",
            lambda ch: ch.queue_bind(endpoint, exchange, routing_key=routing_key),
        )

    async def unbind(self, endpoint: str, exchange: str, routing_key: str, *,
                     selector: str | None = None) -> None:
        """Remove the binding of ``endpoint`` to ``exchange`` with ``routing_key``.

        Raises:
            NotConnectedError: the transport is not open.
            TransportError: the broker refused.
        """
        await self._control(
            f"queue.unbind {endpoint} -> {exchange}/{routing_key}",
            lambda ch: ch.queue_unbind(endpoint, exchange, routing_key=routing_key),
        )

    async def _control(self, what: str, op: Callable[[Any], Coroutine[Any, Any, _T]]) -> _T:
        """Run ``op`` on the control channel as a shielded task and map its errors.

        A cancelled caller does not cancel the aiormq RPCs (that would close the
        channel): the operation finishes in the background.
        """
        self._check_open()
        task = asyncio.get_running_loop().create_task(self._control_op(what, op))
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            if not task.done():
                task.add_done_callback(retrieve)
                self._background.add(task)
                task.add_done_callback(self._background.discard)
            raise

    async def _control_op(self, what: str, op: Callable[[Any], Coroutine[Any, Any, _T]]) -> _T:
        try:
            async with self._control_lock:
                ch = self._control_ch
                if ch is None or ch.is_closed:
                    self._check_open()
                    ch = self._control_ch = await self._conn_checked().channel(
                        publisher_confirms=False
                    )
                return await op(ch)
        except QmfError:
            raise
        except Exception as exc:
            raise self._op_error(what, exc) from exc

    def _op_error(self, what: str, exc: BaseException) -> QmfError:
        if self._state != _S.OPEN or self._conn is None or self._conn.is_closed:
            if self._lost_exc is not None:
                return NotConnectedError(f"{what}: {self._lost_exc}")
            return NotConnectedError(f"{what}: transport to {self.where} is not open")
        if isinstance(exc, (TypeError, ValueError)):
            return UsageError(f"{what}: {exc}")
        return TransportError(f"{what} failed on {self.where}: {exc}")

    # ------------------------------------------------------------------ publish

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
        """Send ``body`` to ``exchange`` with ``routing_key``; no broker confirm.  A dict
        or list body (QMF v2) goes in the AMQP 0-10 map/list encoding with content
        type ``amqp/map``/``amqp/list``.

        ``reply_to`` is the plain reply key (the responder publishes to
        ``amq.direct`` with it).  ``user_id`` must equal the authenticated user or
        RabbitMQ drops the message and closes the publish channel (reopened on the
        next publish); by default it is the URL's user (none with EXTERNAL), which
        RabbitMQ checks, so an agent can trust the user id of a request.

        Raises:
            UsageError: the body, a header value or the routing key cannot be sent.
            NotConnectedError: the transport is not open (never opened, closed, lost).
            TransportError: the publish channel could not be (re)opened.
        """
        if not isinstance(body, (bytes, bytearray)):
            try:
                content_type, body = encode_v2_body(body)
            except EncodeError as exc:
                raise UsageError(f"cannot send this map message: {exc}") from exc
        ch = self._publish_ch
        if self._state != _S.OPEN or ch is None or ch.is_closed:
            ch = await self._reopen_publish_channel()
        properties = spec.Basic.Properties(
            content_type=content_type,
            headers=(headers if type(headers) is dict else dict(headers)) if headers else None,
            reply_to=reply_to,
            user_id=user_id if user_id is not None else self._user_id,
            correlation_id=correlation_id,
            message_id=message_id(),
        )
        try:
            await ch.basic_publish(
                body,
                exchange=exchange,
                routing_key=routing_key,
                properties=properties,
                mandatory=False,
                wait=False,
            )
        except QmfError:
            raise
        except Exception as exc:
            raise self._op_error(f"publish to {exchange}/{routing_key}", exc) from exc

    async def _reopen_publish_channel(self) -> Any:
        self._check_open()
        async with self._publish_lock:
            ch = self._publish_ch
            if ch is not None and not ch.is_closed:
                return ch
            self._check_open()
            log.info("reopening the publish channel on %s", self.where)
            try:
                ch = await self._conn_checked().channel(publisher_confirms=False)
            except Exception as exc:
                raise self._op_error("open publish channel", exc) from exc
            self._publish_ch = ch
            return ch

    def _check_open(self) -> None:
        if self._state != _S.OPEN:
            if self._lost_exc is not None:
                raise NotConnectedError(str(self._lost_exc)) from self._lost_exc
            raise NotConnectedError(f"transport to {self.where} is {self._state}")

    def _conn_checked(self) -> aiormq.Connection:
        conn = self._conn
        if conn is None or conn.is_closed:
            raise NotConnectedError(f"transport to {self.where} is not open")
        return conn

    # ------------------------------------------------------------------ receive

    def set_dispatcher(self, dispatch: Callable[[Delivery], None]) -> None:
        """Hand every delivery to ``dispatch`` (sync), in order, from one reader task.

        An exception raised by ``dispatch`` is logged and the delivery counts as
        handled.

        Raises:
            Nothing.
        """
        self._dispatch = dispatch
        self._wake()

    def on_lost(self, callback: Callable[[BaseException], None]) -> None:
        """Call ``callback(ConnectionLostError)`` once if the connection drops.

        Not called after :meth:`close`.  Registered after the loss, it is called soon.
        An exception raised by ``callback`` is logged.

        Raises:
            Nothing.
        """
        self._lost_callbacks.append(callback)
        if self._lost_fired and self._lost_exc is not None:
            exc = self._lost_exc
            asyncio.get_running_loop().call_soon(self._call_lost, callback, exc)

    def _consumer(self, endpoint: str, no_ack: bool) -> Callable[[Any], Coroutine[Any, Any, None]]:
        buffer = self._buffer
        append = buffer.append

        async def on_message(message: Any) -> None:
            # aiormq runs this in a task of its own, tasks start in arrival order, and
            # nothing here awaits: deliveries keep their order.
            delivery = to_delivery(message, endpoint)
            if no_ack:
                dispatch = self._dispatch
                # The reader hands each batch over without awaiting, so an empty buffer
                # means every earlier delivery has been dispatched: go straight on.
                if not buffer and dispatch is not None and self._state == _S.OPEN:
                    try:
                        dispatch(delivery)
                    except Exception:
                        log.exception(
                            "dispatcher failed on a delivery from %s (routing key %r)",
                            endpoint,
                            delivery.routing_key,
                        )
                    return
                append((delivery, 0))
            else:
                append((delivery, message.delivery.delivery_tag))
            wakeup = self._wakeup
            if wakeup is not None and not wakeup.done():
                wakeup.set_result(None)

        return on_message

    def _wake(self) -> None:
        wakeup = self._wakeup
        if wakeup is not None and not wakeup.done():
            wakeup.set_result(None)

    async def _read_loop(self) -> None:
        buffer = self._buffer
        popleft = buffer.popleft
        loop = asyncio.get_running_loop()
        try:
            while not self._stop_reader:  # close(): the rest is dropped
                dispatch = self._dispatch
                if not buffer or dispatch is None:
                    if self._state == _S.LOST:  # drained what came before the loss
                        break
                    self._wakeup = loop.create_future()
                    try:
                        await self._wakeup
                    finally:
                        self._wakeup = None
                    continue
                last_tag = 0
                for _ in range(min(self._batch, len(buffer))):
                    delivery, tag = popleft()
                    try:
                        dispatch(delivery)
                    except Exception:
                        log.exception(
                            "dispatcher failed on a delivery from %s (routing key %r)",
                            delivery.endpoint,
                            delivery.routing_key,
                        )
                    if tag:
                        last_tag = tag
                if last_tag:
                    await self._ack(last_tag)
                if buffer:
                    await asyncio.sleep(0)
        finally:
            if self._state == _S.LOST:
                self._fire_lost()

    async def _ack(self, tag: int) -> None:
        ch = self._consume_ch
        if ch is None or ch.is_closed or self._state != _S.OPEN:
            return
        try:
            await ch.basic_ack(tag, multiple=True, wait=False)
        except Exception as exc:  # the loss is reported by on_lost
            log.debug("ack %d failed: %r", tag, exc)

    # ------------------------------------------------------------------ loss

    def _on_connection_closed(self, closing: asyncio.Future[Any]) -> None:
        cause = None if closing.cancelled() else closing.exception()
        self._mark_lost(cause, "connection closed")

    def _on_consume_channel_closed(self, closing: asyncio.Future[Any]) -> None:
        if self._state != _S.OPEN:
            return
        cause = None if closing.cancelled() else closing.exception()
        # let a connection loss, reported in the same loop turn, win with its own words
        asyncio.get_running_loop().call_soon(self._mark_lost, cause, "consumer channel closed")

    def _on_consumer_cancelled(self, frame: Any) -> None:
        tag = getattr(frame, "consumer_tag", None)
        endpoint = next((ep for ep, t in self._endpoints.items() if t == tag), tag)
        self._mark_lost(None, f"the broker cancelled the consumer of endpoint {endpoint!r}")

    def _mark_lost(self, cause: BaseException | None, what: str) -> None:
        if self._state != _S.OPEN:
            return  # closing on purpose, or already lost
        self._state = _S.LOST
        if isinstance(cause, asyncio.CancelledError):
            cause = None  # aiormq's way of saying "closed" carries no information
        detail = (
            f": {cause}"
            if cause is not None and str(cause)
            else (f": {cause!r}" if cause is not None else "")
        )
        lost = ConnectionLostError(f"connection to {self.where} lost ({what}){detail}")
        lost.__cause__ = cause
        self._lost_exc = lost
        log.warning("%s", lost)
        conn = self._conn
        if conn is not None and not conn.is_closed:
            self._spawn(conn.close(cause or ConnectionLostError(what)))
        reader = self._reader
        if reader is None or reader.done():
            asyncio.get_running_loop().call_soon(self._fire_lost)
        else:
            self._wake()

    def _fire_lost(self) -> None:
        if self._lost_fired or self._lost_exc is None:
            return
        self._lost_fired = True
        for callback in list(self._lost_callbacks):
            self._call_lost(callback, self._lost_exc)

    @staticmethod
    def _call_lost(callback: Callable[[BaseException], None], exc: BaseException) -> None:
        try:
            callback(exc)
        except Exception:
            log.exception("on_lost callback %r failed", callback)

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        task.add_done_callback(retrieve)

    # ------------------------------------------------------------------ close

    async def close(self, timeout: float = 5.0) -> None:
        """Close the connection; idempotent, bounded by ``timeout``, shielded.

        Every body published before is read by the broker before the socket closes
        (one round trip, within ``timeout``; a warning says when it was not).
        Deliveries not yet dispatched are dropped; ``on_lost`` callbacks are not
        called.  Cancelling the caller does not interrupt the cleanup.

        Raises:
            Nothing: failures while closing are logged.
        """
        if self._close_task is None:
            self._close_task = asyncio.get_running_loop().create_task(self._shutdown(timeout))
        await asyncio.shield(self._close_task)

    async def _shutdown(self, timeout: float) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        was = self._state
        if was != _S.LOST:
            self._state = _S.CLOSING
        self._stop_reader = True
        self._wake()
        setup = self._setup_task
        if setup is not None and not setup.done():
            setup.cancel()
            await asyncio.wait({setup}, timeout=max(0.0, deadline - loop.time()))
        conn = self._conn
        if was == _S.OPEN and conn is not None and not conn.is_closed:
            await publishes_through(self._publish_ch, max(0.01, deadline - loop.time()),
                                    self.where)
        if conn is not None and not conn.is_closed:
            try:
                await asyncio.wait_for(conn.close(None), max(0.01, deadline - loop.time()))
            except TimeoutError:
                log.warning("closing the connection to %s timed out; aborting it", self.where)
                abort(conn)
            except Exception as exc:  # closing must not raise
                log.debug("closing the connection to %s: %r", self.where, exc)
        pending = [t for t in (self._reader, *self._background) if t is not None and not t.done()]
        if pending:
            await asyncio.wait(pending, timeout=max(0.01, deadline - loop.time()))
            for task in pending:
                if not task.done():
                    task.cancel()
        self._buffer.clear()
        if self._state != _S.LOST:
            self._state = _S.CLOSED

    async def __aenter__(self) -> AiormqTransport:
        await self.connect()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"<AiormqTransport {self.where} {self._state}>"


#: The name this class had before the Transport protocol existed (kept for callers).
Transport = AiormqTransport


def _conforms(factory: type[AiormqTransport]) -> None:
    """Type-level check (mypy): the class is a TransportFactory making Transports."""
    _factory: TransportFactory = factory
    _transport: TransportProtocol = factory("amqp://localhost/")
    del _factory, _transport
