"""A live QMF dashboard in an async web backend (aiohttp).

One :class:`~qmf_async.Session` lives as long as the application (opened in
``on_startup`` with ``manage_connections=True``, closed in ``on_cleanup``) and is shared
by every request.  JSON endpoints:

* ``GET /api/agents``: brokers (connected or not) and the known agents;
* ``GET /api/objects/{class}``: objects of a class (``?where=`` a JMS selector,
  ``?package=`` narrows the package); the consoles' own queues are left out, as from
  the stream, unless ``--console-queues``;
* ``GET /api/object/{object_id}``: one object (id in its text form ``0-1-1-10-26``);
* ``POST /api/object/{object_id}/methods/{method}``: call a method of the allow-list
  (``--methods``, default ``queue.purge``), the body is a JSON object of its arguments;
* ``GET /api/stream``: server-sent events: ``status`` (broker connected or not),
  ``snapshot``, ``queue`` (an update with its depth and enqueue-rate sample) and
  ``agent_gone``.

Errors are JSON ``{"error": ..., "type": ...}`` with the status code of who is at
fault: 400 bad selector, object id, body or arguments (``ArgumentError``); 404 unknown
object, class or method; 422 the agent refused the method (``MethodError``: ``status``
and ``text`` are in the body); 502 other agent/protocol errors; 503 the broker is not
connected (``Retry-After`` is set); 504 the bus did not answer in time.

Who may write (:class:`Guard`, docs/web.md): every request must name a Host the
dashboard serves (403 otherwise: DNS rebinding); a write (POST ...) must also be
``application/json`` (415), come from the dashboard's own origin (Origin, or Referer
without one; 403), carry the bearer token when there is one (401: bound beyond
loopback, one is made and printed at start unless ``--token``/$QMF_DASHBOARD_TOKEN
gives it) and call a method of the allow-list (403).

    python examples/web_dashboard/app.py --url amqp://guest:guest@localhost:5672/ \\
        [--host 127.0.0.1] [--port 8080] [--timeout 5] [-v]

The page (``/``) shows the queues with live depth and enqueue-rate charts and a purge
button per queue.  Needs ``aiohttp`` (``pip install 'qmf-async[web]'``).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import errno
import hmac
import ipaddress
import json
import logging
import math
import os
import secrets
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import attrs
from aiohttp import web

from qmf_async import (
    AgentError,
    ArgumentError,
    AuthenticationError,
    Broker,
    ClassKey,
    Console,
    MethodError,
    NotConnectedError,
    ObjectId,
    PartialResultError,
    ProtocolError,
    QmfError,
    QmfObject,
    QmfTimeout,
    RemoteAgent,
    SelectorError,
    Session,
    Subscription,
    TransportError,
    UnknownClassError,
    UsageError,
)
from qmf_async.names import is_console_queue
from qmf_async.transport import add_connection_arguments, connection_arguments

__all__ = ["STATIC", "Dashboard", "Guard", "create_app", "encode_object", "jsonable",
           "is_loopback", "parse_methods", "write_token", "main"]

log = logging.getLogger("qmf_async.web_dashboard")

STATIC = Path(__file__).resolve().parent / "static"
SSE_KEEPALIVE = 15.0  # seconds between comment lines on an idle stream


# --------------------------------------------------------------------------- JSON


def jsonable(value: Any) -> Any:
    """A QMF value as JSON: object ids, class keys and UUIDs as text, bytes as UTF-8
    text (hex when not UTF-8), maps and lists recursively, NaN/infinity as null."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, (ObjectId, ClassKey, uuid.UUID)):
        return str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value)
        try:
            return raw.decode()
        except UnicodeDecodeError:
            return raw.hex()
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in value]
    return str(value)


def encode_object(obj: QmfObject) -> dict[str, Any]:
    """A proxy as JSON: identity as text, properties, statistics and timestamps (ns)."""
    key = obj.get_class_key()
    updated, created, deleted = obj.get_timestamps()
    agent = obj.get_agent()
    return {
        "object_id": str(obj.get_object_id()),
        "class_key": str(key),
        "package": key.package,
        "class": key.name,
        "index": obj.get_index(),
        "agent": _agent_text(agent) if agent is not None else None,
        "agent_label": (agent.label or _agent_text(agent)) if agent is not None else None,
        "properties": jsonable(obj.get_properties()),
        "statistics": jsonable(obj.get_statistics()),
        "timestamps": {"updated": updated, "created": created, "deleted": deleted},
    }


def _agent_text(agent: RemoteAgent) -> str:
    return f"{agent.broker_bank}.{agent.agent_bank}"


