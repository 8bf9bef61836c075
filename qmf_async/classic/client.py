"""``qmf.client``: the AMQP 1.0 ``BrokerAgent`` of qpid-cpp's management library, on
qmf-async's AMQP 1.0 transport.

A :class:`BrokerAgent` sends QMF v2 requests to the broker's management node
(``qmf.default.direct``, subject ``broker``) and reads the answers from a dynamic reply
node of its own.  As the upstream library it starts **no thread**: each call runs the
connection's private event loop in the calling thread until its answer is in, so the
library is safe where processes fork (a child connects a ``BrokerAgent`` of its own;
the parent's keeps working).  With ``reconnect_delays`` a call that loses the
connection reconnects after each delay in turn and is sent again.

Values follow the classic layer's text rule (docs/classic.md): every string is ``str``
when it is valid UTF-8, at any depth; other bytes stay ``bytes``.

The AMQP 1.0 transport is the built-in, pure-Python one (``NativeAmqp10Transport``).

Raises (every call): :class:`ConnectionException` (a ``TransportError``; once the
program has imported proton itself, also proton's ``ConnectionException``) when the
broker cannot be reached or the connection is lost for good; ``QmfTimeout`` when no
answer comes within the agent's ``timeout``;
``MethodError`` when the broker refuses a method; ``UsageError`` for bad arguments or a
call made from a running asyncio event loop or from a process the connection was not
opened in (after ``os.fork()``: connect anew in the child).
"""

from __future__ import annotations

import asyncio
import atexit
import itertools
import os
import sys
import threading
import time
import weakref
from collections.abc import Callable, Coroutine, Iterable, Iterator, Mapping
from typing import Any, TypeVar

from .. import names
from ..errors import (
    MethodError,
    ObjectGoneError,
    QmfError,
    QmfTimeout,
    TransportError,
    UsageError,
)
from ..transport import Delivery, NativeAmqp10Transport, TlsOptions
from ._values import BrokerURL, classic_text
from ._wrappers import (
    ACL_ADDR,
    BROKER_ADDR,
    Acl,
    Binding,
    Bridge,
    Broker,
    BrokerCalls,
    BrokerObject,
    Cluster,
    Connection,
    Exchange,
    HaBroker,
    Link,
    Memory,
    Queue,
    Subscription,
    W,
)
from ._wrappers import Session_ as Session

_TRANSPORT: Any = NativeAmqp10Transport

T = TypeVar("T")

#: the broker's management node (the upstream default when the URL has no path)
MANAGEMENT_NODE = names.V2_DIRECT_EXCHANGE

#: what a connection failure raises: a :class:`~qmf_async.TransportError`
#: (``Amqp10ConnectionError``)
ConnectionException: type[TransportError] = _TRANSPORT.connection_error

_ALSO_PROTON: dict[tuple[type, type], type[TransportError]] = {}


def _connection_exception(message: str) -> TransportError:
    """A :data:`ConnectionException`; when the program has imported proton (code
    written for proton's blocking client catches ``proton.ConnectionException``) and
    the class is not proton's already, one of a subclass that is both."""
    cls = ConnectionException
    proton = sys.modules.get("proton")
    theirs = getattr(proton, "ConnectionException", None) if proton is not None else None
    if isinstance(theirs, type) and issubclass(theirs, BaseException) \
            and not issubclass(cls, theirs):
        both = _ALSO_PROTON.get((cls, theirs))
        if both is None:
            both = _ALSO_PROTON[(cls, theirs)] = type(cls.__name__, (cls, theirs), {
                "__module__": cls.__module__, "__doc__": cls.__doc__})
        cls = both
    return cls(message)

__all__ = [
    "ACL_ADDR",
    "BROKER_ADDR",
    "Acl",
    "AgentConnection",
    "Binding",
    "Bridge",
    "Broker",
    "BrokerAgent",
    "BrokerObject",
    "Cluster",
    "Connection",
    "ConnectionException",
    "Exchange",
    "HaBroker",
    "Link",
    "Memory",
    "Queue",
    "ReconnectDelays",
    "Response",
    "Session",
    "Subscription",
    "SyncRequestResponse",
]


