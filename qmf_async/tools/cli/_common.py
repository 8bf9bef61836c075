"""What every ``qmf`` subcommand shares: the URL, connecting, errors and exit codes.

The tools use the public API only (``qmf_async`` and ``qmf_async.wire``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import AsyncIterator, Sequence
from typing import Any, TextIO

from qmf_async import (
    AuthenticationError,
    Broker,
    Console,
    MethodError,
    PartialResultError,
    QmfError,
    QmfTimeout,
    Session,
    TransportError,
    UnknownClassError,
    UsageError,
)
from qmf_async.transport import add_connection_arguments, broker_url, connection_arguments

__all__ = [
    "DEFAULT_URL",
    "EXIT_OK",
    "EXIT_ERROR",
    "EXIT_USAGE",
    "EXIT_UNREACHABLE",
    "EXIT_AUTH",
    "EXIT_NOT_FOUND",
    "EXIT_METHOD",
    "EXIT_NO_AGENT",
    "EXIT_LISTEN",
    "EXIT_PIPE",
    "listen_error",
    "ToolError",
    "add_url_argument",
    "add_broker_option",
    "connection_arguments",
    "resolve_url",
    "resolve_urls",
    "connect",
    "exit_code",
    "fail",
    "print_json",
    "note",
    "ConnectionNotes",
    "positive_float",
    "maybe_terminal",
    "require_packages",
]

DEFAULT_URL = "amqp://guest:guest@localhost:5672/"

EXIT_OK = 0
EXIT_ERROR = 1          #: anything else
EXIT_USAGE = 2          #: bad command line or bad URL (argparse uses 2 too)
EXIT_UNREACHABLE = 3    #: the broker cannot be reached, or the connection was lost
EXIT_AUTH = 4           #: the broker refused the login
EXIT_NOT_FOUND = 5      #: unknown class, object, queue, exchange ...
EXIT_METHOD = 6         #: a method call returned an error status
EXIT_NO_AGENT = 7       #: no management agent answered (timeout)
EXIT_LISTEN = 8         #: a server cannot listen on its address (in use, not permitted)
EXIT_PIPE = 141         #: stdout's reader went away (``| head``): 128 + SIGPIPE, as a shell


class ToolError(Exception):
    """An expected failure of a tool: printed as one line, exits with ``code``."""

    def __init__(self, message: str, code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.code = code


#: what ``-b/--broker`` and the URL positional take (help text)
ADDRESS_FORMS = ("an amqp:// or amqps:// URL, or [user[/password]@]host[:port] "
                 "as the qpid tools take it")


def add_url_argument(parser: argparse.ArgumentParser, *, nargs: str = "?",
                     short_broker: bool = True) -> None:
    """The broker URL positional (optional, from QMF_URL, else the local default) and
    ``-b/--broker ADDRESS`` (only ``--broker`` when ``short_broker`` is False)."""
    parser.add_argument("url", nargs=nargs, default=None,
                        help=f"broker: {ADDRESS_FORMS} (default: $QMF_URL or {DEFAULT_URL})")
    add_broker_option(parser, short=short_broker)


def add_broker_option(parser: argparse.ArgumentParser, *, short: bool = True,
                      multiple: bool = False) -> None:
    """``-b/--broker ADDRESS`` (dest ``broker``; a list when ``multiple``) and the TLS and
    SASL flags (:func:`~qmf_async.transport.add_connection_arguments`)."""
    add_connection_arguments(parser)
    flags = ("-b", "--broker") if short else ("--broker",)
    if multiple:
        parser.add_argument(*flags, dest="broker", action="append", default=[],
                            metavar="ADDRESS",
                            help=f"a broker (repeatable): {ADDRESS_FORMS}")
    else:
        parser.add_argument(*flags, dest="broker", default=None, metavar="ADDRESS",
                            help=f"the broker: {ADDRESS_FORMS} (instead of the URL)")


def add_session_options(parser: argparse.ArgumentParser) -> None:
    """``--timeout`` and ``--wait`` of the interactive tools (shell, repl)."""
    parser.add_argument("--timeout", type=float, default=10.0,
                        help="seconds to wait for the broker and for each answer (default 10)")
    parser.add_argument("--wait", type=float, default=3.0,
                        help="without a management broker, seconds to wait for a first "
                             "agent's heartbeat (default 3)")


def resolve_url(url: str | None = None, broker: str | None = None) -> str:
    """The broker URL: ``broker`` (``-b``), else ``url`` (the positional), else
    ``$QMF_URL``, else the local default, through :func:`~qmf_async.transport.broker_url`.

    Raises:
        UsageError: both ``url`` and ``broker`` are given, or the address is malformed.
    """
    if url and broker:
        raise UsageError("give the broker once: as the URL argument or with --broker, "
                         "not both")
    return broker_url(broker or url or os.environ.get("QMF_URL") or DEFAULT_URL)


def resolve_urls(urls: Sequence[str], brokers: Sequence[str] = ()) -> list[str]:
    """The URLs of a multi-broker tool: ``brokers`` (``-b``, repeatable) then ``urls``
    (positionals), each through ``broker_url``; ``[resolve_url()]`` when both are empty.

    Raises:
        UsageError: an address is malformed.
    """
    given = [*brokers, *urls]
    if not given:
        return [resolve_url()]
    return [broker_url(text) for text in given]


@contextlib.asynccontextmanager
async def connect(url: str | None, *, timeout: float = 10.0, query_timeout: float | None = None,
                  broker: str | None = None, connection: dict[str, Any] | None = None,
                  **session_options: Any) -> AsyncIterator[Session]:
    """A session with one broker added (connect ``timeout``; ``query_timeout`` is the
    session's default wait for answers); closed on exit.  ``broker`` is ``-b``'s
    address (see :func:`resolve_url`); ``connection`` holds the ``tls`` and
    ``sasl_mechanisms`` of :func:`~qmf_async.transport.connection_arguments`.

    Raises:
        ToolError: the broker cannot be reached or refused the login (with the exit code).
        UsageError: a malformed address, or both ``url`` and ``broker``.
    """
    target = resolve_url(url, broker)
    if query_timeout is not None:
        session_options["timeout"] = query_timeout
    session = Session(**session_options)
    try:
        try:
            await session.add_broker(target, timeout=timeout, **(connection or {}))
        except QmfTimeout as exc:
            raise ToolError(f"cannot reach the broker: {exc}", EXIT_UNREACHABLE) from exc
        yield session
    finally:
        await session.close()


def exit_code(exc: BaseException) -> int:
    """The exit code of an expected failure."""
    if isinstance(exc, ToolError):
        return exc.code
    if isinstance(exc, AuthenticationError):
        return EXIT_AUTH
    if isinstance(exc, TransportError):
        return EXIT_UNREACHABLE
    if isinstance(exc, UnknownClassError):
        return EXIT_NOT_FOUND
    if isinstance(exc, MethodError):
        return EXIT_METHOD
    if isinstance(exc, (QmfTimeout, PartialResultError)):
        return EXIT_NO_AGENT
    if isinstance(exc, UsageError):
        return EXIT_USAGE
    return EXIT_ERROR


def fail(exc: BaseException, tool: str = "qmf") -> int:
    """Print one line on stderr for an expected failure; return its exit code."""
    if isinstance(exc, MethodError):
        text = f"method failed: status {exc.status}: {exc.text}"
    else:
        text = str(exc) or type(exc).__name__
    print(f"{tool}: error: {text}", file=sys.stderr)
    return exit_code(exc)


def print_json(data: Any) -> None:
    """Machine output: one JSON document on stdout (non-JSON values as strings)."""
    json.dump(data, sys.stdout, indent=2, sort_keys=True, default=str)
    sys.stdout.write("\n")


EXPECTED_ERRORS = (QmfError, ToolError)


def listen_error(host: str, port: int, exc: OSError) -> ToolError:
    """The one-line error of a server that cannot listen on ``host:port`` (exit code
    :data:`EXIT_LISTEN`): ``cannot listen on 0.0.0.0:9469: address already in use``."""
    # asyncio's own text names the address again: the system's words for errno only
    why = (os.strerror(exc.errno) if exc.errno else str(exc) or type(exc).__name__)
    shown = f"[{host}]" if ":" in host else host
    return ToolError(f"cannot listen on {shown}:{port}: {why[:1].lower()}{why[1:]}",
                     EXIT_LISTEN)


def note(tool: str, text: str) -> None:
    """A progress or status note of ``qmf TOOL`` on stderr."""
    print(f"qmf {tool}: {text}", file=sys.stderr, flush=True)


class ConnectionNotes(Console):
    """Connection changes of long-running tools (events, collect) as notes on stderr."""

    def __init__(self, tool: str, quiet: bool) -> None:
        self.tool = tool
        self.quiet = quiet
        self.up: set[int] = set()

    def broker_connected(self, broker: Broker) -> None:
        if id(broker) in self.up:
            return
        if broker.reconnects and not self.quiet:
            note(self.tool, f"reconnected to {broker.where}")
        self.up.add(id(broker))

    def broker_disconnected(self, broker: Broker) -> None:
        self.up.discard(id(broker))
        if not self.quiet:
            note(self.tool, f"lost the connection to {broker.where} ({broker.error}); "
                            "reconnecting")


def positive_float(text: str) -> float:
    """An argparse type: a number above 0 (seconds, mostly).

    Raises:
        argparse.ArgumentTypeError: not a number, or not above 0.
    """
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive: {text!r}")
    return value


def maybe_terminal(stream: TextIO) -> bool:
    """False when rich would surely not take ``stream`` for a terminal (not a tty, and
    neither ``TTY_COMPATIBLE=1`` nor a non-empty ``FORCE_COLOR`` says otherwise): the
    tools then write plain text without importing rich, which a pipe never needs."""
    if os.environ.get("TTY_COMPATIBLE") == "1" or os.environ.get("FORCE_COLOR"):
        return True
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or closed
        return False


def require_packages(*packages: str) -> None:
    """Fail as importing them would when one of ``packages`` is not installed, without
    importing them: a module that draws with rich only on a terminal still needs the
    ``cli`` extra, and ``qmf`` names it (``qmf stat`` on a pipe imports no rich).

    Raises:
        ModuleNotFoundError: a package is missing (``name`` is its name).
    """
    import importlib.util

    for name in packages:
        if importlib.util.find_spec(name) is None:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
