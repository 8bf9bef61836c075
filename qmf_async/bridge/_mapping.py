"""RabbitMQ's management-API JSON mapped onto qpidd's ``org.apache.qpid.broker`` classes.

Pure: no I/O, no asyncio.  :func:`map_state` turns one poll's lists (:class:`RawState`)
into :class:`Mapped` objects keyed by their identity in RabbitMQ; :func:`diff_events`
turns two consecutive snapshots into qpidd's events.  A :class:`Mapped` names the
objects its reference properties point to by their keys (the agent resolves them to
object ids).  docs/bridge.md has the table of every name and its source.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from ..frozen import frozen

__all__ = [
    "BINDING_COLUMNS", "CHANNEL_COLUMNS", "CONNECTION_COLUMNS", "CONSUMER_COLUMNS",
    "EXCHANGE_COLUMNS", "QUEUE_COLUMNS", "VHOST_COLUMNS", "CLASS_ORDER",
    "Key", "Mapped", "RawState", "map_state", "diff_events",
]

#: the columns the bridge asks for (``columns=``): only what the mapping reads
VHOST_COLUMNS = ("name",)
QUEUE_COLUMNS = ("name", "vhost", "durable", "auto_delete", "exclusive", "arguments",
                 "messages", "messages_unacknowledged", "message_bytes", "consumers", "state",
                 "message_stats.publish", "message_stats.deliver_get",
                 "message_stats.redeliver", "message_stats.ack",
                 "message_stats.deliver_no_ack", "message_stats.get_no_ack")
EXCHANGE_COLUMNS = ("name", "vhost", "type", "durable", "auto_delete", "internal", "arguments",
                    "message_stats.publish_in", "message_stats.publish_out")
BINDING_COLUMNS = ("source", "vhost", "destination", "destination_type", "routing_key",
                   "arguments", "properties_key")
CONNECTION_COLUMNS = ("name", "vhost", "user", "protocol", "auth_mechanism", "peer_host",
                      "peer_port", "ssl", "client_properties", "connected_at", "recv_oct",
                      "send_oct", "recv_cnt", "send_cnt", "state")
CHANNEL_COLUMNS = ("name", "vhost", "number", "connection_details", "messages_unacknowledged",
                   "transactional", "message_stats.publish", "message_stats.deliver_get")
CONSUMER_COLUMNS = ("consumer_tag", "queue", "channel_details", "ack_required", "exclusive",
                    "prefetch_count", "arguments")

#: creation order: a class refers only to classes before it (altExchange aside)
CLASS_ORDER = ("broker", "vhost", "exchange", "queue", "binding", "connection", "session",
               "subscription")

#: an object's identity: (class, ...RabbitMQ names)
Key = tuple[str, ...]
BROKER_KEY: Key = ("broker",)


@frozen
class Mapped:
    """One object as qpidd would show it.

    ``props`` and ``stats`` use qpidd's names; ``refs`` maps reference properties to the
    key of their target (None: no target).  ``created_ns`` is RabbitMQ's creation time
    when it reports one.
    """

    key: Key
    props: Mapping[str, Any]
    stats: Mapping[str, Any]
    refs: Mapping[str, Key | None] = attrs.field(factory=dict)
    created_ns: int | None = None

    @property
    def cls(self) -> str:
        return self.key[0]


@frozen
class RawState:
    """One poll of the API: the answers of each endpoint (items as RabbitMQ sends them)."""

    overview: Mapping[str, Any]
    nodes: list[Mapping[str, Any]]
    vhosts: list[Mapping[str, Any]]
    queues: list[Mapping[str, Any]]
    exchanges: list[Mapping[str, Any]]
    bindings: list[Mapping[str, Any]]
    connections: list[Mapping[str, Any]]
    channels: list[Mapping[str, Any]]
    consumers: list[Mapping[str, Any]]


def _int(value: Any) -> int:
    """A count from the API (absent or null when RabbitMQ has no figure yet) as an int."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return max(0, value)
    if isinstance(value, float):
        return max(0, int(value))
    return 0


def _stat(item: Mapping[str, Any], name: str) -> int:
    """``message_stats.<name>`` (absent before the first message)."""
    stats = item.get("message_stats")
    return _int(stats.get(name)) if isinstance(stats, Mapping) else 0


def _map(value: Any) -> dict[str, Any]:
    """An arguments table as a QMF map (RabbitMQ sends ``[]`` for an empty one)."""
    return dict(value) if isinstance(value, Mapping) else {}


