"""Warnings about bad input are rate limited: the first ten, then every thousandth."""

from __future__ import annotations

import logging

import pytest

from qmf_async.logs import warn_limited


def test_a_flood_of_bad_input_logs_ten_warnings_then_one_per_thousand(
        caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("qmf_async.test.limits")
    with caplog.at_level(logging.DEBUG, logger="qmf_async.test.limits"):
        for n in range(1, 3001):
            warn_limited(logger, n, "bad body %d from %s", n, "here")
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings[:10] == [f"bad body {n} from here" for n in range(1, 11)]
    assert warnings[10:] == [
        f"bad body {n} from here ({n} so far; the others are logged at DEBUG)"
        for n in (1000, 2000, 3000)]
    debug = [r for r in caplog.records if r.levelno == logging.DEBUG]
    assert len(debug) == 3000 - 13
