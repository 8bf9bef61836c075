"""What the stat, config, events and queue-stats tools share: rich tables, units,
short timestamps, a progress spinner for slow queries, and the session they query.

Public API only (``qmf_async``) and the sibling ``_common``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from qmf_async import (
    Broker,
    ObjectId,
    QmfObject,
    QmfTimeout,
    QmfType,
    RemoteAgent,
    SchemaClass,
    Session,
    UnknownClassError,
)
from qmf_async.frozen import frozen

from ._common import (
    EXIT_NO_AGENT,
    EXIT_NOT_FOUND,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    ToolError,
    add_url_argument,
    connection_arguments,
    maybe_terminal,
    require_packages,
    resolve_url,
)

require_packages("rich")  # the cli extra, imported where a table or spinner is drawn

if TYPE_CHECKING:  # rich is imported where something is drawn: a pipe needs none of it
    from rich.console import Console as RichConsole

__all__ = [
    "DETAIL_COLUMNS",
    "PACKAGE",
    "Column",
    "Target",
    "add_query_options",
    "close_quietly",
    "detail_rows",
    "err_console",
    "find_column",
    "fmt_bool",
    "fmt_bytes",
    "fmt_count",
    "fmt_duration",
    "fmt_rate",
    "fmt_time",
    "fmt_value",
    "help_text",
    "jsonable",
    "not_found",
    "open_target",
    "out_console",
    "plain",
    "print_json_line",
    "print_rich",
    "progress",
    "render_table",
    "setup_logging",
    "sort_rows",
]

#: the package of qpidd's broker classes (broker, queue, exchange, binding, ...)
PACKAGE = "org.apache.qpid.broker"

# --------------------------------------------------------------------------- consoles


def out_console() -> RichConsole:
    """stdout: colours only on a terminal, no wrapping when piped (wide virtual width)."""
    from rich.console import Console as RichConsole

    probe = RichConsole(highlight=False)
    if probe.is_terminal:
        return probe
    return RichConsole(highlight=False, width=4096, soft_wrap=True)


def err_console() -> RichConsole:
    from rich.console import Console as RichConsole

    return RichConsole(stderr=True, highlight=False)


def help_text(doc: str | None) -> str:
    """A module docstring as --help text (without the reST quoting)."""
    return (doc or "").replace("``", "")


def setup_logging(verbose: bool = False) -> None:
    """Library warnings as ``qmf: ...`` lines on stderr; aiormq's own chatter only with -v
    (its failures reach the tools as qmf-async errors anyway)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("qmf: %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO if verbose else logging.WARNING)
    for noisy in ("aiormq", "pamqp"):
        logging.getLogger(noisy).setLevel(logging.INFO if verbose else logging.CRITICAL + 1)
    # a lost connection reaches the tools as an error (or an events note) already
    logging.getLogger("qmf_async.transport").setLevel(logging.INFO if verbose else logging.ERROR)
    if not verbose:
        logging.getLogger("qmf_async.session").addFilter(_NoConnectRaceNoise())


class _NoConnectRaceNoise(logging.Filter):
    """Drop the warning about a body held for its schema while the connection was not
    (yet, or any more) up: an ``agent`` object broadcast arriving while the session
    connects or closes, which the tool does not need."""

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        return not ("held for unknown schemas" in text
                    and ("not connected" in text or "session closed" in text))


class _OnlyErrors(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.ERROR


async def close_quietly(session: Session) -> None:
    """Close ``session`` at the end of a tool, muting the library's warnings about what
    closing interrupts (bodies still waiting for a schema, whose fetch fails once the
    connection is gone, also just after ``close`` returned)."""
    logging.getLogger("qmf_async.session").addFilter(_OnlyErrors())
    await session.close()


@contextlib.asynccontextmanager
async def progress(message: str, *, delay: float = 0.5) -> AsyncIterator[None]:
    """A spinner on stderr while the body runs, if stderr is a terminal and the body
    takes longer than ``delay`` seconds."""
    console = err_console() if maybe_terminal(sys.stderr) else None
    if console is None or not console.is_terminal:
        yield
        return
    status = console.status(message, spinner="dots")

    async def show() -> None:
        await asyncio.sleep(delay)
        status.start()

    task = asyncio.ensure_future(show())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        status.stop()


# --------------------------------------------------------------------------- units


def fmt_count(value: Any) -> str:
    """An integer with thousands separators ("" for None)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.2f}"
    return str(value)


def fmt_bytes(value: Any) -> str:
    """A byte count with a binary unit: ``512 B``, ``20.8 KiB``, ``1.2 GiB``."""
    if value is None:
        return ""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return str(value)
    size = float(value)
    if abs(size) < 1024:
        return f"{int(size)} B"
    for unit in ("KiB", "MiB", "GiB", "TiB", "PiB"):
        size /= 1024
        if abs(size) < 1024 or unit == "PiB":
            return f"{size:.1f} {unit}"
    return str(value)  # pragma: no cover


def fmt_duration(ns: Any) -> str:
    """A duration in ns as ``45s``, ``3m 07s``, ``2h 05m``, ``4d 03h``."""
    if ns is None:
        return ""
    if not isinstance(ns, (int, float)) or isinstance(ns, bool):
        return str(ns)
    seconds = ns / 1e9
    if seconds < 10:
        return f"{seconds:.1f}s"
    whole = int(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m {whole % 60:02d}s"
    if whole < 86400:
        return f"{whole // 3600}h {whole % 3600 // 60:02d}m"
    return f"{whole // 86400}d {whole % 86400 // 3600:02d}h"


def fmt_time(ns: Any, *, now: float | None = None) -> str:
    """A timestamp in ns since the epoch, short: ``14:02:11`` today, else
    ``2024-05-01 14:02``; ``-`` for 0."""
    if not ns:
        return "-"
    import datetime  # here: most views show no timestamp

    when = datetime.datetime.fromtimestamp(ns / 1e9)
    today = datetime.datetime.fromtimestamp(time.time() if now is None else now).date()
    if when.date() == today:
        return when.strftime("%H:%M:%S")
    return when.strftime("%Y-%m-%d %H:%M")


def fmt_rate(value: float | None) -> str:
    """A per-second rate with two decimals (``-`` when unknown)."""
    return "-" if value is None else f"{value:,.2f}"


def fmt_bool(value: Any) -> str:
    """qpid-stat's flags: ``Y`` for true, blank otherwise."""
    return "Y" if value else ""


def _fmt_map(value: Mapping[Any, Any]) -> str:
    if not value:
        return "{}"
    return "{" + ", ".join(f"{k}={_plain(v)}" for k, v in value.items()) + "}"


def plain(value: Any) -> str:
    """A value as text without units (maps as ``{k=v, ...}``, bytes decoded)."""
    return _plain(value)


def _plain(value: Any) -> str:
    if isinstance(value, bytes):
        try:
            return value.decode()
        except UnicodeDecodeError:
            return value.hex()
    if isinstance(value, Mapping):
        return _fmt_map(value)
    return str(value)


def fmt_value(value: Any, qmf_type: QmfType | None = None, unit: str | None = None) -> str:
    """A property or statistic value for people, by its QMF type and unit."""
    if value is None:
        return ""
    if qmf_type == QmfType.ABSTIME:
        return fmt_time(value)
    if qmf_type == QmfType.DELTATIME:
        return fmt_duration(value)
    if unit == "octet" and isinstance(value, int):
        return fmt_count(value) if value < 1024 else f"{value:,} ({fmt_bytes(value)})"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return fmt_count(value)
    if isinstance(value, float):
        return f"{value:,.3f}"
    return _plain(value)


# --------------------------------------------------------------------------- tables


@frozen(slots=True)
class Column:
    """One column of a table: the row key, its header, how to show a value."""

    key: str
    header: str
    fmt: Callable[[Any], str] = lambda v: "" if v is None else _plain(v)
    numeric: bool = False


def find_column(columns: Sequence[Column], name: str) -> Column:
    """The column named ``name`` (header or key, any case).

    Raises:
        ToolError: no such column (usage exit code; the message lists the columns).
    """
    want = name.lower()
    for col in columns:
        if want in (col.key.lower(), col.header.lower()):
            return col
    names = ", ".join(c.header for c in columns)
    raise ToolError(f"no column {name!r} to sort by (columns: {names})", EXIT_USAGE)


def _sort_key(value: Any) -> tuple[int, Any]:
    if value is None:
        return (0, 0)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (1, value)
    if isinstance(value, bool):
        return (1, int(value))
    return (2, str(value))


def sort_rows(rows: list[dict[str, Any]], column: Column, *, increasing: bool
              ) -> list[dict[str, Any]]:
    """Rows sorted by the raw values of ``column`` (numbers before text)."""
    return sorted(rows, key=lambda r: _sort_key(r.get(column.key)), reverse=not increasing)


def render_table(columns: Sequence[Column], rows: Iterable[Mapping[str, Any]], *,
                 title: str | None = None, console: RichConsole | None = None,
                 show_header: bool = True) -> None:
    """Print an aligned table (header rule, no borders) on stdout."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    table = Table(box=box.SIMPLE_HEAD, title=title, title_justify="left", show_edge=False,
                  pad_edge=False, highlight=False, title_style="bold",
                  show_header=show_header)
    for col in columns:
        table.add_column(col.header, justify="right" if col.numeric else "left",
                         no_wrap=True)
    for row in rows:
        table.add_row(*(Text(col.fmt(row.get(col.key))) for col in columns))
    print_rich(table, console)


def print_rich(renderable: Any, console: RichConsole | None = None) -> None:
    """Print on stdout; when piped, without the trailing blanks of padded cells."""
    console = console or out_console()
    if console.is_terminal:
        need = console.measure(renderable, options=console.options.update_width(100_000)).maximum
        if need > console.width:  # never squeeze or crop: let the terminal wrap
            from rich.console import Console as RichConsole

            console = RichConsole(highlight=False, width=need, force_terminal=True)
        console.print(renderable)
        return
    with console.capture() as captured:
        console.print(renderable)
    text = "\n".join(line.rstrip() for line in captured.get().splitlines())
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def detail_rows(obj: QmfObject) -> list[dict[str, Any]]:
    """Every property and statistic of ``obj`` with its kind, unit and description."""
    schema: SchemaClass = obj.get_schema()
    props, stats = obj.get_properties(), obj.get_statistics()
    rows: list[dict[str, Any]] = []
    for p in schema.properties:
        if p.name in props:
            rows.append({"kind": "property", "name": p.name, "value": props[p.name],
                         "text": fmt_value(props[p.name], p.type, p.unit),
                         "unit": p.unit or "", "desc": p.desc or ""})
    for s in schema.statistics:
        if s.name in stats:
            rows.append({"kind": "statistic", "name": s.name, "value": stats[s.name],
                         "text": fmt_value(stats[s.name], s.type, s.unit),
                         "unit": s.unit or "", "desc": s.desc or ""})
    return rows


DETAIL_COLUMNS = (
    Column("kind", "Type", lambda v: "config" if v == "property" else "inst"),
    Column("name", "Element"),
    Column("text", "Value", numeric=False),
    Column("unit", "Unit"),
    Column("desc", "Description"),
)


# --------------------------------------------------------------------------- JSON


def jsonable(value: Any) -> Any:
    """``value`` with object ids, UUIDs and bytes as text, maps and lists walked."""
    if isinstance(value, (ObjectId, uuid.UUID)):
        return str(value)
    if isinstance(value, bytes):
        try:
            return value.decode()
        except UnicodeDecodeError:
            return value.hex()
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return value


def print_json_line(data: Any) -> None:
    """One compact JSON document per line on stdout (flushed: for pipes and tests)."""
    sys.stdout.write(json.dumps(jsonable(data), sort_keys=True, default=str) + "\n")
    sys.stdout.flush()


# --------------------------------------------------------------------------- the bus


def add_query_options(parser: argparse.ArgumentParser, *, url: bool = True,
                      json_help: str = "machine output (JSON)") -> None:
    """URL and -b/--broker, --json, -t/--timeout, --agent, --discover and -v, as every
    query tool has them (``url=False``: neither the URL nor -b/--broker)."""
    if url:
        add_url_argument(parser)
    parser.add_argument("--json", action="store_true", help=json_help)
    parser.add_argument("-t", "--timeout", type=_positive, default=10.0, metavar="S",
                        help="seconds to wait for answers (default 10)")
    parser.add_argument("--agent", metavar="LABEL", default=None,
                        help="ask only the agent(s) with this label")
    parser.add_argument("--discover", type=_positive, default=10.0, metavar="S",
                        help="without a management broker, wait this long for an agent's "
                             "heartbeat (default 10)")
    parser.add_argument("--qmf-version", type=int, choices=(1, 2), default=None,
                        help="QMF version of the queries (default: v1 where the broker "
                             "answers it, qpidd included, which is the fast path; else v2)")
    parser.add_argument("-v", "--verbose", action="store_true", help="log what happens")


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive: {text!r}")
    return value


def _is_broker_agent(agent: RemoteAgent) -> bool:
    """The management broker's own agent (``<brokerBank>.0``)."""
    return agent.agent_bank == 0


class Target:
    """A tool's session and the agents it asks (all, or those with ``--agent``)."""

    def __init__(self, session: Session, where: str, *, label: str | None,
                 timeout: float) -> None:
        self.session = session
        self.where = where
        self.label = label
        self.timeout = timeout

    def agents(self) -> list[RemoteAgent] | None:
        """The agents to ask, or None for every agent."""
        if self.label is None:
            return None
        return [a for a in self.session.get_agents() if a.label == self.label]

    async def objects(self, cls: str, *, package: str = PACKAGE, what: str | None = None,
                      **equals: Any) -> list[QmfObject]:
        """Live objects of ``package:cls`` (a spinner while slow); none when no
        known schema has that class (callers explain it with :meth:`require_class`)."""
        async with progress(f"querying {what or cls} objects on {self.where} ..."):
            agents = self.agents()
            if agents is not None and not agents:
                raise self._no_such_agent()
            found: list[QmfObject] = []
            try:
                if agents is None:
                    found = await self.session.get_objects(_class=cls, _package=package,
                                                           _timeout=self.timeout, **equals)
                else:
                    for agent in agents:
                        found.extend(await self.session.get_objects(
                            _class=cls, _package=package, _agent=agent,
                            _timeout=self.timeout, **equals))
            except UnknownClassError:
                return []
        return [o for o in found if not o.is_deleted()]

    def _no_such_agent(self) -> ToolError:
        labels = sorted({a.label or "?" for a in self.session.get_agents()})
        return ToolError(f"no agent labelled {self.label!r} on {self.where} "
                         f"(agents: {', '.join(labels) or 'none'})", EXIT_NO_AGENT)

    async def class_known(self, cls: str, *, package: str = PACKAGE) -> bool:
        """Whether some agent on the bus serves ``package:cls`` (asks for the schema)."""
        async with progress(f"looking for class {cls} on {self.where} ..."):
            packages = await self.session.get_packages(_timeout=self.timeout)
            if package not in packages:
                return False
            keys = await self.session.get_classes(package, _timeout=self.timeout)
        return any(k.name == cls for k in keys)

    async def require_class(self, cls: str, *, package: str = PACKAGE,
                            what: str | None = None) -> None:
        """Fail clearly when nobody serves ``package:cls``.

        Raises:
            ToolError: only the management broker answers (no-agent code), or the
                agents there do not serve that class (not-found code).
        """
        if await self.class_known(cls, package=package):
            return
        others = [a for a in self.session.get_agents() if not _is_broker_agent(a)]
        if not others:
            raise ToolError(f"no management agent answers on {self.where} (nothing serves "
                            f"{package}:{cls})", EXIT_NO_AGENT)
        raise ToolError(f"no agent on {self.where} serves {package}:{cls}: "
                        f"{what or cls} are not managed on this bus", EXIT_NOT_FOUND)

    async def broker_object(self) -> QmfObject:
        """The one ``broker`` object whose methods configure the bus.

        Raises:
            ToolError: none (no agent / not found) or several (use --agent).
        """
        brokers = await self.objects("broker")
        if not brokers:
            await self.require_class("broker", what="brokers")
            raise ToolError(f"no broker object on {self.where}", EXIT_NOT_FOUND)
        if len(brokers) > 1:
            labels = ", ".join(sorted({_label(b.get_agent()) for b in brokers}))
            raise ToolError(f"{len(brokers)} broker objects answer on {self.where} (agents: "
                            f"{labels}): choose one with --agent LABEL", EXIT_USAGE)
        return brokers[0]


def _label(agent: RemoteAgent | None) -> str:
    return agent.label if agent is not None and agent.label else "?"


async def _discover(session: Session, where: str, *, label: str | None,
                    wait: float) -> None:
    """Without a management broker, wait for the first (or the labelled) agent's heartbeat.

    Raises:
        ToolError: no agent at all was heard (no-agent code).
    """
    if any(b.has_management for b in session.brokers):
        return  # the management broker listed its agents already
    with contextlib.suppress(QmfTimeout):
        async with progress(f"waiting for agents on {where} ..."):
            await session.wait_for_agents(1, timeout=wait, label=label)
        return
    if session.get_agents():
        return  # the label check reports which agents there are
    raise ToolError(f"no management agent answers on {where} (no management broker, and "
                    f"no agent heartbeat within {wait:g}s)", EXIT_NO_AGENT)


@contextlib.asynccontextmanager
async def open_target(args: argparse.Namespace, **session_options: Any
                      ) -> AsyncIterator[Target]:
    """Connect to ``args.url`` and find the agents; closed on exit.

    Raises:
        ToolError: unreachable (also when connecting times out) or no agent answers.
        UsageError, TransportError, AuthenticationError: from ``add_broker``.
    """
    url = resolve_url(getattr(args, "url", None), getattr(args, "broker", None))
    connection = connection_arguments(args)
    session_options.setdefault("timeout", args.timeout)
    session_options.setdefault("broker_timeout", min(2.0, args.timeout))
    # queries need neither the published objects nor the events
    session_options.setdefault("rcv_objects", False)
    session_options.setdefault("rcv_events", False)
    # v1 queries are the fast path, and qpidd answers them whatever its --mgmt-qmf1
    # (its v2 answers cost it 20-40 times more: docs/qmf-versions.md); without a v1
    # management broker on a bus that carries QMF v2 (the transport says), v2
    chosen = getattr(args, "qmf_version", None)
    session_options.setdefault("qmf_version", chosen or 1)
    session = Session(**session_options)
    try:
        try:
            async with progress(f"connecting to {url.split('@')[-1]} ..."):
                broker = await session.add_broker(url, timeout=args.timeout, **connection)
                if chosen is None and _carries_v2(broker) and not broker.has_management:
                    await close_quietly(session)
                    session_options["qmf_version"] = 2
                    session = Session(**session_options)
                    broker = await session.add_broker(url, timeout=args.timeout,
                                                      **connection)
        except QmfTimeout as exc:
            raise ToolError(f"cannot reach the broker: {exc}", EXIT_UNREACHABLE) from exc
        await _discover(session, broker.where, label=args.agent, wait=args.discover)
        yield Target(session, broker.where, label=args.agent, timeout=args.timeout)
    finally:
        await close_quietly(session)


def _carries_v2(broker: Broker) -> bool:
    """Whether ``broker``'s bus carries QMF v2, as its transport declares it
    (``Capabilities.qmf_v2``: qpidd over AMQP 1.0)."""
    transport = broker.transport
    return transport is not None and transport.capabilities.qmf_v2


def not_found(what: str, name: str, where: str) -> ToolError:
    return ToolError(f"no {what} named {name!r} on {where}", EXIT_NOT_FOUND)
