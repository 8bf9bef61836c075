"""``qmf repl``: a Python REPL with top-level ``await`` and a connected session.

    $ qmf repl amqp://guest:guest@localhost:5672/
    >>> queues = await session.get_objects(_class="queue")
    >>> await queues[0].purge(0)

The event loop runs in the main thread and owns the session; the console (reading
lines, compiling them with top-level ``await`` allowed) runs in a second thread and
hands every compiled statement to the loop, waiting for it to finish.  So statements
run in the loop's thread, where the session lives, and background work (updates,
heartbeats, subscriptions) goes on while the console waits for input.  ^C cancels the
running statement; ^D or ``exit()`` closes the session and leaves.

Without a terminal on stdin, lines are read from stdin without prompts; the banner,
errors and notes go to stderr, so stdout carries only what the statements print.

The session reconnects by itself after a lost connection (a broker restart): a note
says when the connection is lost and when it is back; statements run meanwhile fail
with ``NotConnectedError``.  An exception of the library (a ``QmfError``, or any
exception raised inside qmf_async, such as the ``AttributeError`` of ``await
obj.nosuch()``) raised by a statement is shown as one line, ``error: NotConnectedError:
...``; other exceptions (the statement's own) as Python shows them.  ``--debug`` shows
every traceback.  A note that comes while the prompt waits is written above it: the
prompt and what was typed so far are shown again below the note.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import code
import concurrent.futures
import contextlib
import inspect
import os
import signal
import sys
import textwrap
import threading
import traceback
import types
import warnings
from collections.abc import Callable
from typing import Any, Final

import qmf_async
from qmf_async import Broker, Console, QmfError, Session

from ._common import (
    EXIT_ERROR,
    EXIT_OK,
    EXIT_USAGE,
    add_session_options,
    add_url_argument,
    connection_arguments,
)
from .shell import (
    add_debug_option,
    history_file,
    managed_session,
    one_line_logging,
    wait_for_agents,
)

__all__ = ["AsyncConsole", "ReconnectNotes", "add_parser", "error_line", "namespace", "run"]


def error_line(exc: BaseException) -> str:
    """A library exception as one line: ``error: Type: first line of the message``."""
    text = str(exc).strip()
    first = text.splitlines()[0] if text else ""
    return f"error: {type(exc).__name__}" + (f": {first}" if first else "")


#: the directory of the qmf_async package: an exception raised in a frame under it is
#: the library's, shown as one line
_LIBRARY: Final = os.path.dirname(os.path.abspath(qmf_async.__file__)) + os.sep


def raised_in_library(tb: types.TracebackType | None) -> bool:
    """Whether the innermost frame of ``tb`` is qmf_async's own code (the library
    raised the exception, not the statement)."""
    last = None
    while tb is not None:
        last, tb = tb, tb.tb_next
    return last is not None and os.path.abspath(
        last.tb_frame.f_code.co_filename).startswith(_LIBRARY)


def _note(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


class ReconnectNotes(Console):
    """Notes (``emit``, stderr by default) when a broker connection is lost and when it
    is back."""

    def __init__(self, emit: Callable[[str], None] | None = None) -> None:
        self.down: set[int] = set()
        self.emit: Callable[[str], None] = emit or _note

    def _lost(self, broker: Broker) -> None:
        if id(broker) not in self.down:
            self.down.add(id(broker))
            self.emit(f"connection to {broker.where} lost; reconnecting ...")

    def broker_disconnected(self, broker: Broker) -> None:
        self._lost(broker)

    def broker_connection_failed(self, broker: Broker, error: BaseException) -> None:
        if broker.reconnects or id(broker) in self.down:
            self._lost(broker)

    def broker_connected(self, broker: Broker) -> None:
        if id(broker) in self.down:
            self.down.discard(id(broker))
            self.emit(f"reconnected to {broker.where}")


class _Exit(Exception):
    """SystemExit raised by a statement, carried out of the loop's thread."""

    def __init__(self, code: object) -> None:
        super().__init__(code)
        self.code = code