def _dumps(data: Any) -> str:
    return json.dumps(data, separators=(",", ":"), allow_nan=False)


def _error(http_status: int, message: str, exc: BaseException | None = None,
           /, **extra: Any) -> web.Response:
    body: dict[str, Any] = {"error": message}
    if exc is not None:
        body["type"] = type(exc).__name__
    body.update(extra)
    headers = {"Retry-After": "1"} if http_status == 503 else None
    return web.json_response(body, status=http_status, headers=headers, dumps=_dumps)


def error_response(exc: QmfError) -> web.Response:
    """Map a qmf-async error to an HTTP error response (most specific class first)."""
    if isinstance(exc, SelectorError):
        return _error(400, str(exc), exc, reason=exc.reason, position=exc.position)
    if isinstance(exc, UnknownClassError):
        return _error(404, str(exc), exc)
    if isinstance(exc, UsageError):  # ArgumentError, EncodeError, bad ids, ...
        return _error(400, str(exc), exc)
    if isinstance(exc, MethodError):
        return _error(422, str(exc), exc, status=exc.status, text=exc.text)
    if isinstance(exc, QmfTimeout):  # QueryTimeout too
        return _error(504, str(exc), exc)
    if isinstance(exc, TransportError):  # NotConnected, ConnectionLost, AgentGone
        return _error(503, str(exc), exc)
    if isinstance(exc, PartialResultError) and not exc.errors and not exc.partial:
        return _error(503, str(exc), exc)  # no agent known (yet): try again later
    if isinstance(exc, AgentError):  # CommandError
        return _error(502, str(exc), exc, status=exc.status, text=exc.text)
    if isinstance(exc, ProtocolError):
        return _error(502, str(exc), exc)
    return _error(502, str(exc), exc)  # PartialResultError and the rest


# --------------------------------------------------------------------------- stream


class _Series:
    """Samples of one queue: (time ns, depth, enqueues, rate msg/s or None)."""

    __slots__ = ("created", "samples")

    def __init__(self, created: int, history: int) -> None:
        self.created = created
        self.samples: collections.deque[tuple[int, int, int, float | None]] = \
            collections.deque(maxlen=history)


class _Client:
    """One SSE connection: a bounded buffer of encoded events (oldest dropped)."""

    def __init__(self, maxsize: int) -> None:
        self.items: collections.deque[bytes] = collections.deque(maxlen=maxsize)
        self.dropped = 0
        self.closed = False
        self._wake = asyncio.Event()

    def put(self, item: bytes) -> None:
        if self.closed:
            return
        if len(self.items) == self.items.maxlen:
            self.dropped += 1
        self.items.append(item)
        self._wake.set()

    def close(self) -> None:
        self.closed = True
        self._wake.set()

    async def next(self, timeout: float) -> bytes | None:
        """The next event; None after ``timeout`` with nothing to send or when closed."""
        if not self.items and not self.closed:
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout)
        return self.items.popleft() if self.items else None


def _sse(event: str, data: Any) -> bytes:
    return f"event: {event}\ndata: {_dumps(data)}\n\n".encode()


