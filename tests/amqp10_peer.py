"""A small AMQP 1.0 broker for the tests of the AMQP 1.0 transport.

proton's engine in server mode (``proton.Transport(Transport.SERVER)``) on an asyncio
server socket (TLS when given an SSL context).  SASL is answered here, frame by frame
(proton's built-in server side only knows ANONYMOUS and EXTERNAL): the peer offers the
mechanisms it is given, checks PLAIN credentials, and accepts EXTERNAL only over TLS with
a client certificate.

Links: a client's sending link targets an exchange; its messages go to the client
receiving links whose source is that exchange and whose binding key (the legacy
direct/topic filter the transport sends) matches the subject, as the exchange type
says (direct: equal, topic: ``*``/``#`` words, fanout: all).  Links to an exchange that
does not exist are refused with ``amqp:not-found`` (attach with a null terminus, then
detach with the error, as qpidd does).

Misbehaviour on demand: grant limited credit (``credit``; ``auto_credit=False`` waits
for :meth:`Amqp10Peer.grant`), never answer attaches to ``silent`` addresses, never
answer the client's close (``answer_close=False``), :meth:`Amqp10Peer.stall` (stop
reading and writing, socket left open) and :meth:`Amqp10Peer.close_connections`
(close with an error condition).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import ssl
import struct
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from proton import (
    UNDESCRIBED,
    Array,
    Collector,
    Condition,
    Connection,
    Data,
    Described,
    Endpoint,
    Event,
    Link,
    Message,
    symbol,
    ubyte,
    ulong,
)
from proton import Transport as PnTransport

from .pki import Pki

__all__ = ["Amqp10Peer", "Pki"]

SASL_HEADER = b"AMQP\x03\x01\x00\x00"
AMQP_HEADER = b"AMQP\x00\x01\x00\x00"
SASL_MECHANISMS, SASL_INIT, SASL_OUTCOME = 0x40, 0x41, 0x44

DEFAULT_EXCHANGES: Mapping[str, str] = {
    "amq.direct": "direct", "amq.topic": "topic", "amq.fanout": "fanout",
    "qpid.management": "topic", "qmf.default.direct": "direct", "qmf.default.topic": "topic",
}


def topic_match(pattern: str, key: str) -> bool:
    """AMQP topic matching: words split at ``.``, ``*`` one word, ``#`` zero or more."""
    words, keys = pattern.split("."), key.split(".")

    def match(i: int, j: int) -> bool:
        if i == len(words):
            return j == len(keys)
        if words[i] == "#":
            return any(match(i + 1, k) for k in range(j, len(keys) + 1))
        return j < len(keys) and words[i] in ("*", keys[j]) and match(i + 1, j + 1)

    return match(0, 0)


class Received:
    """One message a client sent: the address it went to and proton's reading of it."""

    __slots__ = ("address", "message", "raw")

    def __init__(self, address: str, raw: bytes) -> None:
        self.address = address
        self.raw = raw
        self.message = Message()
        self.message.decode(raw)


class Subscription:
    """A client's receiving link: source exchange, filter descriptor and binding key."""

    __slots__ = ("address", "descriptor", "key", "link", "queue")

    def __init__(self, link: Link, address: str, descriptor: str | None, key: str | None) -> None:
        self.link = link
        self.address = address
        self.descriptor = descriptor
        self.key = key
        self.queue: collections.deque[bytes] = collections.deque()