class AsyncConsole(code.InteractiveConsole):
    """An InteractiveConsole whose statements may ``await``; they run in ``loop``
    (a loop running in another thread) while :meth:`interact` runs in this one."""

    def __init__(self, namespace: dict[str, Any], loop: asyncio.AbstractEventLoop, *,
                 prompts: bool = True, debug: bool = False) -> None:
        super().__init__(namespace, filename="<qmf repl>")
        self.compile.compiler.flags |= ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
        self.loop = loop
        self.prompts = prompts
        self.debug = debug
        self._task: asyncio.Task[Any] | None = None  # the running statement (loop thread)
        self._interrupted = False
        #: the prompt shown while the console waits for a line (None otherwise)
        self._waiting: str | None = None
        self._screen = threading.Lock()
        #: what was typed so far at the prompt (readline's buffer, set on a terminal)
        self.line_buffer: Callable[[], str] = lambda: ""

    # -- console thread
    def raw_input(self, prompt: str = "") -> str:
        if self.prompts:
            with self._screen:
                self._waiting = prompt
            try:
                return input(prompt)
            finally:
                with self._screen:
                    self._waiting = None
        line = sys.stdin.readline()
        if not line:
            raise EOFError
        return line.rstrip("\n")

    # -- any thread
    def note(self, text: str) -> None:
        """Write a background note on stderr.  While the prompt waits, the note goes
        above it (the prompt line is cleared first) and the prompt and what was typed
        so far are written again below it, so the next line has its prompt."""
        with self._screen:
            prompt = self._waiting
            if prompt is None:
                print(text, file=sys.stderr, flush=True)
                return
            sys.stdout.flush()
            sys.stderr.write(f"\r\x1b[K{text}\n")
            sys.stderr.flush()
            sys.stdout.write(prompt + self.line_buffer())
            sys.stdout.flush()

    def runcode(self, code: types.CodeType) -> None:
        future = asyncio.run_coroutine_threadsafe(self._evaluate(code), self.loop)
        try:
            failure = future.result()
        except concurrent.futures.CancelledError:
            self.write("\nKeyboardInterrupt\n")
            return
        if failure is None:
            return
        exc, tb = failure
        if isinstance(exc, _Exit):
            raise SystemExit(exc.code)
        sys.last_type, sys.last_value, sys.last_traceback = type(exc), exc, tb
        if (isinstance(exc, QmfError) or raised_in_library(tb)) and not self.debug:
            # the library's failure (not connected, timeout, no such method ...): its
            # inner frames are not the user's business
            self.write(error_line(exc) + "\n")
            return
        self.write("".join(traceback.format_exception(type(exc), exc, tb)))

    # -- loop thread
    async def _evaluate(self, code: types.CodeType
                        ) -> tuple[BaseException, types.TracebackType | None] | None:
        """Run one compiled statement; its exception (and traceback without this frame)
        is returned, never raised, so it cannot escape into the loop."""
        self._task = asyncio.current_task()
        self._interrupted = False
        try:
            value = types.FunctionType(code, self.locals)()
            if inspect.iscoroutine(value):
                await value
        except SystemExit as exc:
            return _Exit(exc.code), None
        except asyncio.CancelledError as exc:
            if self._interrupted:
                raise  # ^C: the console thread reports KeyboardInterrupt
            return exc, exc.__traceback__.tb_next if exc.__traceback__ else None
        except BaseException as exc:  # KeyboardInterrupt too: shown, not raised in the loop
            return exc, exc.__traceback__.tb_next if exc.__traceback__ else None
        finally:
            self._task = None
        return None

    def interrupt(self) -> bool:
        """Cancel the running statement (loop thread; the SIGINT handler); False when
        none runs."""
        task = self._task
        if task is None or task.done():
            return False
        self._interrupted = True
        task.cancel()
        return True


def namespace(session: Session) -> dict[str, Any]:
    """What the REPL starts with: ``session``, ``broker``, ``asyncio`` and the public
    names of qmf_async."""
    ns: dict[str, Any] = {"__name__": "__main__", "__doc__": None,
                          "__builtins__": __builtins__, "asyncio": asyncio}
    ns.update({name: getattr(qmf_async, name) for name in qmf_async.__all__})
    ns["qmf_async"] = qmf_async
    ns["session"] = session
    ns["broker"] = session.brokers[0] if session.brokers else None
    return ns