class Dashboard:
    """The application's state: the one Session, the queue series and the SSE clients.

    A single task reads ``session.object_updates(_class="queue")`` (a bounded
    subscription: a slow consumer drops the oldest updates, counted in ``dropped``),
    turns each update into a sample with the enqueue rate (``msgTotalEnqueues`` delta
    over the sample-timestamp delta of the same object; a restarted object starts a
    new series) and fans it out to every SSE client's bounded buffer.
    """

    def __init__(self, url: str, *, request_timeout: float = 5.0, history: int = 120,
                 client_buffer: int = 1000, updates_buffer: int = 10_000,
                 session_options: Mapping[str, Any] | None = None,
                 connection: Mapping[str, Any] | None = None,
                 console_queues: bool = False) -> None:
        self.url = url
        #: show the consoles' own reply and topic queues too (left out by default)
        self.console_queues = console_queues
        self.request_timeout = request_timeout
        self.history = history
        self.client_buffer = client_buffer
        self.updates_buffer = updates_buffer
        self.session_options = dict(session_options or {})
        self.connection = dict(connection or {})
        self.session: Session | None = None
        self.clients: set[_Client] = set()
        self.series: dict[str, _Series] = {}
        self.latest: dict[str, dict[str, Any]] = {}
        self._updates: Subscription[QmfObject] | None = None
        self._reader: asyncio.Task[None] | None = None

    # -- lifecycle (aiohttp signals)

    async def startup(self, app: web.Application) -> None:
        options = {"timeout": self.request_timeout, **self.session_options}
        self.session = Session(console=_StatusConsole(self), manage_connections=True,
                               **options)
        self._updates = self.session.object_updates(_class="queue", maxsize=self.updates_buffer)
        self._reader = asyncio.create_task(self._read_updates(self._updates),
                                           name="dashboard-updates")
        # with manage_connections a broker that is down now is retried in the background
        await self.session.add_broker(self.url, **self.connection)

    async def shutdown(self, app: web.Application) -> None:
        for client in list(self.clients):  # ends the SSE handlers, so shutdown is quick
            client.close()

    async def cleanup(self, app: web.Application) -> None:
        if self._updates is not None:
            self._updates.close()
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
        if self.session is not None:
            await self.session.close()

    # -- state

    def the_session(self) -> Session:
        if self.session is None:
            raise web.HTTPServiceUnavailable(reason="the dashboard is starting")
        return self.session

    def status(self) -> dict[str, Any]:
        brokers = self.session.brokers if self.session is not None else []
        return {
            "connected": bool(brokers) and all(b.connected for b in brokers),
            "brokers": [_broker_json(b) for b in brokers],
            "updates_dropped": self._updates.dropped if self._updates is not None else 0,
            "time": time.time_ns(),
        }

    def broadcast(self, event: str, data: Any) -> None:
        item = _sse(event, data)
        for client in self.clients:
            client.put(item)

    def broadcast_status(self) -> None:
        self.broadcast("status", self.status())

    def forget_agent(self, agent: RemoteAgent) -> None:
        """Drop the queues of an agent that left (stopped or restarted: a restarted
        agent's objects come back with new ids)."""
        banks = (agent.broker_bank, agent.agent_bank)
        gone = [oid for oid in self.latest if ObjectId.parse(oid).agent_key() == banks]
        for oid in gone:
            self.latest.pop(oid, None)
            self.series.pop(oid, None)
        self.broadcast("agent_gone", {"agent": _agent_text(agent), "objects": gone})

    def shows(self, obj: QmfObject) -> bool:
        """Whether the page (the stream and ``/api/objects/queue``) shows this object:
        not a console's own reply or topic queue (qmf_async.names.CONSOLE_QUEUES, as
        ``qmf exporter`` leaves them out), unless ``console_queues``."""
        if self.console_queues or obj.get_class_key().name != "queue":
            return True
        name = obj.get("name")
        return not (isinstance(name, str) and is_console_queue(name))

    async def _read_updates(self, updates: Subscription[QmfObject]) -> None:
        async for obj in updates:
            if not self.shows(obj):
                continue
            try:
                message = self.sample(obj)
            except Exception:  # one odd object must not stop the stream
                log.exception("cannot process an update of %r", obj)
                continue
            self.broadcast("queue", message)

    def sample(self, obj: QmfObject) -> dict[str, Any]:
        """Record an update of a queue; the ``queue`` event for it."""
        data = encode_object(obj)
        oid = data["object_id"]
        updated, created, deleted = obj.get_timestamps()
        if deleted:
            self.series.pop(oid, None)
            self.latest.pop(oid, None)
            return {"object": data, "sample": None}
        self.latest[oid] = data
        stats = obj.get_statistics()
        enqueues, depth = stats.get("msgTotalEnqueues"), stats.get("msgDepth")
        if not isinstance(enqueues, int) or not isinstance(depth, int):
            return {"object": data, "sample": None}  # properties only, so far
        series = self.series.get(oid)
        if series is None or series.created != created:
            series = self.series[oid] = _Series(created, self.history)
        samples = series.samples
        if samples and updated == samples[-1][0]:
            samples.pop()  # c and i of one publication: the later one completes it
        elif samples and updated < samples[-1][0]:
            return {"object": data, "sample": None}  # late duplicate: keep the series
        rate: float | None = None
        if samples:
            t0, _, e0, _ = samples[-1]
            if enqueues < e0:  # counter went back: the object restarted, new series
                samples.clear()
            else:
                rate = (enqueues - e0) * 1e9 / (updated - t0)
        samples.append((updated, depth, enqueues, rate))
        return {"object": data,
                "sample": {"t": updated, "depth": depth, "enqueues": enqueues, "rate": rate}}

    def snapshot(self) -> dict[str, Any]:
        queues = []
        for oid, data in self.latest.items():
            series = self.series.get(oid)
            history = [list(s) for s in series.samples] if series is not None else []
            queues.append({"object": data, "history": history})
        return {"queues": queues}

    # -- bus access

    async def find_object(self, object_id: str) -> QmfObject:
        """The object with this id, asked from its own agent.

        Raises:
            HTTPBadRequest, HTTPNotFound; QmfError from the session.
        """
        try:
            oid = ObjectId.parse(object_id)
        except UsageError as exc:
            raise _http(web.HTTPBadRequest, str(exc)) from None
        session = self.the_session()
        if not any(b.connected for b in session.brokers):
            # checked before looking for the agent: "no such agent" would be a wrong 404
            raise self.not_connected()
        agent = next((a for a in session.get_agents()
                      if (a.broker_bank, a.agent_bank) == oid.agent_key()), None)
        if agent is None:
            raise _http(web.HTTPNotFound, f"no agent {oid.broker_bank}.{oid.agent_bank} "
                                          f"is known for object {oid}")
        found = await session.get_objects(_objectId=oid, _agent=agent,
                                          _timeout=self.request_timeout)
        if not found:
            raise _http(web.HTTPNotFound, f"object {oid} not found")
        return found[0]

    def not_connected(self) -> NotConnectedError:
        brokers = self.session.brokers if self.session is not None else []
        where = ", ".join(f"{b.where} ({b.error})" if b.error else b.where for b in brokers)
        return NotConnectedError(f"not connected to {where or 'any broker'}")

    async def class_known(self, name: str, package: str | None) -> bool:
        """Whether any agent on the bus has a class ``name`` (asked only when a query
        returned nothing, to tell an empty class from an unknown one)."""
        session = self.the_session()
        if session.schemas.find(name, package):
            return True
        packages = [package] if package else await session.get_packages(
            _timeout=self.request_timeout)
        for pkg in packages:
            keys = await session.get_classes(pkg, _timeout=self.request_timeout)
            if any(k.name == name for k in keys):
                return True
        return False


