"""The transport surface in QMF terms: what the console, the agent and the role need
from a connection to a broker, with no client-library type crossing it.

:class:`Transport` is a :class:`typing.Protocol`: an implementation (AMQP 0-9-1 over
aiormq in ``_aiormq.py``; an in-memory bus in the tests; AMQP 1.0 later) conforms by
shape.  :data:`TransportFactory` is what the console, the agent and the role are given
to build one per connection.
"""

from __future__ import annotations

import enum
import os
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, Protocol
from urllib.parse import parse_qs, parse_qsl, quote, unquote, urlencode, urlsplit, urlunsplit

import attrs

from .. import names
from ..errors import UsageError
from ..frozen import frozen
from ..protocol import Delivery

__all__ = [
    "Body",
    "REPLY_EXCHANGE",
    "MANAGEMENT_EXCHANGE",
    "QMF_CONTENT_TYPE",
    "BrokerAddress",
    "ConnectionState",
    "Delivery",
    "TlsOptions",
    "Transport",
    "TransportFactory",
    "broker_url",
    "censor_url",
    "client_process_properties",
    "open_broadcast_endpoint",
    "open_reply_endpoint",
    "parse_url",
]

#: the management topic exchange (declared durable, always with the same arguments)
MANAGEMENT_EXCHANGE: Final = names.MANAGEMENT_EXCHANGE
#: where replies go: a reply key ``K`` means routing key ``K`` on this exchange
REPLY_EXCHANGE: Final = names.REPLY_EXCHANGE
#: content type of QMF v1 bodies
QMF_CONTENT_TYPE: Final = "x-application/qmf"

#: what :meth:`Transport.publish` sends: v1 bytes, or a v2 map or list
Body = bytes | Mapping[str, Any] | list[Any]

_DEFAULT_PORTS: Final = {"amqp": 5672, "amqps": 5671}


def _process_name() -> str:
    """This program's name as a process list shows it: the script's file name
    (``qmf``), the package of a ``python -m PACKAGE`` run, else the interpreter's."""
    arg0 = sys.argv[0] if sys.argv else ""
    base = os.path.basename(arg0)
    if base == "__main__.py":
        base = os.path.basename(os.path.dirname(arg0))
    if base in ("", "-c", "-"):
        base = os.path.basename(sys.executable) or "python"
    return base


def client_process_properties() -> dict[str, str | int]:
    """The connection properties that name the client process, as the qpid clients
    send them and qpidd reads them (AMQP 1.0 open properties, AMQP 0-10 and 0-9-1
    client properties): ``qpid.client_process`` (the program's name),
    ``qpid.client_pid`` and ``qpid.client_ppid``; ``qmf stat -c`` shows the first two
    (cproc, cpid), on qpidd and through the RabbitMQ bridge."""
    return {"qpid.client_process": _process_name(), "qpid.client_pid": os.getpid(),
            "qpid.client_ppid": os.getppid()}


class ConnectionState(enum.StrEnum):
    """Where a transport is in its life, the same for every transport: ``NEW`` ->
    ``CONNECTING`` -> ``OPEN`` -> ``LOST`` (the broker or the network ended it) or
    ``CLOSING`` -> ``CLOSED`` (:meth:`Transport.close`); a failed or cancelled connect
    ends ``CLOSED`` too.  A transport is never opened again: reconnecting makes a new
    one."""

    NEW = "new"
    CONNECTING = "connecting"
    OPEN = "open"
    LOST = "lost"
    CLOSING = "closing"
    CLOSED = "closed"


