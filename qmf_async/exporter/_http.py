"""A small asyncio HTTP server for ``/metrics`` (on the event loop the store lives on).

The exposition is rendered on the loop, between updates, so a scrape never reads the
store half-changed; no thread, no web framework.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Final

__all__ = ["serve_metrics"]

log = logging.getLogger("qmf_async.exporter")

CONTENT_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"
#: seconds a client may take to send its request
REQUEST_TIMEOUT: Final = 10.0
MAX_HEADER: Final = 16_384

_INDEX: Final = (b"<html><head><title>qmf exporter</title></head><body><h1>qmf exporter</h1>"
                 b'<p><a href="/metrics">Metrics</a></p></body></html>\n')


def _response(status: str, body: bytes, content_type: str, head: bool = False) -> bytes:
    header = (f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\n"
              f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
    return header if head else header + body


async def serve_metrics(render: Callable[[], bytes], host: str, port: int, *,
                        pause: Callable[[bool], None] | None = None) -> asyncio.Server:
    """Serve ``render()`` at ``GET /metrics`` on ``host:port`` (port 0: any free port;
    read it from the server's sockets).  ``pause(True)`` is called when a request has
    been read and ``pause(False)`` when it is answered (the exporter holds its update
    work meanwhile, so a busy bus does not delay the scrape).

    Raises:
        OSError: the address cannot be bound.
    """

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), REQUEST_TIMEOUT)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError,
                ConnectionError, OSError):
            writer.close()
            return
        if pause is not None:
            pause(True)
        try:
            await answer(request, writer)
        finally:
            if pause is not None:
                pause(False)

    async def answer(request: bytes, writer: asyncio.StreamWriter) -> None:
        try:
            line = request.split(b"\r\n", 1)[0].decode("latin-1").split()
            method, path = (line[0], line[1]) if len(line) >= 2 else ("", "")
            path = path.split("?", 1)[0]
            if method not in ("GET", "HEAD"):
                out = _response("405 Method Not Allowed", b"", "text/plain")
            elif path == "/metrics":
                out = _response("200 OK", render(), CONTENT_TYPE, method == "HEAD")
            elif path == "/":
                out = _response("200 OK", _INDEX, "text/html", method == "HEAD")
            else:
                out = _response("404 Not Found", b"not found\n", "text/plain")
            writer.write(out)
            await writer.drain()
        except (ConnectionError, OSError) as exc:
            log.debug("scrape connection failed: %s", exc)
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError, OSError):
                await writer.wait_closed()

    return await asyncio.start_server(handle, host, port, limit=MAX_HEADER)