def _broker_json(broker: Broker) -> dict[str, Any]:
    return {
        "where": broker.where,
        "connected": broker.connected,
        "has_management": broker.has_management,
        "reconnects": broker.reconnects,
        "topic_dropped": broker.topic_dropped,
        "error": None if broker.connected or broker.error is None else str(broker.error),
    }


class _StatusConsole(Console):
    """Connection callbacks -> ``status`` events on the stream."""

    def __init__(self, dashboard: Dashboard) -> None:
        self.dashboard = dashboard

    def broker_connected(self, broker: Broker) -> None:
        log.info("connected to %s", broker.where)
        self.dashboard.broadcast_status()

    def broker_disconnected(self, broker: Broker) -> None:
        log.warning("connection to %s lost; reconnecting", broker.where)
        self.dashboard.broadcast_status()

    def broker_connection_failed(self, broker: Broker, error: BaseException) -> None:
        log.info("cannot connect to %s: %s", broker.where, error)
        self.dashboard.broadcast_status()

    def del_agent(self, agent: RemoteAgent) -> None:
        # on a lost connection every agent is reported gone: keep showing the last
        # state under the banner, the same objects come back after the reconnect
        if agent.broker.connected:
            self.dashboard.forget_agent(agent)


# --------------------------------------------------------------------------- who may write
#
# A browser sends requests to the dashboard on behalf of any page it shows, and a
# cross-origin form or text/plain POST goes out without a CORS preflight.  So a write
# (any method but GET, HEAD and OPTIONS) must be JSON, from a page of the dashboard
# itself (Origin, or Referer without one), addressed to a Host the dashboard serves
# (DNS rebinding gives a foreign name), carry the bearer token when one is set, and
# call a method of the allow-list.  Every request, reads too, must name a served Host.

#: the methods callable by default: CLASS.METHOD (the class name of the object's key)
DEFAULT_METHODS: tuple[str, ...] = ("queue.purge",)
#: the environment variable that gives the write token
TOKEN_ENV = "QMF_DASHBOARD_TOKEN"
_SAFE = frozenset({"GET", "HEAD", "OPTIONS"})
_LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


def _host_port(text: str, scheme: str) -> tuple[str, int | None] | None:
    """``host[:port]`` (``[v6]:port`` too) as a lower-case host and a port (the scheme's
    default when absent); None when it is not one."""
    try:
        parts = urlsplit(f"{scheme}://{text}")
        host, port = parts.hostname, parts.port
    except ValueError:
        return None
    if not host or parts.path or parts.query or parts.username is not None:
        return None
    return host, port if port is not None else {"http": 80, "https": 443}.get(scheme)