@frozen
class Capabilities:
    """What a connected transport can do, declared by the transport (the console
    branches on these, never on a protocol name or a transport's class).

    ``protocol``: the AMQP version (``"0-9-1"``, ``"1.0"``; ``""`` before a connection);
    ``qmf_v2``: the brokers it reaches publish QMF v2 (qpidd over AMQP 1.0; a 0-9-1 bus
    with the management-broker role speaks v1);
    ``server_selectors``: ``bind(selector=...)`` is applied by the broker;
    ``dead_letters``: an endpoint's overflow can be dead-lettered
    (``open_endpoint(dead_letter_exchange=...)``) and its length capped
    (``max_length``); ``drain_probe``: a message published to ``qpid.management``
    reaches the endpoints bound to its key behind what they already hold, in order
    (a probe tells when an endpoint's backlog was read); ``v2_map_bytes``: QMF v2 maps
    arrive as ``amqp/map``/``amqp/list`` bytes in ``Delivery.body`` for the protocol
    core to decode (AMQP 0-9-1); without it they arrive only as a decoded
    ``Delivery.value`` (an AMQP 1.0 amqp-value), and bytes under those content types
    are not a v2 message; ``vhosts``: the broker has virtual hosts and the address
    names one (AMQP 0-9-1); qpidd over AMQP 1.0 has none, and its address is written
    without (:attr:`BrokerAddress.server_where`).
    """

    protocol: str
    qmf_v2: bool = False
    server_selectors: bool = False
    dead_letters: bool = False
    drain_probe: bool = False
    v2_map_bytes: bool = False
    vhosts: bool = True


#: AMQP 0-9-1 (RabbitMQ): queues with length caps and dead letters, no selectors
AMQP091_CAPABILITIES: Final = Capabilities("0-9-1", server_selectors=False,
                                           dead_letters=True, drain_probe=True,
                                           v2_map_bytes=True)
#: AMQP 1.0 (qpidd): selectors applied at the source; link credit bounds an endpoint
AMQP10_CAPABILITIES: Final = Capabilities("1.0", qmf_v2=True, server_selectors=True,
                                          vhosts=False)
#: a transport that has not connected yet
NO_CAPABILITIES: Final = Capabilities("")


@frozen
class TlsOptions:
    """TLS settings for ``amqps://`` URLs.

    ``cafile`` defaults to the system trust store; ``certfile``/``keyfile`` give a
    client certificate; ``verify_hostname=False`` keeps certificate verification but
    skips the host name check.
    """

    cafile: str | None = None
    certfile: str | None = None
    keyfile: str | None = None
    verify_hostname: bool = True


@frozen
class BrokerAddress:
    """A parsed broker URL (credentials kept out of ``repr`` and ``where``)."""

    scheme: str
    host: str
    port: int
    vhost: str
    user: str = attrs.field(repr=False)

    @property
    def where(self) -> str:
        """``scheme://host:port/vhost`` without credentials (for messages and logs)."""
        return f"{self.scheme}://{self.host}:{self.port}/{quote(self.vhost, safe='')}"

    @property
    def server_where(self) -> str:
        """``scheme://host:port/``: :attr:`where` of a broker without virtual hosts
        (qpidd over AMQP 1.0)."""
        return f"{self.scheme}://{self.host}:{self.port}/"


def sasl_mechanism_list(mechanisms: str | Sequence[str] | None) -> tuple[str, ...] | None:
    """SASL mechanism names as a tuple of upper-case names, in the order given (``None``
    stays ``None``: the transport picks).  A string holds names separated by spaces or
    commas, as ``--sasl-mechanism`` takes them.

    Raises:
        UsageError: an empty list, or a name that is not a SASL mechanism name.
    """
    if mechanisms is None:
        return None
    items = mechanisms.replace(",", " ").split() if isinstance(mechanisms, str) else mechanisms
    names = []
    for item in items:
        if not isinstance(item, str) or not re.fullmatch(r"[A-Za-z0-9_-]{1,20}", item):
            raise UsageError(f"{item!r} is not a SASL mechanism name (e.g. PLAIN, EXTERNAL)")
        names.append(item.upper())
    if not names:
        raise UsageError("no SASL mechanism given")
    return tuple(names)


