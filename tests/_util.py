"""Test helpers shared by the test modules."""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import contextlib
import importlib.util
import inspect
import io
import json
import logging
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import quote, unquote, urlsplit, urlunsplit


async def wait_until(
    predicate: Callable[[], Any | Awaitable[Any]],
    timeout: float = 5.0,
    interval: float = 0.01,
    message: str | None = None,
) -> Any:
    """Poll ``predicate`` (sync or async) until it returns a truthy value.

    Returns that value.

    Raises:
        AssertionError: the predicate stayed falsy for ``timeout`` seconds; the message
            names the predicate (or uses ``message``) and its last value.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if time.monotonic() >= deadline:
            what = message or getattr(predicate, "__qualname__", repr(predicate))
            raise AssertionError(
                f"condition not met within {timeout} s: {what} (last value: {value!r})"
            )
        await asyncio.sleep(interval)


def rabbitmqctl(*args: str) -> bool:
    """Run ``rabbitmqctl -q -s ARGS``; True when it exists here and succeeded."""
    ctl = shutil.which("rabbitmqctl") or shutil.which("rabbitmqctl", path="/usr/sbin:/sbin")
    if ctl is None:
        return False
    try:
        return subprocess.run([ctl, "-q", "-s", *args], capture_output=True,
                              timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _management_api(amqp_url: str) -> str | None:
    """The base URL (``http://user:pw@host:port/api``) of the management API of the local
    broker ``amqp_url`` names, when that API answers and lists ``amqp_url``'s port among
    the node's listeners (so a vhost made there is one that URL reaches); else None."""
    parts = urlsplit(amqp_url)
    if parts.hostname not in ("localhost", "127.0.0.1", "::1"):
        return None
    port = parts.port or (5671 if parts.scheme == "amqps" else 5672)
    key = (amqp_url, os.environ.get("QMF_RABBITMQ_API"))
    if key in _API_OF:
        return _API_OF[key]
    base = os.environ.get("QMF_RABBITMQ_API", "http://guest:guest@localhost:15672/")
    base = base.rstrip("/") + "/api"
    try:
        overview = json.loads(_api_call("GET", base + "/overview"))
        ports = {int(listener["port"]) for listener in overview.get("listeners", ())}
    except (OSError, ValueError, KeyError, TypeError):
        ports = set()
    _API_OF[key] = base if port in ports else None
    return _API_OF[key]


_API_OF: dict[tuple[str, str | None], str | None] = {}


def _api_call(method: str, url: str, body: dict[str, Any] | None = None) -> bytes:
    """One request to the management API (credentials taken from the URL); raises OSError
    (urllib's errors are OSErrors) on a refused connection or a non-2xx answer."""
    parts = urlsplit(url)
    auth = base64.b64encode(
        f"{unquote(parts.username or 'guest')}:{unquote(parts.password or 'guest')}".encode())
    netloc = (parts.hostname or "localhost") + (f":{parts.port}" if parts.port else "")
    request = urllib.request.Request(
        urlunsplit(parts._replace(netloc=netloc)), method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": "Basic " + auth.decode(), "content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        return bytes(answer.read())


def make_vhost(amqp_url: str, vhost: str) -> bool:
    """Make ``vhost`` on the local broker ``amqp_url`` names, with every permission for
    the URL's user; True when done.  The management API when it serves that broker
    (milliseconds), else rabbitmqctl (an Erlang VM per call: about a second of CPU)."""
    user = unquote(urlsplit(amqp_url).username or "guest")
    api = _management_api(amqp_url)
    if api is not None:
        name = quote(vhost, safe="")
        try:
            _api_call("PUT", f"{api}/vhosts/{name}", {})
        except OSError:
            return False
        try:
            _api_call("PUT", f"{api}/permissions/{name}/{quote(user, safe='')}",
                      {"configure": ".*", "write": ".*", "read": ".*"})
            return True
        except OSError:
            drop_vhost(amqp_url, vhost)
            return False
    if urlsplit(amqp_url).hostname not in ("localhost", "127.0.0.1", "::1") \
            or not rabbitmqctl("add_vhost", vhost):
        return False
    if rabbitmqctl("set_permissions", "-p", vhost, user, ".*", ".*", ".*"):
        return True
    drop_vhost(amqp_url, vhost)
    return False


def drop_vhost(amqp_url: str, vhost: str) -> bool:
    """Delete ``vhost`` made by :func:`make_vhost` (the same way); True when done."""
    api = _management_api(amqp_url)
    if api is not None:
        try:
            _api_call("DELETE", f"{api}/vhosts/{quote(vhost, safe='')}")
            return True
        except OSError:
            return False
    return rabbitmqctl("delete_vhost", vhost)


def vhost_url(amqp_url: str, vhost: str) -> str:
    """``amqp_url`` with its path naming ``vhost``."""
    return urlunsplit(urlsplit(amqp_url)._replace(path="/" + quote(vhost, safe="")))


@contextlib.contextmanager
def private_vhost(amqp_url: str, prefix: str) -> Iterator[str]:
    """``amqp_url`` on a temporary vhost ``PREFIX-<random>`` (deleted afterwards), or
    ``amqp_url`` itself when none can be made for that broker (not a local host, neither
    its management API nor rabbitmqctl usable)."""
    vhost = f"{prefix}-{uuid.uuid4().hex[:8]}"
    if not make_vhost(amqp_url, vhost):
        yield amqp_url
        return
    try:
        yield vhost_url(amqp_url, vhost)
    finally:
        drop_vhost(amqp_url, vhost)


EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def import_example(name: str, path: Path | None = None) -> ModuleType:
    """Import ``examples/<name>.py`` (or ``path``) once, as module
    ``qmf_async_examples_<name>``."""
    module_name = f"qmf_async_examples_{name}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, path or EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


async def rabbitmqctl_output(*args: str) -> str | None:
    """Run rabbitmqctl without blocking the loop; its stdout, or None when unusable."""
    ctl = shutil.which("rabbitmqctl") or shutil.which("rabbitmqctl", path="/usr/sbin:/sbin")
    if ctl is None:
        return None
    try:
        proc = await asyncio.create_subprocess_exec(
            ctl, "-q", "-s", *args, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE)
    except OSError:
        return None
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), 30)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        return None
    return out.decode() if proc.returncode == 0 else None


