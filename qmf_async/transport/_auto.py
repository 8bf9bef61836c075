"""Picking the AMQP version from the URL alone.

:class:`AutoTransport` is the default transport of the console, the agent and the role.
With ``protocol="auto"`` it first speaks AMQP 0-9-1 (RabbitMQ); a broker that answers the
0-9-1 protocol header with another version's header (qpidd answers with 0-10 and speaks
1.0 on the same port) is tried again over AMQP 1.0, and the answer is remembered per
host and port by the factory that made the transport (one per session, agent or role:
their reconnections go straight to the version found), not process-wide.
``protocol="0-9-1"`` or ``"1.0"`` forces one.  AMQP 1.0 is the built-in, pure-Python
:class:`~qmf_async.transport.NativeAmqp10Transport`.

The places found to speak AMQP 1.0 are also remembered across processes, in a small
file (``$QMF_PROTOCOL_CACHE``, else ``$XDG_CACHE_HOME/qmf-async/amqp10-places.json``,
else ``~/.cache/...``; ``QMF_PROTOCOL_CACHE=`` empty turns it off): the next process
speaks 1.0 to such a place first and never loads the AMQP 0-9-1 client library (aiormq,
a tenth of a second of start-up).  A place that changed broker since costs one more
connection: the 1.0 attempt is answered with a 0-9-1 header, 0-9-1 is tried next and
the entry dropped.  Only the auto mode reads it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, Literal

from ..errors import (
    NotConnectedError,
    ProtocolMismatchError,
    QmfTimeout,
    TransportError,
    UsageError,
)
from ._base import (
    NO_CAPABILITIES,
    QMF_CONTENT_TYPE,
    Body,
    Capabilities,
    ConnectionState,
    Delivery,
    TlsOptions,
    TransportFactory,
    censor_url,
    check_prefetch,
    parse_url,
    sasl_mechanism_list,
)
from ._base import Transport as TransportProtocol

__all__ = ["PROTOCOLS", "AutoTransport", "ProtocolName", "check_protocol", "transport_factory"]

ProtocolName = Literal["auto", "0-9-1", "1.0"]
#: the values of ``protocol=``
PROTOCOLS: Final = ("auto", "0-9-1", "1.0")
_ALIASES: Final = {"auto": "auto", "0-9-1": "0-9-1", "0.9.1": "0-9-1", "091": "0-9-1",
                   "amqp0-9-1": "0-9-1", "1.0": "1.0", "1": "1.0", "10": "1.0",
                   "amqp1.0": "1.0", "amqp10": "1.0"}

_log: Final = logging.getLogger("qmf_async.transport")

#: the environment variable naming the file of places that speak AMQP 1.0 ("": none)
PROTOCOL_CACHE_ENV: Final = "QMF_PROTOCOL_CACHE"


def _cache_file() -> Path | None:
    """The file of the places found to speak AMQP 1.0 (None: turned off)."""
    named = os.environ.get(PROTOCOL_CACHE_ENV)
    if named is not None:
        return Path(named) if named.strip() else None
    base = os.environ.get("XDG_CACHE_HOME")
    if not base:
        home = os.path.expanduser("~")
        if home.startswith("~"):  # no home directory: no file
            return None
        base = os.path.join(home, ".cache")
    return Path(base) / "qmf-async" / "amqp10-places.json"


def _amqp10_places(path: Path) -> set[str]:
    """The ``host:port`` entries of ``path`` (none when missing or unreadable)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return set()
    places = data.get("1.0") if isinstance(data, dict) else None
    return {p for p in places if isinstance(p, str)} if isinstance(places, list) else set()


def _remembered(place: tuple[str, int]) -> str | None:
    """``"1.0"`` when an earlier process found AMQP 1.0 at ``place``."""
    path = _cache_file()
    if path is None:
        return None
    return "1.0" if f"{place[0]}:{place[1]}" in _amqp10_places(path) else None


