"""``qmf shell``: an interactive management shell in the spirit of qpid-tool.

    qmf shell [URL]                      # prompt with history and tab completion
    printf 'list\\nlist queue\\n' | qmf shell [URL]   # commands from stdin, no prompt

Commands (``help`` in the shell): ``list``, ``list CLASS [active|all]``, ``show ID...``
(ranges such as ``101-103``), ``schema [CLASS]``, ``agents``, ``call ID METHOD ARGS...``,
``events on|off``, ``set time-format short|long``, ``wait SECONDS``, ``help``,
``quit``/``exit``/EOF.

Objects get short numeric ids as in qpid-tool: the first object seen is 101, and an
object keeps its id for the life of the shell.  The shell keeps the latest proxy of
every object it has seen (and the deleted ones, for ``list CLASS all``); ``list`` asks
the agents again, and the session's object updates replace them in the background, so
``show`` prints current values.  Merging an update's properties and statistics with
what was known, and completing an object first seen through one part, is the
session's object view's work (``Session.object_updates``), not the shell's.

The command logic is the :class:`Shell` class (``await shell.execute(line)`` returns
the output text), separate from the terminal: with a terminal the prompt is
prompt_toolkit's; without one (stdin or stdout not a TTY) commands are read line by
line from stdin and nothing else is printed.  In that mode errors go to stderr and the
exit code is that of the first failed command (0 when every command succeeded).

The session reconnects by itself after a lost connection (a broker restart): one line
says the connection is lost, one that it is back; commands in between fail with one
line, and after the reconnection the shell asks for its objects again.  Errors are one
line; ``--debug`` adds the tracebacks behind them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import re
import shlex
import signal
import sys
import time
import traceback
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, TextIO

from qmf_async import (
    Access,
    Broker,
    ClassKey,
    ClassKind,
    ConnectionLostError,
    Console,
    Event,
    MethodError,
    ObjectId,
    PartialResultError,
    QmfError,
    QmfObject,
    QmfTimeout,
    QmfType,
    RemoteAgent,
    SchemaArgument,
    SchemaClass,
    Session,
    TransportError,
)
from qmf_async.names import is_console_queue

from ._common import (
    EXIT_ERROR,
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    ToolError,
    add_session_options,
    add_url_argument,
    connection_arguments,
    exit_code,
    resolve_url,
)

__all__ = ["FIRST_ID", "Shell", "ShellError", "ShellExit", "add_parser", "history_file",
           "managed_session", "one_line_logging", "run"]

#: the short id of the first object the shell sees (as qpid-tool numbers them)
FIRST_ID = 101
#: deleted objects kept in the cache (``list CLASS all``); the oldest are forgotten
MAX_DELETED = 1000
PROMPT = "qmf: "

COMMANDS = ("list", "show", "schema", "agents", "call", "events", "set", "wait", "help",
            "quit", "exit")

HELP = """\
Management shell for QMF (qpid-tool's commands)
Commands:
    list                       - summary of the objects by class (asks the agents)
    list CLASS                 - the objects of a class: id, created, destroyed, index
    list CLASS active          - the contents of the class's live objects
    list CLASS all             - the contents of all its objects, deleted ones too
    show ID...                 - the contents of objects; ranges allowed: show 101-103 105
    schema                     - summary of the classes known on the bus
    schema CLASS               - the properties, statistics, methods (or arguments) of a class
    agents                     - the agents known on the bus
    call ID METHOD ARGS...     - invoke a method; arguments in schema order or as name=value;
                                 quote strings with spaces, maps and lists as JSON:
                                 call 102 create queue q1 '{"durable": true}' false
    events on|off              - print events as they arrive
    set time-format short|long - time stamps as 12:00:01 or 2024-05-01 12:00:01
    wait SECONDS               - pause (scripts: let events or updates arrive)
    help                       - this text
    quit, exit or ^D           - leave the shell
CLASS is a class name (queue) or package:name; IDs are the numbers list prints."""

_INT_TYPES = frozenset({
    QmfType.UINT8, QmfType.UINT16, QmfType.UINT32, QmfType.UINT64, QmfType.INT8,
    QmfType.INT16, QmfType.INT32, QmfType.INT64, QmfType.ABSTIME, QmfType.DELTATIME,
})
_TRUE = frozenset({"true", "yes", "y", "on", "1"})
_FALSE = frozenset({"false", "no", "n", "off", "0"})
_ACCESS_NAMES = {Access.RC: "ReadCreate", Access.RW: "ReadWrite", Access.RO: "ReadOnly"}
_NULL_OID = ObjectId(bytes(16))
#: commands that never ask the bus (they do not wait for a resync)
_LOCAL_COMMANDS = frozenset({"help", "quit", "exit", "set", "wait", "events"})
_RANGE = re.compile(r"(\d+)-(\d+)")
_OBJECT_ID = re.compile(r"\d+-\d+-\d+-\d+-\d+")


class ShellError(Exception):
    """A command failed; the message is one line, ``code`` the exit code it maps to."""

    def __init__(self, message: str, code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.code = code


class ShellExit(Exception):
    """``quit`` or ``exit`` was entered."""


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, MethodError):
        return f"method failed: {exc}"
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _table(headers: Iterable[str], rows: Iterable[Iterable[str]], indent: str = "  "
           ) -> list[str]:
    """A plain-text table: a header, a rule of ``=`` and the rows, columns padded."""
    head = list(headers)
    body = [list(r) for r in rows]
    widths = [max([len(h), *(len(r[i]) for r in body)]) for i, h in enumerate(head)]

    def line(cells: list[str]) -> str:
        return (indent + "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True))).rstrip()

    return [line(head), indent + "=" * (sum(widths) + 2 * (len(widths) - 1)),
            *(line(r) for r in body)]


def _class_name(key: ClassKey) -> str:
    return f"{key.package}:{key.name}"


class _ConnectionWatch(Console):
    """The shell's view of connection changes, installed as the session's console; every
    callback is also passed on to the console it replaced (``prior``)."""

    def __init__(self, shell: Shell, prior: Console | None) -> None:
        self.shell = shell
        self.prior = prior

    def _pass_on(self, name: str, *args: Any) -> Any:
        fn = getattr(self.prior, name, None) if self.prior is not None else None
        return fn(*args) if fn is not None else None

    def broker_connected(self, broker: Broker) -> Any:
        self.shell._connection_up(broker)
        return self._pass_on("broker_connected", broker)

    def broker_disconnected(self, broker: Broker) -> Any:
        self.shell._connection_down(broker)
        return self._pass_on("broker_disconnected", broker)

    def broker_connection_failed(self, broker: Broker, error: BaseException) -> Any:
        self.shell._connection_down(broker)
        return self._pass_on("broker_connection_failed", broker, error)


def _forwarder(name: str) -> Callable[..., Any]:
    def forward(self: _ConnectionWatch, *args: Any) -> Any:
        return self._pass_on(name, *args)

    forward.__name__ = name
    return forward


for _name in [n for n in vars(Console) if not n.startswith("_")]:
    if _name not in vars(_ConnectionWatch):
        setattr(_ConnectionWatch, _name, _forwarder(_name))


class _Entry:
    """What the shell knows of one object: the latest proxy the session handed out
    (merged by the session's object view: it answers every property and statistic
    received), when the shell got it, and when the object was deleted."""

    __slots__ = ("deleted", "obj", "seen")

    def __init__(self, obj: QmfObject, now: float) -> None:
        self.obj = obj
        self.deleted = obj.get_timestamps()[2]
        self.seen = now

    @property
    def props(self) -> dict[str, Any]:
        return self.obj.get_properties()

    @property
    def stats(self) -> dict[str, Any]:
        return self.obj.get_statistics()

    @property
    def key(self) -> tuple[str, str]:
        k = self.obj.get_class_key()
        return k.package, k.name

    @property
    def schema(self) -> SchemaClass:
        return self.obj.get_schema()

    @property
    def updated(self) -> int:
        return self.obj.get_timestamps()[0]

    @property
    def created(self) -> int:
        return self.obj.get_timestamps()[1]


class Shell:
    """The shell's commands over a connected :class:`~qmf_async.Session`, without I/O.

    ``async with Shell(session, emit=print) as shell: print(await shell.execute("list"))``.
    ``emit`` receives text produced in the background (events), ``note`` the connection
    notes (``emit`` when not given).  :meth:`execute` returns a command's output; it
    raises :class:`ShellError` (one line) when the command fails and :class:`ShellExit`
    for ``quit``.

    With a session that reconnects (``Session(manage_connections=True)``) the shell
    notes the loss and the return of each broker connection; after a reconnection it
    asks for the classes and objects again, and short ids follow their objects (an
    object that came back under a new object id keeps its short id; one that did not
    come back is marked deleted).
    """

    def __init__(self, session: Session, *, emit: Callable[[str], None] | None = None,
                 note: Callable[[str], None] | None = None,
                 time_format: str = "short", console_queues: bool = False) -> None:
        self.session = session
        #: list the consoles' own reply and topic queues too (left out by default)
        self.console_queues = console_queues
        self.emit: Callable[[str], None] = emit or (lambda text: print(text, flush=True))
        self.note: Callable[[str], None] = note or self.emit
        self.time_format = time_format
        self._objects: dict[ObjectId, _Entry] = {}
        self._short: dict[ObjectId, int] = {}
        self._by_short: dict[int, ObjectId] = {}
        self._next_short = FIRST_ID
        #: brokers (by id()) whose connection is down, and the first short id given
        #: since the first of them went down
        self._down: set[int] = set()
        self._mark = FIRST_ID
        self._watch: _ConnectionWatch | None = None
        self._resync_task: asyncio.Task[None] | None = None
        self._classes: dict[ClassKey, SchemaClass] = {}
        self._tasks: list[asyncio.Task[Any]] = []
        self._subscriptions: list[Any] = []
        self._event_sub: Any = None
        self._commands: dict[str, Callable[[list[str]], Awaitable[str]]] = {
            "list": self._list, "show": self._show, "schema": self._schema,
            "agents": self._agents, "call": self._call, "events": self._events,
            "set": self._set, "wait": self._wait, "help": self._help,
            "quit": self._quit, "exit": self._quit,
        }

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> list[str]:
        """Learn the classes on the bus and their objects (short ids are given in the
        order of the class names), then follow object updates.

        Returns warnings (one line each) for what could not be learned; the shell
        works without it and retries when a command needs the classes.
        """
        # subscribe first so nothing is missed; merge what arrived once the initial
        # queries are in, so that the short ids follow the classes' order
        updates = self.session.object_updates()
        self._subscriptions.append(updates)
        if self._watch is None:
            self._watch = _ConnectionWatch(self, self.session.console)
            self.session.console = self._watch
        warnings: list[str] = []
        try:
            await self.load_classes()
        except QmfError as exc:
            warnings.append(f"warning: the classes on the bus are not known yet: "
                            f"{_one_line(exc)}")
        else:
            for key in self._object_classes():
                more, _ = await self._refresh_all([key])
                warnings += more
        self._tasks.append(asyncio.create_task(self._follow_updates(updates),
                                               name="qmf-shell-updates"))
        return warnings

    async def close(self) -> None:
        """Stop the background tasks (idempotent)."""
        if self._watch is not None:
            if self.session.console is self._watch:
                self.session.console = self._watch.prior
            self._watch = None
        self._stop_events()
        for sub in self._subscriptions:
            sub.close()
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(BaseException):
                await task

    async def __aenter__(self) -> Shell:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ------------------------------------------------------------------ the cache

    def short_id(self, oid: ObjectId) -> int:
        """The object's short id, assigned on first sight (101, 102, ...)."""
        sid = self._short.get(oid)
        if sid is None:
            sid = self._short[oid] = self._next_short
            self._next_short += 1
            self._by_short[sid] = oid
        return sid

    def object_id(self, short: int) -> ObjectId | None:
        """The object id behind a short id, or None."""
        return self._by_short.get(short)

    def cached(self, class_name: str | None = None, *, deleted: bool = False
               ) -> dict[int, QmfObject]:
        """The cached objects (of a class name, live ones unless ``deleted``) by short id:
        the latest proxy of each (for calls; a statistics-only update carries no
        properties: :meth:`values` has everything merged)."""
        out = {}
        for oid, entry in self._objects.items():
            if class_name is not None and entry.key[1] != class_name:
                continue
            if (entry.deleted and not deleted) or self._hidden(entry):
                continue
            out[self.short_id(oid)] = entry.obj
        return dict(sorted(out.items()))

    def _hidden(self, entry: _Entry) -> bool:
        """A console's own reply or topic queue, left out of the listings unless
        ``console_queues`` (``show ID`` still shows it)."""
        if self.console_queues or entry.key[1] != "queue":
            return False
        name = entry.props.get("name")
        return isinstance(name, str) and is_console_queue(name)

    def values(self, short: int) -> dict[str, Any]:
        """Merged properties and statistics of a cached object.

        Raises:
            ShellError: no such object in the cache.
        """
        entry = self._entry(short)
        return {**entry.props, **entry.stats}

    def _entry(self, short: int) -> _Entry:
        oid = self._by_short.get(short)
        entry = self._objects.get(oid) if oid is not None else None
        if entry is None:
            raise ShellError(f"no object {short}", EXIT_NOT_FOUND)
        return entry

    def describe(self, short: int) -> str:
        """What a short id is: ``queue orders`` (class and name, else index), with
        ``(deleted)`` for an object that no longer exists; "" for an unknown id."""
        oid = self._by_short.get(short)
        entry = self._objects.get(oid) if oid is not None else None
        if entry is None:
            return ""
        name = entry.props.get("name")
        label = self.format_value(name) if name is not None else self._index(entry)
        text = f"{entry.key[1]} {label}".rstrip()
        return f"{text} (deleted)" if entry.deleted else text

    def _merge(self, obj: QmfObject) -> None:
        """Take a proxy (from a query or an update) into the cache, newest sample wins
        (an update's proxy is merged already: the session's object view)."""
        oid = obj.get_object_id()
        self.short_id(oid)
        now = time.monotonic()
        entry = self._objects.get(oid)
        if entry is None:
            self._objects[oid] = _Entry(obj, now)
            self._classes.setdefault(obj.get_class_key(), obj.get_schema())
            if obj.is_deleted():
                self._prune()
            return
        stamp, _, deleted = obj.get_timestamps()
        if stamp < entry.updated and not deleted:
            return  # an older sample than the one held (a query raced an update)
        entry.obj = obj
        entry.seen = now
        was_deleted, entry.deleted = entry.deleted, deleted
        if deleted and not was_deleted:
            self._prune()

    def _mark_deleted(self, entry: _Entry) -> None:
        if not entry.deleted:
            entry.deleted = time.time_ns()
            self._prune()

    def _prune(self) -> None:
        gone = [(e.deleted, oid) for oid, e in self._objects.items() if e.deleted]
        if len(gone) > MAX_DELETED:
            gone.sort(key=lambda item: item[0])
            for _, oid in gone[:len(gone) - MAX_DELETED]:
                del self._objects[oid]

    async def _follow_updates(self, updates: Any) -> None:
        with contextlib.suppress(ConnectionLostError):  # the connection note says it
            await self._merge_updates(updates)

    async def _merge_updates(self, updates: Any) -> None:
        async for obj in updates:
            try:
                self._merge(obj)
            except Exception as exc:  # a malformed update must not stop the follower
                self.emit(f"warning: update of {obj!r} ignored: {exc}")

    async def refresh(self, key: tuple[str, str]) -> list[str]:
        """Ask the agents for every object of class (package, name) and merge them;
        cached live objects the agents no longer have are marked deleted.

        Returns warnings (agents that did not answer completely).

        Raises:
            QmfError: the query failed altogether.
        """
        started = time.monotonic()
        found, complete, warnings = await self._fetch(key)
        self._apply(key, found, complete, started)
        return warnings

    async def _fetch(self, key: tuple[str, str]) -> tuple[list[QmfObject], bool, list[str]]:
        """The objects of a class: (objects, whether every agent answered, warnings).

        Raises:
            QmfError: the query failed altogether.
        """
        try:
            found = await self.session.get_objects(_class=key[1], _package=key[0])
        except PartialResultError as exc:
            return ([o for o in exc.partial if isinstance(o, QmfObject)], False,
                    [f"warning: {key[0]}:{key[1]}: {_one_line(exc)}"])
        return found, True, []

    def _apply(self, key: tuple[str, str], found: list[QmfObject], complete: bool,
               started: float) -> None:
        """Merge a query's answer; when it is complete, the cached live objects of the
        class that it lacks are marked deleted -- only those of agents known now (that
        answered): an object is never marked deleted for want of an answer (an agent
        that timed out, left, or stopped heartbeating because its broker stalled)."""
        for obj in found:
            self._merge(obj)
        if complete:
            present = {o.get_object_id() for o in found}
            answered = {(id(a.broker), a.broker_bank, a.agent_bank)
                        for a in self.session.get_agents()}
            for oid, entry in list(self._objects.items()):
                if (entry.key == key and not entry.deleted and oid not in present
                        and entry.seen < started
                        and (id(entry.obj.get_broker()), *oid.agent_key()) in answered):
                    self._mark_deleted(entry)

    # ------------------------------------------------------------------ connections

    def _connection_down(self, broker: Broker) -> None:
        if id(broker) in self._down:
            return  # a failed reconnection attempt: already said
        if not self._down:
            self._mark = self._next_short
        self._down.add(id(broker))
        if self.session.manage_connections:
            self.note(f"connection to {broker.where} lost; reconnecting ...")
        else:
            self.note(f"connection to {broker.where} lost")

    def _connection_up(self, broker: Broker) -> None:
        if id(broker) not in self._down:
            return
        self._down.discard(id(broker))
        self.note(f"reconnected to {broker.where}")
        previous = self._resync_task
        if previous is not None and not previous.done():
            previous.cancel()
        task = self._resync_task = asyncio.create_task(self._resync(), name="qmf-shell-resync")
        self._tasks.append(task)
        task.add_done_callback(self._forget)

    async def _resync(self) -> None:
        """After a reconnection: the classes and every class's objects again.  Objects
        that came back under another object id (a restarted broker numbers them anew)
        keep their short ids; those that did not come back are marked deleted."""
        started = time.monotonic()
        try:
            await self.load_classes()
        except QmfError as exc:
            self.note(f"warning: the classes were not learned again: {_one_line(exc)}")
        keys = sorted(set(self._object_classes()) | {e.key for e in self._objects.values()})
        results = await asyncio.gather(*(self._fetch(k) for k in keys), return_exceptions=True)
        fetched: dict[tuple[str, str], tuple[list[QmfObject], bool]] = {}
        failed = 0
        for key, result in zip(keys, results, strict=True):
            if isinstance(result, BaseException):
                failed += 1
            else:
                fetched[key] = (result[0], result[1])
        try:
            self._adopt({k: found for k, (found, complete) in fetched.items() if complete})
            for key, (found, complete) in fetched.items():
                self._apply(key, found, complete, started)
        except Exception as exc:  # a bug must not go unseen, nor end the shell
            self.note(f"warning: the objects were not merged again: internal error: "
                      f"{type(exc).__name__}: {_one_line(exc)}")
            return
        if failed:
            self.note(f"warning: the objects of {failed} of {len(keys)} classes were not "
                      "asked again (list asks again)")

    def _identity(self, oid: ObjectId, lookup: Callable[[ObjectId], tuple[
            tuple[str, str], Mapping[str, Any], SchemaClass] | None], depth: int = 3
                  ) -> Any:
        """What names an object across object ids: its class and index values, a
        reference by the referenced object's identity."""
        found = lookup(oid)
        if found is None or depth <= 0:
            return ("id", oid.raw)
        key, props, schema = found
        values: list[Any] = []
        for name in schema.index_names:
            value = props.get(name)
            if isinstance(value, ObjectId):
                value = None if value == _NULL_OID else self._identity(value, lookup, depth - 1)
            elif not isinstance(value, (str, int, float, bytes, tuple, type(None))):
                value = repr(value)
            values.append(value)
        return key, tuple(values)

    def _adopt(self, fetched: Mapping[tuple[str, str], list[QmfObject]]) -> None:
        """Give objects that came back under new object ids the short ids of the
        vanished objects with the same class and index (unambiguous matches only)."""
        fresh = {o.get_object_id(): o for objs in fetched.values() for o in objs}

        def new_view(oid: ObjectId) -> tuple[tuple[str, str], Mapping[str, Any],
                                             SchemaClass] | None:
            obj = fresh.get(oid)
            if obj is not None:
                k = obj.get_class_key()
                return (k.package, k.name), obj.get_properties(), obj.get_schema()
            return old_view(oid)

        def old_view(oid: ObjectId) -> tuple[tuple[str, str], Mapping[str, Any],
                                             SchemaClass] | None:
            entry = self._objects.get(oid)
            return None if entry is None else (entry.key, entry.props, entry.schema)

        vanished: dict[Any, ObjectId | None] = {}
        for oid, entry in self._objects.items():
            if entry.key in fetched and oid not in fresh and not entry.deleted:
                ident = self._identity(oid, old_view)
                vanished[ident] = None if ident in vanished else oid  # None: ambiguous
        if not vanished:
            return
        moves: list[tuple[ObjectId, ObjectId]] = []
        claimed: set[Any] = set()
        for oid in fresh:
            sid = self._short.get(oid)
            if sid is not None and sid < self._mark:
                continue  # known before the connection went down
            ident = self._identity(oid, new_view)
            old = vanished.get(ident)
            if old is not None and ident not in claimed:
                claimed.add(ident)
                moves.append((old, oid))
        for old, new in moves:
            sid = self._short.pop(old)
            stale = self._short.get(new)
            if stale is not None:
                self._by_short.pop(stale, None)
            self._short[new] = sid
            self._by_short[sid] = new
            self._objects.pop(old, None)

    # ------------------------------------------------------------------ classes

    async def load_classes(self) -> None:
        """Learn the classes on the bus (packages, class keys, their schemas).

        Raises:
            QmfError: the brokers or agents could not be asked.
        """
        session = self.session
        packages = await session.get_packages()
        listed = await asyncio.gather(*(session.get_classes(p) for p in packages))
        keys = [k for keys in listed for k in keys if k not in self._classes]
        schemas = await asyncio.gather(*(session.get_schema(k) for k in keys),
                                       return_exceptions=True)
        for schema in schemas:
            if isinstance(schema, SchemaClass):
                self._classes[schema.class_key] = schema

    def class_names(self, kind: ClassKind | None = None) -> list[str]:
        """Names to complete: short class names, qualified where a name is ambiguous."""
        by_name: dict[str, set[str]] = {}
        for key, schema in self._classes.items():
            if kind is None or schema.kind == kind:
                by_name.setdefault(key.name, set()).add(key.package)
        out = set()
        for name, packages in by_name.items():
            out.add(name)
            if len(packages) > 1:
                out.update(f"{p}:{name}" for p in packages)
        return sorted(out)

    def _match_classes(self, text: str) -> list[SchemaClass]:
        package: str | None
        if "(" in text:
            try:
                key = ClassKey.parse(text)
            except QmfError:
                return []
            return [s for k, s in self._classes.items() if k == key]
        if ":" in text:
            package, name = text.rsplit(":", 1)
        else:
            package, name = None, text
        found = [s for k, s in self._classes.items()
                 if k.name == name and (package is None or k.package == package)]
        if not found and package is None and "." in text:
            package, name = text.rsplit(".", 1)  # qpid-tool style package.class
            found = [s for k, s in self._classes.items()
                     if k.name == name and k.package == package]
        return found

    async def find_class(self, text: str, kind: ClassKind | None = None) -> list[SchemaClass]:
        """The schemas (every hash version) of one class named ``name``, ``package:name``,
        ``package.name`` or ``package:name(hash)``.

        Raises:
            ShellError: unknown or ambiguous.
        """
        found = self._match_classes(text)
        if not found:
            with contextlib.suppress(QmfError):
                await self.load_classes()
            found = self._match_classes(text)
        if kind is not None:
            found = [s for s in found if s.kind == kind]
        if not found:
            what = "object class" if kind == ClassKind.OBJECT else "class"
            raise ShellError(f"unknown {what} {text!r}", EXIT_NOT_FOUND)
        packages = sorted({s.class_key.package for s in found})
        if len(packages) > 1:
            raise ShellError(f"class name {text!r} is ambiguous: "
                             + ", ".join(f"{p}:{found[0].class_key.name}" for p in packages),
                             EXIT_USAGE)
        return sorted(found, key=lambda s: s.class_key.hash)

    # ------------------------------------------------------------------ formatting

    def format_time(self, ns: int) -> str:
        """A time stamp (ns since the epoch) in the chosen format; ``-`` for none."""
        if not ns:
            return "-"
        fmt = "%H:%M:%S" if self.time_format == "short" else "%Y-%m-%d %H:%M:%S"
        return time.strftime(fmt, time.localtime(ns / 1e9))

    def format_value(self, value: Any, qmf_type: QmfType | None = None) -> str:
        """A value as the shell prints it: references as short ids (NULL for none),
        absolute times in the time format, maps and lists as JSON."""
        if value is None:
            return ""
        if isinstance(value, ObjectId):
            return "NULL" if value == _NULL_OID else str(self.short_id(value))
        if isinstance(value, bool):
            return str(value)
        if qmf_type == QmfType.ABSTIME and isinstance(value, int):
            return self.format_time(value)
        if isinstance(value, (bytes, bytearray)):
            try:
                return bytes(value).decode()
            except UnicodeDecodeError:
                return bytes(value).hex()
        if isinstance(value, (Mapping, list, tuple)):
            return json.dumps(value, default=str, sort_keys=True)
        return str(value)

    def _index(self, entry: _Entry) -> str:
        types = {p.name: p.type for p in entry.schema.properties}
        return ":".join(self.format_value(entry.props.get(name), types.get(name))
                        for name in entry.schema.index_names)

    def _contents(self, entries: list[tuple[int, _Entry]]) -> list[str]:
        """qpid-tool's object view: one column per object, grouped by class."""
        groups: dict[tuple[str, str], list[tuple[int, _Entry]]] = {}
        for sid, entry in entries:
            groups.setdefault(entry.key, []).append((sid, entry))
        out: list[str] = []
        for (package, name), group in groups.items():
            if out:
                out.append("")
            last = max(e.updated for _, e in group)
            out.append(f"Object of type {package}:{name}: "
                       f"(last sample time: {self.format_time(last)})")
            # elements in schema order (newest schema first), then any extra ones
            rows: dict[tuple[str, str], tuple[QmfType | None, str]] = {}
            for _, e in sorted(group, key=lambda item: -item[1].updated):
                for p in e.schema.properties:
                    rows.setdefault(("property", p.name), (p.type, p.unit or ""))
                for s in e.schema.statistics:
                    rows.setdefault(("statistic", s.name), (s.type, s.unit or ""))
            headers = ["Type", "Element",
                       *(f"{sid}" + (" (deleted)" if e.deleted else "") for sid, e in group)]
            units = any(unit for _, unit in rows.values())
            if units:
                headers.append("Unit")
            table = []
            for (kind, element), (qmf_type, unit) in rows.items():
                cells = [kind, element]
                for _, e in group:
                    values = e.props if kind == "property" else e.stats
                    cells.append(self.format_value(values.get(element), qmf_type))
                if units:
                    cells.append(unit)
                table.append(cells)
            out += _table(headers, table)
        return out

    # ------------------------------------------------------------------ commands

    async def execute(self, line: str) -> str:
        """Run one command line; returns its output ("" for none).

        Raises:
            ShellError: the command failed (one-line message, exit code in ``code``).
            ShellExit: ``quit`` or ``exit``.
        """
        line = line.strip()
        if not line or line.startswith("#"):
            return ""
        try:
            words = shlex.split(line)
        except ValueError as exc:
            raise ShellError(f"cannot parse the line: {exc}", EXIT_USAGE) from None
        if not words:
            return ""
        command, args = words[0].lower(), words[1:]
        handler = self._commands.get(command)
        if handler is None:
            raise ShellError(f"unknown command {words[0]!r} (help lists the commands)",
                             EXIT_USAGE)
        resync = self._resync_task
        if resync is not None and not resync.done() and command not in _LOCAL_COMMANDS:
            # just reconnected: let the objects be asked again first (bounded)
            await asyncio.wait({resync}, timeout=self.session.timeout)
        try:
            return await handler(args)
        except (ShellError, ShellExit):
            raise
        except TransportError as exc:
            down = [b.where for b in self.session.brokers if not b.connected]
            if down and self.session.manage_connections:
                raise ShellError(f"not connected to {', '.join(down)}; reconnecting in "
                                 "the background, try again shortly", EXIT_UNREACHABLE) from exc
            raise ShellError(_one_line(exc), exit_code(exc)) from exc
        except QmfError as exc:
            raise ShellError(_one_line(exc), exit_code(exc)) from exc
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug must not end the shell
            raise ShellError(f"internal error: {type(exc).__name__}: {_one_line(exc)}") \
                from exc

    async def _help(self, args: list[str]) -> str:
        return HELP

    async def _quit(self, args: list[str]) -> str:
        raise ShellExit()

    async def _wait(self, args: list[str]) -> str:
        if len(args) != 1:
            raise ShellError("usage: wait SECONDS", EXIT_USAGE)
        try:
            seconds = float(args[0])
        except ValueError:
            raise ShellError(f"not a number of seconds: {args[0]!r}", EXIT_USAGE) from None
        if not 0 <= seconds <= 3600:
            raise ShellError("wait takes 0 to 3600 seconds", EXIT_USAGE)
        await asyncio.sleep(seconds)
        return ""

    async def _set(self, args: list[str]) -> str:
        if not args:
            return f"time-format {self.time_format}"
        if len(args) == 2 and args[0] == "time-format" and args[1] in ("short", "long"):
            self.time_format = args[1]
            return ""
        raise ShellError("usage: set time-format short|long", EXIT_USAGE)

    async def _list(self, args: list[str]) -> str:
        if not args:
            return await self._summary()
        if _RANGE.fullmatch(args[0]) or args[0].isdigit() or _OBJECT_ID.fullmatch(args[0]):
            return await self._show(args)  # qpid-tool: list <list-of-IDs>
        if len(args) > 2 or (len(args) == 2 and args[1] not in ("active", "all")):
            raise ShellError("usage: list [CLASS [active|all]]", EXIT_USAGE)
        schemas = await self.find_class(args[0], ClassKind.OBJECT)
        key = (schemas[0].class_key.package, schemas[0].class_key.name)
        warnings = await self.refresh(key)
        entries = sorted((self.short_id(oid), e) for oid, e in self._objects.items()
                         if e.key == key and not self._hidden(e))
        out = list(warnings)
        if len(args) == 2:
            shown = [(sid, e) for sid, e in entries if args[1] == "all" or not e.deleted]
            if not shown:
                return "\n".join([*out, f"no {args[1]} objects of type {key[0]}:{key[1]}"])
            return "\n".join(out + self._contents(shown))
        out.append(f"Objects of type {key[0]}:{key[1]}")
        out += _table(["ID", "Created", "Destroyed", "Index"],
                      [[str(sid), self.format_time(e.created), self.format_time(e.deleted),
                        self._index(e)] for sid, e in entries])
        return "\n".join(out)

    def _object_classes(self) -> list[tuple[str, str]]:
        return sorted({(k.package, k.name) for k, s in self._classes.items()
                       if s.kind == ClassKind.OBJECT})

    async def _refresh_all(self, keys: list[tuple[str, str]]
                           ) -> tuple[list[str], list[QmfError]]:
        """Refresh classes concurrently: (warnings, errors of the classes that failed)."""
        results = await asyncio.gather(*(self.refresh(k) for k in keys), return_exceptions=True)
        warnings: list[str] = []
        failed: list[QmfError] = []
        for key, result in zip(keys, results, strict=True):
            if isinstance(result, BaseException):
                if not isinstance(result, QmfError):
                    raise result
                failed.append(result)
                warnings.append(f"warning: {key[0]}:{key[1]}: {_one_line(result)}")
            else:
                warnings += result
        return warnings, failed

    async def _summary(self) -> str:
        warnings = []
        try:
            await self.load_classes()
        except QmfError as exc:
            warnings.append(f"warning: classes not refreshed: {_one_line(exc)}")
        keys = self._object_classes()
        if not keys:
            return "\n".join([*warnings, "no object classes are known"])
        more, failed = await self._refresh_all(keys)
        warnings += more
        if failed and len(failed) == len(keys):
            raise failed[0]
        counts = {k: [0, 0] for k in keys}
        for entry in self._objects.values():
            if not self._hidden(entry):
                counts.setdefault(entry.key, [0, 0])[1 if entry.deleted else 0] += 1
        rows = [[f"{p}:{n}", str(a), str(d)] for (p, n), (a, d) in sorted(counts.items())]
        return "\n".join([*warnings, "Management Object Types:",
                          *_table(["ObjectType", "Active", "Deleted"], rows)])

    def _parse_ids(self, words: list[str]) -> list[int]:
        out: list[int] = []
        for word in words:
            for part in filter(None, word.split(",")):
                if part.isdigit():
                    self._entry(int(part))
                    out.append(int(part))
                elif m := _RANGE.fullmatch(part):
                    lo, hi = sorted((int(m[1]), int(m[2])))
                    out += sorted(s for s, oid in self._by_short.items()
                                  if lo <= s <= hi and oid in self._objects)
                elif _OBJECT_ID.fullmatch(part):
                    oid = ObjectId.parse(part)
                    if oid not in self._objects:
                        raise ShellError(f"no object {part}", EXIT_NOT_FOUND)
                    out.append(self.short_id(oid))
                else:
                    raise ShellError(f"not an object id or range: {part!r}", EXIT_USAGE)
        return list(dict.fromkeys(out))

    async def _show(self, args: list[str]) -> str:
        if not args:
            raise ShellError("usage: show ID... (ranges allowed: 101-103)", EXIT_USAGE)
        ids = self._parse_ids(args)
        if not ids:
            raise ShellError(f"no objects in {' '.join(args)}", EXIT_NOT_FOUND)
        return "\n".join(self._contents([(sid, self._entry(sid)) for sid in ids]))

    async def _schema(self, args: list[str]) -> str:
        if len(args) > 1:
            raise ShellError("usage: schema [CLASS]", EXIT_USAGE)
        if not args:
            warnings = []
            try:
                await self.load_classes()
            except QmfError as exc:
                warnings.append(f"warning: classes not refreshed: {_one_line(exc)}")
            if not self._classes:
                return "\n".join([*warnings, "no classes are known"])
            rows = []
            for key, s in sorted(self._classes.items(), key=lambda kv: str(kv[0])):
                kind = "event" if s.is_event else "object"
                rows.append([_class_name(key), kind, key.hash_hex[:8], str(len(s.properties)),
                             str(len(s.statistics)), str(len(s.methods)),
                             str(len(s.arguments))])
            return "\n".join([*warnings, "Classes:", *_table(
                ["Class", "Kind", "Hash", "Properties", "Statistics", "Methods", "Arguments"],
                rows)])
        out: list[str] = []
        for schema in await self.find_class(args[0]):
            if out:
                out.append("")
            out += self._schema_detail(schema)
        return "\n".join(out)

    def _schema_detail(self, schema: SchemaClass) -> list[str]:
        key = schema.class_key
        if schema.is_event:
            out = [f"Schema for event '{_class_name(key)}' (hash {key.hash_hex}):"]
            out += _table(["Argument", "Type", "Unit", "Description"],
                          [[a.name, a.type.name.lower(), a.unit or "", a.desc or ""]
                           for a in schema.arguments])
            return out
        out = [f"Schema for class '{_class_name(key)}' (hash {key.hash_hex}):"]
        rows = []
        for p in schema.properties:
            notes = " ".join(n for n, on in (("index", p.index), ("optional", p.optional)) if on)
            rows.append([p.name, p.type.name.lower(), p.unit or "", _ACCESS_NAMES[p.access],
                         notes, p.desc or ""])
        for s in schema.statistics:
            rows.append([s.name, s.type.name.lower(), s.unit or "", "", "", s.desc or ""])
        out += _table(["Element", "Type", "Unit", "Access", "Notes", "Description"], rows)
        for m in schema.methods:
            out.append("")
            out.append(f"  Method '{m.name}'" + (f": {m.desc}" if m.desc else ""))
            if m.arguments:
                out += _table(["Argument", "Type", "Dir", "Default", "Description"],
                              [[a.name, a.type.name.lower(), a.direction or "I",
                                a.default or "", a.desc or ""] for a in m.arguments],
                              indent="    ")
        return out

    async def _agents(self, args: list[str]) -> str:
        if args:
            raise ShellError("usage: agents", EXIT_USAGE)
        out = []
        for broker in self.session.brokers:
            state = "connected" if broker.connected else "disconnected"
            management = "yes" if broker.has_management else "no"
            out.append(f"Broker {broker.where} ({state}, management broker: {management})")
        live: dict[tuple[int, int], int] = {}
        for oid, entry in self._objects.items():
            if not entry.deleted:
                live[oid.agent_key()] = live.get(oid.agent_key(), 0) + 1
        agents: list[RemoteAgent] = sorted(self.session.get_agents(),
                                           key=lambda a: (a.broker_bank, a.agent_bank))
        if not agents:
            out.append("no agents are known")
            return "\n".join(out)
        out += _table(["Agent", "Label", "Objects"],
                      [[f"{a.broker_bank}.{a.agent_bank}", a.label or "?",
                        str(live.get((a.broker_bank, a.agent_bank), 0))] for a in agents])
        return "\n".join(out)

    def _convert(self, arg: SchemaArgument, text: str) -> Any:
        """A command-line word as a value of the argument's type (never evaluated)."""
        t = arg.type

        def bad(why: str) -> ShellError:
            return ShellError(f"argument {arg.name!r}: {why}", EXIT_USAGE)

        if t in _INT_TYPES:
            try:
                return int(text, 10)
            except ValueError:
                try:
                    return int(text, 0)  # 0x1f, 0o17, 0b101
                except ValueError:
                    raise bad(f"{text!r} is not an integer") from None
        if t == QmfType.BOOL:
            if text.lower() in _TRUE:
                return True
            if text.lower() in _FALSE:
                return False
            raise bad(f"{text!r} is not a boolean (true/false)")
        if t in (QmfType.FLOAT, QmfType.DOUBLE):
            try:
                return float(text)
            except ValueError:
                raise bad(f"{text!r} is not a number") from None
        if t in (QmfType.MAP, QmfType.LIST, QmfType.ARRAY):
            want = dict if t == QmfType.MAP else list
            try:
                value = json.loads(text)
            except ValueError as exc:
                raise bad(f"not JSON ({exc}); quote it: '{{\"key\": 1}}'") from None
            if not isinstance(value, want):
                raise bad(f"expects a JSON {'object' if want is dict else 'array'}")
            return value
        if t == QmfType.REF:
            if text.upper() == "NULL":
                return _NULL_OID
            if text.isdigit():
                oid = self._by_short.get(int(text))
                if oid is None:
                    raise bad(f"no object {text}")
                return oid
            return text  # an object id's text form; checked by the call
        return text

    async def _call(self, args: list[str]) -> str:
        if len(args) < 2:
            raise ShellError("usage: call ID METHOD [ARGS...]", EXIT_USAGE)
        if not args[0].isdigit():
            raise ShellError(f"not an object id: {args[0]!r}", EXIT_USAGE)
        entry = self._entry(int(args[0]))
        if entry.deleted:
            what = self.describe(int(args[0])).removesuffix(" (deleted)")
            raise ShellError(f"object {args[0]} ({what}) no longer exists", EXIT_NOT_FOUND)
        method = entry.schema.method(args[1])  # UnknownClassError: no such method
        params = {a.name: a for a in method.in_args}
        positional: list[Any] = []
        keywords: dict[str, Any] = {}
        for word in args[2:]:
            name, eq, text = word.partition("=")
            if eq and name in params:
                keywords[name] = self._convert(params[name], text)
            else:
                if len(positional) >= len(method.in_args):
                    raise ShellError(f"{method.name}() takes {len(method.in_args)} "
                                     f"argument(s)", EXIT_USAGE)
                positional.append(self._convert(method.in_args[len(positional)], word))
        try:
            result = await entry.obj.invoke(method.name, *positional, **keywords)
        except MethodError as exc:
            raise ShellError(f"method failed: {exc}", exit_code(exc)) from exc
        out = [f"OK ({result.status})" + (f": {result.text}" if result.text
                                          and result.text != "OK" else "")]
        declared = [a for a in method.out_args if a.name in result.out_args]
        rows = [[a.name, self.format_value(result.out_args[a.name], a.type)] for a in declared]
        names = {a.name for a in declared}
        rows += [[str(k), self.format_value(v)] for k, v in result.out_args.items()
                 if k not in names]
        if rows:
            out += _table(["Output", "Value"], rows)
        return "\n".join(out)

    async def _events(self, args: list[str]) -> str:
        if not args:
            return f"events are {'on' if self._event_sub is not None else 'off'}"
        if len(args) != 1 or args[0] not in ("on", "off"):
            raise ShellError("usage: events on|off", EXIT_USAGE)
        if args[0] == "off":
            self._stop_events()
            return ""
        if self._event_sub is None:
            self._event_sub = self.session.events()
            task = asyncio.create_task(self._print_events(self._event_sub),
                                       name="qmf-shell-events")
            self._tasks.append(task)
            task.add_done_callback(self._forget)
        return ""

    def _forget(self, task: asyncio.Task[Any]) -> None:
        if task in self._tasks:
            self._tasks.remove(task)

    def _stop_events(self) -> None:
        if self._event_sub is not None:
            self._event_sub.close()  # its printing task ends
            self._event_sub = None

    def format_event(self, event: Event) -> str:
        types = {a.name: a.type for a in event.schema.arguments} if event.schema else {}
        args = " ".join(f"{k}={self.format_value(v, types.get(k))}"
                        for k, v in event.arguments.items())
        return (f"event {self.format_time(event.timestamp)} {event.severity_name} "
                f"{_class_name(event.class_key)} {args}").rstrip()

    async def _print_events(self, sub: Any) -> None:
        with contextlib.suppress(ConnectionLostError):  # the connection note says it
            async for event in sub:
                self.emit(self.format_event(event))

    # ------------------------------------------------------------------ completion

    def complete(self, text: str) -> list[str]:
        """Candidates for the word being typed at the end of ``text`` (a line up to the
        cursor): commands, class names, short ids, method and argument names."""
        return [c for c, _ in self.complete_meta(text)]

    def complete_meta(self, text: str) -> list[tuple[str, str]]:
        """:meth:`complete`'s candidates with what each is: an object id's class and
        name (``queue orders``), a method's description; "" for the others."""
        words = text.split()
        if text and not text[-1].isspace():
            current, before = words[-1], words[:-1]
        else:
            current, before = "", words
        if not before:
            return [(c, "") for c in COMMANDS if c.startswith(current)]
        command, done = before[0].lower(), before[1:]
        out = []
        for c in self._arguments(command, done):
            if not c.startswith(current):
                continue
            meta = ""
            if c.isdigit() and (command == "show" or (command == "call" and not done)):
                meta = self.describe(int(c))
            elif command == "call" and len(done) == 1:
                entry = self._objects.get(self._by_short.get(int(done[0]), _NULL_OID))
                method = entry.schema.find_method(c) if entry is not None else None
                meta = (method.desc or "") if method is not None else ""
            out.append((c, meta))
        return out

    def _ids(self) -> list[str]:
        return [str(sid) for sid in sorted(self.short_id(oid) for oid, e in self._objects.items()
                                           if not e.deleted)]

    def _arguments(self, command: str, done: list[str]) -> list[str]:
        n = len(done)
        if command == "list":
            if n == 0:
                return self.class_names(ClassKind.OBJECT)
            return ["active", "all"] if n == 1 and self._match_classes(done[0]) else []
        if command == "show":
            return self._ids()
        if command == "schema":
            return self.class_names() if n == 0 else []
        if command == "call":
            if n == 0:
                return self._ids()
            oid = self._by_short.get(int(done[0])) if done[0].isdigit() else None
            entry = self._objects.get(oid) if oid is not None else None
            if entry is None:
                return []
            if n == 1:
                return sorted(m.name for m in entry.schema.methods)
            method = entry.schema.find_method(done[1])
            if method is None:
                return []
            given = {w.partition("=")[0] for w in done[2:] if "=" in w}
            return [f"{a.name}=" for a in method.in_args if a.name not in given]
        if command == "events":
            return ["on", "off"] if n == 0 else []
        if command == "set":
            if n == 0:
                return ["time-format"]
            return ["short", "long"] if n == 1 and done[0] == "time-format" else []
        if command == "help":
            return list(COMMANDS) if n == 0 else []
        return []


# ---------------------------------------------------------------------- the terminal


def history_file(name: str) -> Path | None:
    """``~/.qmf_history/<name>``, created if needed; None when HOME is unusable."""
    home = os.environ.get("HOME")
    if not home:
        return None
    folder = Path(home) / ".qmf_history"
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        path = folder / name
        with open(path, "a", encoding="utf-8"):
            pass
    except OSError:
        return None
    return path


def _history() -> Any:
    from prompt_toolkit.history import FileHistory, InMemoryHistory

    path = history_file("shell")
    return FileHistory(str(path)) if path is not None else InMemoryHistory()


def _completer(shell: Shell) -> Any:
    from prompt_toolkit.completion import Completer, Completion

    class ShellCompleter(Completer):
        def get_completions(self, document: Any, complete_event: Any) -> Any:
            word = document.get_word_before_cursor(WORD=True)
            for candidate, meta in shell.complete_meta(document.text_before_cursor):
                yield Completion(candidate, start_position=-len(word),
                                 display_meta=meta or None)

    return ShellCompleter()


def _banner(session: Session) -> str:
    lines = []
    for b in session.brokers:
        management = "management broker" if b.has_management else "no management broker"
        lines.append(f"qmf shell: connected to {b.where} ({management}, "
                     f"{len(session.get_agents(b))} agents)")
    lines.append("Type help for the commands, quit or ^D to leave; TAB completes.")
    return "\n".join(lines)


def _report(exc: ShellError, debug: bool, file: TextIO | None = None) -> None:
    """A failed command: ``error: ...`` (one line); with ``debug`` the traceback of
    what caused it too."""
    out = file or sys.stdout
    print(f"error: {exc}", file=out, flush=True)
    if debug and exc.__cause__ is not None:
        traceback.print_exception(exc.__cause__, file=out)
        out.flush()


async def _interactive(shell: Shell, warnings: list[str], debug: bool = False) -> int:
    from prompt_toolkit import PromptSession
    from prompt_toolkit.auto_suggest import AutoSuggestFromHistory
    from prompt_toolkit.patch_stdout import patch_stdout

    prompt: PromptSession[str] = PromptSession(
        history=_history(), completer=_completer(shell), complete_while_typing=False,
        auto_suggest=AutoSuggestFromHistory())
    loop = asyncio.get_running_loop()
    current: asyncio.Future[str] | None = None

    def interrupt() -> None:  # ^C while a command runs cancels the command only
        if current is not None and not current.done():
            current.cancel()

    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
        loop.add_signal_handler(signal.SIGINT, interrupt)
    try:
        with patch_stdout():
            print(_banner(shell.session))
            for w in warnings:
                print(w)
            while True:
                try:
                    line = await prompt.prompt_async(PROMPT, handle_sigint=False)
                except KeyboardInterrupt:
                    continue
                except EOFError:
                    break
                current = asyncio.ensure_future(shell.execute(line))
                try:
                    text = await current
                except ShellExit:
                    break
                except ShellError as exc:
                    _report(exc, debug)
                    continue
                except asyncio.CancelledError:
                    task = asyncio.current_task()
                    if task is not None and task.cancelling():
                        raise
                    print("interrupted")
                    continue
                finally:
                    current = None
                if text:
                    print(text)
    finally:
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.remove_signal_handler(signal.SIGINT)
    return EXIT_OK


async def _batch(shell: Shell, stream: TextIO, warnings: list[str], debug: bool = False
                 ) -> int:
    """Commands from ``stream``, one a line; errors on stderr, the first one's code."""
    loop = asyncio.get_running_loop()
    status = EXIT_OK
    for w in warnings:
        print(w, file=sys.stderr)
    while True:
        line = await loop.run_in_executor(None, stream.readline)
        if not line:
            break
        try:
            text = await shell.execute(line)
        except ShellExit:
            break
        except ShellError as exc:
            sys.stdout.flush()
            _report(exc, debug, sys.stderr)
            status = status or exc.code
            continue
        if text:
            print(text, flush=True)
    return status


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "shell", help="interactive management shell (qpid-tool's commands)",
        description="An interactive management shell in the spirit of qpid-tool. "
                    "Without a terminal, commands are read from stdin, one a line.")
    add_url_argument(parser)
    add_session_options(parser)
    parser.add_argument("--time-format", choices=("short", "long"), default="short",
                        help="time stamps as 12:00:01 (short, default) or with the date")
    parser.add_argument("--console-queues", action="store_true",
                        help="list the consoles' own reply and topic queues too")
    add_debug_option(parser)
    parser.set_defaults(run=run)


