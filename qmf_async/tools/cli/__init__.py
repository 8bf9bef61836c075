"""``qmf``: command-line tools on the public qmf-async API.

Subcommands: shell, repl, stat, config, events, queue-stats, route, collect, pipeline,
bridge, exporter (``qmf --help``).  They need the ``cli`` extra
(``pip install 'qmf-async[cli]'``), some one more (``EXTRAS``); a subcommand whose extra
is missing says which one when it is run, and the others work.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import sys
from collections.abc import Sequence
from typing import Any

from ... import __version__

# Start-up: this module imports neither asyncio nor logging nor the library (``_common``
# brings in the Session): ``qmf --version`` and ``qmf --help`` need none of them, and a
# subcommand's module imports what it needs (docs/benchmarks.md, "Start-up").

__all__ = ["main", "SUBCOMMANDS"]

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
    parser = subparsers.add_parser(name, help=f"(needs {hint})", add_help=False)
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
    parser = argparse.ArgumentParser(prog="qmf", description=__doc__.splitlines()[0])
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
        return int(asyncio.run(args.run(args)) or 0)
    except EXPECTED_ERRORS as exc:
        return fail(exc, f"qmf {args.command}")
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # the reader went away (``qmf stat --json | head``): stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_PIPE
