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

BROKER_ADDR = "org.apache.qpid.broker:broker:amqp-broker"
ACL_ADDR = "org.apache.qpid.acl:acl:org.apache.qpid.broker:broker:amqp-broker"


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


class BrokerAgent:
    """Proxy of a manageable Qpid broker.

    ``BrokerAgent("amqp://host:5672")`` (or ``"host:port"``, or a connection object with
    ``host``/``port`` such as a ``qpid.messaging.Connection``, or a classic Session with a
    broker) opens what it needs; :meth:`close` closes what it opened.

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

    def _getAllBrokerObjects(self, cls: type[BrokerObject]) -> list[BrokerObject]:
        name = cls.__name__.lower().rstrip("_")  # Session_ is the class "session"
        return [cls(self, o) for o in self.sess.getObjects(_class=name, _timeout=self.timeout)]

    def _getBrokerObject(self, cls: type[BrokerObject], oid: str) -> BrokerObject | None:
        try:
            return cls(self, self._find(oid))
        except UsageError:
            return None

    def _getSingleObject(self, cls: type[BrokerObject]) -> BrokerObject | None:
        objects = self._getAllBrokerObjects(cls)
        return objects[0] if objects else None

    # ---------------------------------------------------------------- objects

    def getBroker(self) -> BrokerObject | None: return self._getSingleObject(Broker)
    def getCluster(self) -> BrokerObject | None: return self._getSingleObject(Cluster)
    def getHaBroker(self) -> BrokerObject | None: return self._getSingleObject(HaBroker)
    def getAcl(self) -> BrokerObject | None: return self._getSingleObject(Acl)
    def getMemory(self) -> BrokerObject | None: return self._getSingleObject(Memory)
    def getAllConnections(self) -> list[BrokerObject]:
        return self._getAllBrokerObjects(Connection)
    def getAllSessions(self) -> list[BrokerObject]: return self._getAllBrokerObjects(Session_)
    def getAllSubscriptions(self) -> list[BrokerObject]:
        return self._getAllBrokerObjects(Subscription)
    def getAllExchanges(self) -> list[BrokerObject]: return self._getAllBrokerObjects(Exchange)
    def getAllQueues(self) -> list[BrokerObject]: return self._getAllBrokerObjects(Queue)
    def getAllBindings(self) -> list[BrokerObject]: return self._getAllBrokerObjects(Binding)
    def getAllLinks(self) -> list[BrokerObject]: return self._getAllBrokerObjects(Link)
    def getAllBridges(self) -> list[BrokerObject]: return self._getAllBrokerObjects(Bridge)

    def getConnection(self, oid: str) -> BrokerObject | None:
        return self._getBrokerObject(Connection, f"org.apache.qpid.broker:connection:{oid}")

    def getSession(self, oid: str) -> BrokerObject | None:
        return self._getBrokerObject(Session_, f"org.apache.qpid.broker:session:{oid}")

    def getSubscription(self, oid: str) -> BrokerObject | None:
        return self._getBrokerObject(Subscription, f"org.apache.qpid.broker:subscription:{oid}")

    def getExchange(self, name: str) -> BrokerObject | None:
        return self._getBrokerObject(Exchange, f"org.apache.qpid.broker:exchange:{name}")

    def getQueue(self, name: str) -> BrokerObject | None:
        return self._getBrokerObject(Queue, f"org.apache.qpid.broker:queue:{name}")

    # ---------------------------------------------------------------- methods

    def echo(self, sequence: int = 1, body: str = "Body") -> dict[str, Any]:
        """Request a response to test the path to the management broker."""
        return self._method("echo", {"sequence": sequence, "body": body})

    def connect(self, host: str, port: int, durable: bool, authMechanism: str,
                username: str, password: str, transport: str) -> None:
        """Kept for compatibility; does nothing (as in the classic library)."""

    def queueMoveMessages(self, srcQueue: str, destQueue: str, qty: int) -> None:
        self._method("queueMoveMessages", {"srcQueue": srcQueue, "destQueue": destQueue,
                                           "qty": qty})

    def queueRedirect(self, sourceQueue: str, targetQueue: str) -> None:
        self._method("queueRedirect", {"sourceQueue": sourceQueue, "targetQueue": targetQueue})

    def setLogLevel(self, level: str) -> None:
        self._method("setLogLevel", {"level": level})

    def getLogLevel(self) -> dict[str, Any]:
        return self._method("getLogLevel")

    def setTimestampConfig(self, receive: bool) -> None:
        self._method("setTimestampConfig", {"receive": receive})

    def getTimestampConfig(self) -> dict[str, Any]:
        return self._method("getTimestampConfig")

    def setLogHiresTimestamp(self, logHires: bool) -> None:
        self._method("setLogHiresTimestamp", {"logHires": logHires})

    def getLogHiresTimestamp(self) -> dict[str, Any]:
        return self._method("getLogHiresTimestamp")

    def addExchange(self, exchange_type: str, name: str,
                    options: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        props = {"exchange-type": exchange_type, **(options or {}), **kwargs}
        self._method("create", {"type": "exchange", "name": name, "properties": props,
                                "strict": True})

    def delExchange(self, name: str) -> None:
        self._method("delete", {"type": "exchange", "name": name, "options": {}})

    def addQueue(self, name: str, options: Mapping[str, Any] | None = None,
                 **kwargs: Any) -> None:
        props = {**(options or {}), **kwargs}
        self._method("create", {"type": "queue", "name": name, "properties": props,
                                "strict": True})

    def delQueue(self, name: str, if_empty: bool = True, if_unused: bool = True) -> None:
        self._method("delete", {"type": "queue", "name": name,
                                "options": {"if_empty": if_empty, "if_unused": if_unused}})

    def bind(self, exchange: str, queue: str, key: str = "",
             options: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        self._method("create", {"type": "binding", "name": f"{exchange}/{queue}/{key}",
                                "properties": {**(options or {}), **kwargs}, "strict": True})

    def unbind(self, exchange: str, queue: str, key: str, **kwargs: Any) -> None:
        self._method("delete", {"type": "binding", "name": f"{exchange}/{queue}/{key}",
                                "options": {}})

    def reloadAclFile(self) -> None:
        self._method("reloadACLFile", {}, ACL_ADDR)

    def acl_lookup(self, userName: str, action: str, aclObj: str, aclObjName: str,
                   propMap: Mapping[str, Any]) -> dict[str, Any]:
        return self._method("Lookup", {"userId": userName, "action": action, "object": aclObj,
                                       "objectName": aclObjName, "propertyMap": propMap},
                            ACL_ADDR)

    def acl_lookupPublish(self, userName: str, exchange: str, key: str) -> dict[str, Any]:
        return self._method("LookupPublish", {"userId": userName, "exchangeName": exchange,
                                              "routingKey": key}, ACL_ADDR)

    def Redirect(self, sourceQueue: str, targetQueue: str) -> dict[str, Any]:
        return self._method("queueRedirect", {"sourceQueue": sourceQueue,
                                              "targetQueue": targetQueue})

    def create(self, _type: str, name: str, properties: Mapping[str, Any] | None = None,
               strict: bool = False) -> dict[str, Any]:
        return self._method("create", {"type": _type, "name": name,
                                       "properties": dict(properties or {}), "strict": strict})

    def delete(self, _type: str, name: str, options: Mapping[str, Any]) -> dict[str, Any]:
        return self._method("delete", {"type": _type, "name": name, "options": dict(options)})

    def list(self, _type: str) -> list[dict[str, Any]]:
        """The values of every object of a class."""
        return [BrokerObject(self, o).values
                for o in self.sess.getObjects(_class=_type.lower(), _timeout=self.timeout)]

    def query(self, _type: str, oid: str) -> BrokerObject | None:
        """The object of a class by its name (``package:class:name`` or the bare name)."""
        addr = oid if oid.count(":") >= 2 else f"org.apache.qpid.broker:{_type.lower()}:{oid}"
        return self._getBrokerObject(BrokerObject, addr)


class BrokerObject:
    """An object of the broker: ``values`` (a dict), attributes (a reference reads as the
    referenced object's name; None for an absent value), ``update()``."""

    def __init__(self, broker: BrokerAgent, obj: Object) -> None:
        self.broker, self._obj = broker, obj
        self._load(obj)

    def _load(self, obj: Object) -> None:
        self._obj = obj
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
        self.content: dict[str, Any] = {"_values": values, "_object_id": {"_object_name": name},
                        "_create_ts": create, "_delete_ts": delete, "_update_ts": current}
        self.values = values

    def __getattr__(self, key: str) -> Any:
        if key.startswith("__") or key in ("values", "content", "_obj", "broker"):
            raise AttributeError(key)
        value = self.values.get(key)
        if isinstance(value, dict) and "_object_name" in value:
            parts = str(value["_object_name"]).split(":", 2)
            return parts[2] if len(parts) == 3 else value["_object_name"]
        if isinstance(value, ObjectId):  # a v1 reference: the referenced object's name
            found = self.broker.sess.getObjects(_objectId=value)
            return getattr(found[0], "name", None) if found else None
        return value

    def getObjectId(self) -> str:
        return str(self.content["_object_id"]["_object_name"])

    def getAttributes(self) -> dict[str, Any]:
        return self.values

    def getCreateTime(self) -> int:
        return int(self.content["_create_ts"])

    def getDeleteTime(self) -> int:
        return int(self.content["_delete_ts"])

    def getUpdateTime(self) -> int:
        return int(self.content["_update_ts"])

    def update(self) -> None:
        """Reload the values from the agent.

        Raises: ObjectGoneError when the object no longer exists."""
        self._obj.update(_timeout=self.broker.timeout)
        self._load(self._obj)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.getObjectId()})"