def _str(value: Any) -> str:
    return "" if value is None else str(value)


def _hilo(**values: int) -> dict[str, int]:
    """A hilo statistic with its watermarks: one sample per poll, so both are the value."""
    out: dict[str, int] = {}
    for name, value in values.items():
        out[name] = out[f"{name}High"] = out[f"{name}Low"] = value
    return out


def _queue(item: Mapping[str, Any], binding_count: int) -> Mapped:
    vhost, name = _str(item.get("vhost")), _str(item.get("name"))
    args = _map(item.get("arguments"))
    depth = _int(item.get("messages"))
    enqueues = _stat(item, "publish")
    dlx = args.get("x-dead-letter-exchange")
    return Mapped(
        key=("queue", vhost, name),
        props={"name": name, "durable": bool(item.get("durable")),
               "autoDelete": bool(item.get("auto_delete")),
               "exclusive": bool(item.get("exclusive")), "arguments": args},
        stats={"msgDepth": depth, "byteDepth": _int(item.get("message_bytes")),
               "msgTotalEnqueues": enqueues,
               # messages consumers took off the queue (acknowledged, or taken without
               # acknowledgement); RabbitMQ counts no purges, expiries or overflow drops
               "msgTotalDequeues": _stat(item, "ack") + _stat(item, "deliver_no_ack")
               + _stat(item, "get_no_ack"),
               "acquires": _stat(item, "deliver_get"),
               "releases": _stat(item, "redeliver"),
               **_hilo(consumerCount=_int(item.get("consumers")), bindingCount=binding_count,
                       unackedMessages=_int(item.get("messages_unacknowledged"))),
               "flowStopped": item.get("state") == "flow"},
        refs={"vhostRef": ("vhost", vhost),
              "altExchange": ("exchange", vhost, str(dlx)) if dlx is not None else None})


def _exchange(item: Mapping[str, Any], binding_count: int) -> Mapped:
    vhost, name = _str(item.get("vhost")), _str(item.get("name"))
    args = _map(item.get("arguments"))
    alt = args.get("alternate-exchange")
    return Mapped(
        key=("exchange", vhost, name),
        props={"name": name, "type": _str(item.get("type")),
               "durable": bool(item.get("durable")),
               "autoDelete": bool(item.get("auto_delete")), "arguments": args},
        stats={**_hilo(bindingCount=binding_count), "msgReceives": _stat(item, "publish_in"),
               "msgRoutes": _stat(item, "publish_out")},
        refs={"vhostRef": ("vhost", vhost),
              "altExchange": ("exchange", vhost, str(alt)) if alt is not None else None})


def _binding_key(item: Mapping[str, Any]) -> Key:
    return ("binding", _str(item.get("vhost")), _str(item.get("source")),
            _str(item.get("destination")), _str(item.get("properties_key")))


def _binding(item: Mapping[str, Any]) -> Mapped:
    vhost = _str(item.get("vhost"))
    return Mapped(
        key=_binding_key(item),
        props={"bindingKey": _str(item.get("routing_key")),
               "arguments": _map(item.get("arguments"))},
        stats={},
        refs={"exchangeRef": ("exchange", vhost, _str(item.get("source"))),
              "queueRef": ("queue", vhost, _str(item.get("destination")))})


def _connection(item: Mapping[str, Any], msgs_in: int, msgs_out: int) -> Mapped:
    name = _str(item.get("name"))
    client = _map(item.get("client_properties"))
    process = client.get("qpid.client_process") or client.get("connection_name") or \
        client.get("product")
    pid = client.get("qpid.client_pid")
    connected = item.get("connected_at")
    props: dict[str, Any] = {
        "address": name, "incoming": True, "SystemConnection": False,
        "userProxyAuth": False, "federationLink": False, "shadow": False,
        "authIdentity": _str(item.get("user")),
        "saslMechanism": _str(item.get("auth_mechanism")), "saslSsf": 0,
        "remoteProperties": client, "protocol": _str(item.get("protocol"))}
    if process is not None:
        props["remoteProcessName"] = str(process)
    if isinstance(pid, int) and not isinstance(pid, bool):
        props["remotePid"] = pid
    return Mapped(
        key=("connection", name), props=props,
        stats={"closing": item.get("state") == "closing",
               "framesFromClient": _int(item.get("recv_cnt")),
               "framesToClient": _int(item.get("send_cnt")),
               "bytesFromClient": _int(item.get("recv_oct")),
               "bytesToClient": _int(item.get("send_oct")),
               "msgsFromClient": msgs_in, "msgsToClient": msgs_out},
        refs={"vhostRef": ("vhost", _str(item.get("vhost")))},
        created_ns=int(connected) * 1_000_000 if isinstance(connected, int) else None)


