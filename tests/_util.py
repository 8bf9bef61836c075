"""Test helpers shared by the test modules."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import inspect
import shutil
import subprocess
import sys
import time
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


@contextlib.contextmanager
def private_vhost(amqp_url: str, prefix: str) -> Iterator[str]:
    """``amqp_url`` on a temporary vhost ``PREFIX-<random>`` (deleted afterwards), or
    ``amqp_url`` itself when rabbitmqctl cannot make one for that broker (not a local
    host, rabbitmqctl missing or failing)."""
    parts = urlsplit(amqp_url)
    vhost = f"{prefix}-{uuid.uuid4().hex[:8]}"
    user = unquote(parts.username) if parts.username else "guest"
    local = parts.hostname in ("localhost", "127.0.0.1", "::1")
    if not (local and rabbitmqctl("add_vhost", vhost)):
        yield amqp_url
        return
    try:
        if rabbitmqctl("set_permissions", "-p", vhost, user, ".*", ".*", ".*"):
            yield urlunsplit(parts._replace(path="/" + quote(vhost, safe="")))
        else:
            yield amqp_url
    finally:
        rabbitmqctl("delete_vhost", vhost)


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