class Broker(BrokerObject):
    """A broker object."""


class Cluster(BrokerObject):
    """A cluster object."""


class HaBroker(BrokerObject):
    """A habroker object."""


class Memory(BrokerObject):
    """A memory object."""


class Exchange(BrokerObject):
    """A exchange object."""


class Link(BrokerObject):
    """A link object."""


class Bridge(BrokerObject):
    """A bridge object."""


class Acl(BrokerObject):
    """A acl object."""




class Connection(BrokerObject):
    def close(self) -> None:
        self.broker._method("close", {}, f"org.apache.qpid.broker:connection:{self.address}")


class Session_(BrokerObject):
    """A broker session (``qpidtoollibs.Session`` in the classic library)."""


class Subscription(BrokerObject):
    def __repr__(self) -> str:
        return "subscription name undefined"


class Binding(BrokerObject):
    def __repr__(self) -> str:
        return f"Binding key: {self.values.get('bindingKey')}"


class Queue(BrokerObject):
    def purge(self, request: int) -> None:
        """Discard all (0) or ``request`` messages."""
        self.broker._method("purge", {"request": request},
                            f"org.apache.qpid.broker:queue:{self.name}")

    def reroute(self, request: int, useAltExchange: bool, exchange: str,
                filter: Mapping[str, Any] | None = None) -> None:
        self.broker._method("reroute", {"request": request, "useAltExchange": useAltExchange,
                                        "exchange": exchange, "filter": dict(filter or {})},
                            f"org.apache.qpid.broker:queue:{self.name}")


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