class Amqp10Peer:
    """The test broker; ``async with Amqp10Peer(...) as peer`` listens on ``peer.port``."""

    def __init__(
        self,
        *,
        mechanisms: Iterable[str] = ("ANONYMOUS",),
        users: Mapping[str, str] | None = None,
        ssl_context: ssl.SSLContext | None = None,
        exchanges: Mapping[str, str] = DEFAULT_EXCHANGES,
        credit: int = 100,
        auto_credit: bool = True,
        silent: Iterable[str] = (),
        answer_close: bool = True,
    ) -> None:
        self.mechanisms = list(mechanisms)
        self.users = dict(users or {})
        self.ssl_context = ssl_context
        self.exchanges = dict(exchanges)
        self.credit = credit
        self.auto_credit = auto_credit
        self.silent = set(silent)
        self.answer_close = answer_close
        self.port = 0
        self.connections: list[PeerConnection] = []
        self.received: list[Received] = []
        #: (mechanism, user or authzid, accepted) per SASL exchange
        self.sasl_log: list[tuple[str, str | None, bool]] = []
        #: the most credit a client sending link ever had from this peer
        self.max_credit_given = 0
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> Amqp10Peer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0,
                                                  ssl=self.ssl_context)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    def url(self, *, scheme: str = "amqp", host: str = "127.0.0.1", userinfo: str = "") -> str:
        """A URL of this peer (``userinfo`` like ``"user:pass@"``)."""
        return f"{scheme}://{userinfo}{host}:{self.port}/"

    async def stop(self) -> None:
        """Close every connection and the listening socket (bounded)."""
        for conn in self.connections:
            conn.abort()
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2.0)
        for conn in self.connections:
            await conn.finished()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = PeerConnection(self, reader, writer)
        self.connections.append(conn)
        await conn.run()

    # ---------------------------------------------------------------- test controls

    @property
    def subscriptions(self) -> list[Subscription]:
        """Every open client receiving link, of every connection."""
        return [s for c in self.connections for s in c.subscriptions.values()]

    def stall(self) -> None:
        """Stop reading and writing on every connection; the sockets stay open."""
        for conn in self.connections:
            conn.stall()

    def close_connections(self, name: str = "amqp:internal-error",
                          description: str = "closed by the test") -> None:
        """Close every connection with the error condition ``name``."""
        for conn in self.connections:
            conn.close_with(name, description)

    def grant(self, credit: int) -> None:
        """Give ``credit`` more to every client sending link."""
        for conn in self.connections:
            conn.grant(credit)

    async def wait_for(self, predicate: Callable[[], Any], timeout: float = 5.0,
                       what: str = "a condition") -> None:
        """Poll ``predicate`` until it is true.

        Raises:
            AssertionError: still false after ``timeout`` seconds.
        """
        await wait_for(predicate, timeout, what)