def add_debug_option(parser: argparse.ArgumentParser) -> None:
    """``--debug``: tracebacks behind the one-line errors, and the library's log."""
    parser.add_argument("--debug", action="store_true",
                        help="show the tracebacks behind errors and the library's log")


#: the longest pause between reconnection attempts of the interactive tools (seconds)
RECONNECT_MAX_DELAY = 5.0


@contextlib.asynccontextmanager
async def managed_session(url: str | None, *, broker: str | None = None,
                          timeout: float = 10.0, console: Console | None = None,
                          connection: dict[str, Any] | None = None
                          ) -> AsyncIterator[Session]:
    """A session with one broker that reconnects by itself after a lost connection
    (``manage_connections``); closed on exit.  The first connection must succeed.
    ``connection``: the ``tls`` and ``sasl_mechanisms`` of ``connection_arguments``.

    Raises:
        ToolError: the broker cannot be reached (exit code EXIT_UNREACHABLE).
        TransportError: the broker refused the connection or the login.
        UsageError: a malformed address, or both ``url`` and ``broker``.
    """
    target = resolve_url(url, broker)
    session = Session(console=console, manage_connections=True, timeout=timeout,
                      reconnect_max_delay=RECONNECT_MAX_DELAY)
    try:
        added = await session.add_broker(target, timeout=timeout, **(connection or {}))
        if not added.connected:
            error = added.error
            if error is None or isinstance(error, QmfTimeout):
                raise ToolError(f"cannot reach the broker: {error or 'no answer'}",
                                EXIT_UNREACHABLE)
            raise error
        yield session
    finally:
        await session.close()