class ReconnectDelays:
    """The delays (seconds) before successive reconnect attempts: 0, then
    ``shortest``, doubled up to ``longest``; then ``longest`` again ``repeat`` more
    times (``repeat=True``: forever).

    ``list(ReconnectDelays(1, 7, 3)) == [0, 1, 2, 4, 7, 7, 7, 7]``.

    Raises (constructor): ValueError when ``shortest`` is not positive, exceeds
    ``longest``, or ``repeat`` is negative.
    """

    def __init__(self, shortest: float, longest: float, repeat: bool | int = True) -> None:
        if shortest <= 0 or shortest > longest or (repeat is not True and repeat < 0):
            raise ValueError(f"invalid reconnect delays: shortest={shortest!r}, "
                             f"longest={longest!r}, repeat={repeat!r}")
        self.shortest, self.longest, self.repeat = shortest, longest, repeat

    def __iter__(self) -> Iterator[float]:
        yield 0
        delay = self.shortest
        while delay < self.longest:
            yield delay
            delay *= 2
        yield self.longest
        more: Iterable[int] = itertools.count() if self.repeat is True else range(
            int(self.repeat))
        for _ in more:
            yield self.longest

    def __repr__(self) -> str:
        return f"ReconnectDelays({self.shortest!r}, {self.longest!r}, {self.repeat!r})"


def _target(url: Any) -> tuple[str, str | None]:
    """(the transport's ``amqp[s]://`` URL, the management node from the URL's path)
    of a URL text (``[amqp[s]://][user[/password]@]host[:port][/node]``) or an object
    with ``host`` and ``port`` (and ``scheme``, ``user``, ``password``), such as
    ``qpid.util.URL``."""
    if url is None:
        parsed = BrokerURL("localhost")
    elif isinstance(url, (str, BrokerURL)):
        parsed = BrokerURL(url)
    else:
        host = getattr(url, "host", None)
        if not host:
            raise UsageError(f"connect() needs a broker URL or an object with host and port, "
                             f"not {type(url).__name__}")
        port = getattr(url, "port", None)
        parsed = BrokerURL(scheme=getattr(url, "scheme", None) or None,
                           user=getattr(url, "user", None) or None,
                           password=getattr(url, "password", None) or None,
                           host=str(host), port=int(port) if port else None,
                           path=str(getattr(url, "path", "") or ""))
    node = parsed.path.lstrip("/") or None
    plain = BrokerURL(scheme=parsed.scheme, user=parsed.user, password=parsed.password,
                      host=parsed.host, port=parsed.port)
    return plain.url(), node


_OPEN: weakref.WeakSet[AgentConnection] = weakref.WeakSet()


@atexit.register
def _close_open() -> None:
    """Close, at exit, the connections left open (in the process that opened them)."""
    for conn in list(_OPEN):
        conn.close()