def _connection_of(channel: Mapping[str, Any]) -> str:
    details = channel.get("connection_details")
    return _str(details.get("name")) if isinstance(details, Mapping) else ""


def _session(item: Mapping[str, Any]) -> Mapped:
    name = _str(item.get("name"))
    return Mapped(
        key=("session", name),
        props={"name": name, "channelId": _int(item.get("number")), "detachedLifespan": 0,
               "attached": True},
        stats={"unackedMessages": _int(item.get("messages_unacknowledged"))},
        refs={"vhostRef": ("vhost", _str(item.get("vhost"))),
              "connectionRef": ("connection", _connection_of(item))})


def _subscription(item: Mapping[str, Any]) -> Mapped:
    channel = item.get("channel_details")
    channel_name = _str(channel.get("name")) if isinstance(channel, Mapping) else ""
    queue = item.get("queue")
    queue = queue if isinstance(queue, Mapping) else {}
    tag = _str(item.get("consumer_tag"))
    return Mapped(
        key=("subscription", channel_name, tag),
        props={"name": tag, "browsing": False, "acknowledged": bool(item.get("ack_required")),
               "exclusive": bool(item.get("exclusive")), "creditMode": "WINDOW",
               "arguments": _map(item.get("arguments"))},
        stats={},
        refs={"sessionRef": ("session", channel_name),
              "queueRef": ("queue", _str(queue.get("vhost")), _str(queue.get("name")))})


#: broker statistics that are sums over the queues, as on qpidd
_BROKER_SUMS = ("msgDepth", "byteDepth", "msgTotalEnqueues", "msgTotalDequeues", "acquires",
                "releases")


def _broker(raw: RawState, queues: Iterable[Mapped], interval: float) -> Mapped:
    overview = raw.overview
    listeners = overview.get("listeners") or ()
    port = next((_int(x.get("port")) for x in listeners
                 if isinstance(x, Mapping) and x.get("protocol") == "amqp"), 0)
    node = _str(overview.get("node"))
    uptime_ms = next((_int(n.get("uptime")) for n in raw.nodes
                      if isinstance(n, Mapping) and n.get("name") == node), 0)
    sums = dict.fromkeys(_BROKER_SUMS, 0)
    count = 0
    for q in queues:
        count += 1
        for name in _BROKER_SUMS:
            sums[name] += q.stats[name]
    stats = overview.get("message_stats")
    stats = stats if isinstance(stats, Mapping) else {}
    return Mapped(
        key=BROKER_KEY,
        props={"name": node or "rabbitmq", "port": min(port, 65535), "workerThreads": 0,
               "maxConns": 0, "connBacklog": 0, "stagingThreshold": 0, "mgmtPublish": True,
               "mgmtPubInterval": max(1, min(65535, round(interval))),
               "version": f"RabbitMQ {_str(overview.get('rabbitmq_version'))}".strip()},
        stats={**sums, "queueCount": count, "uptime": uptime_ms * 1_000_000,
               "discardsNoRoute": _int(stats.get("drop_unroutable"))
               + _int(stats.get("return_unroutable"))})


