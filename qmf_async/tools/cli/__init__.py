"""``qmf``: command-line tools on the public qmf-async API.

Subcommands: shell, repl, stat, config, events, queue-stats, route, collect, pipeline,
bridge, exporter (``qmf --help``).  They need the ``cli`` extra
(``pip install 'qmf-async[cli]'``), some one more (``EXTRAS``); a subcommand whose extra
is missing says which one when it is run, and the others work.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib
import os
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from ... import __version__
from ._help import HELP

# Start-up: this module imports neither asyncio nor logging nor the library (``_common``
# brings in the Session): ``qmf --version`` and ``qmf --help`` need none of them, and a
# subcommand's module imports what it needs (docs/benchmarks.md, "Start-up").

__all__ = ["main", "SUBCOMMANDS", "EXIT_AT_ONCE"]

#: subcommand name -> module of this package with ``add_parser(subparsers)`` and
#: ``async def run(args) -> int``
SUBCOMMANDS = {
    "shell": "shell",
    "repl": "repl",
    "stat": "stat",
    "config": "config",
    "events": "events",
    "queue-stats": "queue_stats",
    "pipeline": "pipeline",
    "collect": "collect",
    "route": "route",
    "bridge": "bridge",
    "exporter": "exporter",
}

#: subcommands whose process ends as soon as they return (``os._exit``, skipping the
#: interpreter's teardown) when ``qmf`` is the program: one-shot commands that leave
#: nothing to finalize (no files written, connections closed); see ``_exit_at_once``
EXIT_AT_ONCE = frozenset({"stat"})

#: the extras a subcommand needs (what ``pip install 'qmf-async[...]'`` names when one of
#: their packages is missing)
EXTRAS = {
    "pipeline": "pipeline",
    "collect": "collector",
    "bridge": "cli,bridge",
    "exporter": "prometheus",
}

#: the top-level packages of the extras (a missing one means an extra is not installed;
#: any other missing module is a real bug and is raised)
_EXTRA_PACKAGES = frozenset({
    "rich", "prompt_toolkit", "aiohttp", "pyarrow", "pyspark", "matplotlib", "pandas",
    "prometheus_client",
})


def _missing_extra(subparsers: Any, name: str, exc: ModuleNotFoundError) -> None:
    """Register ``name`` as a subcommand that only says which extra to install."""
    extra = EXTRAS.get(name, "cli")
    hint = f"pip install 'qmf-async[{extra}]'"
    parser = subparsers.add_parser(name, help=f"(needs {hint})", add_help=False,
                                   formatter_class=HELP)
    parser.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    parser.set_defaults(missing_extra=extra)

    async def run(args: argparse.Namespace) -> int:
        from ._common import EXIT_USAGE

        print(f"qmf {name}: needs the {extra} extra ({hint}): "
              f"no module named {(exc.name or '?').split('.')[0]!r}", file=sys.stderr)
        return EXIT_USAGE

    parser.set_defaults(run=run)


def _wanted(argv: Sequence[str] | None) -> Sequence[str]:
    """The subcommands whose modules ``argv`` needs: the one its first word names, none
    for ``--version``, else all (for the overview and the list of choices)."""
    if argv and argv[0] in SUBCOMMANDS:
        return [argv[0]]
    if argv and argv[0] == "--version":
        return []
    return list(SUBCOMMANDS)


def _parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """``qmf``'s parser, with the subcommands ``argv`` needs (all when None): ``qmf stat``
    imports no other subcommand's module (not the bridge's HTTP client, Spark's helpers
    or the exporter), which takes a third off its start-up time."""
    parser = argparse.ArgumentParser(prog="qmf", description=__doc__.splitlines()[0],
                                     formatter_class=HELP)
    parser.add_argument("--version", action="version", version=f"qmf-async {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in _wanted(argv):
        module_name = SUBCOMMANDS[name]
        # a subcommand whose extra is missing says so when it is run, and never stops
        # the others (or ``qmf --version``) from working
        try:
            importlib.import_module(f".{module_name}", __name__).add_parser(sub)
        except ModuleNotFoundError as exc:
            if (exc.name or "").split(".")[0] not in _EXTRA_PACKAGES:
                raise
            _missing_extra(sub, name, exc)
    # each subcommand's parser, to report its own usage on an unknown option
    parser.subcommands = dict(sub.choices)  # type: ignore[attr-defined]
    return parser


def _quiet_logging() -> None:
    """Library warnings as one short line each; aiormq's connect noise is dropped
    (the tool reports the failure itself)."""
    import logging

    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.WARNING, format="qmf: %(levelname)s: %(message)s")
    logging.getLogger("aiormq").setLevel(logging.CRITICAL)


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``qmf``; returns the exit code (0 ok, see ``_common`` for the others).

    With ``argv`` None (the process's own command line: the ``qmf`` script, ``python -m
    qmf_async``) the start-up runs without the cyclic garbage collector, and what it
    imported is then frozen out of later collections (``gc.freeze``): the imports leave
    no garbage to collect, and collecting them cost ``qmf stat -q`` a sixth of its time
    (docs/benchmarks.md, "Start-up").  A caller's own argv (tests, embedding) leaves the
    collector alone.
    """
    program = argv is None
    argv = sys.argv[1:] if argv is None else list(argv)
    if program:
        gc.disable()
    try:
        parser = _parser(argv)
    finally:
        if program:
            gc.freeze()
            gc.enable()
    args, extra = parser.parse_known_args(argv)
    if extra and not getattr(args, "missing_extra", None):
        # reported with the subcommand's usage, not qmf's
        sub = parser.subcommands.get(args.command, parser)  # type: ignore[attr-defined]
        sub.error(f"unrecognized arguments: {' '.join(extra)}")
    _quiet_logging()
    import asyncio

    from ._common import EXIT_PIPE, EXPECTED_ERRORS, fail

    try:
        code = int(asyncio.run(args.run(args)) or 0)
    except EXPECTED_ERRORS as exc:
        code = fail(exc, f"qmf {args.command}")
    except KeyboardInterrupt:
        code = 130
    except BrokenPipeError:
        _quiet_stdout()
        code = EXIT_PIPE
    if program and args.command in EXIT_AT_ONCE:
        _exit_at_once(code)
    return code


def _quiet_stdout() -> None:
    """The reader went away (``qmf stat --json | head``): stop quietly."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def _exit_at_once(code: int) -> NoReturn:
    """End the process with ``code`` now that the command is done and its connections
    closed: the output and the log handlers flushed, then no interpreter teardown
    (freeing every module's objects and a last full collection: 2% of ``qmf stat -q``'s
    run; docs/benchmarks.md, "Start-up")."""
    import logging

    from ._common import EXIT_PIPE

    logging.shutdown()  # what atexit would do: flush and close the handlers
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _quiet_stdout()
        code = code or EXIT_PIPE
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.flush()
    os._exit(code)
