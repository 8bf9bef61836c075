"""An in-process broker for tests: agents, the role and test peers with no RabbitMQ.

:class:`MemoryBus` holds exchanges (topic and direct; ``amq.direct`` and ``amq.topic``
exist from the start) and queues (one per endpoint, owned by the connection that
opened it, deleted with it), routes published messages with AMQP's topic matching,
and caps queue lengths by dropping the oldest message, as RabbitMQ's
``x-overflow=drop-head`` does.  :meth:`MemoryBus.factory` is a
:class:`~qmf_async.transport.TransportFactory`: every transport it hands out is a
:class:`MemoryTransport` implementing the :class:`~qmf_async.transport.TransportProtocol`.

Deliveries reach a dispatcher from the event loop (``call_soon``), one queue drain at
a time, in publish order per queue; a queue whose connection has no dispatcher yet
keeps its messages (capped), which is the backpressure the real transport gives.
Faults: :meth:`MemoryBus.lose` drops connections (their ``on_lost`` callbacks run),
``refuse_connects`` makes the next connects fail.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from qmf_async.errors import ConnectionLostError, NotConnectedError, TransportError, UsageError
from qmf_async.transport import (
    MANAGEMENT_EXCHANGE,
    QMF_CONTENT_TYPE,
    REPLY_EXCHANGE,
    Body,
    Capabilities,
    ConnectionState,
    Delivery,
    TlsOptions,
    TransportFactory,
    TransportProtocol,
    parse_url,
)
from qmf_async.wire import encode_v2_body

__all__ = ["MemoryBus", "MemoryQueue", "MemoryTransport", "topic_matches"]


@functools.lru_cache(maxsize=4096)
def topic_matches(pattern: str, key: str) -> bool:
    """AMQP topic matching: words split on ``.``; ``*`` is one word, ``#`` zero or more."""
    words = pattern.split(".")
    keys = key.split(".")

    @functools.cache
    def match(i: int, j: int) -> bool:
        if i == len(words):
            return j == len(keys)
        word = words[i]
        if word == "#":
            return match(i + 1, j) or (j < len(keys) and match(i, j + 1))
        if j == len(keys):
            return False
        return (word == "*" or word == keys[j]) and match(i + 1, j + 1)

    return match(0, 0)


@attrs.define(eq=False)
class MemoryQueue:
    """One endpoint: its bindings, waiting messages, and what its cap dropped."""

    name: str
    owner: MemoryTransport
    max_length: int | None
    bindings: set[tuple[str, str]] = attrs.Factory(set)
    messages: collections.deque[Delivery] = attrs.Factory(collections.deque)
    dropped: int = 0
    delivered: int = 0

    def put(self, delivery: Delivery) -> None:
        self.messages.append(delivery)
        cap = self.max_length
        if cap is not None:
            while len(self.messages) > cap:
                self.messages.popleft()
                self.dropped += 1


@attrs.define(eq=False)
class Sent:
    """One published message, as the bus saw it."""

    exchange: str
    routing_key: str
    body: bytes
    reply_to: str | None
    headers: Mapping[str, Any]
    sender: str
    routed: int
    content_type: str | None = None