def banner(session: Session) -> str:
    public = textwrap.fill(", ".join(n for n in qmf_async.__all__ if not n.startswith("_")),
                           width=88, initial_indent="  ", subsequent_indent="  ")
    lines = [f"qmf-async {qmf_async.__version__} asyncio REPL, Python "
             f"{sys.version.split()[0]} on {sys.platform}"]
    for b in session.brokers:
        management = "management broker" if b.has_management else "no management broker"
        lines.append(f"session: connected to {b.where} ({management}, "
                     f"{len(session.get_agents(b))} agents)")
    lines += [
        "In the namespace: session (the connected Session), broker (its Broker), asyncio, "
        "qmf_async and its public names:",
        public,
        'Use await directly: queues = await session.get_objects(_class="queue")',
        "exit() or ^D closes the session and leaves; ^C cancels the running statement.",
        "A lost connection is re-established in the background (a note says so).",
    ]
    return "\n".join(lines)


def _setup_readline(ns: dict[str, Any], console: AsyncConsole) -> Any:
    """Line editing, completion over the namespace and a history file (terminals only);
    the console's notes write the typed line again."""
    try:
        import readline
        import rlcompleter
    except ImportError:
        return None
    console.line_buffer = readline.get_line_buffer
    readline.set_completer(rlcompleter.Completer(ns).complete)
    readline.parse_and_bind("tab: complete")
    path = history_file("repl")
    if path is not None:
        with contextlib.suppress(OSError):
            readline.read_history_file(path)
    return readline, path


def _save_history(state: Any) -> None:
    if not state:
        return
    readline, path = state
    if path is not None:
        with contextlib.suppress(OSError):
            readline.set_history_length(1000)
            readline.write_history_file(path)


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "repl", help="Python asyncio REPL with a connected session",
        description="A Python REPL with top-level await; `session` is a connected "
                    "qmf_async.Session.")
    add_url_argument(parser)
    add_session_options(parser)
    add_debug_option(parser)
    parser.set_defaults(run=run)


async def run(args: argparse.Namespace) -> int:
    if args.timeout <= 0:
        print("qmf repl: error: --timeout must be positive", file=sys.stderr)
        return EXIT_USAGE
    debug = bool(getattr(args, "debug", False))
    one_line_logging(debug)
    loop = asyncio.get_running_loop()
    interactive = sys.stdin.isatty()
    notes = ReconnectNotes()
    async with managed_session(args.url, broker=args.broker, timeout=args.timeout,
                               console=notes,
                               connection=connection_arguments(args)) as session:
        await wait_for_agents(session, args.wait)
        ns = namespace(session)
        console = AsyncConsole(ns, loop, prompts=interactive, debug=debug)
        notes.emit = console.note
        done: asyncio.Future[int] = loop.create_future()

        def finish(status: int) -> None:
            if not done.done():
                done.set_result(status)

        def console_thread() -> None:
            status = EXIT_OK
            state = _setup_readline(ns, console) if interactive else None
            try:
                console.interact(banner=banner(session), exitmsg="closing the session")
            except SystemExit as exc:
                if exc.code is None:
                    status = EXIT_OK
                elif isinstance(exc.code, int):
                    status = exc.code
                else:
                    print(exc.code, file=sys.stderr)
                    status = EXIT_ERROR
            except BaseException as exc:
                if debug:
                    traceback.print_exc()
                else:
                    print(f"qmf repl: {error_line(exc)}", file=sys.stderr)
                status = EXIT_ERROR
            finally:
                _save_history(state)
                loop.call_soon_threadsafe(finish, status)

        def on_sigint() -> None:
            console.interrupt()

        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(signal.SIGINT, on_sigint)
        thread = threading.Thread(target=console_thread, name="qmf-repl", daemon=True)
        try:
            thread.start()
            status = await done
        finally:
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.remove_signal_handler(signal.SIGINT)
        # statements left unawaited (``session.get_objects()`` without await) are not news
        warnings.filterwarnings("ignore", message=r"^coroutine .* was never awaited$",
                                category=RuntimeWarning)
    return status