def check_prefetch(prefetch: object) -> int:
    """``prefetch`` as the transports take it: an int >= 0 (0: unlimited).

    Raises:
        UsageError: a negative number, or not an int (a bool is not).
    """
    if not isinstance(prefetch, int) or isinstance(prefetch, bool) or prefetch < 0:
        raise UsageError(f"prefetch must be an int >= 0, not {prefetch!r}")
    return prefetch


def url_heartbeat(url: str) -> float | None:
    """The ``heartbeat`` query parameter of a broker URL, in seconds (None when absent):
    how often each side sends something on an idle connection, so a peer silent for
    about twice that is declared lost.  AMQP 0-9-1 negotiates it with the broker;
    over AMQP 1.0 it sets the idle timeout to twice the value.

    Raises:
        UsageError: the value is not a number >= 0.
    """
    values = parse_qs(urlsplit(url).query).get("heartbeat") if isinstance(url, str) else None
    if not values:
        return None
    try:
        seconds = float(values[-1])
    except ValueError:
        seconds = -1.0
    if not seconds >= 0:
        raise UsageError(f"heartbeat={values[-1]!r} in the broker URL: give seconds >= 0")
    return seconds


def with_heartbeat(url: str, seconds: int) -> str:
    """``url`` (a URL or a qpid-tools address) with ``heartbeat=seconds`` in its query,
    replacing any there.

    Raises:
        UsageError: a malformed address, or a negative ``seconds``.
    """
    if seconds < 0:
        raise UsageError("heartbeat seconds must be >= 0")
    parts = urlsplit(broker_url(url))
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True)
             if k != "heartbeat"] + [("heartbeat", str(int(seconds)))]
    return urlunsplit(parts._replace(query=urlencode(query)))


def parse_url(url: str) -> BrokerAddress:
    """Check an ``amqp://`` or ``amqps://`` URL and return its parts.

    The vhost is the percent-decoded path without its leading ``/`` (``/`` when the path
    is empty); user and password default to ``guest``.

    Raises:
        UsageError: the URL is not a string or is malformed.
    """
    if not isinstance(url, str):
        raise UsageError(f"broker URL must be a str, not {type(url).__name__}")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise UsageError(f"malformed broker URL {censor_url(url)!r}: {exc}") from exc
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS:
        raise UsageError(f"broker URL {censor_url(url)!r} must start with amqp:// or amqps://")
    if not parts.hostname:
        raise UsageError(f"broker URL {censor_url(url)!r} has no host")
    path = parts.path
    if path in ("", "/"):
        vhost = "/"
    else:
        raw = path[1:]
        if "@" in raw:
            # amqp://user/password@host: the password sits in the path; keep it out
            shown = f"{parts.scheme}://{parts.netloc}/******@{raw.rpartition('@')[2]}"
            raise UsageError(
                f"broker URL {shown!r}: '@' in the vhost; for a qpid-style "
                "address write it without the scheme (-b user/password@host:port), "
                "or write amqp://user:password@host:port/vhost"
            )
        if "/" in raw:
            raise UsageError(
                f"broker URL {censor_url(url)!r}: the vhost is one path segment; "
                "write '/' inside it as %2F"
            )
        vhost = unquote(raw)
    user = unquote(parts.username) if parts.username is not None else "guest"
    return BrokerAddress(scheme, parts.hostname, port or _DEFAULT_PORTS[scheme], vhost, user)


#: ``host``, ``[ipv6]``, each with an optional ``:port`` (what follows ``@``).
_HOST_PORT: Final = re.compile(
    r"""^(?:(?P<host>[^\s@:/\[\]?#%]+)|\[(?P<host6>[0-9A-Fa-f:.]+(?:%[\w.-]+)?)\])
        (?::(?P<port>[0-9]*))?$""",
    re.X,
)