class MemoryBus:
    """The broker behind every :class:`MemoryTransport` it makes."""

    def __init__(self, vhost_url: str = "amqp://guest:guest@memory:5672/test") -> None:
        self.url = vhost_url
        self.exchanges: dict[str, str] = {REPLY_EXCHANGE: "direct", "amq.topic": "topic"}
        self.queues: dict[str, MemoryQueue] = {}
        self.transports: list[MemoryTransport] = []
        self.sent: list[Sent] = []
        self.unroutable = 0
        #: exceptions dispatchers raised (a test asserts there are none)
        self.dispatch_errors: list[Exception] = []
        self.refuse_connects = 0
        self.connects = 0
        self._names = itertools.count(1)

    # ------------------------------------------------------------------ factory

    def factory(self, url: str, *, tls: TlsOptions | None = None, prefetch: int = 1000,
                name: str = "qmf-async") -> MemoryTransport:
        """A new, unconnected transport on this bus (a TransportFactory)."""
        return MemoryTransport(self, url, tls=tls, prefetch=prefetch, name=name)

    def as_factory(self) -> TransportFactory:
        """:meth:`factory`, typed as what the agent and the role are given."""
        return self.factory

    def open_transports(self, name_prefix: str = "") -> list[MemoryTransport]:
        """The open connections (whose name starts with ``name_prefix``)."""
        return [t for t in self.transports if t.is_open and t.name.startswith(name_prefix)]

    # ------------------------------------------------------------------ routing

    def new_queue_name(self) -> str:
        return f"amq.gen-memory-{next(self._names)}"

    def route(self, exchange: str, routing_key: str, delivery: Delivery) -> int:
        """Put ``delivery`` on every queue bound to ``exchange`` matching ``routing_key``;
        the number of queues (0: unroutable, dropped as RabbitMQ does without
        ``mandatory``)."""
        kind = self.exchanges.get(exchange)
        if kind is None:
            self.unroutable += 1
            return 0
        count = 0
        for queue in list(self.queues.values()):
            for ex, pattern in queue.bindings:
                if ex != exchange:
                    continue
                if pattern == routing_key if kind == "direct" else \
                        topic_matches(pattern, routing_key):
                    queue.put(delivery)
                    queue.owner.wake()
                    count += 1
                    break
        if count == 0:
            self.unroutable += 1
        return count

    def messages(self, routing_prefix: str = "", exchange: str | None = None) -> list[Sent]:
        """What was published (optionally only keys starting with ``routing_prefix``)."""
        return [s for s in self.sent if s.routing_key.startswith(routing_prefix)
                and (exchange is None or s.exchange == exchange)]

    # ------------------------------------------------------------------ faults

    def lose(self, name_prefix: str = "") -> int:
        """Drop every open connection whose name starts with ``name_prefix``; their
        ``on_lost`` callbacks are called soon.  The number dropped."""
        lost = self.open_transports(name_prefix)
        for transport in lost:
            transport.lose()
        return len(lost)


