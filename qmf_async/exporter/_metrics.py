"""The metric families: qpidd's classes by hand, any other agent's from its schema.

Pure data and functions (no I/O, no prometheus_client): a :class:`ClassMap` says how
the objects of one QMF class become samples; :data:`QPIDD_CLASSES` holds qpidd's
(``org.apache.qpid.broker``), :func:`generic_class_map` builds one from a schema.

Naming follows the Prometheus guide and what operators know from RabbitMQ's exporter:
prefix ``qpidd_`` (``qmf_`` for the generic families), base units (bytes, seconds),
``_total`` only on counters, ``_info`` families (value 1) for properties worth
labelling.  qpidd's monotonic statistics are counters; depths and levels are gauges.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from .. import QmfType, SchemaClass
from ..frozen import frozen

__all__ = [
    "COUNTER",
    "GAUGE",
    "INFO",
    "QPIDD_PACKAGE",
    "QPIDD_PREFIX",
    "GENERIC_PREFIX",
    "MetricSpec",
    "ClassMap",
    "QPIDD_CLASSES",
    "generic_class_map",
    "snake",
    "metric_table",
]

COUNTER: Final = "counter"
GAUGE: Final = "gauge"
INFO: Final = "info"

QPIDD_PACKAGE: Final = "org.apache.qpid.broker"
QPIDD_PREFIX: Final = "qpidd_"
#: prefix of the families built from any other agent's schema
GENERIC_PREFIX: Final = "qmf_"

NS: Final = 1e-9  #: nanoseconds to seconds


@frozen(slots=True)
class MetricSpec:
    """One sample of an object: family ``name`` (with ``_total`` for a counter), its
    ``kind``, ``help``, the QMF element it is read from, a ``scale`` to base units, and
    ``extra`` labels (``(("reason", "ttl"),)``) that tell samples of one family apart.
    An ``info`` spec reads no element: its labels are the ClassMap's ``info``."""

    name: str
    kind: str
    help: str
    element: str = ""
    scale: float = 1.0
    extra: tuple[tuple[str, str], ...] = ()


@frozen(slots=True)
class ClassMap:
    """How the objects of one class become samples.

    ``labels``: label name -> element the value comes from (a name, or a reference
    ``xxxRef`` resolved to the referenced object's name; ``@index`` is the object's
    index string, ``@agent`` its agent); ``info``: label name -> element, for the
    ``_info`` family; ``metrics``: the samples; ``filter``: which include/exclude
    patterns apply to the object (``queue``, ``connection``) and on which label.
    """

    package: str
    name: str
    labels: tuple[tuple[str, str], ...]
    metrics: tuple[MetricSpec, ...]
    info: tuple[tuple[str, str], ...] = ()
    filter: tuple[str, str] | None = None


def _c(name: str, element: str, help: str, scale: float = 1.0,
       extra: tuple[tuple[str, str], ...] = ()) -> MetricSpec:
    return MetricSpec(name + "_total", COUNTER, help, element, scale, extra)


def _g(name: str, element: str, help: str, scale: float = 1.0) -> MetricSpec:
    return MetricSpec(name, GAUGE, help, element, scale)


def _info(name: str, help: str) -> MetricSpec:
    return MetricSpec(name + "_info", INFO, help)


_DISCARDS = (("ttl", "discardsTtl"), ("ring", "discardsRing"), ("lvq", "discardsLvq"),
             ("overflow", "discardsOverflow"), ("subscriber", "discardsSubscriber"),
             ("purge", "discardsPurge"))