def _loop_running() -> bool:
    """Whether an asyncio event loop runs in this thread (a blocking call would stall it)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


class AgentConnection:
    """One AMQP 1.0 connection of a :class:`BrokerAgent` (what upstream's
    ``BrokerAgent.connection()`` returns), with an event loop of its own that runs
    only inside a call, in the calling thread.

    Raises (constructor): ConnectionException (the broker cannot be reached or refused
    the login), QmfTimeout (no connection within ``timeout``), UsageError (a bad URL).
    """

    def __init__(self, url: Any = None, timeout: float = 10, ssl_domain: Any = None,
                 sasl: Any = None) -> None:
        if _loop_running():
            raise UsageError("qmf.client blocks; from asyncio code use qmf_async.Session")
        address, node = _target(url)
        tls: TlsOptions | None = None
        if ssl_domain is not None:
            if not isinstance(ssl_domain, TlsOptions):
                raise UsageError("ssl_domain: pass qmf_async.transport.TlsOptions (CA file, "
                                 "certificate, key); proton's SSLDomain is not read")
            tls = ssl_domain
        mechanisms: str | None = None
        if sasl is not None:
            mechanisms = str(getattr(sasl, "mechs", "") or "") or None
            user, password = getattr(sasl, "user", None), getattr(sasl, "password", None)
            if user:
                host_part = address.split("://", 1)[1].rpartition("@")[2]
                scheme = address.split("://", 1)[0]
                address = BrokerURL(f"{scheme}://{user}/{password or ''}@{host_part}").url()
        self.url = address
        self.node = node
        self.timeout = float(timeout)
        self._pid = os.getpid()
        self._lock = threading.RLock()
        self._loop = asyncio.new_event_loop()
        self.transport = _TRANSPORT(address, tls=tls, name="qmf.client", idle_timeout=0,
                                    sasl_mechanisms=mechanisms,
                                    operation_timeout=self.timeout)
        try:
            self.run(self.transport.connect(self.timeout), self.timeout + 1)
        except BaseException:
            self.close()
            raise
        _OPEN.add(self)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coro`` on this connection's loop in the calling thread (at most
        ``timeout`` s); transport failures are raised as ConnectionException.

        Raises:
            UsageError: called from a running event loop or from another process.
            ConnectionException, QmfTimeout: as the coroutine.
        """
        if os.getpid() != self._pid:
            coro.close()
            raise UsageError(f"this connection was opened in process {self._pid}; after "
                             f"os.fork() the child connects a BrokerAgent of its own")
        if _loop_running():
            coro.close()
            raise UsageError("qmf.client blocks; from asyncio code use qmf_async.Session")
        wait = self.timeout if timeout is None else timeout
        with self._lock:
            if self._loop.is_closed():
                coro.close()
                raise _connection_exception(f"the connection to {self.url} is closed")
            try:
                return self._loop.run_until_complete(asyncio.wait_for(coro, wait))
            except TimeoutError:
                raise QmfTimeout(f"no answer from {self.transport.where} within "
                                 f"{wait} s") from None
            except ConnectionException:
                raise
            except TransportError as exc:
                raise _connection_exception(str(exc)) from exc

    def close(self) -> None:
        """Close the connection (bounded; idempotent)."""
        if self._loop.is_closed() or os.getpid() != self._pid:
            return  # a forked child leaves its parent's connection alone
        _OPEN.discard(self)
        with self._lock:
            if not _loop_running():  # else the socket is dropped, not closed politely
                try:
                    self._loop.run_until_complete(self.transport.close(min(self.timeout, 2.0)))
                except Exception:  # pragma: no cover - closing must not raise
                    pass
            self._loop.close()

    def __repr__(self) -> str:
        return f"AgentConnection({self.transport.where})"


class Response:
    """A received answer: ``body`` (after the text rule), ``properties`` (the
    application properties), ``correlation_id``."""

    def __init__(self, delivery: Delivery) -> None:
        self.body: Any = classic_text(delivery.value)
        self.properties: dict[str, Any] = classic_text(dict(delivery.headers or {}))
        self.correlation_id = delivery.correlation_id
        self.subject = delivery.routing_key

    def __repr__(self) -> str:
        return f"Response({self.properties!r}, {self.body!r})"