async def cut_connection(transport: Any) -> None:
    """Cut the broker connection under one of our transports, as a network fault would
    (the AMQP 0-9-1 connection closed under aiormq, or the AMQP 1.0 socket aborted)."""
    inner = getattr(transport, "inner", None) or transport
    conn = getattr(inner, "_conn", None)
    if hasattr(conn, "close") and hasattr(inner, "_consume_ch"):  # aiormq
        await conn.close(ConnectionError("forced close"))
        return
    writer = getattr(inner, "_writer", None)
    if writer is None:
        raise AssertionError(f"cannot cut the connection of {transport!r}")
    writer.transport.abort()


#: in-process qmf runs go one at a time: stdout, stderr and the environment are the
#: process's
_IN_PROCESS = threading.Lock()


def qmf_in_process(*argv: str, env: dict[str, str | None] | None = None,
                   stdin: str | None = None, timeout: float = 60.0) -> tuple[int, str, str]:
    """Run ``qmf ARGV`` as the ``qmf`` command does (``qmf_async.tools.cli.main``), in
    this process: (exit code, stdout, stderr).  What a subprocess would cost, starting
    Python and importing qmf_async (0.5 s of CPU each), is saved; the tests that check
    the process itself (the entry point, signals, a missing extra) start one.

    ``env`` sets (or, with None, removes) environment variables for the run; ``stdin``
    is what the command reads from standard input (nothing by default).  The
    command runs on a thread of its own (it runs its own event loop, and the caller may
    be inside one), one run at a time; its output is captured from
    ``sys.stdout``/``sys.stderr``.  Raises TimeoutError after ``timeout`` seconds.
    """
    from qmf_async.tools.cli import main

    def run() -> int:
        try:
            return main(list(argv))
        except SystemExit as exc:  # argparse's usage errors and --help
            if exc.code is None or isinstance(exc.code, int):
                return exc.code or 0
            print(exc.code, file=sys.stderr)
            return 1

    out, err = io.StringIO(), io.StringIO()
    with _IN_PROCESS:
        saved = {key: os.environ.get(key) for key in env or {}}
        aiormq_level = logging.getLogger("aiormq").level
        saved_stdin = sys.stdin
        try:
            sys.stdin = io.StringIO(stdin or "")
            _set_environ(env or {})
            pool = concurrent.futures.ThreadPoolExecutor(1)
            try:
                with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                    rc = pool.submit(run).result(timeout)
            finally:
                pool.shutdown(wait=False)  # a run that timed out is left behind
        finally:
            sys.stdin = saved_stdin
            _set_environ(saved)
            logging.getLogger("aiormq").setLevel(aiormq_level)  # main() quiets it
    return rc, out.getvalue(), err.getvalue()


def _set_environ(values: dict[str, str | None]) -> None:
    for key, value in values.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
