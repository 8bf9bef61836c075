"""A small messaging broker, simulated and served over QMF as qpidd would serve it.

The classes are qpidd's own (package ``org.apache.qpid.broker``: broker, vhost, queue,
exchange, binding and the events queueDeclare, queueDelete, exchangeDeclare,
exchangeDelete, bind, unbind), loaded from ``schemas/qpidd-broker.xml`` next to this
script, so qpid tools and qmf-async consoles see the same schema as on a real qpidd
(only the class hashes differ).

Model: one broker ``amqp-broker``, one vhost ``/``, the exchanges ``""`` (direct),
``amq.direct``, ``amq.topic``, ``amq.fanout``, the queues ``orders``, ``invoices``,
``audit`` plus ``--queues N`` more, and bindings.  Every ``--interval`` seconds simulated
traffic enqueues and dequeues messages, so the statistics move (counters only grow,
depth = enqueues - dequeues).

Methods, with qpidd's signatures and status codes: ``broker.echo``, ``create`` /
``delete`` of queues, exchanges and bindings (binding name ``exchange/queue/key``, with
the events qpidd raises), ``query``, ``getLogLevel`` / ``setLogLevel``,
``queueMoveMessages``; ``queue.purge``.  The other methods answer NotImplemented (3).

    python examples/demo_agent.py --url amqp://guest:guest@localhost:5672/ [--interval 2]
        [--queues 3] [--label demo-broker] [--seed 1] [--no-attach] [-v]

Runs until SIGINT or SIGTERM.  Importable: ``build_demo_agent(url, ...)`` returns the
:class:`~qmf_async.agent.Agent` and the :class:`DemoBroker` model (start with
``await broker.start()``, or ``async with broker:``).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import logging
import os
import random
import signal
import sys
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from qmf_async import MethodError, ObjectId, QmfError
from qmf_async.agent import Agent, ManagedObject, XmlSchemas, load_schema_xml
from qmf_async.transport import add_connection_arguments, connection_arguments

#: exit code when stdout's reader went away (``... | head``): 128 + SIGPIPE, as a shell
#: reports a program that SIGPIPE stopped
EXIT_PIPE = 141

__all__ = ["PACKAGE", "SCHEMA_PATH", "DemoBroker", "build_demo_agent", "main"]

log = logging.getLogger("qmf_async.demo_agent")

SCHEMA_PATH = Path(__file__).resolve().parent / "schemas" / "qpidd-broker.xml"
PACKAGE = "org.apache.qpid.broker"

#: qpidd's log levels (``setLogLevel`` selectors are ``[!]level[+|-][:category]``)
LOG_LEVELS = ("trace", "debug", "info", "notice", "warning", "error", "critical")
EXCHANGE_TYPES = ("direct", "topic", "fanout", "headers")
DEFAULT_EXCHANGES = (("", "direct"), ("amq.direct", "direct"), ("amq.topic", "topic"),
                     ("amq.fanout", "fanout"))
DEMO_QUEUES = ("orders", "invoices", "audit")
#: extra bindings besides every queue's binding to the default exchange
DEMO_BINDINGS = (("amq.direct", "orders", "orders"), ("amq.topic", "invoices", "invoices.#"),
                 ("amq.topic", "audit", "#"), ("amq.fanout", "audit", ""))
#: qpidd raises events of management requests with the console's address and user; a
#: handler does not see those, so the demo uses what qpidd writes for internal actions
EVENT_RHOST = ""
EVENT_USER = "anonymous"
NULL_OID = ObjectId(bytes(16))
MAX_DEPTH = 500  # simulated consumers catch up when a queue holds this many messages

# create properties qpidd takes out of the map (the rest become the object's arguments)
_QUEUE_KEYS = ("durable", "auto-delete", "alternate-exchange")
_EXCHANGE_KEYS = ("durable", "auto-delete", "exchange-type", "alternate-exchange")


def _fail(text: str, status: int = 7) -> MethodError:
    """A method failure; 7 (EXCEPTION) with the text is what qpidd answers."""
    return MethodError(status, text)


class _Queue:
    """A simulated queue: its managed object and the sizes of the messages it holds."""

    __slots__ = ("consumers", "messages", "obj")

    def __init__(self, obj: ManagedObject) -> None:
        self.obj = obj
        self.messages: collections.deque[int] = collections.deque()
        self.consumers = 0

    @property
    def name(self) -> str:
        return str(self.obj["name"])


class DemoBroker:
    """The broker model behind the demo agent: objects, traffic and method handlers."""

    def __init__(self, agent: Agent, schemas: XmlSchemas, *, interval: float, queues: int = 0,
                 seed: int | None = None) -> None:
        """Create the objects in ``agent`` and register the method handlers.

        Raises:
            UsageError: the schema lacks a class the model needs.
        """
        self.agent = agent
        self.schemas = schemas
        self.interval = interval
        self.rng = random.Random(seed)
        self.log_level = "info+"
        self.started_ns = time.time_ns()
        self.exchanges: dict[str, ManagedObject] = {}
        self.queues: dict[str, _Queue] = {}
        self.bindings: dict[tuple[str, str, str], ManagedObject] = {}
        # reference properties by object, recomputed when object ids change
        self._links: dict[ManagedObject, dict[str, ManagedObject | None]] = {}
        self._traffic: asyncio.Task[None] | None = None
        #: set to True to freeze the simulated traffic (tests, demonstrations)
        self.paused = False

        self.broker = agent.create_object(
            "broker", package=PACKAGE, name="amqp-broker", systemRef=NULL_OID, port=5672,
            workerThreads=4, maxConns=500, connBacklog=10, stagingThreshold=5_000_000,
            mgmtPublish=True, mgmtPubInterval=max(1, min(65535, round(interval))),
            version="qmf-async-demo")
        self.vhost = self._create("vhost", {"brokerRef": self.broker}, name="/",
                                  federationTag="")
        for name, ex_type in DEFAULT_EXCHANGES:
            self._add_exchange(name, ex_type, durable=bool(name))
        for name in (*DEMO_QUEUES, *(f"work-{i}" for i in range(1, queues + 1))):
            self._add_queue(name, durable=True)
        for exchange, queue, key in DEMO_BINDINGS:
            self._add_binding(exchange, queue, key, {})
        self._register_methods()

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Start the agent and the simulated traffic.

        Raises:
            TransportError: the broker cannot be reached.
        """
        await self.agent.start()
        self._relink()
        self.agent.publish_now()
        self._traffic = asyncio.create_task(self._traffic_loop(), name="demo-traffic")

    async def stop(self) -> None:
        """Stop the traffic, then the agent (flushing what it still has to send)."""
        if self._traffic is not None:
            self._traffic.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._traffic
            self._traffic = None
        await self.agent.stop()

    async def __aenter__(self) -> DemoBroker:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # ------------------------------------------------------------------ objects

    def _create(self, cls: str, links: Mapping[str, ManagedObject | None],
                **values: Any) -> ManagedObject:
        for prop, target in links.items():
            if target is not None:
                values[prop] = target.object_id
        obj = self.agent.create_object(cls, package=PACKAGE, **values)
        self._links[obj] = dict(links)
        return obj

    def _delete(self, obj: ManagedObject) -> None:
        self._links.pop(obj, None)
        self.agent.delete_object(obj)

    def _relink(self) -> None:
        """Point reference properties at their targets' current object ids (they
        change when the agent gets other banks from a management broker)."""
        for obj, links in self._links.items():
            for prop, target in links.items():
                if target is not None and obj[prop] != target.object_id:
                    obj.set(**{prop: target.object_id})

    def _add_exchange(self, name: str, ex_type: str, *, durable: bool = False,
                      auto_delete: bool = False, alternate: ManagedObject | None = None,
                      arguments: Mapping[str, Any] | None = None) -> ManagedObject:
        obj = self._create("exchange", {"vhostRef": self.vhost, "altExchange": alternate},
                           name=name, type=ex_type, durable=durable, autoDelete=auto_delete,
                           arguments=dict(arguments or {}))
        self.exchanges[name] = obj
        return obj

    def _add_queue(self, name: str, *, durable: bool = False, auto_delete: bool = False,
                   alternate: ManagedObject | None = None,
                   arguments: Mapping[str, Any] | None = None) -> _Queue:
        obj = self._create("queue", {"vhostRef": self.vhost, "altExchange": alternate},
                           name=name, durable=durable, autoDelete=auto_delete, exclusive=False,
                           arguments=dict(arguments or {}), creator=EVENT_USER)
        queue = self.queues[name] = _Queue(obj)
        self.broker.inc("queueCount")
        # as qpidd: every queue is bound to the default exchange under its own name
        self._add_binding("", name, name, {})
        return queue

    def _add_binding(self, exchange: str, queue: str, key: str,
                     arguments: Mapping[str, Any]) -> ManagedObject:
        ex, q = self.exchanges[exchange], self.queues[queue]
        obj = self._create("binding", {"exchangeRef": ex, "queueRef": q.obj},
                           bindingKey=key, arguments=dict(arguments))
        self.bindings[(exchange, queue, key)] = obj
        for counted in (ex, q.obj):
            _watermark(counted, "bindingCount", +1)
        return obj

    def _remove_binding(self, exchange: str, queue: str, key: str) -> None:
        obj = self.bindings.pop((exchange, queue, key))
        self._delete(obj)
        if exchange in self.exchanges:
            _watermark(self.exchanges[exchange], "bindingCount", -1)
        if queue in self.queues:
            _watermark(self.queues[queue].obj, "bindingCount", -1)

    def _remove_queue(self, name: str) -> None:
        queue = self.queues.pop(name)
        for ex, qn, key in [b for b in self.bindings if b[1] == name]:
            self._remove_binding(ex, qn, key)
        # messages left in a deleted queue are abandoned (and leave the broker's depth)
        left, left_bytes = len(queue.messages), sum(queue.messages)
        self.broker.inc("abandoned", left)
        self.broker.inc("msgTotalDequeues", left)
        self.broker.inc("byteTotalDequeues", left_bytes)
        self.broker.dec("queueCount")
        self._delete(queue.obj)
        self._update_broker_depth()

    def _remove_exchange(self, name: str) -> None:
        obj = self.exchanges.pop(name)
        for ex, qn, key in [b for b in self.bindings if b[0] == name]:
            self._remove_binding(ex, qn, key)
        self._delete(obj)

    # ------------------------------------------------------------------ traffic

    async def _traffic_loop(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            if self.paused:
                continue
            try:
                self.tick()
            except Exception:  # keep simulating whatever one tick did
                log.exception("demo traffic tick failed")

    def tick(self) -> None:
        """One interval of simulated traffic."""
        self._relink()
        rng = self.rng
        for queue in list(self.queues.values()):
            obj = queue.obj
            # consumers come and go (watermarks cover the interval, as in qpidd)
            obj.set(consumerCountHigh=queue.consumers, consumerCountLow=queue.consumers)
            queue.consumers = max(0, min(5, queue.consumers + rng.choice((-1, 0, 0, 1, 1))))
            _watermark(obj, "consumerCount", queue.consumers - obj["consumerCount"])
            routes = [b for b in self.bindings if b[1] == queue.name]
            sizes = [rng.randint(64, 4096) for _ in range(rng.randint(0, 8))]
            if routes and sizes:
                exchange, _, key = rng.choice(routes)
                self._route(exchange, (exchange, queue.name, key), sizes)
                self._enqueue(queue, sizes)
            if queue.consumers or len(queue.messages) > MAX_DEPTH:
                want = rng.randint(0, 3 * max(1, queue.consumers))
                if len(queue.messages) > MAX_DEPTH:
                    want = len(queue.messages) - MAX_DEPTH // 2
                self._dequeue(queue, min(want, len(queue.messages)), "acquires")
        # now and then a message nobody is bound for
        if rng.random() < 0.3 and "amq.topic" in self.exchanges:
            size = rng.randint(64, 1024)
            self.exchanges["amq.topic"].inc("msgReceives")
            self.exchanges["amq.topic"].inc("byteReceives", size)
            self.exchanges["amq.topic"].inc("msgDrops")
            self.exchanges["amq.topic"].inc("byteDrops", size)
            self.broker.inc("discardsNoRoute")
        self.broker.set(uptime=time.time_ns() - self.started_ns)
        self._update_broker_depth()

    def _route(self, exchange: str, binding: tuple[str, str, str], sizes: list[int]) -> None:
        ex = self.exchanges[exchange]
        ex.inc("msgReceives", len(sizes))
        ex.inc("byteReceives", sum(sizes))
        ex.inc("msgRoutes", len(sizes))
        ex.inc("byteRoutes", sum(sizes))
        self.bindings[binding].inc("msgMatched", len(sizes))

    def _enqueue(self, queue: _Queue, sizes: Iterable[int]) -> None:
        sizes = list(sizes)
        if not sizes:
            return
        queue.messages.extend(sizes)
        for obj in (queue.obj, self.broker):
            obj.inc("msgTotalEnqueues", len(sizes))
            obj.inc("byteTotalEnqueues", sum(sizes))
            if queue.obj["durable"]:
                obj.inc("msgPersistEnqueues", len(sizes))
                obj.inc("bytePersistEnqueues", sum(sizes))
        self._update_depth(queue)

    def _dequeue(self, queue: _Queue, count: int, reason: str) -> list[int]:
        taken = [queue.messages.popleft() for _ in range(min(count, len(queue.messages)))]
        if not taken:
            return taken
        for obj in (queue.obj, self.broker):
            obj.inc("msgTotalDequeues", len(taken))
            obj.inc("byteTotalDequeues", sum(taken))
            if queue.obj["durable"]:
                obj.inc("msgPersistDequeues", len(taken))
                obj.inc("bytePersistDequeues", sum(taken))
            if reason:
                obj.inc(reason, len(taken))
        self._update_depth(queue)
        return taken

    def _update_depth(self, queue: _Queue) -> None:
        queue.obj.set(msgDepth=len(queue.messages), byteDepth=sum(queue.messages))

    def _update_broker_depth(self) -> None:
        self.broker.set(msgDepth=sum(len(q.messages) for q in self.queues.values()),
                        byteDepth=sum(sum(q.messages) for q in self.queues.values()))

    # ------------------------------------------------------------------ methods

    def _register_methods(self) -> None:
        on = self.agent.method
        on("broker", "echo")(self.echo)
        on("broker", "create")(self.create)
        on("broker", "delete")(self.delete)
        on("broker", "query")(self.query)
        on("broker", "getLogLevel")(self.get_log_level)
        on("broker", "setLogLevel")(self.set_log_level)
        on("broker", "queueMoveMessages")(self.queue_move_messages)
        on("queue", "purge")(self.purge)

    async def echo(self, obj: ManagedObject, *, sequence: int, body: str) -> dict[str, Any]:
        return {"sequence": sequence, "body": body}

    async def get_log_level(self, obj: ManagedObject) -> dict[str, Any]:
        return {"level": self.log_level}

    async def set_log_level(self, obj: ManagedObject, *, level: str) -> None:
        # qpidd splits on ", " and checks each selector's level name
        selectors = [s for s in level.replace(",", " ").split() if s]
        if not selectors:
            raise _fail("Invalid log level name: ")
        for selector in selectors:
            name = selector.lstrip("!").split(":", 1)[0].rstrip("+-")
            if name not in LOG_LEVELS:
                raise _fail(f"Invalid log level name: {name}")
        self.log_level = ",".join(selectors)

    async def create(self, obj: ManagedObject, *, type: str, name: str,
                     properties: Mapping[str, Any] | None, strict: bool) -> None:
        props = dict(properties or {})
        if type == "queue":
            self._create_queue(name, props, strict)
        elif type in ("exchange", "topic"):
            self._create_exchange(name, props, strict)
        elif type == "binding":
            exchange, queue, key = _binding_id(name)
            if exchange == "":
                raise _fail("not-allowed: Bind not allowed for default exchange")
            self._bind(exchange, queue, key, {k: v for k, v in props.items()
                                              if k != "exchange-type"})
        else:
            raise _fail(f"unknown object type: {type}")

    def _create_queue(self, name: str, props: dict[str, Any], strict: bool) -> None:
        if not name:
            raise _fail("invalid parameter to method call: a queue needs a name")
        if name in self.queues:
            raise _fail(f"object already exists: {name}")
        extensions = {k: v for k, v in props.items() if k not in _QUEUE_KEYS}
        unknown = sorted(k for k in extensions if not k.startswith(("qpid.", "x-")))
        if strict and unknown:
            raise _fail(f"unrecognised queue properties: {', '.join(unknown)}")
        alt_name = str(props.get("alternate-exchange") or "")
        alternate = self._alternate(alt_name)
        durable, auto_delete = bool(props.get("durable")), bool(props.get("auto-delete"))
        self._add_queue(name, durable=durable, auto_delete=auto_delete, alternate=alternate,
                        arguments=extensions)
        self.agent.raise_event("queueDeclare", package=PACKAGE, rhost=EVENT_RHOST,
                               user=EVENT_USER, qName=name, durable=durable, excl=False,
                               autoDel=auto_delete, altEx=alt_name, args=props, disp="created")

    def _create_exchange(self, name: str, props: dict[str, Any], strict: bool) -> None:
        if not name:
            raise _fail("invalid parameter to method call: an exchange needs a name")
        if name.startswith(("amq.", "qpid.")):
            raise _fail('not-allowed: Exchange names beginning with "amq." or "qpid." are '
                        f"reserved. (exchange={name})")
        if name in self.exchanges:
            raise _fail(f"object already exists: {name}")
        ex_type = str(props.get("exchange-type", "topic"))
        if ex_type not in EXCHANGE_TYPES:
            raise _fail(f"Invalid exchange type: {ex_type}")
        extensions = {k: v for k, v in props.items() if k not in _EXCHANGE_KEYS}
        unknown = sorted(k for k in extensions if not k.startswith(("qpid.", "x-")))
        if strict and unknown:
            raise _fail(f"unrecognised exchange properties: {', '.join(unknown)}")
        alt_name = str(props.get("alternate-exchange") or "")
        alternate = self._alternate(alt_name)
        durable, auto_delete = bool(props.get("durable")), bool(props.get("auto-delete"))
        self._add_exchange(name, ex_type, durable=durable, auto_delete=auto_delete,
                           alternate=alternate, arguments=extensions)
        self.agent.raise_event("exchangeDeclare", package=PACKAGE, rhost=EVENT_RHOST,
                               user=EVENT_USER, exName=name, exType=ex_type, altEx=alt_name,
                               durable=durable, autoDel=auto_delete, args=extensions,
                               disp="created")

    def _alternate(self, name: str) -> ManagedObject | None:
        if not name:
            return None
        if name not in self.exchanges:
            raise _fail(f"not-found: Alternate exchange does not exist: {name}")
        return self.exchanges[name]

    def _bind(self, exchange: str, queue: str, key: str, arguments: dict[str, Any]) -> None:
        if exchange not in self.exchanges:
            raise _fail(f"not-found: Bind failed. No such exchange: {exchange}")
        if queue not in self.queues:
            raise _fail(f"not-found: Bind failed. No such queue: {queue}")
        if (exchange, queue, key) in self.bindings:
            raise _fail(f"object already exists: {exchange}/{queue}/{key}")
        self._add_binding(exchange, queue, key, arguments)
        self.agent.raise_event("bind", package=PACKAGE, rhost=EVENT_RHOST, user=EVENT_USER,
                               exName=exchange, qName=queue, key=key, args=arguments)

    async def delete(self, obj: ManagedObject, *, type: str, name: str,
                     options: Mapping[str, Any] | None) -> None:
        opts = dict(options or {})
        if type == "queue":
            queue = self.queues.get(name)
            if queue is None:
                raise _fail(f"not-found: Delete failed. No such queue: {name}")
            if opts.get("if_empty") and queue.messages:
                raise _fail(f"precondition-failed: Cannot delete queue {name}; queue not empty")
            if opts.get("if_unused") and queue.consumers:
                raise _fail(f"precondition-failed: Cannot delete queue {name}; queue in use")
            self._remove_queue(name)
            self.agent.raise_event("queueDelete", package=PACKAGE, rhost=EVENT_RHOST,
                                   user=EVENT_USER, qName=name)
        elif type in ("exchange", "topic"):
            if name == "":
                raise _fail("invalid-argument: Delete not allowed for default exchange")
            if name not in self.exchanges:
                raise _fail(f"not-found: Delete failed. No such exchange: {name}")
            self._remove_exchange(name)
            self.agent.raise_event("exchangeDelete", package=PACKAGE, rhost=EVENT_RHOST,
                                   user=EVENT_USER, exName=name)
        elif type == "binding":
            exchange, queue, key = _binding_id(name)
            if exchange not in self.exchanges:
                raise _fail(f"not-found: Unbind failed. No such exchange: {exchange}")
            if queue not in self.queues:
                raise _fail(f"not-found: Unbind failed. No such queue: {queue}")
            if (exchange, queue, key) not in self.bindings:
                raise _fail(f"not-found: Unbind failed. No such binding: {name}")
            self._remove_binding(exchange, queue, key)
            self.agent.raise_event("unbind", package=PACKAGE, rhost=EVENT_RHOST,
                                   user=EVENT_USER, exName=exchange, qName=queue, key=key)
        else:
            raise _fail(f"unknown object type: {type}")

    async def query(self, obj: ManagedObject, *, type: str, name: str
                    ) -> dict[str, Any]:
        if type == "queue":
            queue = self.queues.get(name)
            if queue is None:
                raise _fail("UnknownObject", 1)
            return {"results": _snapshot(queue.obj)}
        if type in ("exchange", "topic", "binding"):
            raise _fail("NotImplemented", 3)  # as qpidd: only queues can be queried
        raise _fail(f"unknown object type: {type}")

    async def queue_move_messages(self, obj: ManagedObject, *, srcQueue: str,
                                  destQueue: str, qty: int,
                                  filter: Mapping[str, Any] | None) -> None:
        src, dest = self.queues.get(srcQueue), self.queues.get(destQueue)
        if src is None or dest is None:
            raise _fail("InvalidParameter", 4)  # qpidd: a missing queue is status 4
        if filter:
            return  # simulated messages carry no headers: a filter matches none
        moved = self._dequeue(src, qty or len(src.messages), "")
        self._enqueue(dest, moved)
        self._update_broker_depth()

    async def purge(self, obj: ManagedObject, *, request: int,
                    filter: Mapping[str, Any] | None) -> None:
        queue = self.queues.get(str(obj["name"]))
        if queue is None or queue.obj is not obj:
            raise _fail("UnknownObject", 1)
        if filter:
            return  # simulated messages carry no headers: a filter matches none
        self._dequeue(queue, request or len(queue.messages), "discardsPurge")
        self._update_broker_depth()


def _watermark(obj: ManagedObject, name: str, delta: int) -> None:
    """Change a hilo statistic and keep its High/Low watermarks around it."""
    value = obj[name] + delta
    obj.set(**{name: value, f"{name}High": max(obj[f"{name}High"], value),
               f"{name}Low": min(obj[f"{name}Low"], value)})


def _binding_id(name: str) -> tuple[str, str, str]:
    """``[exchange/]queue[/key]`` as qpidd's BindingIdentifier reads it."""
    parts = name.split("/")
    if len(parts) == 1:
        return "", parts[0], ""
    if len(parts) == 2:
        return parts[0], parts[1], ""
    if len(parts) == 3:
        return parts[0], parts[1], parts[2]
    raise _fail(f"invalid binding: {name}")


def _snapshot(obj: ManagedObject) -> dict[str, Any]:
    """An object's values for a map (object ids as their text form)."""
    values = {**obj.properties, **obj.statistics}
    return {k: str(v) if isinstance(v, ObjectId) else v for k, v in values.items()}


def build_demo_agent(url: str, *, interval: float = 2.0, queues: int = 0,
                     label: str = "qmf-async-demo-broker", seed: int | None = None,
                     **agent_options: Any) -> tuple[Agent, DemoBroker]:
    """The demo's agent (not started) and its broker model.

    ``agent_options`` go to :class:`~qmf_async.agent.Agent` (``attach``,
    ``agent_bank`` ...).  Start both with ``await broker.start()``.

    Raises:
        UsageError: a bad option, or the schema file is unreadable or invalid.
    """
    schemas = load_schema_xml(SCHEMA_PATH)
    agent = Agent(url, label=label, interval=interval, **agent_options)
    schemas.add_to(agent)
    return agent, DemoBroker(agent, schemas, interval=interval, queues=queues, seed=seed)


def _parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-b", "--broker", "--url", dest="url", default=None, metavar="ADDRESS",
                        help="the broker: a URL or a qpid-tools address (host:port, "
                             "user/password@host:port); default $QMF_URL")
    parser.add_argument("--interval", type=float, default=2.0,
                        help="publish and traffic interval in seconds (default 2)")
    parser.add_argument("--queues", type=int, default=0,
                        help="extra queues besides orders, invoices and audit (default 0)")
    parser.add_argument("--label", default="qmf-async-demo-broker", help="agent label")
    parser.add_argument("--seed", type=int, default=None, help="traffic random seed")
    parser.add_argument("--no-attach", dest="attach", action="store_false",
                        help="do not ask a management broker for banks (use 1.<random>)")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    add_connection_arguments(parser)
    args = parser.parse_args(argv)
    args.url = args.url or os.environ.get("QMF_URL")
    if not args.url:
        parser.error("no broker: give -b ADDRESS, or set QMF_URL")
    try:
        args.connection = connection_arguments(args)
    except QmfError as exc:
        parser.error(str(exc))
    if args.interval <= 0:
        parser.error("--interval must be positive")
    if args.queues < 0:
        parser.error("--queues must be >= 0")
    return args