def _remember(place: tuple[str, int], protocol: str) -> None:
    """Record (1.0) or forget (0-9-1) ``place`` in the file; a failure to write is
    logged at debug level and otherwise ignored (the file is only a hint)."""
    path = _cache_file()
    if path is None:
        return
    key = f"{place[0]}:{place[1]}"
    places = _amqp10_places(path)
    if (key in places) == (protocol == "1.0"):
        return
    if protocol == "1.0":
        places.add(key)
    else:
        places.discard(key)
    import tempfile  # here only: a known place writes nothing (start-up time)

    tmp: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".amqp10-places-", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump({"1.0": sorted(places)[-256:]}, out)
        os.replace(tmp, path)
    except OSError as exc:
        _log.debug("cannot record the AMQP version of %s in %s: %s", key, path, exc)
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def check_protocol(protocol: str) -> str:
    """The canonical name of ``protocol`` (``"auto"``, ``"0-9-1"`` or ``"1.0"``).

    Raises:
        UsageError: an unknown protocol name.
    """
    name = _ALIASES.get(str(protocol).strip().lower()) if isinstance(protocol, str) else None
    if name is None:
        raise UsageError(f"protocol must be one of {', '.join(PROTOCOLS)}, not {protocol!r}")
    return name


class AutoTransport:
    """A transport that speaks AMQP 0-9-1 or 1.0, as ``protocol`` says or as the broker
    answers (conforms to :class:`~qmf_async.transport.TransportProtocol`).

    Every call after :meth:`connect` goes to the transport that connected
    (:attr:`inner`).
    """

    def __init__(self, url: str, *, tls: TlsOptions | None = None, prefetch: int = 1000,
                 name: str = "qmf-async", protocol: str = "auto",
                 sasl_mechanisms: str | Sequence[str] | None = None,
                 detected: dict[tuple[str, int], str] | None = None) -> None:
        """Prepare; nothing is sent before :meth:`connect`.  ``sasl_mechanisms`` goes to
        the transport that connects (see each for what it supports).  ``detected``
        (``(host, port)`` -> ``"0-9-1"`` or ``"1.0"``) is where the auto mode reads and
        records the version found; the factories of :func:`transport_factory` share
        one among their transports (None: this transport's own).

        Raises:
            UsageError: an unknown ``protocol``, a bad ``prefetch`` or mechanism name.
        """
        self._protocol = check_protocol(protocol)
        self._mechanisms = sasl_mechanism_list(sasl_mechanisms)
        check_prefetch(prefetch)
        self._url = url
        self._tls = tls
        self._prefetch = prefetch
        self._name = name
        self._inner: TransportProtocol | None = None
        #: NEW, CONNECTING (then the connected transport's state counts), or CLOSED
        self._own_state = ConnectionState.NEW
        self._lost_callbacks: list[Callable[[BaseException], None]] = []
        self._dispatch: Callable[[Delivery], None] | None = None
        self._detected: dict[tuple[str, int], str] = {} if detected is None else detected

    @property
    def inner(self) -> TransportProtocol | None:
        """The transport that connected (None before :meth:`connect`)."""
        return self._inner

    @property
    def protocol(self) -> str | None:
        """``"0-9-1"`` or ``"1.0"`` once connected, else None."""
        return None if self._inner is None else self._inner.capabilities.protocol or None

    @property
    def backlog(self) -> int:
        """Deliveries received but not yet handed to the dispatcher (0 before
        :meth:`connect`)."""
        return 0 if self._inner is None else self._inner.backlog

    @property
    def capabilities(self) -> Capabilities:
        """What the transport that connected can do (``NO_CAPABILITIES`` before)."""
        return NO_CAPABILITIES if self._inner is None else self._inner.capabilities

    @property
    def local_address(self) -> str | None:
        """The connected transport's :attr:`local_address` (None before)."""
        return None if self._inner is None else self._inner.local_address

    @property
    def server_selectors(self) -> bool:
        """True when ``bind(selector=...)`` is applied by the broker."""
        return self.capabilities.server_selectors

    @property
    def state(self) -> ConnectionState:
        """The state of the connection it picked (``NEW`` before, ``CLOSED`` when
        picking failed or was cancelled)."""
        if self._inner is not None:
            return self._inner.state
        return self._own_state

    @property
    def is_open(self) -> bool:
        """True while connected and not closing."""
        return self._inner is not None and self._inner.is_open

    @property
    def where(self) -> str:
        """The broker address without credentials."""
        if self._inner is not None:
            return self._inner.where
        return censor_url(self._url) if isinstance(self._url, str) else repr(self._url)

    def _make(self, protocol: str) -> TransportProtocol:
        if protocol == "1.0":
            from ._native import NativeAmqp10Transport  # loads only for a 1.0 broker

            return NativeAmqp10Transport(self._url, tls=self._tls, prefetch=self._prefetch,
                                         name=self._name, sasl_mechanisms=self._mechanisms)
        from ._aiormq import AiormqTransport  # aiormq loads only for a 0-9-1 broker

        return AiormqTransport(self._url, tls=self._tls, prefetch=self._prefetch,
                               name=self._name, sasl_mechanisms=self._mechanisms)

    async def connect(self, timeout: float = 10.0) -> None:
        """Connect over the forced version, or detect it (see the module docstring).

        Raises:
            UsageError: malformed URL or options, or called twice.
            ProtocolMismatchError: the forced version is not what the broker speaks.
            TransportError: the broker refused or cannot be reached (cause chained).
            QmfTimeout: no connection within ``timeout`` seconds.
        """
        if self._own_state is not ConnectionState.NEW:
            raise UsageError("connect() called twice")
        self._own_state = ConnectionState.CONNECTING
        try:
            await self._connect(timeout)
        except BaseException:
            self._own_state = ConnectionState.CLOSED
            raise

    async def _connect(self, timeout: float) -> None:
        target = parse_url(self._url)
        place = (target.host, target.port)
        protocol = self._protocol
        if protocol == "auto":
            protocol = self._detected.get(place) or _remembered(place) or "0-9-1"
        loop = asyncio.get_running_loop()
        start = loop.time()
        transport = self._make(protocol)
        try:
            await transport.connect(timeout)
        except ProtocolMismatchError as exc:
            if self._protocol != "auto":
                raise
            other = "1.0" if protocol == "0-9-1" else "0-9-1"
            left = timeout - (loop.time() - start)
            if left <= 0:
                raise QmfTimeout(f"no connection to {target.where} within {timeout} s") from exc
            transport = self._make(other)
            try:
                await transport.connect(left)
            except ProtocolMismatchError as again:
                raise TransportError(f"{target.where} speaks neither AMQP 0-9-1 nor 1.0 "
                                     f"({again})") from again
            protocol = other
        if self._protocol == "auto" and self._detected.get(place) != protocol:
            _remember(place, protocol)
        self._detected[place] = protocol
        self._inner = transport
        for callback in self._lost_callbacks:
            transport.on_lost(callback)
        if self._dispatch is not None:
            transport.set_dispatcher(self._dispatch)

    def _connected(self) -> TransportProtocol:
        inner = self._inner
        if inner is None:
            raise NotConnectedError(f"not connected to {self.where}")
        return inner

    async def declare_management_exchange(self) -> None:
        """As :meth:`TransportProtocol.declare_management_exchange`.

        Raises:
            NotConnectedError: not open.
            TransportError: the broker refused.
        """
        await self._connected().declare_management_exchange()

    async def declare_exchange(self, name: str, kind: str = "topic") -> None:
        """As :meth:`TransportProtocol.declare_exchange`.

        Raises:
            NotConnectedError: not open.
            TransportError: the broker refused, or has no such exchange.
        """
        await self._connected().declare_exchange(name, kind)

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
        """As :meth:`TransportProtocol.open_endpoint`.

        Raises:
            UsageError: bad options.
            NotConnectedError: not open.
            TransportError: the broker refused.
        """
        return await self._connected().open_endpoint(
            name, bindings=bindings, max_length=max_length,
            dead_letter_exchange=dead_letter_exchange,
            dead_letter_routing_key=dead_letter_routing_key, no_ack=no_ack)

    async def bind(self, endpoint: str, exchange: str, routing_key: str, *,
                   selector: str | None = None) -> None:
        """As :meth:`TransportProtocol.bind`.

        Raises:
            NotConnectedError: not open.
            TransportError: the broker refused.
        """
        await self._connected().bind(endpoint, exchange, routing_key, selector=selector)

    async def unbind(self, endpoint: str, exchange: str, routing_key: str, *,
                     selector: str | None = None) -> None:
        """As :meth:`TransportProtocol.unbind`.

        Raises:
            NotConnectedError: not open.
            TransportError: the broker refused.
        """
        await self._connected().unbind(endpoint, exchange, routing_key, selector=selector)

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
        """As :meth:`TransportProtocol.publish`.

        Raises:
            UsageError: something in the message cannot be sent.
            NotConnectedError: not open.
            TransportError: the broker refused.
        """
        inner = self._inner
        if inner is None:
            inner = self._connected()
        await inner.publish(body, exchange=exchange, routing_key=routing_key,
                            reply_to=reply_to, content_type=content_type, headers=headers,
                            user_id=user_id, correlation_id=correlation_id)

    def set_dispatcher(self, dispatch: Callable[[Delivery], None]) -> None:
        """As :meth:`TransportProtocol.set_dispatcher` (kept for the connection to come).

        Raises:
            Nothing: it does not raise.
        """
        self._dispatch = dispatch
        if self._inner is not None:
            self._inner.set_dispatcher(dispatch)

    def on_lost(self, callback: Callable[[BaseException], None]) -> None:
        """As :meth:`TransportProtocol.on_lost`.

        Raises:
            Nothing: it does not raise.
        """
        self._lost_callbacks.append(callback)
        if self._inner is not None:
            self._inner.on_lost(callback)

    async def close(self, timeout: float = 5.0) -> None:
        """As :meth:`TransportProtocol.close`.

        Raises:
            Nothing: it does not raise.
        """
        if self._inner is not None:
            await self._inner.close(timeout)
        else:
            self._own_state = ConnectionState.CLOSED

    def __repr__(self) -> str:
        return f"<AutoTransport {self.where} {self.protocol or self._protocol}>"


