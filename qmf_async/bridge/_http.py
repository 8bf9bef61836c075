"""An async client of RabbitMQ's management HTTP API (plugin ``rabbitmq_management``),
on aiohttp.

One :class:`RabbitApi` keeps one ``aiohttp.ClientSession`` (connection pooling, one
timeout per request).  Lists are read page by page (``page``/``page_size``) with only
the ``columns`` the bridge maps, so thousands of queues cost a few bounded requests.
Every failure is one typed error: :class:`ApiUnavailableError` (nothing answers, or not
in time), :class:`ApiAuthError` (401/403), :class:`ApiError` (another HTTP error, with
RabbitMQ's reason text).
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote, unquote, urlsplit, urlunsplit

import aiohttp

from ..errors import AuthenticationError, QmfError, TransportError, UsageError

__all__ = ["ApiAuthError", "ApiError", "ApiUnavailableError", "RabbitApi", "api_base", "enc"]

#: RabbitMQ caps page_size at 500
PAGE_SIZE = 500
DEFAULT_API = "http://guest:guest@localhost:15672/api"


class ApiError(QmfError):
    """RabbitMQ's API answered an HTTP error; ``status`` and RabbitMQ's ``reason``."""

    def __init__(self, status: int, reason: str, what: str) -> None:
        super().__init__(f"{what}: HTTP {status}: {reason}")
        self.status = status
        self.reason = reason
        self.what = what


class ApiAuthError(ApiError, AuthenticationError):
    """The API refused the credentials (401) or the user's rights (403)."""


class ApiUnavailableError(TransportError):
    """Nothing answers at the API's address, or not within the timeout."""


def enc(name: str) -> str:
    """One path segment (a vhost, queue or exchange name) percent-encoded (``/`` is ``%2F``)."""
    return quote(name, safe="")


def api_base(url: str) -> tuple[str, str, str]:
    """``(base URL ending in /api, user, password)`` of an ``--api`` URL; user and password
    come from the URL (default guest/guest) and are left out of the base.

    Raises:
        UsageError: not an http(s) URL with a host.
    """
    parts = urlsplit(url if "://" in url else f"http://{url}")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"--api must be an http(s) URL with a host, not {url!r}")
    user = unquote(parts.username) if parts.username is not None else "guest"
    password = unquote(parts.password) if parts.password is not None else "guest"
    host = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
    netloc = f"{host}:{parts.port}" if parts.port else host
    path = parts.path.rstrip("/")
    if not path.endswith("/api"):
        path += "/api"
    return urlunsplit((parts.scheme, netloc, path, "", "")), user, password


class RabbitApi:
    """RabbitMQ's management API at ``url`` (``http://user:pass@host:15672/``)."""

    def __init__(self, url: str = DEFAULT_API, *, timeout: float = 10.0) -> None:
        """Nothing is connected before the first request.

        Raises:
            UsageError: a malformed URL or a non-positive timeout.
        """
        if timeout <= 0:
            raise UsageError("the API timeout must be positive")
        self.base, self.user, password = api_base(url)
        self.timeout = timeout
        token = base64.b64encode(f"{self.user}:{password}".encode()).decode()
        # no Accept header: RabbitMQ answers JSON anyway, and refuses some DELETEs
        # (a queue's contents) with 406 when one is sent
        self._headers = {"Authorization": f"Basic {token}"}
        self._session: aiohttp.ClientSession | None = None

    @property
    def where(self) -> str:
        """The API's address without credentials."""
        return self.base

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                headers=self._headers, timeout=aiohttp.ClientTimeout(total=self.timeout),
                connector=aiohttp.TCPConnector(limit=8))
        return self._session

    async def close(self) -> None:
        """Close the pooled connections."""
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def __aenter__(self) -> RabbitApi:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def request(self, method: str, path: str, *, params: Mapping[str, str] | None = None,
                      body: Any = None, headers: Mapping[str, str] | None = None,
                      what: str | None = None) -> Any:
        """One request; the decoded JSON answer (None for an empty one).

        Raises:
            ApiUnavailableError: no answer (refused, unresolvable, timed out).
            ApiAuthError: 401 or 403.
            ApiError: another HTTP error status, with RabbitMQ's reason.
        """
        url = f"{self.base}/{path.lstrip('/')}"
        what = what or f"{method} {path}"
        data = None if body is None else json.dumps(body)
        hdrs = dict(headers or {})
        if data is not None:
            hdrs["Content-Type"] = "application/json"
        try:
            async with self._http().request(method, url, params=params, data=data,
                                            headers=hdrs) as resp:
                text = await resp.text()
                status = resp.status
        except TimeoutError as exc:
            raise ApiUnavailableError(
                f"RabbitMQ's management API at {self.base} did not answer within "
                f"{self.timeout:g}s") from exc
        except aiohttp.ClientError as exc:
            raise ApiUnavailableError(
                f"RabbitMQ's management API at {self.base} is unreachable: {exc}") from exc
        if status >= 400:
            reason = _reason(text) or f"HTTP {status}"
            if status in (401, 403):
                raise ApiAuthError(status, reason, f"RabbitMQ's management API at "
                                   f"{self.base} refused user {self.user!r}")
            raise ApiError(status, reason, what)
        if not text:
            return None
        try:
            return json.loads(text)
        except ValueError as exc:
            raise ApiError(status, f"not JSON: {text[:80]!r}", what) from exc

    async def get(self, path: str, **params: str) -> Any:
        """GET ``path``; see :meth:`request`."""
        return await self.request("GET", path, params=params or None)

    async def list(self, path: str, columns: Sequence[str] = (),
                   page_size: int = PAGE_SIZE) -> list[dict[str, Any]]:
        """Every item of a list endpoint, page by page, with only ``columns``.

        Raises:
            ApiUnavailableError, ApiAuthError, ApiError: as :meth:`request`.
        """
        items: list[dict[str, Any]] = []
        page = 1
        while True:
            params = {"page": str(page), "page_size": str(page_size)}
            if columns:
                params["columns"] = ",".join(columns)
            answer = await self.request("GET", path, params=params)
            if isinstance(answer, list):  # an endpoint without pagination
                return answer
            if not isinstance(answer, dict):
                raise ApiError(200, f"unexpected answer {type(answer).__name__}", f"GET {path}")
            items.extend(answer.get("items") or ())
            if page >= int(answer.get("page_count") or 0):
                return items
            page += 1
            await asyncio.sleep(0)


def _reason(text: str) -> str:
    """RabbitMQ's text of an error body (the longer of its ``error`` and ``reason``:
    one of them is often a bare "Not Found"), else the body's start."""
    try:
        body = json.loads(text)
    except ValueError:
        return text.strip()[:200]
    if isinstance(body, dict):
        texts = [str(body[k]) for k in ("reason", "error") if body.get(k)]
        if texts:
            return max(texts, key=len)
    return text.strip()[:200]
