"""Public names imported on first use, for this package's own ``__init__`` files (PEP 562;
not an API for users).

Each lazy ``__init__`` lists its names twice: as ``if TYPE_CHECKING`` imports, which type
checkers read, and as a ``_LAZY`` table (name -> ``module``, or ``module:attribute``
when the name is an alias, relative to the package), which :func:`lazy_names` reads at
run time.  ``tests/test_startup_imports.py`` holds the two lists to the same names.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_names"]


def lazy_names(namespace: dict[str, Any], table: Mapping[str, str],
               ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for the package whose globals are ``namespace``.

    ``__getattr__(name)`` imports the module ``table`` names for ``name``, keeps the
    value as a plain global of the package and returns it; it raises AttributeError for
    a name ``table`` lacks.
    """

    def __getattr__(name: str) -> Any:
        where = table.get(name)
        if where is None:
            raise AttributeError(f"module {namespace['__name__']!r} has no attribute {name!r}")
        module, _, attribute = where.partition(":")
        relative = module.lstrip(".")
        # __import__ (not importlib) so that ``python -X importtime`` shows the module
        source = __import__(relative, namespace, None, [attribute or name],
                            len(module) - len(relative))
        value = getattr(source, attribute or name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *table})

    return __getattr__, __dir__