class _OneLineFormatter(logging.Formatter):
    """Log records as one line: an exception as ``(Type: message)``, no traceback."""

    def format(self, record: logging.LogRecord) -> str:
        exc_info, exc_text, stack = record.exc_info, record.exc_text, record.stack_info
        record.exc_info = record.exc_text = record.stack_info = None
        try:
            text = super().format(record)
        finally:
            record.exc_info, record.exc_text, record.stack_info = exc_info, exc_text, stack
        lines = text.splitlines()
        text = lines[0] if lines else ""
        if exc_info and exc_info[1] is not None:
            text += f" ({type(exc_info[1]).__name__}: {_one_line(exc_info[1])})"
        return text


def one_line_logging(debug: bool) -> None:
    """Log lines of the interactive tools: one line each (no tracebacks); with
    ``debug`` the library's informational log and full tracebacks."""
    root = logging.getLogger()
    if not root.handlers:
        logging.basicConfig(level=logging.WARNING, format="qmf: %(levelname)s: %(message)s")
    if debug:
        logging.getLogger("qmf_async").setLevel(logging.INFO)
        return
    for handler in root.handlers:
        fmt = handler.formatter._fmt if handler.formatter is not None else None
        handler.setFormatter(_OneLineFormatter(fmt or "qmf: %(levelname)s: %(message)s"))