class SyncRequestResponse:
    """Requests to one address and their answers on a dynamic reply node.

    A request is any object with ``body``, ``properties`` and ``subject`` (and
    optionally ``address``), such as a ``proton.Message``.

    Raises: as :meth:`AgentConnection.run`.
    """

    def __init__(self, connection: AgentConnection, address: str | None = None) -> None:
        self.address = address
        self._ids = itertools.count(1)
        self._answers: dict[str, asyncio.Queue[Delivery | BaseException]] = {}
        self.connection = connection
        self._reply = ""
        self.reconnect(connection)

    def reconnect(self, connection: AgentConnection) -> None:
        """Use ``connection`` from now on (opens the reply node on it)."""
        self.connection = connection
        transport = connection.transport
        self._fail_all(_connection_exception(f"reconnected to {connection.url}"))

        async def setup() -> str:
            transport.set_dispatcher(self._on_delivery)
            transport.on_lost(self._fail_all)
            return str(await transport.open_dynamic_endpoint("qmf-client-reply"))

        self._reply = connection.run(setup())

    @property
    def reply_to(self) -> str:
        """The address of the reply node."""
        return self._reply

    def _on_delivery(self, delivery: Delivery) -> None:
        cid = delivery.correlation_id
        key = cid.decode("utf-8", "replace") if isinstance(cid, bytes) else str(cid)
        queue = self._answers.get(key)
        if queue is not None:
            queue.put_nowait(delivery)

    def _fail_all(self, exc: BaseException) -> None:
        if isinstance(exc, TransportError) and not isinstance(exc, ConnectionException):
            exc = _connection_exception(str(exc))
        for queue in self._answers.values():
            queue.put_nowait(exc)

    def call(self, request: Any) -> Response:
        """Send ``request`` and wait for its (first) answer."""
        return self.wait(self.send(request))

    def send(self, request: Any) -> str:
        """Send ``request``; returns its correlation id (for :meth:`wait`)."""
        address = getattr(request, "address", None) or self.address
        if not address:
            raise UsageError("the request has no address and neither has this client")
        cid = str(next(self._ids))
        self._answers[cid] = asyncio.Queue()
        body = getattr(request, "body", None)
        try:
            self.connection.run(self.connection.transport.publish(
                body if body is not None else {}, exchange=address,
                routing_key=getattr(request, "subject", None) or "",
                reply_to=self._reply, headers=dict(getattr(request, "properties", None) or {}),
                correlation_id=cid, content_type=None))
        except BaseException:
            self._answers.pop(cid, None)
            raise
        return cid

    def wait(self, correlation_id: str, *, keep: bool = False) -> Response:
        """The next answer to the request ``correlation_id`` (``keep``: more answers
        are expected, as for a partial query answer)."""
        queue = self._answers.get(correlation_id)
        if queue is None:
            raise UsageError(f"no request {correlation_id!r} is waiting for an answer")

        async def next_answer() -> Delivery | BaseException:
            return await queue.get()

        try:
            got = self.connection.run(next_answer())
        except BaseException:
            self._answers.pop(correlation_id, None)
            raise
        if isinstance(got, BaseException):
            self._answers.pop(correlation_id, None)
            raise got
        if not keep:
            self._answers.pop(correlation_id, None)
        return Response(got)


class _Request:
    def __init__(self, opcode: str, body: Mapping[str, Any]) -> None:
        self.body = dict(body)
        self.subject = "broker"
        self.address: str | None = None
        self.properties = {"method": "request", "qmf.opcode": opcode,
                           "x-amqp-0-10.app-id": "qmf2"}


