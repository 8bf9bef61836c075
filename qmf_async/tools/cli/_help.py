"""``--help`` formatting for the ``qmf`` parsers: argparse's formatters, given the
terminal's width as ``shutil.get_terminal_size`` finds it (``COLUMNS``, else the
terminal of stdout, else 80) without importing :mod:`shutil`.  argparse imports it for
every parser it builds, and with its archive modules (bz2, lzma, zlib) it cost ``qmf
stat -q`` about 1.5% of its run (docs/benchmarks.md, "Start-up")."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any, Final

__all__ = ["HELP", "RAW_DESCRIPTION", "formatter", "terminal_columns"]


def terminal_columns() -> int:
    """The terminal's width, as ``shutil.get_terminal_size().columns`` finds it."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


def formatter(base: type[argparse.HelpFormatter] = argparse.HelpFormatter,
              ) -> Callable[..., argparse.HelpFormatter]:
    """A ``formatter_class`` making ``base`` formatters as wide as argparse makes them
    (the terminal's width less 2) unless told a width."""

    def make(*args: Any, **kwargs: Any) -> argparse.HelpFormatter:
        if len(args) < 4 and kwargs.get("width") is None:
            kwargs["width"] = terminal_columns() - 2
        return base(*args, **kwargs)

    return make


#: argparse's two formatters the tools use, as ``formatter_class``
HELP: Final = formatter()
RAW_DESCRIPTION: Final = formatter(argparse.RawDescriptionHelpFormatter)
