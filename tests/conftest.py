"""Shared fixtures: the RabbitMQ URL of the integration tests, and genuine qpidd brokers."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest

DEFAULT_URL = "amqp://guest:guest@localhost:5672/"


@pytest.fixture(scope="session")
def amqp_url() -> str:
    """URL of the test broker (``QMF_TEST_URL``); fails when nothing answers there."""
    url = os.environ.get("QMF_TEST_URL", DEFAULT_URL)
    parts = urlsplit(url)
    host = parts.hostname or "localhost"
    port = parts.port or (5671 if parts.scheme == "amqps" else 5672)
    try:
        with socket.create_connection((host, port), timeout=2.0):
            pass
    except OSError as exc:
        pytest.fail(
            f"no AMQP broker answers on {host}:{port} ({exc}); "
            "start one with `bash scripts/rabbitmq.sh` (or set QMF_TEST_URL)",
            pytrace=False,
        )
    return url


# ---------------------------------------------------------------------------- qpidd

def _unavailable(reason: str) -> None:
    """Skip outside CI; in CI (``$CI`` set) the qpidd tests must run, so fail."""
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI must run the qpidd tests)", pytrace=False)
    pytest.skip(reason)


def _start_qpidd(qmf1: bool) -> Any:
    from .qpidd import Qpidd, QpiddUnavailable

    try:
        return Qpidd(qmf1=qmf1)
    except QpiddUnavailable as exc:
        _unavailable(str(exc))
        raise AssertionError("unreachable") from exc


@pytest.fixture(scope="session")
def qpidd_v1() -> Iterator[Any]:
    """A qpidd with QMF v1 indications on (``--mgmt-qmf1 yes``), for the whole run."""
    q = _start_qpidd(True)
    yield q
    q.remove()


@pytest.fixture(scope="session")
def qpidd_stock() -> Iterator[Any]:
    """A qpidd as shipped (QMF v1 indications off, v2 only), for the whole run."""
    q = _start_qpidd(False)
    yield q
    q.remove()


@pytest.fixture
def qpidd_fresh() -> Iterator[Callable[..., Any]]:
    """``start(qmf1=True)`` -> a qpidd of the test's own (to restart or kill); all are
    stopped when the test ends."""
    made: list[Any] = []

    def start(qmf1: bool = True) -> Any:
        made.append(_start_qpidd(qmf1))
        return made[-1]

    yield start
    for q in made:
        q.remove()


@pytest.fixture(scope="session")
def classic_tools() -> Callable[..., tuple[int, str, str]]:
    """``run(tool, *args, timeout=60)`` -> (exit code, stdout, stderr) of a classic qpid
    tool (../shared/classic-tools)."""
    from .qpidd import classic_tools_problem, run_classic

    problem = classic_tools_problem()
    if problem is not None:
        _unavailable(problem)
    return run_classic
