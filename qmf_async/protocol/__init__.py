"""qmf_async.protocol."""

from __future__ import annotations

from ._correlation import Correlator, Pending
from ._selector import Selector, SelectorError, compile_selector

__all__ = [
    "Correlator",
    "Pending",
    "Selector",
    "SelectorError",
    "compile_selector",
]
