"""The AMQP 1.0 transport: python-qpid-proton's engine driven from an asyncio stream.

``proton.Transport``, ``Connection`` and ``Collector`` are sans-I/O: bytes read from the
socket are pushed into the engine, the engine's events are handled here, and the bytes it
wants to send are written to the socket.  No reactor, no thread.

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
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import ssl
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final
from urllib.parse import unquote, urlsplit

from proton import (
    Collector,
    Connection,
    ConnectionException,
    Described,
    Endpoint,
    Event,
    Link,
    TransportException,
    int32,
    symbol,
)
from proton import Delivery as PnDelivery
from proton import Transport as PnTransport

from .. import names
from ..errors import (
    AuthenticationError,
    ConnectionLostError,
    DecodeError,
    EncodeError,
    NotConnectedError,
    ProtocolMismatchError,
    QmfTimeout,
    TransportError,
    UsageError,
)
from ..logs import warn_limited
from ..wire import decode_amqp10_message, encode_amqp10_message
from ._base import (
    AMQP10_CAPABILITIES,
    MANAGEMENT_EXCHANGE,
    QMF_CONTENT_TYPE,
    REPLY_EXCHANGE,
    Body,
    BrokerAddress,
    Delivery,
    TlsOptions,
    TransportFactory,
    censor_url,
    client_process_properties,
    parse_url,
    sasl_mechanism_list,
    url_heartbeat,
)
from ._base import ConnectionState as _S
from ._base import Transport as TransportProtocol
from ._tls import ssl_context as _ssl_context

__all__ = ["ProtonTransport"]

_log: Final = logging.getLogger("qmf_async.transport.proton")

DIRECT_FILTER: Final = "apache.org:legacy-amqp-direct-binding:string"
TOPIC_FILTER: Final = "apache.org:legacy-amqp-topic-binding:string"
SELECTOR_FILTER: Final = "apache.org:selector-filter:string"
#: exchanges addressed with the direct-binding filter (the others get the topic filter)
DIRECT_EXCHANGES: Final = frozenset({REPLY_EXCHANGE, names.V2_DIRECT_EXCHANGE})

_READ_SIZE: Final = 256 * 1024
_WRITE_HIGH_WATER: Final = 1 << 20
_UNLIMITED_CREDIT: Final = 10_000


class ProtonConnectionError(TransportError, ConnectionException):
    """A connection failure that is also proton's ``ConnectionException``, for the APIs
    that mirror proton's blocking client (``qmf.client``): code written for them
    catches proton's class, code written for qmf-async catches ``TransportError``."""


def _reply_address(reply_to: str | None) -> str | None:
    """A received ``reply_to`` as the agent side reads it: ``EXCHANGE/SUBJECT`` as it
    is, a bare node address ``N`` as ``N/`` (the node, no subject), not as a key of
    ``amq.direct`` (the AMQP 0-9-1 reading)."""
    if reply_to is None or "/" in reply_to or not reply_to:
        return reply_to
    return reply_to + "/"


class _Receiver:
    __slots__ = ("endpoint", "exchange", "key", "link", "name", "no_ack", "opened", "selector")

    def __init__(self, name: str, endpoint: str, exchange: str, key: str, no_ack: bool,
                 link: Link, opened: asyncio.Future[None], selector: str | None = None) -> None:
        self.name = name
        self.selector = selector
        self.endpoint = endpoint
        self.exchange = exchange
        self.key = key
        self.no_ack = no_ack
        self.link = link
        self.opened = opened


class _Sender:
    __slots__ = ("address", "credit", "link", "name", "opened", "tag")

    def __init__(self, name: str, address: str, link: Link,
                 opened: asyncio.Future[None]) -> None:
        self.name = name
        self.address = address
        self.link = link
        self.opened = opened
        self.credit: asyncio.Event = asyncio.Event()
        self.tag = 0