def _flow(prefix: str, what: str) -> tuple[MetricSpec, ...]:
    """The enqueue/dequeue counters and depth gauges shared by broker and queue."""
    p = prefix
    return (
        _g(f"{p}_messages", "msgDepth", f"Messages on {what}"),
        _g(f"{p}_messages_bytes", "byteDepth", f"Bytes of the messages on {what}"),
        _c(f"{p}_messages_enqueued", "msgTotalEnqueues", f"Messages enqueued on {what}"),
        _c(f"{p}_messages_dequeued", "msgTotalDequeues", f"Messages dequeued from {what}"),
        _c(f"{p}_enqueued_bytes", "byteTotalEnqueues", f"Bytes enqueued on {what}"),
        _c(f"{p}_dequeued_bytes", "byteTotalDequeues", f"Bytes dequeued from {what}"),
        _c(f"{p}_messages_persistent_enqueued", "msgPersistEnqueues",
           f"Persistent messages enqueued on {what}"),
        _c(f"{p}_messages_persistent_dequeued", "msgPersistDequeues",
           f"Persistent messages dequeued from {what}"),
        _c(f"{p}_messages_transactional_enqueued", "msgTxnEnqueues",
           f"Transactional messages enqueued on {what}"),
        _c(f"{p}_messages_transactional_dequeued", "msgTxnDequeues",
           f"Transactional messages dequeued from {what}"),
        _c(f"{p}_messages_acquired", "acquires", f"Messages acquired from {what}"),
        _c(f"{p}_messages_released", "releases",
           f"Acquired messages put back on {what}"),
        _c(f"{p}_messages_rerouted", "reroutes",
           f"Messages rerouted by management from {what}"),
        *(_c(f"{p}_messages_discarded", element,
             f"Messages discarded from {what}, by reason", extra=(("reason", reason),))
          for reason, element in _DISCARDS),
    )


_BROKER = ClassMap(QPIDD_PACKAGE, "broker", (), (
    _info("qpidd_broker", "The broker's version and data directory (value 1)"),
    _g("qpidd_broker_uptime_seconds", "uptime", "Seconds since the broker started", NS),
    _g("qpidd_broker_queues", "queueCount", "Queues on the broker"),
    *_flow("qpidd_broker", "all queues of the broker (kept across queue deletions)"),
    _c("qpidd_broker_messages_discarded", "discardsNoRoute",
       "Messages discarded from all queues of the broker (kept across queue "
       "deletions), by reason", extra=(("reason", "no_route"),)),
    _c("qpidd_broker_messages_abandoned", "abandoned", "Messages left in deleted queues"),
    _c("qpidd_broker_messages_abandoned_via_alternate", "abandonedViaAlt",
       "Messages of deleted queues routed to their alternate exchange"),
), info=(("version", "version"), ("data_dir", "dataDir")))

_VHOST = ClassMap(QPIDD_PACKAGE, "vhost", (("vhost", "name"),), (
    _info("qpidd_vhost", "A virtual host (value 1)"),
), info=(("federation_tag", "federationTag"),))

_QUEUE = ClassMap(QPIDD_PACKAGE, "queue", (("vhost", "vhostRef"), ("queue", "name")), (
    _info("qpidd_queue", "A queue's properties (value 1)"),
    *_flow("qpidd_queue", "the queue"),
    _g("qpidd_queue_consumers", "consumerCount", "Consumers of the queue"),
    _g("qpidd_queue_bindings", "bindingCount", "Bindings of the queue"),
    _g("qpidd_queue_flow_stopped", "flowStopped",
       "1 when producer flow control is active on the queue"),
    _c("qpidd_queue_flow_stops", "flowStoppedCount",
       "Times producer flow control was activated on the queue"),
), info=(("durable", "durable"), ("auto_delete", "autoDelete"), ("exclusive", "exclusive"),
         ("policy", "arguments:qpid.policy_type")), filter=("queue", "queue"))

_EXCHANGE = ClassMap(QPIDD_PACKAGE, "exchange", (("vhost", "vhostRef"), ("exchange", "name")), (
    _info("qpidd_exchange", "An exchange's properties (value 1)"),
    _g("qpidd_exchange_bindings", "bindingCount", "Bindings of the exchange"),
    _c("qpidd_exchange_messages_received", "msgReceives", "Messages the exchange received"),
    _c("qpidd_exchange_messages_dropped", "msgDrops",
       "Messages the exchange dropped (no matching binding)"),
    _c("qpidd_exchange_messages_routed", "msgRoutes", "Messages the exchange routed"),
    _c("qpidd_exchange_received_bytes", "byteReceives", "Bytes the exchange received"),
    _c("qpidd_exchange_dropped_bytes", "byteDrops", "Bytes the exchange dropped"),
    _c("qpidd_exchange_routed_bytes", "byteRoutes", "Bytes the exchange routed"),
), info=(("type", "type"), ("durable", "durable"), ("auto_delete", "autoDelete")))

