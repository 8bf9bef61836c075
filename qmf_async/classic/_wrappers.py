"""What ``qpidtoollibs.BrokerAgent`` and ``qmf.client.BrokerAgent`` share (the two
upstream libraries define the same calls and object wrappers): the broker's calls
(:class:`BrokerCalls`) and the wrappers of its objects (:class:`BrokerObject` and its
subclasses), each object held as its QMF v2 map (``content``).

A BrokerAgent provides four primitives: ``_method`` (call a method of a broker
object), ``_getAll`` and ``_get`` (wrap the objects of a class, or the one of a name),
``_reload`` (an object's map, read again) and ``_attribute`` (what reading a value as
an attribute gives).  This module does no I/O of its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

__all__ = [
    "ACL_ADDR",
    "BROKER_ADDR",
    "Acl",
    "Binding",
    "Bridge",
    "Broker",
    "BrokerCalls",
    "BrokerObject",
    "Cluster",
    "Connection",
    "Exchange",
    "HaBroker",
    "Link",
    "Memory",
    "Queue",
    "Session_",
    "Subscription",
]

BROKER_ADDR = "org.apache.qpid.broker:broker:amqp-broker"
ACL_ADDR = "org.apache.qpid.acl:acl:org.apache.qpid.broker:broker:amqp-broker"

W = TypeVar("W", bound="BrokerObject")


class BrokerCalls:
    """The calls of a BrokerAgent, on the primitives its class provides.

    Raises (methods): what the agent's ``_method`` raises (``MethodError`` when the
    broker refuses a call, ``QmfTimeout``, a ``TransportError``).
    """

    # ---------------------------------------------------------------- primitives

    def _method(self, method: str, arguments: Mapping[str, Any] | None = None,
                addr: str = BROKER_ADDR) -> Any:
        """Call ``method`` of the broker object ``addr``; its output arguments."""
        raise NotImplementedError

    def _getAll(self, cls: type[W]) -> list[W]:
        """Every object of the class ``cls`` wraps, wrapped."""
        raise NotImplementedError

    def _get(self, cls: type[W], addr: str) -> W | None:
        """The object named ``addr`` (``package:class:name``), wrapped; None if none."""
        raise NotImplementedError

    def _reload(self, obj: BrokerObject) -> Mapping[str, Any]:
        """``obj``'s map read again from the broker.

        Raises: ObjectGoneError when the object no longer exists."""
        raise NotImplementedError

    def _attribute(self, value: Any) -> Any:
        """What reading ``value`` as an attribute of a wrapper gives."""
        return value

    def _getSingle(self, cls: type[W]) -> W | None:
        objects = self._getAll(cls)
        return objects[0] if objects else None

    # ---------------------------------------------------------------- objects

    def getBroker(self) -> Broker | None: return self._getSingle(Broker)
    def getCluster(self) -> Cluster | None: return self._getSingle(Cluster)
    def getHaBroker(self) -> HaBroker | None: return self._getSingle(HaBroker)
    def getAcl(self) -> Acl | None: return self._getSingle(Acl)
    def getMemory(self) -> Memory | None: return self._getSingle(Memory)
    def getAllConnections(self) -> list[Connection]: return self._getAll(Connection)
    def getAllSessions(self) -> list[Session_]: return self._getAll(Session_)
    def getAllSubscriptions(self) -> list[Subscription]: return self._getAll(Subscription)
    def getAllExchanges(self) -> list[Exchange]: return self._getAll(Exchange)
    def getAllQueues(self) -> list[Queue]: return self._getAll(Queue)
    def getAllBindings(self) -> list[Binding]: return self._getAll(Binding)
    def getAllLinks(self) -> list[Link]: return self._getAll(Link)
    def getAllBridges(self) -> list[Bridge]: return self._getAll(Bridge)

    def getConnection(self, oid: str) -> Connection | None:
        return self._get(Connection, f"org.apache.qpid.broker:connection:{oid}")

    def getSession(self, oid: str) -> Session_ | None:
        return self._get(Session_, f"org.apache.qpid.broker:session:{oid}")

    def getSubscription(self, oid: str) -> Subscription | None:
        return self._get(Subscription, f"org.apache.qpid.broker:subscription:{oid}")

    def getExchange(self, name: str) -> Exchange | None:
        return self._get(Exchange, f"org.apache.qpid.broker:exchange:{name}")

    def getQueue(self, name: str) -> Queue | None:
        return self._get(Queue, f"org.apache.qpid.broker:queue:{name}")

    def query(self, _type: str, oid: str) -> BrokerObject | None:
        """An object of a class by its name (``package:class:name`` or the bare name)."""
        addr = oid if oid.count(":") >= 2 else f"org.apache.qpid.broker:{_type.lower()}:{oid}"
        return self._get(BrokerObject, addr)

    # ---------------------------------------------------------------- methods

    def echo(self, sequence: int = 1, body: str = "Body") -> Any:
        """Ask the broker to answer (tests the path to the management agent)."""
        return self._method("echo", {"sequence": sequence, "body": body})

    def queueMoveMessages(self, srcQueue: str, destQueue: str, qty: int) -> None:
        self._method("queueMoveMessages", {"srcQueue": srcQueue, "destQueue": destQueue,
                                           "qty": qty})

    def queueRedirect(self, sourceQueue: str, targetQueue: str) -> None:
        self._method("queueRedirect", {"sourceQueue": sourceQueue, "targetQueue": targetQueue})

    def setLogLevel(self, level: str) -> None:
        self._method("setLogLevel", {"level": level})

    def getLogLevel(self) -> Any:
        return self._method("getLogLevel")

    def setTimestampConfig(self, receive: bool) -> None:
        self._method("setTimestampConfig", {"receive": receive})

    def getTimestampConfig(self) -> Any:
        return self._method("getTimestampConfig")

    def setLogHiresTimestamp(self, logHires: bool) -> None:
        self._method("setLogHiresTimestamp", {"logHires": logHires})

    def getLogHiresTimestamp(self) -> Any:
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
        self._method("create", {"type": "queue", "name": name,
                                "properties": {**(options or {}), **kwargs}, "strict": True})

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
                   propMap: Mapping[str, Any]) -> Any:
        return self._method("Lookup", {"userId": userName, "action": action, "object": aclObj,
                                       "objectName": aclObjName, "propertyMap": dict(propMap)},
                            ACL_ADDR)

    def acl_lookupPublish(self, userName: str, exchange: str, key: str) -> Any:
        return self._method("LookupPublish", {"userId": userName, "exchangeName": exchange,
                                              "routingKey": key}, ACL_ADDR)

    def Redirect(self, sourceQueue: str, targetQueue: str) -> Any:
        return self._method("queueRedirect", {"sourceQueue": sourceQueue,
                                              "targetQueue": targetQueue})

    def create(self, _type: str, name: str, properties: Mapping[str, Any] | None = None,
               strict: bool = False) -> Any:
        return self._method("create", {"type": _type, "name": name,
                                       "properties": dict(properties or {}), "strict": strict})

    def delete(self, _type: str, name: str, options: Mapping[str, Any]) -> Any:
        return self._method("delete", {"type": _type, "name": name, "options": dict(options)})


class BrokerObject:
    """An object of the broker as its QMF v2 map: ``content`` (``_values``,
    ``_object_id``, timestamps), ``values``, attributes (None when absent; what a
    reference reads as is the agent's choice), ``update()``."""

    def __init__(self, broker: BrokerCalls, content: Mapping[str, Any]) -> None:
        self.broker = broker
        self.content: dict[str, Any] = dict(content)
        self.values: dict[str, Any] = dict(self.content.get("_values") or {})
        #: what the agent built the map from (its own business; ``update()`` passes it on)
        self._source: Any = None

    def __getattr__(self, key: str) -> Any:
        if key.startswith("__") or key in ("values", "content", "broker", "_source"):
            raise AttributeError(key)
        return self.broker._attribute(self.values.get(key))

    def getObjectId(self) -> str:
        return str(self.content["_object_id"]["_object_name"])

    def getAttributes(self) -> dict[str, Any]:
        return self.values

    def getCreateTime(self) -> Any:
        return self.content.get("_create_ts")

    def getDeleteTime(self) -> Any:
        return self.content.get("_delete_ts")

    def getUpdateTime(self) -> Any:
        return self.content.get("_update_ts")

    def update(self) -> None:
        """Reload the values from the broker.

        Raises: ObjectGoneError when the object no longer exists."""
        self.content = dict(self.broker._reload(self))
        self.values = dict(self.content.get("_values") or {})

    def __repr__(self) -> str:
        return f"{type(self).__name__.rstrip('_')}({self.getObjectId()})"

    def __str__(self) -> str:
        return self.getObjectId()


class Broker(BrokerObject):
    """The broker object."""


class Cluster(BrokerObject):
    """A cluster object."""


class HaBroker(BrokerObject):
    """A habroker object."""


class Memory(BrokerObject):
    """A memory object."""


class Exchange(BrokerObject):
    """An exchange."""


class Link(BrokerObject):
    """A federation link."""


class Bridge(BrokerObject):
    """A federation bridge."""


class Acl(BrokerObject):
    """The ACL module's object."""


class Session_(BrokerObject):
    """A broker session (``Session`` in the classic libraries)."""


class Connection(BrokerObject):
    """A client connection."""

    def close(self) -> None:
        """Close this connection at the broker."""
        self.broker._method("close", {}, f"org.apache.qpid.broker:connection:{self.address}")


class Subscription(BrokerObject):
    """A subscription."""

    def __repr__(self) -> str:
        return "subscription name undefined"


class Binding(BrokerObject):
    """A binding."""

    def __repr__(self) -> str:
        return f"Binding key: {self.values.get('bindingKey')}"


class Queue(BrokerObject):
    """A queue."""

    def purge(self, request: int) -> None:
        """Discard all (0) or ``request`` messages."""
        self.broker._method("purge", {"request": request},
                            f"org.apache.qpid.broker:queue:{self.name}")

    def reroute(self, request: int, useAltExchange: bool, exchange: str,
                filter: Mapping[str, Any] | None = None) -> None:
        """Route all (0) or ``request`` messages to an exchange."""
        self.broker._method("reroute", {"request": request, "useAltExchange": useAltExchange,
                                        "exchange": exchange, "filter": dict(filter or {})},
                            f"org.apache.qpid.broker:queue:{self.name}")
