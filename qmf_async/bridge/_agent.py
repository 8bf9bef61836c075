"""The RabbitMQ bridge: an agent serving RabbitMQ's real objects as qpidd's classes.

Every ``interval`` the bridge reads RabbitMQ's management API (:mod:`._http`), maps the
answers (:mod:`._mapping`) and applies the difference to the agent's objects: new
objects are created (with RabbitMQ's creation time where it has one), changed ones
updated (only those, so the agent publishes only them), vanished ones deleted (published
once more with their delete time), and qpidd's events raised for what appeared and
went.  The broker's ``create``/``delete``, ``queue.purge`` and ``connection.close``
act on RabbitMQ through the API, but only for callers RabbitMQ would let do the same
themselves: a request must carry the user id RabbitMQ validated (the AMQP ``user_id``
property, which RabbitMQ checks against the publishing connection's login), and that
user's permissions and tags, read from the API (cached ``access_cache`` seconds), must
allow the operation by RabbitMQ's rules (:mod:`._access`).  Anything else is answered
with status 6, ``unauthorized-access: ...``, logged, and nothing is done.  An API failure
is logged once and the bridge keeps polling; the agent's bus connection is not touched.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping
from importlib import resources
from typing import Any

from ..agent import Agent, ManagedObject, XmlSchemas, current_request, load_schema_xml
from ..errors import MethodError, QmfError, UsageError
from ..names import Status
from ..wire import ObjectId, QmfType
from ._access import (
    Need,
    UserAccess,
    access_from_api,
    close_refusal,
    needs_bind,
    needs_create_exchange,
    needs_create_queue,
    needs_delete,
    needs_purge,
    refusal,
)
from ._http import ApiError, ApiUnavailableError, RabbitApi, enc
from ._mapping import (
    BINDING_COLUMNS,
    CHANNEL_COLUMNS,
    CONNECTION_COLUMNS,
    CONSUMER_COLUMNS,
    EXCHANGE_COLUMNS,
    QUEUE_COLUMNS,
    VHOST_COLUMNS,
    Key,
    Mapped,
    RawState,
    diff_events,
    map_state,
)

__all__ = ["PACKAGE", "RabbitBridge", "load_schemas", "queue_arguments", "exchange_arguments"]

log = logging.getLogger("qmf_async.bridge")

PACKAGE = "org.apache.qpid.broker"
NULL_OID = ObjectId(bytes(16))

def load_schemas() -> XmlSchemas:
    """qpidd's ``org.apache.qpid.broker`` classes the bridge serves (package data).

    Raises:
        UsageError: the schema file is missing or invalid.
    """
    text = resources.files(__package__).joinpath("qpidd-broker.xml").read_text("utf-8")
    return load_schema_xml(text)


def _fail(text: str, status: int = Status.EXCEPTION) -> MethodError:
    return MethodError(status, text)


def _api_failure(exc: QmfError) -> MethodError:
    """An API error as a QMF method status, with RabbitMQ's reason text."""
    if isinstance(exc, ApiError):
        if exc.status in (401, 403):
            return _fail(f"unauthorized-access: {exc.reason}", Status.FORBIDDEN)
        if exc.status == 404:
            return _fail(f"not-found: {exc.what}: {exc.reason}")
        if exc.status == 400:
            return _fail(f"invalid-argument: {exc.reason}", Status.INVALID_PARAMETER)
        if exc.status == 405:
            return _fail(f"not-allowed: {exc.reason}", Status.FEATURE_NOT_IMPLEMENTED)
        return _fail(f"{exc.reason} (HTTP {exc.status})")
    return _fail(str(exc))


#: qpidd queue properties -> RabbitMQ queue arguments
_QUEUE_LIMITS = {"qpid.max_count": "x-max-length", "qpid.max_size": "x-max-length-bytes",
                 "qpid.priorities": "x-max-priority"}
_POLICIES = {"ring": "drop-head", "reject": "reject-publish"}


def _bool(props: Mapping[str, Any], *names: str) -> bool:
    return any(bool(props.get(n)) for n in names)


def _int_arg(name: str, value: Any) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise _fail(f"invalid-argument: {name} must be a number, not {value!r}",
                    Status.INVALID_PARAMETER) from None
    if number < 0:
        raise _fail(f"invalid-argument: {name} must be >= 0", Status.INVALID_PARAMETER)
    return number