async def main(argv: list[str]) -> int:
    """Run the demo agent until SIGINT/SIGTERM; 0 on a clean stop, 1 on failure."""
    args = _parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        agent, broker = build_demo_agent(args.url, interval=args.interval, queues=args.queues,
                                         label=args.label, seed=args.seed,
                                         attach=args.attach, **args.connection)
    except QmfError as exc:
        print(f"demo_agent: {exc}", file=sys.stderr)
        return 1
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    try:
        await broker.start()
    except QmfError as exc:
        print(f"demo_agent: cannot start: {exc}", file=sys.stderr)
        return 1
    try:
        how = "attached" if agent.attached else "no management broker"
        print(f"demo agent {args.label!r} ready: banks {agent.broker_bank}.{agent.agent_bank} "
              f"({how}; requests to {agent.agent_key}), {len(broker.exchanges)} exchanges, "
              f"{len(broker.queues)} queues, interval {args.interval:g} s.  Its broker, "
              f"queues and traffic are SIMULATED in this process: they are not "
              f"RabbitMQ's (the RabbitMQ bridge, python -m qmf_async.bridge.rabbitmq, "
              f"serves RabbitMQ's own)", flush=True)
        await stop.wait()
    finally:
        await broker.stop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(sig)
    return 0


def _run(argv: list[str]) -> int:
    try:
        return asyncio.run(main(argv))
    except BrokenPipeError:  # the reader left (``... | head``): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_PIPE


if __name__ == "__main__":
    sys.exit(_run(sys.argv[1:]))