class MemoryTransport:
    """One connection to a :class:`MemoryBus` (implements ``TransportProtocol``)."""

    def __init__(self, bus: MemoryBus, url: str, *, tls: TlsOptions | None = None,
                 prefetch: int = 1000, name: str = "qmf-async") -> None:
        self.bus = bus
        self.url = url
        self.tls = tls
        self.prefetch = prefetch
        self.name = name  # new, open, lost, closed
        self.state = ConnectionState.NEW
        self.queues: dict[str, MemoryQueue] = {}
        self._dispatch: Callable[[Delivery], None] | None = None
        self._lost_callbacks: list[Callable[[BaseException], None]] = []
        self._scheduled = False

    @property
    def is_open(self) -> bool:
        return self.state == "open"

    @property
    def where(self) -> str:
        return parse_url(self.url).where if isinstance(self.url, str) else repr(self.url)

    #: a test bus: no AMQP version to name; endpoints capped and dead-lettered as on
    #: AMQP 0-9-1, no drain probe, no selectors
    capabilities = Capabilities("", dead_letters=True, v2_map_bytes=True)
    #: deliveries are handed over at once
    backlog = 0
    local_address: str | None = None

    def _check(self) -> None:
        if self.state != "open":
            raise NotConnectedError(f"memory transport {self.name!r} is {self.state}")

    async def connect(self, timeout: float = 10.0) -> None:
        if self.state != "new":
            raise UsageError(f"connect() called on a transport that is {self.state}")
        parse_url(self.url)
        await asyncio.sleep(0)
        self.bus.connects += 1
        if self.bus.refuse_connects > 0:
            self.bus.refuse_connects -= 1
            self.state = ConnectionState.CLOSED
            raise TransportError(f"memory bus refused the connection of {self.name!r}")
        self.state = ConnectionState.OPEN
        self.bus.transports.append(self)

    async def declare_management_exchange(self) -> None:
        self._check()
        self.bus.exchanges.setdefault(MANAGEMENT_EXCHANGE, "topic")

    async def declare_exchange(self, name: str, kind: str = "topic") -> None:
        self._check()
        if self.bus.exchanges.setdefault(name, kind) != kind:
            raise TransportError(f"exchange {name!r} exists with type "
                                 f"{self.bus.exchanges[name]!r}, not {kind!r}")

    async def open_endpoint(self, name: str | None = None, *,
                            bindings: Sequence[tuple[str, str]] = (),
                            max_length: int | None = None,
                            dead_letter_exchange: str | None = None,
                            dead_letter_routing_key: str | None = None,
                            no_ack: bool = True) -> str:
        self._check()
        if max_length is not None and max_length < 0:
            raise UsageError(f"max_length must be an int >= 0, not {max_length!r}")
        queue_name = name or self.bus.new_queue_name()
        if queue_name in self.bus.queues:
            raise TransportError(f"queue {queue_name!r} is exclusive to another connection")
        queue = MemoryQueue(queue_name, self, max_length)
        for exchange, key in bindings:
            self._bindable(exchange)
            queue.bindings.add((exchange, key))
        self.bus.queues[queue_name] = self.queues[queue_name] = queue
        return queue_name

    def _bindable(self, exchange: str) -> None:
        if exchange not in self.bus.exchanges:
            raise TransportError(f"no exchange {exchange!r} on the memory bus")

    async def bind(self, endpoint: str, exchange: str, routing_key: str, *,
                   selector: str | None = None) -> None:
        self._check()
        self._bindable(exchange)
        queue = self.bus.queues.get(endpoint)
        if queue is None:
            raise TransportError(f"no queue {endpoint!r} on the memory bus")
        queue.bindings.add((exchange, routing_key))

    async def unbind(self, endpoint: str, exchange: str, routing_key: str, *,
                     selector: str | None = None) -> None:
        self._check()
        queue = self.bus.queues.get(endpoint)
        if queue is not None:
            queue.bindings.discard((exchange, routing_key))

    async def publish(self, body: Body, *, exchange: str, routing_key: str,
                      reply_to: str | None = None, content_type: str | None = QMF_CONTENT_TYPE,
                      headers: Mapping[str, Any] | None = None,
                      user_id: str | None = None, correlation_id: str | None = None) -> None:
        self._check()
        if isinstance(body, (dict, list)):  # a v2 map message: bytes, as over AMQP 0-9-1
            content_type, raw = encode_v2_body(body)
            value = None
        elif isinstance(body, (bytes, bytearray)):
            raw, value = bytes(body), None
        else:
            raise UsageError(f"body must be bytes, a dict or a list, not {type(body).__name__}")
        delivery = Delivery(raw, exchange, routing_key, reply_to, content_type,
                            dict(headers or {}), user_id, "", value, correlation_id)
        routed = self.bus.route(exchange, routing_key, delivery)
        self.bus.sent.append(Sent(exchange, routing_key, raw, reply_to,
                                  dict(headers or {}), self.name, routed, content_type))

    def set_dispatcher(self, dispatch: Callable[[Delivery], None]) -> None:
        self._dispatch = dispatch
        self.wake()

    def on_lost(self, callback: Callable[[BaseException], None]) -> None:
        self._lost_callbacks.append(callback)

    # ------------------------------------------------------------------ delivery

    def wake(self) -> None:
        """Schedule a drain of this connection's queues (once per loop turn)."""
        if self._scheduled or self._dispatch is None or self.state != "open":
            return
        self._scheduled = True
        asyncio.get_running_loop().call_soon(self._drain)

    def _drain(self) -> None:
        self._scheduled = False
        dispatch = self._dispatch
        if dispatch is None or self.state != "open":
            return
        for queue in list(self.queues.values()):
            while queue.messages and self.state == "open":
                delivery = queue.messages.popleft()
                queue.delivered += 1
                try:
                    dispatch(attrs.evolve(delivery, endpoint=queue.name))
                except Exception as exc:  # kept for the test to see (the loop would hide it)
                    self.bus.dispatch_errors.append(exc)

    # ------------------------------------------------------------------ end

    def _drop_queues(self) -> None:
        for name in self.queues:
            self.bus.queues.pop(name, None)
        self.queues.clear()

    def lose(self) -> ConnectionLostError:
        """Drop the connection as a broker would: queues go, ``on_lost`` runs soon."""
        if self.state != "open":
            raise AssertionError(f"memory transport {self.name!r} is {self.state}")
        self.state = ConnectionState.LOST
        self._drop_queues()
        exc = ConnectionLostError(f"connection {self.name!r} to the memory bus lost")
        loop = asyncio.get_running_loop()
        for callback in list(self._lost_callbacks):
            loop.call_soon(callback, exc)
        return exc

    async def close(self, timeout: float = 5.0) -> None:
        if self.state in ("new", "open"):
            self.state = ConnectionState.CLOSED
        self._drop_queues()
        await asyncio.sleep(0)

    def __repr__(self) -> str:
        return f"<MemoryTransport {self.name!r} {self.state}>"


def _conforms(bus: MemoryBus) -> TransportProtocol:
    """Type-level check (mypy): the bus's factory makes protocol transports."""
    factory: TransportFactory = bus.factory
    return factory(bus.url)