async def wait_for_agents(session: Session, seconds: float) -> None:
    """Without a management broker agents are found by their heartbeats: give the
    first one ``seconds`` to show up (no error when none does)."""
    if seconds > 0 and not any(b.has_management for b in session.brokers):
        with contextlib.suppress(QmfTimeout):
            await session.wait_for_agents(timeout=seconds)


async def run(args: argparse.Namespace) -> int:
    if args.timeout <= 0:
        print("qmf shell: error: --timeout must be positive", file=sys.stderr)
        return EXIT_USAGE
    debug = bool(getattr(args, "debug", False))
    one_line_logging(debug)
    interactive = sys.stdin.isatty() and sys.stdout.isatty()
    async with managed_session(args.url, broker=args.broker, timeout=args.timeout,
                               connection=connection_arguments(args)) as session:
        await wait_for_agents(session, args.wait)
        if interactive:
            shell = Shell(session, time_format=args.time_format,
                          console_queues=args.console_queues)
        else:  # stdout carries the commands' output only
            shell = Shell(session, time_format=args.time_format,
                          console_queues=args.console_queues,
                          note=lambda text: print(text, file=sys.stderr, flush=True))
        try:
            warnings = await shell.start()
            if interactive:
                return await _interactive(shell, warnings, debug)
            return await _batch(shell, sys.stdin, warnings, debug)
        finally:
            await shell.close()