class _Factory:
    """A :data:`TransportFactory` of :class:`AutoTransport` with a fixed ``protocol``;
    its transports share what the auto mode found (see :class:`AutoTransport`)."""

    def __init__(self, protocol: str) -> None:
        self.protocol = check_protocol(protocol)
        self.detected: dict[tuple[str, int], str] = {}

    def __call__(self, url: str, *, tls: TlsOptions | None = None, prefetch: int = 1000,
                 name: str = "qmf-async",
                 sasl_mechanisms: str | Sequence[str] | None = None) -> AutoTransport:
        return AutoTransport(url, tls=tls, prefetch=prefetch, name=name, protocol=self.protocol,
                             sasl_mechanisms=sasl_mechanisms, detected=self.detected)

    def __repr__(self) -> str:
        return f"transport_factory({self.protocol!r})"


def transport_factory(protocol: str = "auto") -> TransportFactory:
    """The factory the console, the agent and the role use for ``protocol=`` (a new
    one each call: each remembers the versions its own transports found).

    Raises:
        UsageError: an unknown protocol name.
    """
    return _Factory(protocol)


def _conforms() -> None:
    """Type-level check (mypy): AutoTransport is a Transport."""
    _transport: TransportProtocol = AutoTransport("amqp://localhost/")
    del _transport