def map_state(raw: RawState, *, interval: float) -> dict[Key, Mapped]:
    """Every object of one poll, keyed, in :data:`CLASS_ORDER`."""
    out: dict[Key, Mapped] = {}
    bindings = [b for b in raw.bindings if b.get("destination_type") == "queue"]
    per_queue: dict[Key, int] = {}
    per_exchange: dict[Key, int] = {}
    for b in bindings:
        vhost = _str(b.get("vhost"))
        qk = ("queue", vhost, _str(b.get("destination")))
        ek = ("exchange", vhost, _str(b.get("source")))
        per_queue[qk] = per_queue.get(qk, 0) + 1
        per_exchange[ek] = per_exchange.get(ek, 0) + 1
    vhosts = [Mapped(key=("vhost", _str(v.get("name"))),
                     props={"name": _str(v.get("name")), "federationTag": ""}, stats={},
                     refs={"brokerRef": BROKER_KEY}) for v in raw.vhosts]
    exchanges = []
    for e in raw.exchanges:
        key = ("exchange", _str(e.get("vhost")), _str(e.get("name")))
        exchanges.append(_exchange(e, per_exchange.get(key, 0)))
    queues = []
    for q in raw.queues:
        key = ("queue", _str(q.get("vhost")), _str(q.get("name")))
        queues.append(_queue(q, per_queue.get(key, 0)))
    msgs: dict[str, list[int]] = {}
    for ch in raw.channels:
        counts = msgs.setdefault(_connection_of(ch), [0, 0])
        counts[0] += _stat(ch, "publish")
        counts[1] += _stat(ch, "deliver_get")
    out[BROKER_KEY] = _broker(raw, queues, interval)
    for m in (*vhosts, *exchanges, *queues, *map(_binding, bindings)):
        out[m.key] = m
    for c in raw.connections:
        counts = msgs.get(_str(c.get("name")), [0, 0])
        m = _connection(c, counts[0], counts[1])
        out[m.key] = m
    for m in (*map(_session, raw.channels), *map(_subscription, raw.consumers)):
        out[m.key] = m
    return out


#: the event's arguments as qpidd raises them, from a snapshot object
def _declare_args(m: Mapped) -> dict[str, Any]:
    alt = m.refs.get("altExchange")
    return {"rhost": "", "user": "", "qName": m.props["name"], "durable": m.props["durable"],
            "excl": m.props["exclusive"], "autoDel": m.props["autoDelete"],
            "altEx": alt[-1] if alt else "", "args": dict(m.props["arguments"]),
            "disp": "created"}


def _client_args(m: Mapped) -> dict[str, Any]:
    address = str(m.props["address"])
    return {"rhost": address.split(" -> ")[0], "user": m.props["authIdentity"],
            "properties": dict(m.props["remoteProperties"])}


def diff_events(old: Mapping[Key, Mapped], new: Mapping[Key, Mapped]
                ) -> list[tuple[str, dict[str, Any]]]:
    """qpidd's events for what changed between two snapshots: (event class, arguments).

    queueDeclare/queueDelete, exchangeDeclare/exchangeDelete, bind/unbind,
    clientConnect/clientDisconnect and subscribe/unsubscribe; ``rhost`` and ``user``
    are the client's where RabbitMQ reports them (connections), else empty.
    """
    events: list[tuple[str, dict[str, Any]]] = []
    added = [m for k, m in new.items() if k not in old]
    removed = [m for k, m in old.items() if k not in new]
    for m in added:
        if m.cls == "queue":
            events.append(("queueDeclare", _declare_args(m)))
        elif m.cls == "exchange":
            alt = m.refs.get("altExchange")
            events.append(("exchangeDeclare", {
                "rhost": "", "user": "", "exName": m.props["name"], "exType": m.props["type"],
                "altEx": alt[-1] if alt else "", "durable": m.props["durable"],
                "autoDel": m.props["autoDelete"], "args": dict(m.props["arguments"]),
                "disp": "created"}))
        elif m.cls == "binding":
            events.append(("bind", {"rhost": "", "user": "", "exName": m.key[2],
                                    "qName": m.key[3], "key": m.props["bindingKey"],
                                    "args": dict(m.props["arguments"])}))
        elif m.cls == "connection":
            events.append(("clientConnect", _client_args(m)))
        elif m.cls == "subscription":
            queue = m.refs["queueRef"]
            events.append(("subscribe", {"rhost": "", "user": "",
                                         "qName": queue[-1] if queue else "",
                                         "dest": m.props["name"],
                                         "excl": m.props["exclusive"],
                                         "args": dict(m.props["arguments"])}))
    for m in removed:
        if m.cls == "queue":
            events.append(("queueDelete", {"rhost": "", "user": "", "qName": m.props["name"]}))
        elif m.cls == "exchange":
            events.append(("exchangeDelete", {"rhost": "", "user": "",
                                              "exName": m.props["name"]}))
        elif m.cls == "binding":
            events.append(("unbind", {"rhost": "", "user": "", "exName": m.key[2],
                                      "qName": m.key[3], "key": m.props["bindingKey"]}))
        elif m.cls == "connection":
            events.append(("clientDisconnect", _client_args(m)))
        elif m.cls == "subscription":
            events.append(("unsubscribe", {"rhost": "", "user": "", "dest": m.props["name"]}))
    return events