def queue_arguments(props: Mapping[str, Any], strict: bool) -> dict[str, Any]:
    """The body of RabbitMQ's queue PUT for qpidd's queue ``create`` properties.

    Raises:
        MethodError: a property RabbitMQ has no counterpart for (unknown ones only when
            ``strict``), or a bad value.
    """
    args: dict[str, Any] = {}
    unknown: list[str] = []
    for name, value in props.items():
        if name in ("durable", "auto-delete", "autoDelete", "exclusive"):
            continue
        if name in ("alternate-exchange", "altExchange"):
            if value:
                args["x-dead-letter-exchange"] = str(value)
        elif name in _QUEUE_LIMITS:
            number = _int_arg(name, value)
            if number:  # qpidd: 0 is no limit
                args[_QUEUE_LIMITS[name]] = number
        elif name == "qpid.policy_type":
            if str(value) not in _POLICIES:
                raise _fail(f"invalid-argument: qpid.policy_type {value!r} has no RabbitMQ "
                            f"counterpart (ring, reject)", Status.INVALID_PARAMETER)
            args["x-overflow"] = _POLICIES[str(value)]
        elif name.startswith("x-"):
            args[name] = value
        else:
            unknown.append(name)
    if unknown and strict:
        raise _fail(f"invalid-argument: unrecognised queue properties: "
                    f"{', '.join(sorted(unknown))}", Status.INVALID_PARAMETER)
    if _bool(props, "exclusive"):
        raise _fail("not-implemented: RabbitMQ's management API cannot declare an exclusive "
                    "queue (it belongs to the declaring connection)",
                    Status.FEATURE_NOT_IMPLEMENTED)
    return {"durable": _bool(props, "durable"), "auto_delete": _bool(props, "auto-delete",
                                                                     "autoDelete"),
            "arguments": args}


def exchange_arguments(props: Mapping[str, Any], strict: bool) -> dict[str, Any]:
    """The body of RabbitMQ's exchange PUT for qpidd's exchange ``create`` properties.

    Raises:
        MethodError: unknown properties when ``strict``.
    """
    args: dict[str, Any] = {}
    unknown: list[str] = []
    for name, value in props.items():
        if name in ("durable", "auto-delete", "autoDelete", "exchange-type", "type"):
            continue
        if name in ("alternate-exchange", "altExchange"):
            if value:
                args["alternate-exchange"] = str(value)
        elif name.startswith("x-"):
            args[name] = value
        else:
            unknown.append(name)
    if unknown and strict:
        raise _fail(f"invalid-argument: unrecognised exchange properties: "
                    f"{', '.join(sorted(unknown))}", Status.INVALID_PARAMETER)
    ex_type = str(props.get("exchange-type") or props.get("type") or "topic")
    return {"type": ex_type, "durable": _bool(props, "durable"),
            "auto_delete": _bool(props, "auto-delete", "autoDelete"), "internal": False,
            "arguments": args}


def _binding_id(name: str) -> tuple[str, str, str]:
    """``exchange/queue[/key]`` as qpidd's BindingIdentifier reads it (the key may hold
    ``/``)."""
    parts = name.split("/", 2)
    if len(parts) < 2:
        raise _fail(f"invalid-argument: a binding is named exchange/queue[/key], not {name!r}",
                    Status.INVALID_PARAMETER)
    return parts[0], parts[1], parts[2] if len(parts) == 3 else ""