class _Endpoint:
    __slots__ = ("bindings", "no_ack")

    def __init__(self, no_ack: bool) -> None:
        self.no_ack = no_ack
        # (exchange, key, selector) -> link name
        self.bindings: dict[tuple[str, str, str | None], str] = {}


class ProtonTransport:
    """One AMQP 1.0 connection carrying a QMF bus (conforms to
    :class:`~qmf_async.transport.TransportProtocol`).

    Lifecycle as every transport: ``connect()`` once, ``open_endpoint()``, ``bind()``,
    ``publish()``, ``close()``.  Deliveries of every endpoint go, in arrival order, to
    the one dispatcher given to :meth:`set_dispatcher`; until it is set they are held
    and their links get no more credit.
    """

    #: the AMQP version this transport speaks
    protocol: Final = "1.0"
    #: bind(selector=...) is applied by the broker
    server_selectors: Final = True
    #: what it can do (the console reads this)
    capabilities: Final = AMQP10_CAPABILITIES
    #: what ``qmf.client`` raises for a connection failure on this transport
    connection_error: Final = ProtonConnectionError

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
        """Prepare a transport; nothing is sent before :meth:`connect`.

        ``prefetch`` is the link credit of each receiving link (0: a large default);
        ``idle_timeout`` (seconds, 0 = none): a broker silent that long is declared
        lost (proton announces half of it, so the broker sends well within it); a
        ``heartbeat=S`` in the URL's query sets it to ``2 * S``;
        ``sasl_mechanisms`` restricts the SASL mechanisms (default: EXTERNAL with a
        client certificate, PLAIN when the URL has a password, and ANONYMOUS);
        ``operation_timeout`` bounds each link attach.

        Raises:
            UsageError: a bad ``prefetch``, ``idle_timeout``, ``operation_timeout`` or
                mechanism name.
        """
        if not isinstance(prefetch, int) or isinstance(prefetch, bool) or prefetch < 0:
            raise UsageError(f"prefetch must be an int >= 0, not {prefetch!r}")
        if idle_timeout < 0 or operation_timeout <= 0:
            raise UsageError("idle_timeout must be >= 0 and operation_timeout positive")
        self._url = url
        self._tls = tls
        self._credit = prefetch or _UNLIMITED_CREDIT
        self._low = max(1, self._credit // 2)
        self._name = name
        heartbeat = url_heartbeat(url)
        self._idle = float(idle_timeout) if heartbeat is None else 2.0 * heartbeat
        self._op_timeout = operation_timeout
        wanted = sasl_mechanism_list(sasl_mechanisms)
        self._mechanisms = list(wanted) if wanted is not None else None

        self._state = _S.NEW
        self._target: BrokerAddress | None = None
        self._reader_stream: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._pt: PnTransport | None = None
        self._conn: Connection | None = None
        self._coll: Collector | None = None
        self._session: Any = None
        self._opened: asyncio.Future[None] | None = None
        self._remote_closed: asyncio.Future[None] | None = None
        self._reader: asyncio.Task[None] | None = None
        self._ticker: asyncio.Task[None] | None = None
        self._link_seq = 0
        self._receivers: dict[str, _Receiver] = {}
        self._senders: dict[str, _Sender] = {}  # address -> sender
        self._sender_names: dict[str, _Sender] = {}  # link name -> sender
        self._endpoints: dict[str, _Endpoint] = {}
        self._dynamic: set[str] = set()  # addresses of dynamic nodes (open_dynamic_endpoint)
        self._dispatch: Callable[[Delivery], None] | None = None
        self._held: collections.deque[tuple[Delivery, str]] = collections.deque()
        self._lost_callbacks: list[Callable[[BaseException], None]] = []
        self._lost_exc: ConnectionLostError | None = None
        self._lost_fired = False
        self._close_task: asyncio.Task[None] | None = None
        self._error: str | None = None
        #: deliveries that were not valid AMQP 1.0 messages (settled as rejected), and
        #: deliveries whose body was not a data section (QMF v1 over 1.0 uses data)
        self.malformed = 0
        self.unsupported = 0

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
        """The broker address without credentials (for messages and logs)."""
        target = self._target
        if target is None:
            return censor_url(self._url) if isinstance(self._url, str) else repr(self._url)
        return target.server_where

    @property
    def local_address(self) -> str | None:
        """``host:port`` of this end of the connection's socket (None when not open);
        the broker names the connection after it."""
        writer = self._writer
        if writer is None:
            return None
        name = writer.get_extra_info("sockname")
        if not isinstance(name, tuple) or len(name) < 2:
            return None
        return f"{name[0]}:{name[1]}"

    @property
    def backlog(self) -> int:
        """Deliveries received but not yet handed to the dispatcher."""
        return len(self._held)

    @property
    def remote_properties(self) -> dict[str, Any]:
        """The broker's connection properties (``product``, ``version``, ...)."""
        conn = self._conn
        props = conn.remote_properties if conn is not None else None
        return {str(k): v for k, v in (props or {}).items()}

    # ------------------------------------------------------------------ connect

    async def connect(self, timeout: float = 10.0) -> None:
        """Open the TCP (TLS for ``amqps://``) connection, SASL, the AMQP connection
        and a session; may be called once.

        Raises:
            UsageError: malformed URL, bad TLS files, TLS options on an ``amqp://``
                URL, or called twice.
            AuthenticationError: SASL failed.
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
        except asyncio.CancelledError:
            await self._abandon()
            raise
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
            server_hostname=target.host if context is not None else None,
            limit=_READ_SIZE)
        self._reader_stream, self._writer = reader, writer
        pt = PnTransport()
        conn = Connection()
        coll = Collector()
        conn.collect(coll)
        self._pt, self._conn, self._coll = pt, conn, coll
        if self._idle:
            pt.idle_timeout = self._idle
        password = self._password()
        mechanisms = self._mechanisms
        if mechanisms is None:
            mechanisms = (["EXTERNAL"] if tls.certfile and context is not None else []) \
                + (["PLAIN"] if password is not None else []) + ["ANONYMOUS"]
        sasl = pt.sasl()
        sasl.allowed_mechs(" ".join(mechanisms))
        if password is not None:
            conn.user = target.user
            conn.password = password
            # PLAIN over plain TCP is what AMQP 0-9-1 does too; the user put the
            # password in an amqp:// URL
            sasl.allow_insecure_mechs = True
        conn.container = names.container_id(self._name)
        conn.hostname = target.host
        props: dict[Any, Any] = {symbol("product"): "qmf-async",
                                 symbol("connection_name"): self._name}
        for key, value in client_process_properties().items():  # qpidd's cproc, cpid
            props[symbol(key)] = int32(value) if isinstance(value, int) else value
        conn.properties = props
        pt.bind(conn)
        conn.open()
        session = conn.session()
        session.open()
        self._session = session
        self._flush()
        loop = asyncio.get_running_loop()
        self._reader = loop.create_task(self._read_loop(), name=f"qmf-amqp10-reader {target.where}")
        self._ticker = loop.create_task(self._tick_loop(), name=f"qmf-amqp10-ticker {target.where}")
        assert self._opened is not None
        await asyncio.shield(self._opened)

    def _password(self) -> str | None:
        try:
            parts = urlsplit(self._url)
        except ValueError:
            return None
        return unquote(parts.password) if parts.password is not None else None

    async def _abandon(self) -> None:
        """Tear down a connection attempt that failed (bounded, no exceptions)."""
        self._state = _S.CLOSED
        await self._teardown()

    # ------------------------------------------------------------------ engine pump

    def _flush(self) -> None:
        pt, writer = self._pt, self._writer
        if pt is None or writer is None:
            return
        while True:
            try:
                n = pt.pending()
            except TransportException:
                return
            if n <= 0:
                return
            data = pt.peek(n)
            pt.pop(n)
            if data and not writer.is_closing():
                writer.write(data)

    async def _read_loop(self) -> None:
        reader, pt = self._reader_stream, self._pt
        assert reader is not None and pt is not None
        cause: BaseException | None = None
        try:
            while True:
                data = await reader.read(_READ_SIZE)
                if not data:
                    with contextlib.suppress(TransportException):
                        pt.close_tail()
                    self._process()
                    break
                view = memoryview(data)
                while view:
                    capacity = pt.capacity()
                    if capacity == 0:  # let the engine consume what it has, then retry
                        self._process()
                        capacity = pt.capacity()
                        if capacity == 0:
                            raise TransportException("the AMQP 1.0 engine takes no input")
                    if capacity < 0:  # the engine closed its input (an error was raised)
                        break
                    pt.push(bytes(view[:capacity]))
                    view = view[capacity:]
                    self._process()
                if self._idle:
                    # the idle deadline counts from the last input only once a tick has
                    # seen it: tick now, not up to a ticker period later
                    with contextlib.suppress(TransportException):
                        pt.tick(asyncio.get_running_loop().time())
                self._pump()
                writer = self._writer
                if writer is not None and writer.transport.get_write_buffer_size() \
                        > _WRITE_HIGH_WATER:
                    await writer.drain()
        except asyncio.CancelledError:
            raise
        except (OSError, ssl.SSLError, TransportException) as exc:
            cause = exc
        except Exception as exc:  # a bug here must not hang the callers
            _log.exception("AMQP 1.0 reader of %s failed", self.where)
            cause = exc
        self._mark_lost(cause, self._error or "the broker closed the connection")

    async def _tick_loop(self) -> None:
        loop = asyncio.get_running_loop()
        pt = self._pt
        assert pt is not None
        while self._state in (_S.CONNECTING, _S.OPEN, _S.CLOSING):
            try:
                deadline = pt.tick(loop.time())
            except TransportException as exc:
                self._mark_lost(exc, str(exc))
                return
            self._pump()
            delay = deadline - loop.time() if deadline else 1.0
            await asyncio.sleep(min(max(delay, 0.01), 1.0))

    def _pump(self) -> None:
        """Handle the engine's events and write its output until neither gives more:
        producing output makes events too (a SASL failure, the end of the output)."""
        for _ in range(8):
            self._process()
            self._flush()
            coll = self._coll
            if coll is None or coll.peek() is None:
                return

    def _process(self) -> None:
        coll = self._coll
        if coll is None:
            return
        while True:
            event = coll.peek()
            if event is None:
                return
            try:
                self._handle(event)
            finally:
                coll.pop()

    def _handle(self, event: Event) -> None:
        kind = event.type
        if kind is Event.DELIVERY:
            dlv = event.delivery
            if dlv is not None:
                self._on_delivery(dlv)
        elif kind is Event.LINK_FLOW:
            link = event.link
            sender = self._sender_names.get(link.name) if link is not None else None
            if sender is not None and link is not None and link.credit > 0:
                sender.credit.set()
        elif kind is Event.LINK_REMOTE_OPEN:
            if event.link is not None:
                self._on_link_open(event.link)
        elif kind is Event.LINK_REMOTE_CLOSE:
            if event.link is not None:
                self._on_link_close(event.link)
        elif kind is Event.CONNECTION_REMOTE_OPEN:
            if self._opened is not None and not self._opened.done():
                self._opened.set_result(None)
        elif kind is Event.CONNECTION_REMOTE_CLOSE:
            if event.connection is not None:
                self._on_connection_close(event.connection)
        elif kind is Event.SESSION_REMOTE_CLOSE:
            session = event.session
            cond = session.remote_condition if session is not None else None
            self._error = f"the broker ended the session: {_describe(cond)}"
            self._mark_lost(None, self._error)
        elif kind is Event.TRANSPORT_ERROR:
            transport = event.transport
            cond = transport.condition if transport is not None else None
            self._error = _describe(cond)
            self._fail_open(cond)
            # the engine reads nothing more (an idle timeout, a framing error): lost
            # now, not when the socket or the engine's output closes later
            self._mark_lost(None, self._error)
        elif kind is Event.TRANSPORT_CLOSED:
            self._fail_open(None)
            self._mark_lost(None, self._error or "the connection closed")

    def _fail_open(self, cond: Any) -> None:
        opened = self._opened
        if opened is None or opened.done():
            return
        where = self.where
        text = _describe(cond) if cond is not None else (self._error or "closed")
        name = getattr(cond, "name", "") or ""
        sasl = self._pt.sasl() if self._pt is not None else None
        outcome = getattr(sasl, "outcome", None)
        low = text.lower()
        if "header mismatch" in low or "protocol header" in low or "unknown protocol" in low:
            opened.set_exception(ProtocolMismatchError(
                f"{where} does not speak AMQP 1.0 ({text}); RabbitMQ speaks 0-9-1: "
                "connect with protocol='auto' or protocol='0-9-1'"))
        elif "unauthorized-access" in name or outcome in (1, 2, 3, 4):
            user = self._target.user if self._target else "?"
            if self._mechanisms == ["EXTERNAL"]:
                opened.set_exception(AuthenticationError(
                    f"authentication with the client certificate (EXTERNAL) failed at "
                    f"{where}: {text} (does the broker offer EXTERNAL?)"))
            else:
                opened.set_exception(AuthenticationError(
                    f"authentication failed for user {user!r} at {where}: {text}"))
        else:
            opened.set_exception(TransportError(f"cannot connect to {where}: {text}"))

    def _on_connection_close(self, conn: Connection) -> None:
        cond = conn.remote_condition
        closed = self._remote_closed
        if closed is not None and not closed.done():
            closed.set_result(None)
        if self._state == _S.CLOSING:
            return
        self._error = f"the broker closed the connection: {_describe(cond)}"
        opened = self._opened
        if opened is not None and not opened.done():
            opened.set_exception(TransportError(f"{self.where} refused the connection: "
                                                f"{_describe(cond)}"))
        with contextlib.suppress(Exception):
            conn.close()
            self._flush()
        self._mark_lost(None, self._error)

    def _on_link_open(self, link: Link) -> None:
        name = link.name
        receiver = self._receivers.get(name)
        if receiver is not None:
            # qpidd attaches a missing node with a null terminus, then detaches with the
            # error: wait for that detach
            if link.remote_source.address is not None and not receiver.opened.done():
                receiver.opened.set_result(None)
            return
        sender = self._sender_names.get(name)
        if sender is not None and link.remote_target.address is not None \
                and not sender.opened.done():
            sender.opened.set_result(None)

    def _on_link_close(self, link: Link) -> None:
        name = link.name
        cond = link.remote_condition
        with contextlib.suppress(Exception):
            if link.state & Endpoint.LOCAL_ACTIVE:
                link.close()
        receiver = self._receivers.pop(name, None)
        if receiver is not None:
            endpoint = self._endpoints.get(receiver.endpoint)
            if endpoint is not None:
                endpoint.bindings.pop((receiver.exchange, receiver.key, receiver.selector), None)
            error = TransportError(
                f"{self.where} refused to bind {receiver.exchange!r} key {receiver.key!r}: "
                f"{_describe(cond)}")
            if not receiver.opened.done():
                receiver.opened.set_exception(error)
            elif self._state == _S.OPEN:
                # a binding the peer relies on is gone: the connection is no longer
                # what the peer set up; report it lost so the peer reconnects
                self._mark_lost(None, f"the broker detached the link from "
                                      f"{receiver.exchange!r} key {receiver.key!r}: "
                                      f"{_describe(cond)}")
            return
        sender = self._sender_names.pop(name, None)
        if sender is not None:
            if self._senders.get(sender.address) is sender:
                del self._senders[sender.address]
            if not sender.opened.done():
                sender.opened.set_exception(TransportError(
                    f"{self.where} refused a sender to {sender.address!r}: {_describe(cond)}"))
            sender.credit.set()  # wake waiters: they see the link gone

    def _on_delivery(self, dlv: PnDelivery) -> None:
        link = dlv.link
        if link.is_sender:
            if dlv.remote_state or dlv.settled:
                dlv.settle()
            return
        if not dlv.readable or dlv.partial:
            return
        data = link.recv(dlv.pending)
        link.advance()
        receiver = self._receivers.get(link.name)
        if receiver is None:  # unbound meanwhile
            dlv.update(PnDelivery.RELEASED)
            dlv.settle()
            return
        try:
            msg = decode_amqp10_message(data or b"")
        except DecodeError as exc:
            self.malformed += 1
            warn_limited(_log, self.malformed, "dropped a malformed AMQP 1.0 message from "
                         "%s: %s", self.where, exc)
            dlv.update(PnDelivery.REJECTED)
            dlv.settle()
            self._top_up(link)
            return
        body = msg.body
        value: Any = None
        if msg.body_kind != "data":
            if msg.body_kind == "value" and isinstance(body, bytes):
                pass
            elif msg.body_kind == "value" and isinstance(body, (dict, list)):
                value, body = body, b""  # a QMF v2 map message
            else:
                self.unsupported += 1
                _log.debug("dropped a message with a %s body from %s", msg.body_kind, self.where)
                dlv.update(PnDelivery.ACCEPTED)
                dlv.settle()
                self._top_up(link)
                return
        user = msg.user_id
        delivery = Delivery(
            body=body, exchange=receiver.exchange, routing_key=msg.subject or "",
            reply_to=_reply_address(msg.reply_to), content_type=msg.content_type,
            headers=msg.application_properties,
            user_id=user.decode("utf-8", "replace") if user is not None else None,
            endpoint=receiver.endpoint, value=value, correlation_id=msg.correlation_id)
        if not dlv.settled:
            dlv.update(PnDelivery.ACCEPTED)
        dlv.settle()
        dispatch = self._dispatch
        if dispatch is None or self._held:
            self._held.append((delivery, receiver.name))
            return
        self._deliver(dispatch, delivery)
        self._top_up(link)

    def _top_up(self, link: Link) -> None:
        if link.credit < self._low:
            link.flow(self._credit - link.credit)

    def _deliver(self, dispatch: Callable[[Delivery], None], delivery: Delivery) -> None:
        try:
            dispatch(delivery)
        except Exception:
            _log.exception("the dispatcher failed on a delivery from %s", self.where)

    # ------------------------------------------------------------------ endpoints

    async def declare_management_exchange(self) -> None:
        """qpidd has ``qpid.management``; this attaches the sender to it (checking that
        it exists).

        Raises:
            NotConnectedError: not open.
            TransportError: the broker has no such exchange.
        """
        await self._sender(MANAGEMENT_EXCHANGE)

    async def declare_exchange(self, name: str, kind: str = "topic") -> None:
        """qpidd has its exchanges: attach the sender to ``name`` (checking that it
        exists; ``kind`` is not checked).

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
        if endpoint in self._endpoints:
            raise UsageError(f"endpoint {endpoint!r} is already open")
        self._endpoints[endpoint] = _Endpoint(no_ack)
        await asyncio.gather(*(self.bind(endpoint, ex, key) for ex, key in bindings))
        return endpoint

    async def bind(self, endpoint: str, exchange: str, routing_key: str, *,
                   selector: str | None = None) -> None:
        """Attach a receiving link from ``exchange`` filtered on ``routing_key`` and, when
        given, the JMS ``selector`` (``apache.org:selector-filter:string``: the broker
        passes only the messages whose properties match; qpidd implements it).

        Raises:
            UsageError: an unknown endpoint.
            NotConnectedError: not open.
            TransportError: the broker refused (no such exchange, ...).
            QmfTimeout: the broker did not answer the attach in time.
        """
        self._check_open()
        ep = self._endpoints.get(endpoint)
        if ep is None:
            raise UsageError(f"no endpoint {endpoint!r} on this transport")
        existing = ep.bindings.get((exchange, routing_key, selector))
        if existing is not None:
            receiver = self._receivers.get(existing)
            if receiver is not None:
                await self._wait_attach(receiver.opened, f"binding {exchange!r} {routing_key!r}")
            return
        session = self._session
        assert session is not None
        self._link_seq += 1
        link_name = f"{endpoint}-{self._link_seq}"
        link = session.receiver(link_name)
        link.source.address = exchange
        descriptor = DIRECT_FILTER if exchange in DIRECT_EXCHANGES else TOPIC_FILTER
        filters: dict[Any, Any] = {
            symbol("qmf-binding"): Described(symbol(descriptor), routing_key)}
        if selector is not None:
            filters[symbol("qmf-selector")] = Described(symbol(SELECTOR_FILTER), selector)
        link.source.filter.put_dict(filters)
        link.target.address = endpoint
        if ep.no_ack:
            link.snd_settle_mode = Link.SND_SETTLED
        opened: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        receiver = _Receiver(link_name, endpoint, exchange, routing_key, ep.no_ack, link, opened,
                             selector)
        self._receivers[link_name] = receiver
        ep.bindings[(exchange, routing_key, selector)] = link_name
        link.open()
        link.flow(self._credit)
        self._flush()
        try:
            await self._wait_attach(opened, f"binding {exchange!r} {routing_key!r}")
        except BaseException:
            self._drop_receiver(link_name)
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
        if endpoint in self._endpoints:
            raise UsageError(f"endpoint {endpoint!r} is already open")
        ep = self._endpoints[endpoint] = _Endpoint(True)
        session = self._session
        assert session is not None
        self._link_seq += 1
        link_name = f"{endpoint}-{self._link_seq}"
        link = session.receiver(link_name)
        link.source.dynamic = True
        link.target.address = endpoint
        link.snd_settle_mode = Link.SND_SETTLED
        opened: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._receivers[link_name] = _Receiver(link_name, endpoint, "", "", True, link, opened)
        ep.bindings[("", "", None)] = link_name
        link.open()
        link.flow(self._credit)
        self._flush()
        try:
            await self._wait_attach(opened, "a dynamic reply node")
        except BaseException:
            self._drop_receiver(link_name)
            raise
        address = str(link.remote_source.address)
        self._dynamic.add(address)
        return address

    async def unbind(self, endpoint: str, exchange: str, routing_key: str, *,
                     selector: str | None = None) -> None:
        """Detach the link of a binding made by :meth:`bind` (nothing when absent).

        Raises:
            NotConnectedError: not open.
        """
        self._check_open()
        ep = self._endpoints.get(endpoint)
        link_name = ep.bindings.get((exchange, routing_key, selector)) if ep is not None \
            else None
        if link_name is not None:
            self._drop_receiver(link_name)
            self._flush()

    def _drop_receiver(self, link_name: str) -> None:
        receiver = self._receivers.pop(link_name, None)
        if receiver is None:
            return
        ep = self._endpoints.get(receiver.endpoint)
        if ep is not None:
            ep.bindings.pop((receiver.exchange, receiver.key, receiver.selector), None)
        with contextlib.suppress(Exception):
            receiver.link.close()

    async def _wait_attach(self, opened: asyncio.Future[None], what: str) -> None:
        try:
            async with asyncio.timeout(self._op_timeout):
                await asyncio.shield(opened)
        except TimeoutError as exc:
            raise QmfTimeout(f"{self.where} did not answer the attach of {what} "
                             f"within {self._op_timeout} s") from exc

    # ------------------------------------------------------------------ publish

    async def _sender(self, address: str) -> _Sender:
        self._check_open()
        sender = self._senders.get(address)
        if sender is None:
            session = self._session
            assert session is not None
            self._link_seq += 1
            name = f"qmf-send-{self._link_seq}"
            link = session.sender(name)
            link.target.address = address
            link.snd_settle_mode = Link.SND_SETTLED
            opened: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            sender = _Sender(name, address, link, opened)
            self._senders[address] = sender
            self._sender_names[name] = sender
            link.open()
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
        """
        sender = self._senders.get(exchange)
        if sender is None or not sender.opened.done() or self._state != _S.OPEN:
            sender = await self._sender(exchange)
        link = sender.link
        while link.credit <= 0:
            sender.credit.clear()
            try:
                async with asyncio.timeout(self._op_timeout):
                    await sender.credit.wait()
            except TimeoutError as exc:
                raise QmfTimeout(f"{self.where} gave no credit to send to {exchange!r} "
                                 f"within {self._op_timeout} s") from exc
            self._check_open()
            if self._sender_names.get(sender.name) is not sender:
                sender = await self._sender(exchange)
                link = sender.link
        if reply_to is not None and "/" not in reply_to and reply_to not in self._dynamic:
            reply_to = f"{REPLY_EXCHANGE}/{reply_to}"
        try:
            is_value = not isinstance(body, (bytes, bytearray, memoryview))
            data = encode_amqp10_message(
                body, subject=routing_key, reply_to=reply_to,
                content_type=None if is_value else content_type,
                application_properties=headers, correlation_id=correlation_id,
                user_id=user_id.encode("utf-8") if user_id is not None else None,
                body_kind="value" if is_value else "data")
        except EncodeError as exc:
            raise UsageError(f"cannot send this message: {exc}") from exc
        sender.tag += 1
        dlv = link.delivery(f"{sender.tag:x}")
        link.send(data)
        link.advance()
        dlv.settle()
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
        self._dispatch = dispatch
        held = self._held
        while held:
            delivery, _ = held.popleft()
            self._deliver(dispatch, delivery)
        for receiver in list(self._receivers.values()):
            with contextlib.suppress(Exception):
                self._top_up(receiver.link)
        self._flush()

    def on_lost(self, callback: Callable[[BaseException], None]) -> None:
        """Call ``callback(ConnectionLostError)`` once if the connection drops (not
        after :meth:`close`); at once (soon) if it already did.

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
        self._fail_waiters(exc)
        writer = self._writer
        if writer is not None:
            writer.close()
        if was_open and not self._lost_fired:
            self._lost_fired = True
            loop = asyncio.get_running_loop()
            for callback in list(self._lost_callbacks):
                loop.call_soon(_call_lost, callback, exc)

    def _fail_waiters(self, exc: BaseException) -> None:
        for receiver in self._receivers.values():
            if not receiver.opened.done():
                receiver.opened.set_exception(exc)
                receiver.opened.exception()
        for sender in self._sender_names.values():
            if not sender.opened.done():
                sender.opened.set_exception(exc)
                sender.opened.exception()
            sender.credit.set()

    # ------------------------------------------------------------------ close

    async def close(self, timeout: float = 5.0) -> None:
        """Close the AMQP connection (waiting up to ``timeout`` for the broker's
        close) and the socket; idempotent, shielded from cancellation.

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
        self._fail_waiters(NotConnectedError(f"transport to {self.where} closed"))
        conn, closed = self._conn, self._remote_closed
        if state == _S.OPEN and conn is not None and closed is not None:
            with contextlib.suppress(Exception):
                conn.close()
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

    async def __aenter__(self) -> ProtonTransport:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"<ProtonTransport {self.where} {self._state}>"


def _describe(cond: Any) -> str:
    if cond is None:
        return "no reason given"
    name = getattr(cond, "name", None) or "error"
    text = getattr(cond, "description", None)
    return f"{name}: {text}" if text else str(name)


def _call_lost(callback: Callable[[BaseException], None], exc: BaseException) -> None:
    try:
        callback(exc)
    except Exception:
        _log.exception("on_lost callback failed")


def _conforms(factory: type[ProtonTransport]) -> None:
    """Type-level check (mypy): the class is a TransportFactory making Transports."""
    _factory: TransportFactory = factory
    _transport: TransportProtocol = factory("amqp://localhost/")
    del _factory, _transport