async def wait_for(predicate: Callable[[], Any], timeout: float = 5.0,
                   what: str = "a condition") -> None:
    """Poll ``predicate`` every 10 ms until it is true.

    Raises:
        AssertionError: still false after ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} within {timeout} s")
        await asyncio.sleep(0.01)


def _frame(descriptor: int, fields: list[Any]) -> bytes:
    data = Data()
    data.put_object(Described(ulong(descriptor), fields))
    body = bytes(data.encode())
    return struct.pack(">IBBH", 8 + len(body), 2, 1, 0) + body


class PeerConnection:
    """One client connection to the peer."""

    def __init__(self, peer: Amqp10Peer, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter) -> None:
        self.peer = peer
        self.reader = reader
        self.writer = writer
        self.pt: PnTransport | None = None
        self.conn: Connection | None = None
        self.coll: Collector | None = None
        self.subscriptions: dict[str, Subscription] = {}  # by link name
        self.senders: list[Link] = []  # the peer's receiving ends of client senders
        self.stalled = False
        self.closed_by_client = False
        self.remote_idle_timeout: float = 0.0
        self._tasks: list[asyncio.Task[None]] = []
        self._done = asyncio.Event()

    # ---------------------------------------------------------------- SASL

    async def _sasl(self) -> bytes | None:
        """Run SASL if the client asks for it; returns the bytes read past it, or None
        when the client is refused."""
        header = await self.reader.readexactly(8)
        if header != SASL_HEADER:
            if self.peer.mechanisms:  # SASL required: answer with the header spoken here
                self.writer.write(SASL_HEADER)  # and close, as an AMQP 1.0 broker does
                await self.writer.drain()
                return None
            return header
        self.writer.write(SASL_HEADER + _frame(SASL_MECHANISMS, [
            Array(UNDESCRIBED, Data.SYMBOL, *(symbol(m) for m in self.peer.mechanisms))]))
        size = struct.unpack(">I", await self.reader.readexactly(4))[0]
        frame = await self.reader.readexactly(size - 4)
        data = Data()
        data.decode(frame[4:])  # after doff, type, channel
        data.rewind()
        data.next()
        init = data.get_object()
        assert isinstance(init, Described) and init.descriptor == SASL_INIT, init
        fields = [*init.value, None, None, None]
        mechanism, response = str(fields[0]), bytes(fields[1] or b"")
        ok, user = self._authenticate(mechanism, response)
        self.peer.sasl_log.append((mechanism, user, ok))
        self.writer.write(_frame(SASL_OUTCOME, [ubyte(0 if ok else 1)]))
        await self.writer.drain()
        return b"" if ok else None

    def _authenticate(self, mechanism: str, response: bytes) -> tuple[bool, str | None]:
        if mechanism not in self.peer.mechanisms:
            return False, None
        if mechanism == "ANONYMOUS":
            return True, None
        if mechanism == "PLAIN":
            parts = response.split(b"\x00")
            if len(parts) != 3:
                return False, None
            user, password = parts[1].decode(), parts[2].decode()
            return self.peer.users.get(user) == password and user in self.peer.users, user
        if mechanism == "EXTERNAL":
            cert = self.writer.get_extra_info("peercert")
            if not cert:
                return False, None
            subject = dict(pair[0] for pair in cert.get("subject", ()))
            return True, subject.get("commonName")
        return False, None

    # ---------------------------------------------------------------- AMQP

    async def run(self) -> None:
        try:
            try:
                rest = await asyncio.wait_for(self._sasl(), 5.0)
            except (OSError, asyncio.IncompleteReadError, TimeoutError, ssl.SSLError):
                rest = None
            if rest is None:
                self.writer.close()
                return
            pt = PnTransport(PnTransport.SERVER)
            conn = Connection()
            coll = Collector()
            conn.collect(coll)
            pt.bind(conn)
            self.pt, self.conn, self.coll = pt, conn, coll
            if rest:
                pt.push(rest)
            self._process()
            loop = asyncio.get_running_loop()
            self._tasks = [loop.create_task(self._read_loop()), loop.create_task(self._tick_loop())]
            await asyncio.gather(*self._tasks, return_exceptions=True)
        finally:
            self._done.set()

    async def finished(self) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._done.wait(), 2.0)

    async def _read_loop(self) -> None:
        pt = self.pt
        assert pt is not None
        while True:
            try:
                data = await self.reader.read(65536)
            except (OSError, ssl.SSLError):
                data = b""
            if self.stalled:
                return
            if not data:
                with contextlib.suppress(Exception):
                    pt.close_tail()
                self._process()
                self.writer.close()
                for task in self._tasks:
                    if task is not asyncio.current_task():
                        task.cancel()
                return
            while data:
                n = pt.capacity()
                if n <= 0:
                    break
                pt.push(data[:n])
                data = data[n:]
                self._process()

    async def _tick_loop(self) -> None:
        pt = self.pt
        assert pt is not None
        while not self.stalled:
            now = time.monotonic()
            with contextlib.suppress(Exception):
                pt.tick(now)
            self._process()
            await asyncio.sleep(0.05)

    def _flush(self) -> None:
        pt = self.pt
        if pt is None or self.stalled:
            return
        while True:
            try:
                n = pt.pending()
            except Exception:
                n = -1
            if n < 0:  # the engine wrote its last byte
                if not self.writer.is_closing():
                    self.writer.close()
                return
            if n == 0:
                return
            data = pt.peek(n)
            pt.pop(n)
            if not self.writer.is_closing():
                self.writer.write(data)

    def _process(self) -> None:
        coll = self.coll
        if coll is None or self.stalled:
            return
        while True:
            event = coll.peek()
            if event is None:
                break
            try:
                self._handle(event)
            finally:
                coll.pop()
        self._flush()

    def _handle(self, event: Event) -> None:
        kind = event.type
        if kind is Event.CONNECTION_REMOTE_OPEN:
            conn = event.connection
            conn.container = "amqp10-test-peer"
            conn.properties = {symbol("product"): "amqp10-test-peer"}
            assert self.pt is not None
            self.remote_idle_timeout = self.pt.remote_idle_timeout
            conn.open()
        elif kind is Event.SESSION_REMOTE_OPEN:
            event.session.open()
        elif kind is Event.LINK_REMOTE_OPEN:
            self._on_attach(event.link)
        elif kind is Event.LINK_REMOTE_CLOSE:
            link = event.link
            self.subscriptions.pop(link.name, None)
            if link.state & Endpoint.LOCAL_ACTIVE:
                link.close()
        elif kind is Event.LINK_FLOW:
            sub = self.subscriptions.get(event.link.name)
            if sub is not None:
                self._pump(sub)
        elif kind is Event.DELIVERY:
            self._on_delivery(event.delivery)
        elif kind is Event.CONNECTION_REMOTE_CLOSE:
            self.closed_by_client = True
            if self.peer.answer_close and event.connection.state & Endpoint.LOCAL_ACTIVE:
                event.connection.close()

    def _on_attach(self, link: Link) -> None:
        if link.is_receiver:  # the client sends to an exchange
            address = link.remote_target.address
            if address in self.peer.silent:
                return
            if address not in self.peer.exchanges:
                self._refuse(link, address)
                return
            link.target.address = address
            link.open()
            self.senders.append(link)
            if self.peer.auto_credit and self.peer.credit > 0:
                self.grant_to(link, self.peer.credit)
            return
        address = link.remote_source.address
        if address in self.peer.silent:
            return
        if address not in self.peer.exchanges:
            self._refuse(link, address)
            return
        descriptor = key = None
        filters = link.remote_source.filter
        filters.rewind()
        if filters.next() is not None:
            for value in (filters.get_object() or {}).values():
                if isinstance(value, Described):
                    descriptor, key = str(value.descriptor), str(value.value)
        link.source.address = address
        link.target.address = link.remote_target.address
        link.open()
        self.subscriptions[link.name] = Subscription(link, address, descriptor, key)

    def _refuse(self, link: Link, address: str | None) -> None:
        link.open()  # a null terminus ...
        link.condition = Condition("amqp:not-found", f"Node not found: {address}")
        link.close()  # ... and the detach with the error

    def grant_to(self, link: Link, credit: int) -> None:
        link.flow(credit)
        self.peer.max_credit_given = max(self.peer.max_credit_given, link.credit)

    def grant(self, credit: int) -> None:
        for link in self.senders:
            if link.state & Endpoint.LOCAL_ACTIVE:
                self.grant_to(link, credit)
        self._flush()

    def _on_delivery(self, dlv: Any) -> None:
        link = dlv.link
        if link.is_sender:
            if dlv.remote_state or dlv.remote_settled:
                dlv.settle()
            return
        if not dlv.readable or dlv.partial:
            return
        raw = bytes(link.recv(dlv.pending))
        link.advance()
        dlv.update(dlv.ACCEPTED)
        dlv.settle()
        address = link.target.address
        received = Received(address, raw)
        self.peer.received.append(received)
        subject = received.message.subject or ""
        kind = self.peer.exchanges.get(address, "direct")
        for conn in self.peer.connections:
            for sub in conn.subscriptions.values():
                if sub.address != address:
                    continue
                key = sub.key
                if kind == "fanout" or key is None or (
                        kind == "direct" and key == subject) or (
                        kind == "topic" and topic_match(key, subject)):
                    sub.queue.append(raw)
                    conn._pump(sub)
        if self.peer.auto_credit and link.credit == 0:
            self.grant_to(link, self.peer.credit)

    def _pump(self, sub: Subscription) -> None:
        link = sub.link
        while sub.queue and link.credit > 0:
            raw = sub.queue.popleft()
            dlv = link.delivery(f"{id(raw):x}-{len(sub.queue)}")
            link.send(raw)
            link.advance()
            if link.remote_snd_settle_mode == Link.SND_SETTLED:
                dlv.settle()
        self._flush()

    # ---------------------------------------------------------------- misbehaviour

    def stall(self) -> None:
        self.stalled = True
        for task in self._tasks:
            task.cancel()

    def close_with(self, name: str, description: str) -> None:
        conn = self.conn
        if conn is None or self.stalled:
            return
        conn.condition = Condition(name, description)
        conn.close()
        self._flush()

    def send_raw(self, sub: Subscription, raw: bytes) -> None:
        """Deliver ``raw`` (any bytes, valid message or not) on a client receiving link."""
        sub.queue.append(raw)
        self._pump(sub)

    def detach(self, sub: Subscription, name: str = "amqp:resource-deleted",
               description: str = "deleted by the test") -> None:
        """Detach a client receiving link with an error."""
        sub.link.condition = Condition(name, description)
        sub.link.close()
        self.subscriptions.pop(sub.link.name, None)
        self._flush()

    def abort(self) -> None:
        self.stalled = True
        for task in self._tasks:
            task.cancel()
        self.writer.close()
