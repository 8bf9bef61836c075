"""The peer runtime: one broker connection of a QMF peer, kept alive.

Shared by the agent, the management-broker role and the console: it
builds a transport with the injected :class:`~qmf_async.transport.TransportFactory`,
connects, declares the management exchange, opens the peer's endpoint (bound on
``amq.direct`` under its own name: the reply key), lets the peer bind its own keys
(``setup``), hands deliveries to the peer's dispatcher, supervises the connection
(reconnect with the shared backoff after a loss), and sends through a bounded queue
drained by one sender task, so no request handler ever waits on the network.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final

from ..errors import NotConnectedError, QmfError, UsageError
from ..protocol import Outgoing
from ..transport import (
    QMF_CONTENT_TYPE,
    REPLY_EXCHANGE,
    Delivery,
    TlsOptions,
    TransportFactory,
    TransportProtocol,
    broker_url,
    sasl_mechanism_list,
)
from ..transport import transport_factory as default_transport_factory
from ._backoff import retry_with_backoff

__all__ = ["PeerRuntime"]

_DEFAULT_LOG: Final = logging.getLogger("qmf_async.runtime")


class PeerRuntime:
    """Connection, endpoint, supervision and sending of one QMF peer.

    Lifecycle: ``await connect()`` (raises when the first connection fails), then
    :meth:`run` starts the sender and the supervisor; :meth:`stop` flushes (bounded),
    stops them, fails what :attr:`pending` waits for and closes.  :meth:`enqueue`
    never blocks: a full queue drops the body (counted in ``stats["dropped"]``).

    Deliveries go to ``dispatch`` once :meth:`begin_dispatch` was called (before it,
    the transport holds them back); ``setup(transport, endpoint)`` runs after each
    connection's endpoint is open, before the connection counts as established: bind
    the peer's keys there.  After a reconnection ``on_reconnected()`` is called.
    """

    def __init__(
        self,
        url: str,
        *,
        dispatch: Callable[[Delivery], None],
        setup: Callable[[TransportProtocol, str], Awaitable[None]],
        transport_factory: TransportFactory | None = None,
        tls: TlsOptions | None = None,
        sasl_mechanisms: str | Sequence[str] | None = None,
        name: str = "qmf-async",
        prefetch: int | None = None,
        connect_timeout: float = 10.0,
        max_outgoing: int = 10_000,
        endpoint_max_length: int | None = None,
        endpoint_no_ack: bool = True,
        endpoint_prefix: str | None = None,
        reconnect: bool = True,
        min_delay: float = 0.2,
        max_delay: float = 10.0,
        on_lost: Callable[[BaseException], None] | None = None,
        on_reconnected: Callable[[], None] | None = None,
        on_connect_failed: Callable[[BaseException, float], None] | None = None,
        stats: dict[str, int] | None = None,
        what: str = "peer",
        log: logging.Logger | None = None,
    ) -> None:
        """Prepare; nothing is sent before :meth:`connect`.

        ``what`` names the peer in log lines (e.g. ``"agent foo"``); ``stats`` is
        updated in place (``published``, ``dropped``); ``prefetch`` is handed to the
        factory when given (the transport's own default otherwise), and so is
        ``sasl_mechanisms``;
        ``endpoint_prefix`` names the endpoint ``<prefix><random hex>`` (server-named
        without it); ``on_connect_failed(exc, delay)`` is called after each failed
        reconnection attempt, before waiting ``delay``; ``reconnect`` (an attribute, read
        when a loss is noticed) False leaves a lost connection lost.

        Raises:
            UsageError: a non-positive ``max_outgoing`` or ``connect_timeout``, or a
                malformed broker address.
        """
        if max_outgoing < 1 or connect_timeout <= 0:
            raise UsageError("max_outgoing and connect_timeout must be positive")
        self.url = broker_url(url)  # qpid-tools addresses (host:port, ...) too
        self.reconnect = reconnect
        self._dispatch_to = dispatch
        self._setup = setup
        self._factory: TransportFactory = transport_factory or default_transport_factory()
        self._tls = tls
        self._factory_options: dict[str, Any] = {}
        if sasl_mechanisms is not None:
            self._factory_options["sasl_mechanisms"] = sasl_mechanism_list(sasl_mechanisms)
        self._name = name
        self._prefetch = prefetch
        self._connect_timeout = connect_timeout
        self._endpoint_max_length = endpoint_max_length
        self._endpoint_no_ack = endpoint_no_ack
        self._endpoint_prefix = endpoint_prefix
        self._min_delay = min_delay
        self._max_delay = max_delay
        self._on_lost_cb = on_lost
        self._on_reconnected = on_reconnected
        self._on_connect_failed = on_connect_failed
        self.stats: dict[str, int] = stats if stats is not None else {}
        self.stats.setdefault("published", 0)
        self.stats.setdefault("dropped", 0)
        self._what = what
        self._log = log or _DEFAULT_LOG
        self.outgoing: asyncio.Queue[Outgoing] = asyncio.Queue(max_outgoing)
        self.transport: TransportProtocol | None = None
        self.endpoint: str | None = None
        self._dispatching = False
        self._running = False
        self._lost = asyncio.Event()
        self._sender: asyncio.Task[None] | None = None
        self._supervisor: asyncio.Task[None] | None = None
        self._lost_listeners: list[Callable[[BaseException], None]] = []
        self._first_failed = False

    # ------------------------------------------------------------------ state

    @property
    def is_open(self) -> bool:
        """True while the current transport is open."""
        transport = self.transport
        return transport is not None and transport.is_open

    @property
    def running(self) -> bool:
        """True between :meth:`run` and :meth:`stop`."""
        return self._running

    def on_lost(self, listener: Callable[[BaseException], None]) -> None:
        """Also call ``listener(exc)`` on every connection loss (after the runtime's own
        ``on_lost``).

        Raises:
            Nothing: it does not raise.
        """
        self._lost_listeners.append(listener)

    # ------------------------------------------------------------------ connection

    def begin_dispatch(self) -> None:
        """Hand deliveries to the dispatcher from now on (this and later connections).

        Raises:
            Nothing: it does not raise.
        """
        self._dispatching = True
        if self.transport is not None:
            self.transport.set_dispatcher(self._dispatch_to)

    async def connect(self) -> None:
        """Open one connection: connect, declare, open and bind the endpoint, ``setup``.

        The previous transport, if any, must be gone (see the supervisor).

        Raises:
            UsageError: bad URL or options.
            TransportError: the broker cannot be reached or refused a declaration.
            QmfTimeout: connecting timed out.
        """
        options = dict(self._factory_options)
        if self._prefetch is not None:
            options["prefetch"] = self._prefetch
        transport = self._factory(self.url, tls=self._tls, name=self._name, **options)
        await transport.connect(self._connect_timeout)
        try:
            if self._dispatching:
                transport.set_dispatcher(self._dispatch_to)
            transport.on_lost(self._lost_from(transport))
            # the management exchange is declared while the endpoint is opened: over
            # AMQP 1.0 each is an attach, and the two take one round trip, not two
            # (aiormq runs them one after the other on its control channel); a refused
            # declaration is the error raised, as when it came first
            declaring = asyncio.ensure_future(transport.declare_management_exchange())
            try:
                endpoint = await self._open_endpoint(transport)
            except BaseException:
                if not declaring.done():
                    declaring.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await declaring
                raise
            await declaring
            self.transport, self.endpoint = transport, endpoint
            self._lost.clear()
            await self._setup(transport, endpoint)
        except BaseException:
            if self.transport is transport:
                self.transport = None
            await transport.close()
            raise

    async def _open_endpoint(self, transport: TransportProtocol) -> str:
        """Open the peer's endpoint, bound on ``amq.direct`` under its own name."""
        name = (None if self._endpoint_prefix is None
                else f"{self._endpoint_prefix}{uuid.uuid4().hex[:16]}")
        endpoint = await transport.open_endpoint(
            name, max_length=self._endpoint_max_length, no_ack=self._endpoint_no_ack)
        await transport.bind(endpoint, REPLY_EXCHANGE, endpoint)
        return endpoint

    def _lost_from(self, transport: TransportProtocol) -> Callable[[BaseException], None]:
        def lost(exc: BaseException) -> None:
            if self.transport is not transport:
                return  # an old connection, already replaced
            # INFO: the transport already said it at WARNING (said once to the user)
            self._log.info("%s lost its broker connection: %s", self._what, exc)
            self._lost.set()
            for listener in (self._on_lost_cb, *self._lost_listeners):
                if listener is None:
                    continue
                try:
                    listener(exc)
                except Exception:
                    self._log.exception("%s: on_lost listener failed", self._what)
        return lost

    def run(self, *, connected: bool = True) -> None:
        """Start the sender and the supervisor, after a successful :meth:`connect`
        (``connected=False``: after a failed one, the supervisor connects at once, with
        backoff, even when ``reconnect`` is False).

        Raises:
            Nothing: it does not raise.
        """
        if not connected:
            self._first_failed = True
            self._lost.set()
        if self._running:
            return
        self._running = True
        self._sender = asyncio.create_task(self._send_loop(), name=f"qmf-sender {self._name}")
        self._supervisor = asyncio.create_task(self._supervise(),
                                               name=f"qmf-supervisor {self._name}")

    async def _supervise(self) -> None:
        """Reconnect with backoff after a lost connection, then ``on_reconnected()``."""
        while self._running:
            await self._lost.wait()
            first, self._first_failed = self._first_failed, False
            if not (self.reconnect or first):
                return
            old, self.transport = self.transport, None
            if old is not None:
                with contextlib.suppress(QmfError):
                    await old.close(1.0)

            def failed(exc: BaseException, delay: float) -> None:
                self._log.info("%s: reconnect failed (%s); retrying in %.1fs", self._what,
                               exc, delay)
                if self._on_connect_failed is not None:
                    try:
                        self._on_connect_failed(exc, delay)
                    except Exception:
                        self._log.exception("%s: on_connect_failed failed", self._what)

            if await retry_with_backoff(self.connect, running=lambda: self._running,
                                        on_failure=failed, min_delay=self._min_delay,
                                        max_delay=self._max_delay):
                if first:
                    self._log.info("%s connected", self._what)
                else:
                    self._log.info("%s reconnected", self._what)
                if self._on_reconnected is not None:
                    try:
                        self._on_reconnected()
                    except Exception:
                        self._log.exception("%s: after reconnecting", self._what)

    async def stop(self, timeout: float = 5.0, *, flush: float | None = None) -> None:
        """Flush the queue (within ``flush``, default ``timeout``), stop the tasks and
        close the transport (within ``timeout``).

        Raises:
            Nothing: failures while stopping are logged.
        """
        was_running, self._running = self._running, False
        if was_running:
            await self.flush(timeout if flush is None else flush)
        tasks = [t for t in (self._sender, self._supervisor) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._sender = self._supervisor = None
        transport, self.transport = self.transport, None
        if transport is not None:
            await transport.close(timeout)

    async def flush(self, timeout: float) -> bool:
        """Wait until every queued body was handed to the transport, for at most
        ``timeout`` seconds or until the connection is lost; True when flushed.

        Raises:
            Nothing: it does not raise.
        """
        if not self.is_open or self._sender is None or self._sender.done():
            return self.outgoing.empty()
        joined = asyncio.ensure_future(self.outgoing.join())
        lost = asyncio.ensure_future(self._lost.wait())
        try:
            await asyncio.wait({joined, lost}, timeout=timeout,
                               return_when=asyncio.FIRST_COMPLETED)
        finally:
            for f in (joined, lost):
                f.cancel()
        return self.outgoing.empty()

    # ------------------------------------------------------------------ sending

    def enqueue(self, out: Outgoing) -> bool:
        """Queue ``out`` (a QMF v1 body a core built) for the sender; False (and
        counted) when the queue is full.

        Raises:
            Nothing: it does not raise.
        """
        try:
            self.outgoing.put_nowait(out)
        except asyncio.QueueFull:
            dropped = self.stats["dropped"] = self.stats["dropped"] + 1
            if dropped in (1, 10, 100) or dropped % 1000 == 0:
                self._log.warning("%s: outgoing queue full, %d bodies dropped so far",
                                  self._what, dropped)
            return False
        return True

    async def _send_loop(self) -> None:
        outgoing = self.outgoing
        stats = self.stats
        while True:
            out = await outgoing.get()
            try:
                transport = self.transport
                if transport is None or not transport.is_open:
                    stats["dropped"] += 1
                    continue
                await self._publish(transport, out)
                stats["published"] += 1
            except QmfError as exc:
                stats["dropped"] += 1
                self._log.warning("%s: publish to %s/%s failed: %s", self._what, out.exchange,
                                  out.key, exc)
            finally:
                outgoing.task_done()

    async def publish_now(self, out: Outgoing) -> None:
        """Publish ``out`` at once, bypassing the queue (e.g. during ``setup``).

        Raises:
            NotConnectedError: no open transport.
            TransportError: the publish failed.
        """
        transport = self.transport
        if transport is None:
            raise NotConnectedError(f"{self._what}: not connected")
        await self._publish(transport, out)

    @staticmethod
    def _publish(transport: TransportProtocol, out: Outgoing) -> Awaitable[None]:
        # a request (it carries a reply key) is marked as QMF; publications are not,
        # as qpidd's agent sends them
        return transport.publish(out.body, exchange=out.exchange, routing_key=out.key,
                                 reply_to=out.reply_to, headers=out.headers,
                                 correlation_id=out.correlation_id,
                                 content_type=QMF_CONTENT_TYPE if out.reply_to else None)

    def __repr__(self) -> str:
        state = "running" if self._running else "stopped"
        return f"<PeerRuntime {self._what} {state} open={self.is_open}>"