def broker_url(text: str, *, default_port: int = 5672) -> str:
    """Turn a broker address as the classic qpid tools take it into a URL.

    Accepted: ``host``, ``host:port``, ``[ipv6]:port``, each optionally preceded by
    ``user@``, ``user/password@`` or ``user:password@`` (the user ends at the first
    ``/`` or ``:``, the host starts after the last ``@``, so a password may hold any
    character); ``amqp://`` and ``amqps://`` URLs come back unchanged, except the
    qpid form behind a scheme (``amqp://user/password@host:port``), which is
    converted.  User and password are percent-encoded (:func:`parse_url` decodes
    them).  A missing port is ``default_port`` (5671 behind ``amqps://``).

    Raises:
        UsageError: ``text`` is not a str, is empty, or is not a broker address.
    """
    if not isinstance(text, str):
        raise UsageError(f"broker address must be a str, not {type(text).__name__}")
    address = text.strip()
    if not address:
        raise UsageError("broker address is empty; write host[:port] or amqp://host:port")
    scheme = "amqp"
    head, sep, rest = address.partition("://")
    if sep:
        scheme = head.lower()
        if scheme not in _DEFAULT_PORTS:
            raise UsageError(
                f"broker address {censor_url(address)!r}: scheme {head!r} is not "
                "supported (amqp:// or amqps://)"
            )
        if not _is_qpid_form(rest):
            parse_url(address)  # a URL: check it, hand it back unchanged
            return address
        address = rest
    elif re.match(r"(?i)amqps?:(tcp|ssl|rdma):", address):
        raise UsageError(
            f"broker address {address!r}: the amqp:tcp:host:port form is not supported; "
            "write host:port (or amqps://host:port for TLS)"
        )
    port_default = default_port if scheme == "amqp" else _DEFAULT_PORTS["amqps"]
    return _qpid_form_to_url(address, scheme, port_default)


def _is_qpid_form(rest: str) -> bool:
    """True when what follows ``scheme://`` is ``user/password@host[:port]``."""
    userinfo, at, hostport = rest.rpartition("@")
    return bool(at) and "/" in userinfo and _HOST_PORT.match(hostport) is not None


def _split_userinfo(userinfo: str) -> tuple[str, str | None]:
    """``user/password`` or ``user:password`` (the user ends at the first / or :)."""
    cuts = [i for i in (userinfo.find("/"), userinfo.find(":")) if i >= 0]
    if not cuts:
        return userinfo, None
    return userinfo[: min(cuts)], userinfo[min(cuts) + 1 :]


def _censor_address(address: str) -> str:
    """A qpid-style ``address`` with its password hidden (for messages)."""
    userinfo, at, hostport = address.rpartition("@")
    if not at:
        return address
    user, password = _split_userinfo(userinfo)
    return f"{user}{'' if password is None else '/******'}@{hostport}"


def _qpid_form_to_url(address: str, scheme: str, default_port: int) -> str:
    shown = _censor_address(address)
    userinfo, at, hostport = address.rpartition("@")
    match = _HOST_PORT.match(hostport)
    if match is None:
        if hostport.count(":") > 1 and "[" not in hostport:
            raise UsageError(
                f"broker address {shown!r}: write an IPv6 address in brackets, "
                "e.g. [::1]:5672"
            )
        raise UsageError(
            f"broker address {shown!r} is not [user[/password]@]host[:port] "
            "or an amqp:// URL"
        )
    host = match["host"] or f"[{match['host6']}]"
    port_text = match["port"]
    if port_text is None:
        port = default_port
    elif not port_text or not 1 <= int(port_text) <= 65535:
        raise UsageError(f"broker address {shown!r}: port must be 1-65535")
    else:
        port = int(port_text)
    credentials = ""
    if at:
        user, password = _split_userinfo(userinfo)
        if not user:
            raise UsageError(f"broker address {shown!r}: the user before '@' is empty")
        credentials = quote(user, safe="")
        if password is not None:
            credentials += ":" + quote(password, safe="")
        credentials += "@"
    url = f"{scheme}://{credentials}{host}:{port}"
    try:
        parse_url(url)
    except UsageError as exc:
        raise UsageError(f"broker address {shown!r} is not usable: {exc}") from None
    return url


