"""A TCP pass-through of the tests' own, put between a client and the AMQP broker to make
network faults on demand: ``delay(seconds)`` holds every chunk that long (both ways, order
kept), ``stall()`` stops forwarding without closing anything (a half-open connection: no
FIN, no RST; the bytes wait and TCP's windows fill), ``cut()`` aborts every connection and
refuses new ones, ``restore()`` forwards normally again (bytes held by a stall go on)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from urllib.parse import urlsplit, urlunsplit

__all__ = ["FaultProxy", "Proxy"]


class _Link:
    """One proxied connection: the client side and the broker side."""

    def __init__(self, down: asyncio.StreamWriter, up: asyncio.StreamWriter) -> None:
        self.down = down
        self.up = up

    def abort(self) -> None:
        self.down.transport.abort()
        self.up.transport.abort()


class FaultProxy:
    """A TCP proxy on 127.0.0.1 to ``host:port`` with faults on demand.

    ``start()`` picks a free port (``port``); ``url(amqp_url)`` is that URL through the
    proxy.  New connections made while stalled are accepted and held silent (the
    broker is not dialled until ``restore()``), as a black-holed network would.
    """

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.port = 0
        #: connections refused (cut) and aborted so far
        self.refused = 0
        self.aborted = 0
        self._blocked = False
        self._delay = 0.0
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._server: asyncio.Server | None = None
        self._links: set[_Link] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Listen on a free port of 127.0.0.1."""
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        """Abort every connection and stop listening."""
        self.cut()
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._server.wait_closed(), 5.0)
        self._flowing.set()  # held handlers see the cut and end by themselves
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=5.0)
        for task in list(self._tasks):
            task.cancel()

    async def __aenter__(self) -> FaultProxy:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def url(self, amqp_url: str) -> str:
        """``amqp_url`` with its host and port replaced by the proxy's."""
        parts = urlsplit(amqp_url)
        auth = parts.netloc.rpartition("@")[0]
        netloc = f"{auth}@127.0.0.1:{self.port}" if auth else f"127.0.0.1:{self.port}"
        return urlunsplit(parts._replace(netloc=netloc))

    @property
    def connections(self) -> int:
        """Connections currently proxied."""
        return len(self._links)

    def upstream_ports(self) -> set[int]:
        """The local ports of the proxy's connections to the broker (what the broker
        sees as the clients' ports)."""
        ports = set()
        for link in self._links:
            sockname = link.up.get_extra_info("sockname")
            if sockname:
                ports.add(int(sockname[1]))
        return ports

    # ------------------------------------------------------------------ faults

    def delay(self, seconds: float) -> None:
        """Hold every chunk ``seconds`` before passing it on (both directions)."""
        self._delay = max(0.0, seconds)

    def stall(self) -> None:
        """Stop forwarding, keeping every socket open (no FIN): a half-open connection."""
        self._flowing.clear()

    def cut(self) -> None:
        """Abort every connection (RST) and refuse new ones until ``restore()``."""
        self._blocked = True
        for link in list(self._links):
            link.abort()
            self.aborted += 1
        self._links.clear()

    def restore(self) -> None:
        """Forward normally again: no delay, no stall, new connections accepted."""
        self._blocked = False
        self._delay = 0.0
        self._flowing.set()

    # ------------------------------------------------------------------ forwarding

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)  # type: ignore[arg-type]
        try:
            await self._serve(reader, writer)
        finally:
            self._tasks.discard(task)  # type: ignore[arg-type]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._blocked:
            self.refused += 1
            writer.transport.abort()
            return
        await self._flowing.wait()  # a black hole: accepted, nothing answers
        if self._blocked:
            self.refused += 1
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.transport.abort()
            return
        link = _Link(writer, up_writer)
        self._links.add(link)
        try:
            await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))
        finally:
            self._links.discard(link)
            link.abort()

    async def _pipe(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        """Read ``src``, pass each chunk on to ``dst`` after the delay, while flowing."""
        queue: asyncio.Queue[tuple[float, bytes] | None] = asyncio.Queue()

        async def send() -> None:
            while (item := await queue.get()) is not None:
                due, data = item
                await self._flowing.wait()
                if (wait := due - time.monotonic()) > 0:
                    await asyncio.sleep(wait)
                await self._flowing.wait()
                dst.write(data)
                await dst.drain()

        sender = asyncio.ensure_future(send())
        read: asyncio.Future[bytes] | None = None
        try:
            while True:
                # while stalled, stop reading too: TCP's windows fill as on a dead path
                await self._flowing.wait()
                read = asyncio.ensure_future(src.read(65536))
                done, _ = await asyncio.wait([read, sender], return_when=asyncio.FIRST_COMPLETED)
                if sender in done:
                    read.cancel()
                    break
                data = read.result()
                if not data:
                    queue.put_nowait(None)
                    await sender
                    break
                queue.put_nowait((time.monotonic() + self._delay, data))
        except (ConnectionError, OSError):
            pass
        finally:
            if read is not None and not read.done():
                read.cancel()
            if not sender.done():
                sender.cancel()
            with contextlib.suppress(BaseException):
                await sender
            dst.transport.abort()


#: the name tests/test_web_dashboard.py used
Proxy = FaultProxy
