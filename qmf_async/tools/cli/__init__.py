"""``qmf``: command-line tools on the public qmf-async API.

Subcommands: shell, repl, stat, config, events, queue-stats, collect, pipeline, exporter
(``qmf --help``).
Needs the ``cli`` extra: ``pip install 'qmf-async[cli]'``.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import logging
import os
import sys
from collections.abc import Sequence

from ... import __version__
from ._common import EXIT_USAGE, EXPECTED_ERRORS, fail

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


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="qmf", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"qmf-async {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for module_name in SUBCOMMANDS.values():
        module = importlib.import_module(f".{module_name}", __name__)
        module.add_parser(sub)
    # each subcommand's parser, to report its own usage on an unknown option
    parser.subcommands = dict(sub.choices)  # type: ignore[attr-defined]
    return parser


def _quiet_logging() -> None:
    """Library warnings as one short line each; aiormq's connect noise is dropped
    (the tool reports the failure itself)."""
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.WARNING, format="qmf: %(levelname)s: %(message)s")
    logging.getLogger("aiormq").setLevel(logging.CRITICAL)


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``qmf``; returns the exit code (0 ok, see ``_common`` for the others)."""
    try:
        parser = _parser()
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] not in ("rich", "prompt_toolkit"):
            raise
        print(f"qmf: the command-line tools need the cli extra "
              f"(pip install 'qmf-async[cli]'): {exc}", file=sys.stderr)
        return EXIT_USAGE
    args, extra = parser.parse_known_args(argv)
    if extra:  # reported with the subcommand's usage, not qmf's
        sub = parser.subcommands.get(args.command, parser)  # type: ignore[attr-defined]
        sub.error(f"unrecognized arguments: {' '.join(extra)}")
    _quiet_logging()
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
        return 1