def _host_entry(entry: str) -> tuple[str, int | None]:
    """A served-host entry (``name``, ``name:port``, ``[v6]:port``) as (name, port or
    None for any port).

    Raises:
        UsageError: not a host.
    """
    try:
        parts = urlsplit(f"//{entry.strip()}")
        name, port = parts.hostname, parts.port
    except ValueError:
        name = None
    if not name or parts.path or parts.username is not None:
        raise UsageError(f"not HOST or HOST:PORT: {entry!r}")
    return name, port


def _origin(text: str) -> tuple[str, str, int | None] | None:
    """The (scheme, host, port) of an Origin or Referer value; None when it has none."""
    try:
        parts = urlsplit(text)
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return None
    found = _host_port(parts.netloc, parts.scheme)
    return None if found is None else (parts.scheme, *found)


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` serves this machine only (127.0.0.0/8, ::1, localhost)."""
    if host.strip("[]").lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def parse_methods(text: str) -> tuple[str, ...]:
    """``CLASS.METHOD[,CLASS.METHOD...]`` as a tuple (empty text: none).

    Raises:
        UsageError: an entry is not ``CLASS.METHOD``.
    """
    found = []
    for entry in (e.strip() for e in text.split(",")):
        if not entry:
            continue
        cls, dot, method = entry.rpartition(".")
        if not dot or not cls or not method:
            raise UsageError(f"not CLASS.METHOD: {entry!r}")
        found.append(entry)
    return tuple(found)


@attrs.frozen
class Guard:
    """Who may do what through the dashboard (see docs/web.md, "Who may write").

    ``hosts``: the Host values served (``name`` for any port, or ``name:port``); None
    is the address the connection came in on, plus localhost, 127.0.0.1 and [::1] at
    that port when it is a loopback address.  ``origins``: pages (``scheme://host[:port]``)
    allowed to write besides the dashboard's own origin (``scheme://Host``), e.g. the
    ``https://`` address of an authenticating proxy in front.  ``methods``: the callable
    ``CLASS.METHOD`` names.  ``token``: when set, a write needs ``Authorization: Bearer
    TOKEN``.
    """

    hosts: tuple[str, ...] | None = None
    origins: tuple[str, ...] = ()
    methods: tuple[str, ...] = DEFAULT_METHODS
    token: str | None = None

    def host_error(self, request: web.Request) -> str | None:
        """Why the request's Host is not served; None when it is."""
        given = request.headers.get("Host", "")
        found = _host_port(given, request.scheme)
        if found is None:
            return f"bad Host header {given!r}"
        if self.hosts is not None:
            for entry in self.hosts:
                name, port = _host_entry(entry)
                if name == found[0] and port in (None, found[1]):
                    return None
            return f"this dashboard does not serve host {given!r}"
        sockname = request.transport.get_extra_info("sockname") if request.transport else None
        if not sockname:
            return None  # not a socket (a test transport): nothing to compare with
        ip, port = str(sockname[0]).lower().removeprefix("::ffff:"), int(sockname[1])
        served = {(ip, port)}
        if is_loopback(ip):
            served.update((name, port) for name in _LOOPBACK_NAMES)
        if found in served:
            return None
        return f"this dashboard does not serve host {given!r}"

    def write_error(self, request: web.Request) -> tuple[int, str] | None:
        """Why a write is refused (HTTP status, reason); None when it may go on."""
        origin_text = request.headers.get("Origin")
        source = "Origin"
        if origin_text is None:
            origin_text, source = request.headers.get("Referer"), "Referer"
        if origin_text is None:
            return 403, "a write needs an Origin (or Referer) header of the dashboard itself"
        origin = _origin(origin_text)
        own = _origin(f"{request.scheme}://{request.headers.get('Host', '')}")
        trusted = {own} | {_origin(o) for o in self.origins}
        if origin is None or origin not in trusted:
            return 403, f"cross-origin write refused ({source} {origin_text!r})"
        if request.content_type != "application/json":
            return 415, (f"a write must be application/json, not "
                         f"{request.content_type or 'without a Content-Type'}")
        if self.token is not None:
            scheme, _, credential = request.headers.get("Authorization", "").partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(
                    credential.strip().encode(), self.token.encode()):
                return 401, "a write needs the dashboard's token (Authorization: Bearer ...)"
        return None

    def offers(self, method: str, cls: str | None = None) -> bool:
        """Whether ``method`` (of an object of class ``cls``; any class when None) is
        callable."""
        for entry in self.methods:
            name, _, allowed = entry.rpartition(".")
            if allowed == method and (cls is None or name == cls):
                return True
        return False


def write_token(host: str, given: str | None) -> tuple[str | None, bool]:
    """The token for a dashboard bound on ``host``: ``given`` (the option, else
    $QMF_DASHBOARD_TOKEN) when set; else a new random one when ``host`` is beyond
    loopback; None on loopback.  The flag says whether it was generated."""
    token = given if given is not None else os.environ.get(TOKEN_ENV) or None
    if token is not None:
        if len(token) < 16:
            raise UsageError("the token must be at least 16 characters")
        return token, False
    if is_loopback(host):
        return None, False
    return secrets.token_urlsafe(24), True


_REFUSALS = {401: "Unauthorized", 403: "Forbidden", 415: "UnsupportedMediaType"}


def _refuse(status: int, message: str) -> web.Response:
    headers = {"WWW-Authenticate": 'Bearer realm="qmf dashboard"'} if status == 401 else None
    return web.json_response({"error": message, "type": _REFUSALS[status]}, status=status,
                             headers=headers, dumps=_dumps)


GUARD = web.AppKey("guard", Guard)


@web.middleware
async def _guard(request: web.Request,
                 handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                 ) -> web.StreamResponse:
    """Host on every request; Origin, JSON and token on every write (before routing
    errors: an unknown path gets the same refusal)."""
    guard = request.app[GUARD]
    reason = guard.host_error(request)
    if reason is not None:
        log.warning("refused %s %s: %s", request.method, request.path, reason)
        return _refuse(403, reason)
    if request.method not in _SAFE:
        refused = guard.write_error(request)
        if refused is not None:
            log.warning("refused %s %s from %s: %s", request.method, request.path,
                        request.remote, refused[1])
            return _refuse(*refused)
    return await handler(request)


# --------------------------------------------------------------------------- HTTP

DASHBOARD = web.AppKey("dashboard", Dashboard)


def _http(cls: type[web.HTTPException], message: str) -> web.HTTPException:
    return cls(text=_dumps({"error": message}), content_type="application/json")


def _json(data: Any) -> web.Response:
    return web.json_response(data, dumps=_dumps)


@web.middleware
async def _errors(request: web.Request,
                  handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                  ) -> web.StreamResponse:
    """qmf-async errors -> JSON error responses; aiohttp's own errors as JSON under /api."""
    try:
        return await handler(request)
    except QmfError as exc:
        return error_response(exc)
    except web.HTTPException as exc:
        if not request.path.startswith("/api/") or exc.content_type == "application/json" \
                or exc.status < 400:
            raise
        return _error(exc.status, exc.reason)


async def agents(request: web.Request) -> web.Response:
    dash = request.app[DASHBOARD]
    session = dash.the_session()
    return _json({
        **dash.status(),
        "agents": [{"broker_bank": a.broker_bank, "agent_bank": a.agent_bank,
                    "label": a.label, "broker": a.broker_url} for a in session.get_agents()],
    })


async def objects(request: web.Request) -> web.Response:
    dash = request.app[DASHBOARD]
    session = dash.the_session()
    name = request.match_info["class"]
    package = request.query.get("package") or None
    where = request.query.get("where") or None
    found = await session.get_objects(_class=name, _package=package, where=where,
                                      _timeout=dash.request_timeout)
    if not found and not await dash.class_known(name, package):
        raise _http(web.HTTPNotFound, f"no agent knows a class {name!r}"
                                      + (f" in package {package!r}" if package else ""))
    found.sort(key=lambda o: (o.get_index(), str(o.get_object_id())))
    return _json([encode_object(o) for o in found if dash.shows(o)])


async def one_object(request: web.Request) -> web.Response:
    dash = request.app[DASHBOARD]
    obj = await dash.find_object(request.match_info["object_id"])
    return _json(encode_object(obj))


async def call_method(request: web.Request) -> web.Response:
    dash = request.app[DASHBOARD]
    guard = request.app[GUARD]
    method = request.match_info["method"]
    if not guard.offers(method):
        raise _not_offered(guard, method)
    raw = await request.read()
    try:
        arguments = json.loads(raw) if raw.strip() else {}
    except ValueError as exc:
        raise _http(web.HTTPBadRequest, f"the body is not JSON: {exc}") from None
    if not isinstance(arguments, dict):
        raise _http(web.HTTPBadRequest, "the body must be a JSON object of arguments")
    reserved = sorted(k for k in arguments if k.startswith("_"))
    if reserved:
        raise ArgumentError(f"{method}() has no argument {reserved[0]!r}")
    obj = await dash.find_object(request.match_info["object_id"])
    cls = obj.get_class_key().name
    if not guard.offers(method, cls):
        raise _not_offered(guard, method, cls)
    result = await obj.invoke(method, _timeout=dash.request_timeout, **arguments)
    return _json({"status": result.status, "text": result.text,
                  "out_args": jsonable(result.out_args)})


def _not_offered(guard: Guard, method: str, cls: str | None = None) -> web.HTTPException:
    what = f"{cls}.{method}" if cls else method
    log.warning("refused a call of %s: not in the allow-list", what)
    return _http(web.HTTPForbidden, f"this dashboard does not offer {what}() (allowed: "
                                    f"{', '.join(guard.methods) or 'none'})")


async def stream(request: web.Request) -> web.StreamResponse:
    """Server-sent events: ``status`` first and on every connection change,
    ``snapshot`` (latest queues with their history), then ``queue`` updates and
    ``agent_gone`` (the agent of those objects left)."""
    dash = request.app[DASHBOARD]
    response = web.StreamResponse(headers={
        "Content-Type": "text/event-stream", "Cache-Control": "no-cache",
        "X-Accel-Buffering": "no"})
    await response.prepare(request)
    client = _Client(dash.client_buffer)
    client.put(_sse("status", dash.status()))
    client.put(_sse("snapshot", dash.snapshot()))
    dash.clients.add(client)
    try:
        await response.write(b"retry: 1000\n\n")
        while True:
            item = await client.next(SSE_KEEPALIVE)
            if item is None:
                if client.closed:
                    break
                item = b": keepalive\n\n"
            await response.write(item)
    except (ConnectionResetError, ConnectionError):
        pass  # the browser went away
    finally:
        dash.clients.discard(client)
    return response


async def index(request: web.Request) -> web.FileResponse:
    return web.FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-cache"})


def create_app(url: str, *, request_timeout: float = 5.0,
               session_options: Mapping[str, Any] | None = None,
               connection: Mapping[str, Any] | None = None,
               history: int = 120, client_buffer: int = 1000,
               console_queues: bool = False, guard: Guard | None = None) -> web.Application:
    """The dashboard application for the QMF bus at ``url``.

    ``request_timeout`` bounds every bus request of an HTTP request;
    ``session_options`` go to :class:`~qmf_async.Session` (e.g. ``agent_interval``,
    ``reconnect_max_delay``), ``connection`` to ``add_broker`` (``tls``,
    ``sasl_mechanisms``); ``history`` is the number of samples kept per queue and
    ``client_buffer`` the events buffered per SSE client before the oldest is dropped;
    ``console_queues`` shows the consoles' own reply and topic queues too.
    ``guard`` says who may write and which methods are callable (default
    ``Guard()``: the address the connection came in on, purge on queues, no token).

    Raises:
        UsageError: a bad entry in ``guard``.
    """
    guard = guard if guard is not None else Guard()
    for entry in guard.hosts or ():
        _host_entry(entry)
    for origin in guard.origins:
        if _origin(origin) is None:
            raise UsageError(f"not an origin (http[s]://HOST[:PORT]): {origin!r}")
    parse_methods(",".join(guard.methods))
    dash = Dashboard(url, request_timeout=request_timeout, history=history,
                     client_buffer=client_buffer, session_options=session_options,
                     connection=connection, console_queues=console_queues)
    app = web.Application(middlewares=[_guard, _errors])
    app[DASHBOARD] = dash
    app[GUARD] = guard
    app.on_startup.append(dash.startup)
    app.on_shutdown.append(dash.shutdown)
    app.on_cleanup.append(dash.cleanup)
    app.router.add_get("/", index)
    app.router.add_get("/api/agents", agents)
    app.router.add_get("/api/objects/{class}", objects)
    app.router.add_get("/api/object/{object_id}", one_object)
    app.router.add_post("/api/object/{object_id}/methods/{method}", call_method)
    app.router.add_get("/api/stream", stream)
    app.router.add_static("/static/", STATIC)
    return app


def _parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="QMF web dashboard (aiohttp)")
    parser.add_argument("-b", "--broker", "--url", dest="url", default=None, metavar="ADDRESS",
                        help="the broker of the QMF bus: a URL or a qpid-tools address "
                             "(host:port, user/password@host:port); default $QMF_URL")
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to bind (default 127.0.0.1; beyond loopback, writes "
                             "need a token)")
    parser.add_argument("--port", type=int, default=8080, help="port (default 8080)")
    parser.add_argument("--timeout", type=float, default=5.0,
                        help="timeout of the bus requests of one HTTP request (default 5 s)")
    parser.add_argument("--console-queues", action="store_true",
                        help="show the consoles' own reply and topic queues too")
    parser.add_argument("--methods", default=",".join(DEFAULT_METHODS), metavar="LIST",
                        help="the callable methods, CLASS.METHOD comma-separated (default "
                             "queue.purge; an empty LIST: none)")
    parser.add_argument("--allowed-host", action="append", default=None, metavar="HOST",
                        help="a Host header served, HOST or HOST:PORT (repeatable; default: "
                             "the address bound, plus localhost forms on loopback)")
    parser.add_argument("--allowed-origin", action="append", default=[], metavar="URL",
                        help="a page allowed to write besides the dashboard's own origin, "
                             "e.g. https://dash.example.com of a proxy (repeatable)")
    parser.add_argument("--token", default=None,
                        help=f"the bearer token writes need (default ${TOKEN_ENV}; bound "
                             "beyond loopback without one, one is made and printed)")
    parser.add_argument("-v", "--verbose", action="store_true", help="log more")
    add_connection_arguments(parser)
    args = parser.parse_args(argv)
    args.url = args.url or os.environ.get("QMF_URL")
    if not args.url:
        parser.error("no broker: give -b ADDRESS, or set QMF_URL")
    if args.timeout <= 0:
        parser.error("--timeout must be positive")
    try:
        args.methods = parse_methods(args.methods)
        args.token, args.token_made = write_token(args.host, args.token)
    except UsageError as exc:
        parser.error(str(exc))
    try:
        args.connection = connection_arguments(args)
    except QmfError as exc:
        parser.error(str(exc))
    return args


#: exit codes, as the ``qmf`` tools' (docs/tools.md): 1 another error, 2 a bad command
#: line or address, or a missing extra, 3 the broker cannot be reached, 4 the broker
#: refused the login, 8 the address cannot be listened on, 141 stdout's reader went away
EXIT_ERROR, EXIT_USAGE, EXIT_UNREACHABLE, EXIT_AUTH, EXIT_LISTEN, EXIT_PIPE = 1, 2, 3, 4, 8, 141
#: errno values of a listening socket that cannot be bound
_LISTEN_ERRNOS = frozenset({errno.EADDRINUSE, errno.EADDRNOTAVAIL, errno.EACCES,
                            errno.EPERM})


def _exit_code(exc: QmfError) -> int:
    if isinstance(exc, AuthenticationError):
        return EXIT_AUTH
    if isinstance(exc, (TransportError, QmfTimeout)):
        return EXIT_UNREACHABLE
    if isinstance(exc, UsageError):  # a bad address, the AMQP 1.0 extra missing ...
        return EXIT_USAGE
    return EXIT_ERROR


def _fail(text: str, code: int) -> int:
    print(f"web_dashboard: error: {text}", file=sys.stderr)
    return code


def main(argv: list[str] | None = None) -> int:
    """Serve the dashboard until interrupted; every failure is one line on stderr with
    an exit code (``EXIT_*``), the tracebacks only with ``-v``."""
    args = _parse_args(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        guard = Guard(hosts=tuple(args.allowed_host) if args.allowed_host else None,
                      origins=tuple(args.allowed_origin), methods=args.methods,
                      token=args.token)
        app = create_app(args.url, request_timeout=args.timeout, connection=args.connection,
                         console_queues=args.console_queues, guard=guard)
        if args.token_made:
            shown = f"[{args.host}]" if ":" in args.host else args.host
            print(f"web_dashboard: bound beyond loopback, writes need this token: "
                  f"{args.token}\n"
                  f"web_dashboard: open http://{shown}:{args.port}/#token={args.token} "
                  f"(or set ${TOKEN_ENV})", flush=True)
        web.run_app(app, host=args.host, port=args.port,
                    print=lambda text: print(text, flush=True))
    except QmfError as exc:  # from the start-up's add_broker, which retries the rest
        if args.verbose:
            log.exception("cannot start")
        return _fail(str(exc), _exit_code(exc))
    except BrokenPipeError:  # the reader left (``... | head``): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_PIPE
    except OSError as exc:
        if args.verbose:
            log.exception("cannot serve")
        if exc.errno in _LISTEN_ERRNOS:
            where = f"[{args.host}]" if ":" in args.host else args.host
            return _fail(f"cannot listen on {where}:{args.port}: "
                         f"{os.strerror(exc.errno).lower()}", EXIT_LISTEN)
        return _fail(f"{os.strerror(exc.errno) if exc.errno else exc}", EXIT_ERROR)
    return 0


if __name__ == "__main__":
    sys.exit(main())