class BrokerAgent(BrokerCalls):
    """Proxy of a manageable Qpid broker over AMQP 1.0 (QMF v2 requests).

    ``BrokerAgent.connect("host:5672")`` (or an ``amqp://`` URL, or an object with
    ``host`` and ``port`` such as ``qpid.util.URL``); ``reconnect_delays`` (an
    iterable, e.g. :class:`ReconnectDelays`) makes calls survive a lost connection.
    Its calls and object wrappers are ``qpidtoollibs``' (``_wrappers``); objects are
    their QMF v2 maps as the broker sent them (a reference reads as its
    ``{'_object_name': ...}`` map).

    Raises (methods): see the module docstring.
    """

    def __init__(self, connection: AgentConnection) -> None:
        self._client: SyncRequestResponse | None = SyncRequestResponse(
            connection, connection.node or MANAGEMENT_NODE)
        self.reconnect_delays: Iterable[float] = []
        self.make_connection: Callable[[], AgentConnection] | None = None

    @staticmethod
    def connection(url: Any = None, timeout: float = 10, ssl_domain: Any = None,
                   sasl: Any = None) -> AgentConnection:
        """A connection suitable for a BrokerAgent (see :class:`AgentConnection`)."""
        return AgentConnection(url, timeout, ssl_domain, sasl)

    @staticmethod
    def connect(url: Any = None, timeout: float = 10, ssl_domain: Any = None,
                sasl: Any = None, reconnect_delays: Iterable[float] | None = None
                ) -> BrokerAgent:
        """A BrokerAgent connected to ``url``; no retry while connecting.

        Raises:
            ConnectionException, QmfTimeout, UsageError: as :class:`AgentConnection`.
        """
        def make() -> AgentConnection:
            return BrokerAgent.connection(url, timeout, ssl_domain, sasl)

        conn = make()
        try:
            agent = BrokerAgent(conn)
        except BaseException:
            conn.close()
            raise
        agent.make_connection = make
        agent.reconnect_delays = reconnect_delays or []
        return agent

    def reconnect(self, connection: AgentConnection) -> None:
        old = self._live().connection
        try:
            self._live().reconnect(connection)
        finally:
            if old is not connection:
                old.close()

    def close(self) -> None:
        """Close the connection (idempotent)."""
        if self._client is not None:
            self._client.connection.close()
            self._client = None

    def __enter__(self) -> BrokerAgent:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        conn = self._client.connection.url if self._client is not None else "closed"
        return f"BrokerAgent({conn})"

    # ---------------------------------------------------------------- plumbing

    def _live(self) -> SyncRequestResponse:
        if self._client is None:
            raise UsageError("this BrokerAgent is closed")
        return self._client

    def _reconnect(self) -> bool:
        if self.make_connection is None:
            return False
        for delay in self.reconnect_delays:
            time.sleep(delay)
            try:
                conn = self.make_connection()
            except ConnectionException:
                continue
            try:
                self.reconnect(conn)
                return True
            except ConnectionException:
                conn.close()
        return False

    def _retry(self, f: Callable[[], T]) -> T:
        while True:
            try:
                return f()
            except ConnectionException:
                if not self._reconnect():
                    raise

    def _request(self, opcode: str, content: Mapping[str, Any]) -> tuple[SyncRequestResponse,
                                                                         str, Response]:
        client = self._live()
        cid = client.send(_Request(opcode, content))
        return client, cid, client.wait(cid, keep=True)

    def _items(self, opcode: str, content: Mapping[str, Any]) -> list[Any]:
        client, cid, response = self._request(opcode, content)
        try:
            if response.properties.get("qmf.opcode") != "_query_response":
                raise QmfError(f"bad response to a query: {response.properties!r}")
            items = list(response.body or [])
            while "partial" in response.properties:
                response = client.wait(cid, keep=True)
                items += list(response.body or [])
            return items
        finally:
            client._answers.pop(cid, None)

    def _method(self, method: str, arguments: Mapping[str, Any] | None = None,
                addr: str = BROKER_ADDR) -> Any:
        content = {"_object_id": {"_object_name": addr}, "_method_name": method,
                   "_arguments": dict(arguments or {})}

        def f() -> Response:
            client, cid, response = self._request("_method_request", content)
            client._answers.pop(cid, None)
            return response

        response = self._retry(f)
        opcode = response.properties.get("qmf.opcode")
        if opcode == "_exception":
            values = (response.body or {}).get("_values", {}) if isinstance(
                response.body, dict) else {}
            raise MethodError(int(values.get("error_code", 1) or 1),
                              str(values.get("error_text", values)))
        if opcode != "_method_response":
            raise QmfError(f"bad response to {method}: {response.properties!r}")
        return response.body.get("_arguments") if isinstance(response.body, dict) else None

    def _classQuery(self, class_name: str) -> list[Any]:
        query = {"_what": "OBJECT", "_schema_id": {"_class_name": class_name}}
        return self._retry(lambda: self._items("_query_request", query))

    def _nameQuery(self, object_id: str) -> Any:
        query = {"_what": "OBJECT", "_object_id": {"_object_name": object_id}}
        items = self._retry(lambda: self._items("_query_request", query))
        return items[0] if len(items) == 1 else None

    def _getAll(self, cls: type[W]) -> list[W]:
        return [cls(self, x) for x in self._classQuery(cls.__name__.lower().rstrip("_"))]

    def _get(self, cls: type[W], addr: str) -> W | None:
        x = self._nameQuery(addr)
        return cls(self, x) if x else None

    def _reload(self, obj: BrokerObject) -> dict[str, Any]:
        refreshed = self._nameQuery(obj.getObjectId())
        if not refreshed:
            raise ObjectGoneError(1, f"{obj.getObjectId()} no longer exists on the broker")
        return dict(refreshed)

    def list(self, _type: str) -> list[Any]:
        """The values of every object of a class."""
        return [i.get("_values", {}) for i in self._classQuery(_type.lower())]