_BINDING = ClassMap(QPIDD_PACKAGE, "binding", (
    ("exchange", "exchangeRef"), ("queue", "queueRef"), ("binding_key", "bindingKey")), (
    _c("qpidd_binding_messages_matched", "msgMatched", "Messages the binding matched"),
), filter=("queue", "queue"))

_CONNECTION = ClassMap(QPIDD_PACKAGE, "connection", (
    ("vhost", "vhostRef"), ("connection", "address")), (
    _info("qpidd_connection", "A client connection's properties (value 1)"),
    _c("qpidd_connection_received_bytes", "bytesFromClient", "Bytes received from the client"),
    _c("qpidd_connection_sent_bytes", "bytesToClient", "Bytes sent to the client"),
    _c("qpidd_connection_received_frames", "framesFromClient",
       "Frames received from the client"),
    _c("qpidd_connection_sent_frames", "framesToClient", "Frames sent to the client"),
    _c("qpidd_connection_received_messages", "msgsFromClient",
       "Messages received from the client"),
    _c("qpidd_connection_sent_messages", "msgsToClient", "Messages sent to the client"),
), info=(("user", "authIdentity"), ("protocol", "protocol"), ("incoming", "incoming"),
         ("federation_link", "federationLink"), ("sasl_mechanism", "saslMechanism")),
    filter=("connection", "connection"))

_SESSION = ClassMap(QPIDD_PACKAGE, "session", (
    ("vhost", "vhostRef"), ("connection", "connectionRef"), ("session", "name")), (
    _g("qpidd_session_unacked_messages", "unackedMessages",
       "Messages delivered on the session and not yet acknowledged"),
    _g("qpidd_session_transactions_pending", "TxnCount", "Open transactions of the session"),
    _c("qpidd_session_transactions_started", "TxnStarts", "Transactions started"),
    _c("qpidd_session_transactions_committed", "TxnCommits", "Transactions committed"),
    _c("qpidd_session_transactions_rejected", "TxnRejects", "Transactions rejected"),
), filter=("connection", "connection"))

_SUBSCRIPTION = ClassMap(QPIDD_PACKAGE, "subscription", (
    ("queue", "queueRef"), ("session", "sessionRef"), ("subscription", "name")), (
    _c("qpidd_subscription_messages_delivered", "delivered",
       "Messages delivered to the subscriber"),
), info=(("browsing", "browsing"), ("acknowledged", "acknowledged"),
         ("exclusive", "exclusive")), filter=("queue", "queue"))

_LINK = ClassMap(QPIDD_PACKAGE, "link", (("vhost", "vhostRef"), ("link", "name")), (
    _info("qpidd_link", "A federation link to another broker (value 1)"),
    MetricSpec("qpidd_link_up", GAUGE, "1 when the link's state is Operational",
               "state:Operational"),
), info=(("host", "host"), ("port", "port"), ("transport", "transport"),
         ("durable", "durable")))

_BRIDGE = ClassMap(QPIDD_PACKAGE, "bridge", (("link", "linkRef"), ("bridge", "name")), (
    _info("qpidd_bridge", "A federation route over a link (value 1)"),
), info=(("source", "src"), ("destination", "dest"), ("key", "key"),
         ("durable", "durable"), ("dynamic", "dynamic")))

_MEMORY = ClassMap(QPIDD_PACKAGE, "memory", (), (
    _g("qpidd_memory_arena_bytes", "malloc_arena", "Bytes malloc took from the system"),
    _g("qpidd_memory_allocated_bytes", "malloc_uordblks", "Bytes malloc has handed out"),
    _g("qpidd_memory_free_bytes", "malloc_fordblks", "Free bytes malloc holds"),
    _g("qpidd_memory_mmap_bytes", "malloc_hblkhd", "Bytes malloc mapped with mmap"),
    _g("qpidd_memory_releasable_bytes", "malloc_keepcost",
       "Bytes malloc could give back to the system"),
    _g("qpidd_memory_free_chunks", "malloc_ordblks", "Free chunks malloc holds"),
    _g("qpidd_memory_mmap_chunks", "malloc_hblks", "Chunks malloc mapped with mmap"),
))

