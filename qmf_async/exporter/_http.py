"""The ``/metrics`` HTTP server: requests are served from a thread, the exposition is
rendered on the event loop the store lives on.

The loop renders the text between two updates (so a scrape never reads the store
half-changed) and hands the bytes over; the server thread sends them with blocking
writes, so a 25 MB answer does not take turns with the bus on the loop.  Standard
library only (``http.server``), with TLS and basic auth when a web configuration file
says so (:mod:`._webconfig`): the TLS handshake happens in the connection's thread, so a
client that stalls in it holds no one else up.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import http.server
import logging
import socket
import ssl
import threading
from collections.abc import Callable
from typing import Any, Final

from ._webconfig import BasicAuth, WebConfig

__all__ = ["MetricsServer", "serve_metrics"]

log = logging.getLogger("qmf_async.exporter")

CONTENT_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"
#: seconds a client may take to send its request, and a render may take
REQUEST_TIMEOUT: Final = 30.0

_INDEX: Final = (b"<html><head><title>qmf exporter</title></head><body><h1>qmf exporter</h1>"
                 b'<p><a href="/metrics">Metrics</a></p></body></html>\n')


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    timeout = REQUEST_TIMEOUT

    def do_GET(self) -> None:
        self._answer(head=False)

    def do_HEAD(self) -> None:
        self._answer(head=True)

    def _answer(self, head: bool) -> None:
        auth = self.server.auth
        if auth is not None and not auth.allows(self.headers.get("Authorization")):
            log.info("scrape from %s refused: no valid basic-auth credentials",
                     self.address_string())
            self._send(401, b"Unauthorized\n", "text/plain", head,
                       extra=(("WWW-Authenticate", 'Basic realm="qmf exporter"'),))
            return
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            try:
                body = self.server.render_on_loop()
            except Exception as exc:  # the loop stopped, or the render failed
                log.warning("scrape failed: %s", exc)
                self._send(503, b"the exporter is stopping\n", "text/plain", head)
                return
            encoding = None
            if "gzip" in self.headers.get("Accept-Encoding", ""):
                # as Prometheus asks: about a tenth of the bytes; zlib runs without the GIL
                body, encoding = gzip.compress(body, compresslevel=1), "gzip"
            self._send(200, body, CONTENT_TYPE, head, encoding)
        elif path == "/":
            self._send(200, _INDEX, "text/html", head)
        else:
            self._send(404, b"not found\n", "text/plain", head)

    def _send(self, status: int, body: bytes, content_type: str, head: bool,
              encoding: str | None = None, extra: tuple[tuple[str, str], ...] = ()) -> None:
        self.send_response(status)
        for name, value in (*self.server.headers, *extra):
            self.send_header(name, value)
        self.send_header("Content-Type", content_type)
        if encoding is not None:
            self.send_header("Content-Encoding", encoding)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        if not head:
            self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("scrape from %s: " + format, self.address_string(), *args)


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    render_on_loop: Callable[[], bytes]
    web: WebConfig = WebConfig()
    auth: BasicAuth | None = None
    headers: tuple[tuple[str, str], ...] = ()

    def finish_request(self, request: Any, client_address: Any) -> None:
        """In the connection's thread: the TLS handshake first (bounded by
        :data:`REQUEST_TIMEOUT`), then the request."""
        tls = self.web.tls
        if tls is None:
            super().finish_request(request, client_address)
            return
        assert isinstance(request, socket.socket)
        request.settimeout(REQUEST_TIMEOUT)
        try:
            conn = tls.context.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError) as exc:
            log.info("TLS handshake with %s refused: %s", client_address[0], exc)
            return
        try:
            refused = tls.peer_refused(conn)
            if refused is not None:
                log.info("TLS connection from %s refused: %s", client_address[0], refused)
                return
            super().finish_request(conn, client_address)
        finally:
            with contextlib.suppress(OSError):
                conn.close()


class MetricsServer:
    """A running ``/metrics`` server; :meth:`close` stops it."""

    def __init__(self, server: _Server) -> None:
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={
            "poll_interval": 0.2}, name="qmf-exporter-http", daemon=True)
        self._thread.start()

    @property
    def scheme(self) -> str:
        """``https`` when it serves TLS, else ``http``."""
        return self._server.web.scheme

    @property
    def address(self) -> tuple[str, int]:
        """The (host, port) it listens on."""
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    async def close(self) -> None:
        """Stop serving (waits for the server thread, off the loop)."""
        await asyncio.to_thread(self._shutdown)

    def _shutdown(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(10)


async def serve_metrics(render: Callable[[], bytes], host: str, port: int, *,
                        pause: Callable[[bool], None] | None = None,
                        web_config: WebConfig | None = None) -> MetricsServer:
    """Serve ``render()`` (called on this event loop) at ``GET /metrics`` on
    ``host:port`` (port 0: any free port, see :attr:`MetricsServer.address`).
    ``pause(True)``/``pause(False)`` are called on the loop around each render.
    ``web_config`` (:func:`~qmf_async.exporter.load_web_config`) adds TLS, client
    certificates, basic auth (401 without valid credentials) and response headers.

    Raises:
        OSError: the address cannot be bound.
    """
    loop = asyncio.get_running_loop()

    async def on_loop() -> bytes:
        if pause is not None:
            pause(True)
        try:
            return render()
        finally:
            if pause is not None:
                pause(False)

    def render_on_loop() -> bytes:
        future = asyncio.run_coroutine_threadsafe(on_loop(), loop)
        try:
            return future.result(REQUEST_TIMEOUT)
        finally:
            with contextlib.suppress(Exception):
                future.cancel()

    server = await asyncio.to_thread(_Server, (host, port), _Handler)
    server.render_on_loop = render_on_loop
    if web_config is not None:
        server.web = web_config
        server.headers = web_config.headers
        server.auth = BasicAuth(web_config.users) if web_config.users else None
    return MetricsServer(server)