def censor_url(url: str) -> str:
    """``url`` with its password hidden (for messages), in every form a broker address
    takes: ``amqp://user:password@host``, ``amqp://user/password@host`` and the qpid
    tools' ``user/password@host`` and ``user:password@host`` (the credentials end at
    the last ``@``; the user at the first ``/`` or ``:``).

    Raises:
        Nothing: a value that is not a string gives ``<unparsable URL>``.
    """
    try:
        head, at, tail = url.rpartition("@")
    except (AttributeError, TypeError):  # not a string after all
        return "<unparsable URL>"
    if not at:
        return url
    scheme, sep, credentials = head.rpartition("://")
    cuts = [i for i in (credentials.find(":"), credentials.find("/")) if i >= 0]
    if not cuts:
        return url  # a user name alone
    cut = min(cuts)
    return f"{scheme}{sep}{credentials[:cut + 1]}******@{tail}"


class Transport(Protocol):
    """One connection carrying a QMF bus, in QMF terms.

    Lifecycle: :meth:`connect` once; :meth:`declare_management_exchange`; open a
    reply endpoint (``open_endpoint(None)`` then ``bind(ep, REPLY_EXCHANGE, ep)``) and
    a broadcast endpoint (``open_endpoint(None, bindings=[(MANAGEMENT_EXCHANGE, key),
    ...], max_length=N, no_ack=False)``); :meth:`bind` / :meth:`unbind` keys;
    :meth:`publish`; :meth:`close` at the end.  Every delivery of every endpoint goes,
    in order, to the one dispatcher given to :meth:`set_dispatcher`; deliveries wait
    until one is set.  Endpoints opened with ``no_ack=False`` have backpressure (the
    broker keeps what the client has not dispatched yet, capped by ``max_length``).
    """

    @property
    def state(self) -> ConnectionState:
        """Where the connection is in its life."""
        ...

    @property
    def is_open(self) -> bool:
        """True while connected and not closing."""
        ...

    @property
    def where(self) -> str:
        """The broker address without credentials (for messages and logs)."""
        ...

    @property
    def capabilities(self) -> Capabilities:
        """What this transport can do (``NO_CAPABILITIES`` before it connected, for a
        transport that picks its protocol when connecting)."""
        ...

    @property
    def backlog(self) -> int:
        """Deliveries received but not yet handed to the dispatcher."""
        ...

    @property
    def local_address(self) -> str | None:
        """``host:port`` of this end of the connection when the broker names the
        connection after it (qpidd), else None (not open, or not known)."""
        ...

    async def connect(self, timeout: float = 10.0) -> None:
        """Open the connection; may be called once.

        Raises:
            UsageError: malformed URL or options, or called twice.
            TransportError: the broker refused or cannot be reached (cause chained).
            QmfTimeout: no connection within ``timeout`` seconds.
        """
        ...

    async def declare_management_exchange(self) -> None:
        """Declare the management topic exchange ``qpid.management``.

        Raises:
            NotConnectedError: not open.
            TransportError: the broker refused.
        """
        ...

    async def declare_exchange(self, name: str, kind: str = "topic") -> None:
        """Make sure the exchange ``name`` of type ``kind`` (``topic``, ``direct``)
        exists: declared durable where clients declare exchanges (AMQP 0-9-1: the QMF
        v2 exchanges on RabbitMQ, as qpidd has them), checked where the broker has its
        own (AMQP 1.0: qpidd).

        Raises:
            NotConnectedError: not open.
            TransportError: the broker refused (e.g. the exchange exists with another
                type), or has no such exchange.
        """
        ...

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
        """Open an exclusive endpoint (``name=None``: server-named), bind it to
        ``bindings`` ((exchange, key) pairs) and receive from it; returns its name.

        Raises:
            UsageError: bad options.
            NotConnectedError: not open.
            TransportError: the broker refused.
        """
        ...

    async def bind(self, endpoint: str, exchange: str, routing_key: str, *,
                   selector: str | None = None) -> None:
        """Bind ``endpoint`` to ``exchange`` with ``routing_key``.

        ``selector`` (a JMS selector over the application properties and the subject)
        asks the broker to pass only matching messages where the transport can
        (``server_selectors`` True: AMQP 1.0 to qpidd); elsewhere it is ignored, so a
        caller always filters what it receives itself.

        Raises:
            NotConnectedError: not open.
            TransportError: the broker refused.
        """
        ...

    async def unbind(self, endpoint: str, exchange: str, routing_key: str, *,
                     selector: str | None = None) -> None:
        """Remove a binding made by :meth:`bind` (with the same ``selector``) or
        :meth:`open_endpoint`.

        Raises:
            NotConnectedError: not open.
            TransportError: the broker refused.
        """
        ...

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
        """Send ``body`` to ``exchange`` with ``routing_key``, the reply key
        ``reply_to``, application ``headers`` and ``correlation_id``.

        ``body`` is bytes (a QMF v1 body, sent as it is), or a dict or list: a QMF v2
        map message, sent as an AMQP 1.0 amqp-value, or over AMQP 0-9-1 in the AMQP 0-10
        map/list encoding with content type ``amqp/map``/``amqp/list`` (``content_type``
        is then ignored).

        Raises:
            UsageError: something in the message cannot be sent.
            NotConnectedError: not open (never opened, closed or lost).
            TransportError: the broker refused.
        """
        ...

    def set_dispatcher(self, dispatch: Callable[[Delivery], None]) -> None:
        """Hand every delivery to ``dispatch`` (synchronous), in arrival order.

        Raises:
            Nothing: it does not raise.
        """
        ...

    def on_lost(self, callback: Callable[[BaseException], None]) -> None:
        """Call ``callback(ConnectionLostError)`` once if the connection drops (not
        after :meth:`close`).

        Raises:
            Nothing: it does not raise.
        """
        ...

    async def close(self, timeout: float = 5.0) -> None:
        """Close; idempotent, bounded by ``timeout``, shielded from cancellation.

        Raises:
            Nothing: it does not raise.
        """
        ...


