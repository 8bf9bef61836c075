"""``qpidtoollibs``: BrokerAgent, its object wrappers and EventHelper, on the classic
Session (so on qmf-async, over either bus and either QMF version)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from ..errors import MethodError, UsageError
from ..names import AMQP_PORT, V2_TOPIC_EXCHANGE, keyify
from ._objects import Object
from ._session import Session
from ._values import ObjectId
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
    Session_,
    Subscription,
    W,
)

__all__ = [
    "ACL_ADDR", "BROKER_ADDR", "YN", "Acl", "Binding", "Bridge", "Broker", "BrokerAgent",
    "BrokerEvent", "BrokerObject", "Cluster", "Commas", "Connection", "EventHelper",
    "Exchange", "HaBroker", "Link", "Memory", "Queue", "Session_", "Subscription",
    "TimeLong", "TimeShort",
]


def YN(val: Any) -> str:
    return "Y" if val else "N"


def Commas(value: Any) -> str:
    text = str(value)
    groups: list[str] = []
    while text:
        groups.insert(0, text[-3:])
        text = text[:-3]
    return ",".join(groups)


def TimeLong(value: int) -> str:
    return time.strftime("%c", time.gmtime(value / 1_000_000_000))


def TimeShort(value: int) -> str:
    return time.strftime("%X", time.gmtime(value / 1_000_000_000))


def _address(conn: Any) -> str:
    """A broker address from what callers pass: a URL or ``host:port`` text, or a
    connection object with ``host``/``port`` (and ``username``/``password``)."""
    if isinstance(conn, str):
        return conn
    host = getattr(conn, "host", None)
    if host is None:
        raise UsageError(f"BrokerAgent needs a broker address or a connection, not "
                         f"{type(conn).__name__}")
    port = getattr(conn, "port", None) or AMQP_PORT
    user = getattr(conn, "username", None) or getattr(conn, "user", None)
    password = getattr(conn, "password", None)
    auth = f"{user}/{password}@" if user and password else (f"{user}@" if user else "")
    return f"{auth}{host}:{port}"


class BrokerAgent(BrokerCalls):
    """Proxy of a manageable Qpid broker.

    ``BrokerAgent("amqp://host:5672")`` (or ``"host:port"``, or a connection object with
    ``host``/``port`` such as a ``qpid.messaging.Connection``, or a classic Session with a
    broker) opens what it needs; :meth:`close` closes what it opened.  Its calls and
    object wrappers are those ``qmf.client`` has too (``_wrappers``).

    Raises (methods): MethodError when the broker refuses a call, QmfTimeout,
    TransportError.
    """

    def __init__(self, conn: Any, timeout: float = 10.0, **session_options: Any) -> None:
        self.timeout = timeout
        if isinstance(conn, Session):
            self.sess, self._own = conn, False
        else:
            self.sess, self._own = Session(timeout=timeout, **session_options), True
            try:
                self.sess.addBroker(_address(conn))
            except BaseException:
                self.sess.close()
                raise
        self.conn = conn

    def close(self) -> None:
        """Close the session this agent opened (not one it was given)."""
        if self._own:
            self.sess.close()

    def __enter__(self) -> BrokerAgent:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---------------------------------------------------------------- plumbing

    def _find(self, addr: str) -> Object:
        pkg, cls, key = [*addr.split(":", 2), "", ""][:3]
        found = self.sess.getObjects(_class=cls, _package=pkg, _timeout=self.timeout)
        for obj in found:
            oid = obj.getObjectId()
            if oid is not None and oid.isV2 and oid.objectName == addr:
                return obj
        named = [o for o in found if key in (str(getattr(o, "name", None)), o.getIndex())
                 or key.endswith(f":{getattr(o, 'name', None)}")]
        if len(named) == 1 or (len(found) == 1 and cls in ("broker", "acl")):
            return (named or found)[0]
        raise UsageError(f"no object {addr!r} on the broker")

    def _method(self, method: str, arguments: Mapping[str, Any] | None = None,
                addr: str = BROKER_ADDR, timeout: float = 10) -> dict[str, Any]:
        obj = self._find(addr)
        result = getattr(obj, method)(_timeout=timeout, **dict(arguments or {}))
        if result.status != 0:
            raise MethodError(result.status, result.text)
        return dict(result.outArgs)

    def _wrap(self, cls: type[W], obj: Object) -> W:
        wrapper = cls(self, _content(obj))
        wrapper._source = obj
        return wrapper

    def _getAll(self, cls: type[W]) -> list[W]:
        name = cls.__name__.lower().rstrip("_")  # Session_ is the class "session"
        return [self._wrap(cls, o)
                for o in self.sess.getObjects(_class=name, _timeout=self.timeout)]

    def _get(self, cls: type[W], addr: str) -> W | None:
        try:
            return self._wrap(cls, self._find(addr))
        except UsageError:
            return None

    def _reload(self, obj: BrokerObject) -> dict[str, Any]:
        source: Object = obj._source
        source.update(_timeout=self.timeout)
        return _content(source)

    def _attribute(self, value: Any) -> Any:
        """A reference reads as the referenced object's name (the classic library's)."""
        if isinstance(value, dict) and "_object_name" in value:
            parts = str(value["_object_name"]).split(":", 2)
            return parts[2] if len(parts) == 3 else value["_object_name"]
        if isinstance(value, ObjectId):  # a v1 reference: the referenced object's name
            found = self.sess.getObjects(_objectId=value)
            return getattr(found[0], "name", None) if found else None
        return value

    # ---------------------------------------------------------------- the classic's own

    def connect(self, host: str, port: int, durable: bool, authMechanism: str,
                username: str, password: str, transport: str) -> None:
        """Kept for compatibility; does nothing (as in the classic library)."""

    def list(self, _type: str) -> list[dict[str, Any]]:
        """The values of every object of a class."""
        return [_content(o)["_values"]
                for o in self.sess.getObjects(_class=_type.lower(), _timeout=self.timeout)]


def _content(obj: Object) -> dict[str, Any]:
    """A record as its QMF v2 map (``_values``: what it carried; references as
    ``{'_object_name': ...}`` over v2, ``ObjectId`` over v1)."""
    values: dict[str, Any] = {}
    for desc, value in obj.getProperties() + obj.getStatistics():
        if value is None:
            continue
        if isinstance(value, ObjectId) and value.isV2:
            value = {"_object_name": value.objectName}
        values[desc.name] = value
    oid = obj.getObjectId()
    name = oid.objectName if oid is not None and oid.isV2 else (
        f"{obj.getClassKey().pname}:{obj.getClassKey().cname}:{obj.getIndex()}")
    current, create, delete = obj.getTimestamps()
    return {"_values": values, "_object_id": {"_object_name": name},
            "_create_ts": create, "_delete_ts": delete, "_update_ts": current}


class EventHelper:
    """Addresses and wrappers for the QMF v2 event messages a client receives itself."""

    def eventAddress(self, pkg: str = "*", cls: str = "*", sev: str = "*") -> str:
        return f"{V2_TOPIC_EXCHANGE}/agent.ind.event.{keyify(pkg)}.{cls}.{sev}.#"

    def event(self, msg: Any) -> BrokerEvent:
        return BrokerEvent(msg)


class BrokerEvent:
    """One event of a QMF v2 event message (``msg.content[0]``)."""

    def __init__(self, msg: Any) -> None:
        self.msg = msg
        self.content = msg.content[0]
        self.values = self.content["_values"]
        self.schema_id = self.content["_schema_id"]
        self.name = f"{self.schema_id['_package_name']}:{self.schema_id['_class_name']}"

    def __repr__(self) -> str:
        rep = f"{TimeLong(self.getTimestamp())} {self.name}"
        for k, v in self.values.items():
            rep += f" {k}={v}"
        return rep

    def __getattr__(self, key: str) -> Any:
        if key.startswith("__") or key in ("values", "content", "msg", "schema_id", "name"):
            raise AttributeError(key)
        return self.values.get(key)

    def getAttributes(self) -> dict[str, Any]:
        return dict(self.values)

    def getTimestamp(self) -> int:
        return int(self.content["_timestamp"])