class RabbitBridge:
    """Serves one RabbitMQ broker's objects through ``agent`` (see the module doc).

    ``vhost`` limits the bridge to one vhost (and is where ``create`` acts); without
    it every vhost is served and ``create``/``delete`` act on ``/``.

    ``access_cache`` is how long (seconds) a caller's permissions and tags, once read
    from the API, are used before they are read again: a permission revoked in
    RabbitMQ stops working through the bridge within that time (0: read them for every
    request).  The API user (``api``) needs the ``administrator`` tag to read them.
    """

    def __init__(self, agent: Agent, api: RabbitApi, *, interval: float = 5.0,
                 vhost: str | None = None, schemas: XmlSchemas | None = None,
                 access_cache: float = 5.0) -> None:
        """Register the schema and the method handlers on ``agent`` (not started).

        Raises:
            UsageError: a non-positive interval, a negative ``access_cache``, or an
                unusable schema.
        """
        if interval <= 0:
            raise UsageError("the bridge's interval must be positive")
        if access_cache < 0:
            raise UsageError("the bridge's access_cache must be >= 0 seconds")
        self.access_cache = access_cache
        #: callers' permissions as read from the API: user -> (expiry, access or None)
        self._access: dict[str, tuple[float, UserAccess | None]] = {}
        self.agent = agent
        self.api = api
        self.interval = interval
        self.vhost = vhost
        self.schemas = schemas if schemas is not None else load_schemas()
        for schema in self.schemas:
            if schema.class_key not in agent.registry:
                agent.add_schema(schema, severity=self.schemas.severity(schema))
        self._refs = {s.class_key.name: {p.name: p.optional for p in s.properties
                                         if p.type == QmfType.REF}
                      for s in self.schemas if s.class_key.package == PACKAGE}
        self._objects: dict[Key, ManagedObject] = {}
        self._keys: dict[ManagedObject, Key] = {}
        self._snapshot: dict[Key, Mapped] | None = None
        self._resolved: dict[Key, dict[str, ObjectId | None]] = {}
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        #: the last API failure (None while the API answers)
        self.last_error: str | None = None
        #: successful polls, failed polls, and how long the last successful one took (s)
        self.polls = 0
        self.failures = 0
        self.poll_seconds = 0.0
        self._register_methods()

    @property
    def method_vhost(self) -> str:
        """The vhost ``create``/``delete`` act on."""
        return self.vhost if self.vhost is not None else "/"

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Start the agent, then poll every interval (the first poll before returning).

        Raises:
            TransportError: the bus cannot be reached.
        """
        await self.agent.start()
        await self.poll_once()
        self._task = asyncio.create_task(self._run(), name="qmf-rabbitmq-bridge")

    async def stop(self) -> None:
        """Stop polling, the agent and the API client."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self.agent.stop()
        await self.api.close()

    async def __aenter__(self) -> RabbitBridge:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def poll_soon(self) -> None:
        """Poll now instead of at the end of the interval."""
        self._wake.set()

    async def _run(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.interval)
            self._wake.clear()
            try:
                await self.poll_once()
            except Exception:  # one bad answer must not end the polling
                self.failures += 1
                log.exception("RabbitMQ bridge: a poll failed")

    # ------------------------------------------------------------------ polling

    async def fetch(self) -> RawState:
        """One read of everything the bridge maps.

        Raises:
            ApiUnavailableError, ApiAuthError, ApiError: the API failed.
        """
        api = self.api
        v = f"/{enc(self.vhost)}" if self.vhost is not None else ""
        vhosts_path = f"vhosts/{enc(self.vhost)}" if self.vhost is not None else "vhosts"
        conns = f"vhosts/{enc(self.vhost)}/connections" if self.vhost is not None \
            else "connections"
        chans = f"vhosts/{enc(self.vhost)}/channels" if self.vhost is not None else "channels"
        (overview, nodes, vhosts, queues, exchanges, bindings, connections, channels,
         consumers) = await asyncio.gather(
            api.get("overview", columns="node,rabbitmq_version,listeners,message_stats"),
            api.list("nodes", ("name", "uptime")),
            api.get(vhosts_path, columns=",".join(VHOST_COLUMNS)) if self.vhost is not None
            else api.list(vhosts_path, VHOST_COLUMNS),
            api.list(f"queues{v}", QUEUE_COLUMNS),
            api.list(f"exchanges{v}", EXCHANGE_COLUMNS),
            api.list(f"bindings{v}", BINDING_COLUMNS),
            api.list(conns, CONNECTION_COLUMNS),
            api.list(chans, CHANNEL_COLUMNS),
            api.list(f"consumers{v}", CONSUMER_COLUMNS))
        if isinstance(vhosts, dict):
            vhosts = [vhosts]
        return RawState(overview=overview or {}, nodes=nodes, vhosts=vhosts, queues=queues,
                        exchanges=exchanges, bindings=bindings, connections=connections,
                        channels=channels, consumers=consumers)

    async def poll_once(self) -> bool:
        """Read the API and apply what changed; False (logged once) when the API failed."""
        started = time.monotonic()
        try:
            raw = await self.fetch()
        except (ApiError, ApiUnavailableError) as exc:
            self.failures += 1
            text = str(exc)
            if text != self.last_error:
                log.error("RabbitMQ bridge: %s (retrying every %gs)", text, self.interval)
            self.last_error = text
            return False
        if self.last_error is not None:
            log.warning("RabbitMQ bridge: the management API at %s answers again",
                        self.api.where)
            self.last_error = None
        self.apply(map_state(raw, interval=self.interval))
        self.polls += 1
        self.poll_seconds = time.monotonic() - started
        return True

    def apply(self, snapshot: dict[Key, Mapped]) -> int:
        """Bring the agent's objects to ``snapshot``; raise the events of the
        difference (none for the first snapshot).  Returns how many objects changed."""
        agent = self.agent
        changed = 0
        previous = self._snapshot
        for key, m in snapshot.items():
            obj = self._objects.get(key)
            before = previous.get(key) if previous is not None else None
            if obj is None:
                values: dict[str, Any] = {**m.props, **m.stats}
                for prop, optional in self._refs[m.cls].items():
                    values[prop] = None if optional else NULL_OID
                obj = agent.create_object(m.cls, package=PACKAGE, **values)
                if m.created_ns:
                    obj.created = m.created_ns
                self._objects[key] = obj
                self._keys[obj] = key
                changed += 1
            elif before is not None:
                if m.props != before.props:
                    obj.set(**{k: v for k, v in m.props.items() if before.props.get(k) != v})
                    changed += 1
                if m.stats != before.stats:
                    obj.set(**{k: v for k, v in m.stats.items() if before.stats.get(k) != v})
                    changed += 1
        for key, m in snapshot.items():  # references, now that every target exists
            resolved = {prop: self._oid(target, self._refs[m.cls].get(prop, True))
                        for prop, target in m.refs.items()}
            if resolved != self._resolved.get(key):
                self._objects[key].set(**resolved)
                self._resolved[key] = resolved
        gone = [key for key in self._objects if key not in snapshot]
        for key in gone:
            obj = self._objects.pop(key)
            self._keys.pop(obj, None)
            self._resolved.pop(key, None)
            agent.delete_object(obj)
            changed += 1
        if previous is not None:
            for event, args in diff_events(previous, snapshot):
                try:
                    agent.raise_event(event, package=PACKAGE, **args)
                except QmfError as exc:  # one unencodable argument must not stop the poll
                    log.warning("RabbitMQ bridge: event %s not raised: %s", event, exc)
        self._snapshot = snapshot
        if changed:
            agent.publish_now()
        return changed

    def _oid(self, target: Key | None, optional: bool) -> ObjectId | None:
        obj = self._objects.get(target) if target is not None else None
        if obj is None or obj.object_id is None:
            return None if optional else NULL_OID
        return obj.object_id

    def object_for(self, key: Key) -> ManagedObject | None:
        """The agent's object for a RabbitMQ identity (``("queue", vhost, name)`` ...)."""
        return self._objects.get(key)

    # ------------------------------------------------------------------ methods

    def _register_methods(self) -> None:
        on = self.agent.set_method_handler
        on("broker", "echo", self.echo)
        on("broker", "create", self.create)
        on("broker", "delete", self.delete)
        on("queue", "purge", self.purge)
        on("connection", "close", self.close_connection)

    # ------------------------------------------------------------------ authorization

    def _caller(self, action: str) -> str:
        """The validated user id of the request being served.

        Raises:
            MethodError: status 6, the request carries none.
        """
        ctx = current_request.get(None)
        user = ctx.user_id if ctx is not None else None
        if not user:
            raise self._refused(action, None, "the request carries no validated user id")
        return user

    def _refused(self, action: str, user: str | None, why: str) -> MethodError:
        who = f"user {user!r}" if user is not None else "a caller without a user id"
        log.warning("RabbitMQ bridge: refused %s to %s: %s", action, who, why)
        return _fail(f"unauthorized-access: {why} ({action})", Status.FORBIDDEN)

    async def access_of(self, user: str) -> UserAccess | None:
        """``user``'s tags and permissions as the API reports them (None: no such
        user), cached for ``access_cache`` seconds.

        Raises:
            MethodError: status 6 when the API refuses to tell (the bridge's API user
                is no administrator), 7 when it does not answer.
        """
        now = time.monotonic()
        hit = self._access.get(user)
        if hit is not None and hit[0] > now:
            return hit[1]
        path = f"users/{enc(user)}"
        try:
            record, perms = await asyncio.gather(self.api.get(path),
                                                 self.api.get(f"{path}/permissions"))
            access: UserAccess | None = access_from_api(user, record or {}, perms or ())
        except ApiError as exc:
            if exc.status != 404:
                log.error("RabbitMQ bridge: cannot read the permissions of user %r: %s",
                          user, exc)
                raise _fail(f"unauthorized-access: cannot read the permissions of user "
                            f"{user!r}: {exc.reason}", Status.FORBIDDEN) from exc
            access = None
        except ApiUnavailableError as exc:
            raise _fail(f"cannot read the permissions of user {user!r}: {exc}") from exc
        if self.access_cache > 0:
            if len(self._access) >= 1024:
                self._access = {u: e for u, e in self._access.items() if e[0] > now}
                if len(self._access) >= 1024:
                    self._access.clear()
            self._access[user] = (now + self.access_cache, access)
        return access

    async def _authorize(self, action: str, vhost: str, needs: list[Need]) -> None:
        """Return when the caller may do ``action`` (``needs`` on ``vhost``).

        Raises:
            MethodError: status 6 (logged), it may not; 7, the API does not answer.
        """
        user = self._caller(action)
        why = refusal(await self.access_of(user), vhost, needs)
        if why is not None:
            raise self._refused(action, user, why)

    # ------------------------------------------------------------------ calls

    async def _call(self, method: str, path: str, **options: Any) -> Any:
        try:
            answer = await self.api.request(method, path, **options)
        except (ApiError, ApiUnavailableError) as exc:
            raise _api_failure(exc) from exc
        self.poll_soon()
        return answer

    async def _exists(self, path: str) -> bool:
        try:
            await self.api.get(path, columns="name")
        except ApiError as exc:
            if exc.status == 404:
                return False
            raise _api_failure(exc) from exc
        except ApiUnavailableError as exc:
            raise _api_failure(exc) from exc
        return True

    async def echo(self, obj: ManagedObject, *, sequence: int, body: str) -> dict[str, Any]:
        return {"sequence": sequence, "body": body}

    async def create(self, obj: ManagedObject, *, type: str, name: str,
                     properties: Mapping[str, Any] | None, strict: bool) -> None:
        self._caller(f"create {type} {name!r}")
        props = dict(properties or {})
        vhost = self.method_vhost
        v = enc(vhost)
        if type == "queue":
            body = queue_arguments(props, strict)
            if not name:
                raise _fail("invalid-argument: a queue needs a name", Status.INVALID_PARAMETER)
            await self._authorize(f"create queue {name!r}", vhost,
                                  needs_create_queue(name, body["arguments"]))
            if await self._exists(f"queues/{v}/{enc(name)}"):
                raise _fail(f"object already exists: {name}")
            await self._call("PUT", f"queues/{v}/{enc(name)}", body=body)
        elif type in ("exchange", "topic"):
            body = exchange_arguments(props, strict)
            if not name:
                raise _fail("invalid-argument: an exchange needs a name",
                            Status.INVALID_PARAMETER)
            await self._authorize(f"create exchange {name!r}", vhost,
                                  needs_create_exchange(name, body["arguments"]))
            if await self._exists(f"exchanges/{v}/{enc(name)}"):
                raise _fail(f"object already exists: {name}")
            await self._call("PUT", f"exchanges/{v}/{enc(name)}", body=body)
        elif type == "binding":
            exchange, queue, key = _binding_id(name)
            if exchange == "":
                raise _fail("not-allowed: Bind not allowed for default exchange",
                            Status.FORBIDDEN)
            args = {k: v for k, v in props.items() if k != "exchange-type"}
            await self._authorize(f"create binding {name!r}", vhost, needs_bind(exchange, queue))
            await self._call("POST", f"bindings/{v}/e/{enc(exchange)}/q/{enc(queue)}",
                             body={"routing_key": key, "arguments": args})
        else:
            raise _fail(f"invalid-argument: unknown object type: {type}",
                        Status.INVALID_PARAMETER)

    async def delete(self, obj: ManagedObject, *, type: str, name: str,
                     options: Mapping[str, Any] | None) -> None:
        self._caller(f"delete {type} {name!r}")
        opts = dict(options or {})
        vhost = self.method_vhost
        v = enc(vhost)
        if type == "queue":
            await self._authorize(f"delete queue {name!r}", vhost, needs_delete("queue", name))
            params = {k.replace("_", "-"): "true" for k in ("if_empty", "if_unused")
                      if opts.get(k)}
            await self._call("DELETE", f"queues/{v}/{enc(name)}", params=params or None,
                             what=f"delete queue {name!r}")
        elif type in ("exchange", "topic"):
            if name == "":
                raise _fail("not-allowed: Delete not allowed for default exchange",
                            Status.FORBIDDEN)
            await self._authorize(f"delete exchange {name!r}", vhost,
                                  needs_delete("exchange", name))
            await self._call("DELETE", f"exchanges/{v}/{enc(name)}",
                             what=f"delete exchange {name!r}")
        elif type == "binding":
            exchange, queue, key = _binding_id(name)
            await self._authorize(f"delete binding {name!r}", vhost, needs_bind(exchange, queue))
            path = f"bindings/{v}/e/{enc(exchange)}/q/{enc(queue)}"
            try:
                found = await self.api.get(path)
            except (ApiError, ApiUnavailableError) as exc:
                raise _api_failure(exc) from exc
            matches = [b for b in found or () if b.get("routing_key") == key]
            if not matches:
                raise _fail(f"not-found: Unbind failed. No such binding: {name}")
            for b in matches:
                await self._call("DELETE", f"{path}/{b.get('properties_key')}",  # encoded already
                                 what=f"delete binding {name!r}")
        else:
            raise _fail(f"invalid-argument: unknown object type: {type}",
                        Status.INVALID_PARAMETER)

    async def purge(self, obj: ManagedObject, *, request: int,
                    filter: Mapping[str, Any] | None) -> None:
        self._caller("purge")
        key = self._keys.get(obj)
        if key is None or obj.is_deleted:
            raise _fail(Status.UNKNOWN_OBJECT.text, Status.UNKNOWN_OBJECT)
        if filter:
            raise _fail("not-implemented: RabbitMQ's API cannot select messages by a filter",
                        Status.FEATURE_NOT_IMPLEMENTED)
        _, vhost, name = key
        await self._authorize(f"purge queue {name!r}", vhost, needs_purge(name))
        path = f"queues/{enc(vhost)}/{enc(name)}"
        if not request:
            await self._call("DELETE", f"{path}/contents", what=f"purge queue {name!r}")
            return
        # n messages: take them off the queue without requeueing (bodies truncated)
        await self._call("POST", f"{path}/get", what=f"purge {request} from queue {name!r}",
                         body={"count": request, "ackmode": "ack_requeue_false",
                               "encoding": "auto", "truncate": 1})

    async def close_connection(self, obj: ManagedObject) -> None:
        user = self._caller("close connection")
        key = self._keys.get(obj)
        if key is None or obj.is_deleted:
            raise _fail(Status.UNKNOWN_OBJECT.text, Status.UNKNOWN_OBJECT)
        action = f"close connection {key[1]!r}"
        try:  # whose it is now (the API's answer, not the last poll's)
            found = await self.api.get(f"connections/{enc(key[1])}", columns="user")
        except (ApiError, ApiUnavailableError) as exc:
            raise _api_failure(exc) from exc
        owner = found.get("user") if isinstance(found, dict) else None
        why = close_refusal(await self.access_of(user), None if owner is None else str(owner))
        if why is not None:
            raise self._refused(action, user, why)
        await self._call("DELETE", f"connections/{enc(key[1])}",
                         headers={"X-Reason": "closed by QMF management request"},
                         what=f"close connection {key[1]!r}")