class TransportFactory(Protocol):
    """Builds one :class:`Transport` per connection: ``factory(url, tls=..., prefetch=...,
    name=...)``, plus ``sasl_mechanisms=...`` when the user chose SASL mechanisms (a
    factory that takes no such keyword still works for everyone else).
    :class:`~qmf_async.transport.AiormqTransport` itself is one."""

    def __call__(
        self,
        url: str,
        *,
        tls: TlsOptions | None = ...,
        prefetch: int = ...,
        name: str = ...,
    ) -> Transport:
        """A new, unconnected transport to ``url``.

        Raises:
            UsageError: bad options.
        """
        ...


async def open_reply_endpoint(transport: Transport) -> str:
    """Open a server-named reply endpoint bound on ``amq.direct`` under its own name
    (its name is the reply key); never lossy.  Returns its name.

    Raises:
        NotConnectedError: the transport is not open.
        TransportError: the broker refused.
    """
    endpoint = await transport.open_endpoint(None)
    await transport.bind(endpoint, REPLY_EXCHANGE, endpoint)
    return endpoint


async def open_broadcast_endpoint(transport: Transport, keys: Sequence[str], *,
                                  max_length: int | None = None) -> str:
    """Open a server-named endpoint bound on ``qpid.management`` to ``keys``, capped at
    ``max_length`` (oldest dropped) with backpressure (``no_ack=False``).  Returns its
    name.

    Raises:
        UsageError: a bad ``max_length``.
        NotConnectedError: the transport is not open.
        TransportError: the broker refused.
    """
    return await transport.open_endpoint(
        None, bindings=[(MANAGEMENT_EXCHANGE, key) for key in keys], max_length=max_length,
        no_ack=False)