#: qpidd's classes, in exposition order (the referenced classes first)
QPIDD_CLASSES: Final[tuple[ClassMap, ...]] = (
    _BROKER, _VHOST, _EXCHANGE, _QUEUE, _BINDING, _CONNECTION, _SESSION, _SUBSCRIPTION,
    _LINK, _BRIDGE, _MEMORY,
)

_NUMERIC = frozenset({QmfType.UINT8, QmfType.UINT16, QmfType.UINT32, QmfType.UINT64,
                      QmfType.INT8, QmfType.INT16, QmfType.INT32, QmfType.INT64,
                      QmfType.FLOAT, QmfType.DOUBLE, QmfType.BOOL, QmfType.DELTATIME,
                      QmfType.ABSTIME})
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_NOT_NAME = re.compile(r"[^a-z0-9_]+")


def snake(text: str) -> str:
    """``msgTotalEnqueues`` -> ``msg_total_enqueues``; any other character becomes ``_``."""
    out = _NOT_NAME.sub("_", _CAMEL.sub("_", text).lower()).strip("_")
    return re.sub(r"_+", "_", out) or "x"


def generic_class_map(schema: SchemaClass) -> ClassMap:
    """The families of any class from its schema: each numeric or boolean statistic is a
    gauge ``qmf_<package>_<class>_<statistic>`` (deltaTime in seconds, ``_seconds``;
    absTime as seconds since the epoch, ``_timestamp_seconds``), labelled ``agent`` and
    ``object`` (the object's index); nothing says which statistics only grow, so none
    is a counter (``rate()`` works on them all the same)."""
    key = schema.class_key
    base = f"{GENERIC_PREFIX}{snake(key.package)}_{snake(key.name)}"
    metrics = [_info(base, f"An object of {key.package}:{key.name} (value 1)")]
    for stat in schema.statistics:
        if stat.type not in _NUMERIC:
            continue
        name, scale = f"{base}_{snake(stat.name)}", 1.0
        if stat.type is QmfType.DELTATIME:
            name, scale = name + "_seconds", NS
        elif stat.type is QmfType.ABSTIME:
            name, scale = name + "_timestamp_seconds", NS
        name = name.removesuffix("_total")
        help_text = (getattr(stat, "desc", "") or f"{key.name}.{stat.name}").strip()
        metrics.append(MetricSpec(name, GAUGE, help_text, stat.name, scale))
    return ClassMap(key.package, key.name, (("agent", "@agent"), ("object", "@index")),
                    tuple(metrics))


def _family_rows(maps: Iterable[ClassMap]) -> Iterable[tuple[str, str, str, str, str]]:
    seen: set[str] = set()
    for cmap in maps:
        for m in cmap.metrics:
            if m.name in seen:
                continue
            seen.add(m.name)
            labels = ["broker", *(n for n, _ in cmap.labels)]
            labels += [n for n, _ in m.extra]
            if m.kind == INFO:
                labels += [n for n, _ in cmap.info]
            source = (f"{cmap.name}" if m.kind == INFO
                      else f"{cmap.name}.{m.element.partition(':')[0]}")
            yield m.name, "gauge" if m.kind == INFO else m.kind, ", ".join(labels), source, m.help


def metric_table(maps: Iterable[ClassMap] = QPIDD_CLASSES,
                 own: Mapping[str, tuple[str, str, str]] | None = None) -> str:
    """The Markdown table of the families (docs/prometheus.md is checked against it):
    ``own`` adds the exporter's own families (name -> (type, labels, help))."""
    lines = ["| metric | type | labels | from | help |", "|---|---|---|---|---|"]
    for name, kind, labels, source, help_text in _family_rows(maps):
        lines.append(f"| `{name}` | {kind} | {labels} | `{source}` | {help_text} |")
    for name, (kind, labels, help_text) in (own or {}).items():
        lines.append(f"| `{name}` | {kind} | {labels} | exporter | {help_text} |")
    return "\n".join(lines) + "\n"


#: reads an element of an object (``get(name, default)``)
Getter = Callable[[str, Any], Any]
