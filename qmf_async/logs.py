"""Logging shared by every layer: warnings about bad input that cannot flood the logs
(``warn_limited``)."""

from __future__ import annotations

import logging
from typing import Any

__all__ = ["warn_limited"]

#: occurrences logged at WARNING before only every ``EVERY``-th one is
FIRST = 10
EVERY = 1000


def warn_limited(logger: logging.Logger, count: int, msg: str, *args: Any) -> None:
    """Log the ``count``-th occurrence of something bad (a malformed message, ...) at
    WARNING when it is among the first ``FIRST`` or a multiple of ``EVERY`` (saying
    how many so far), and at DEBUG otherwise.

    Raises:
        Nothing: it does not raise.
    """
    if count <= FIRST:
        logger.warning(msg, *args)
    elif count % EVERY == 0:
        logger.warning(msg + " (%d so far; the others are logged at DEBUG)", *args, count)
    else:
        logger.debug(msg, *args)
