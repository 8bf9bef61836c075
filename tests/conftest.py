"""Shared fixtures: the RabbitMQ URL of the integration tests, genuine qpidd brokers and
the classic qpid tools."""

from __future__ import annotations

import logging
import os
import shutil
import socket
import subprocess
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import NoReturn
from urllib.parse import urlsplit

import pytest

from .qpidd import ROOT, Qpidd, QpiddError, qpidd_home

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


# --- genuine qpidd (scripts/qpidd.sh) ------------------------------------------------

CLASSIC_TOOLS_RUN = ROOT.parent / "shared" / "classic-tools" / "run"


def _unavailable(reason: str) -> NoReturn:
    """Skip the test, or fail it when ``$CI`` is set (CI must run every test)."""
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI is set, so this is a failure)", pytrace=False)
    pytest.skip(reason)


def _start_qpidd(qmf1: bool, directory: Path | None = None,
                 extra: Sequence[str] = ()) -> Qpidd:
    if qpidd_home() is None:
        if os.environ.get("QPIDD_HOME"):
            _unavailable(f"qpidd not found: QPIDD_HOME={os.environ['QPIDD_HOME']} has no bin/qpidd")
        _unavailable(
            "qpidd not found: ../shared/qpidd is absent and QPIDD_HOME is unset "
            "(set QPIDD_HOME to a qpidd folder with bin/qpidd and modules/amqp.so)"
        )
    try:
        return Qpidd.start(qmf1=qmf1, directory=directory, extra=extra)
    except QpiddError as exc:
        _unavailable(f"qpidd failed to start: {exc}")


@pytest.fixture(scope="session")
def qpidd_v1(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Qpidd]:
    """A qpidd with QMF v1 enabled (``--mgmt-qmf1 yes``) and v2, shared by the session."""
    broker = _start_qpidd(True, tmp_path_factory.mktemp("qpidd-v1"))
    yield broker
    broker.stop()


@pytest.fixture(scope="session")
def qpidd_stock(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Qpidd]:
    """A qpidd with the stock management default (QMF v2 only), shared by the session."""
    broker = _start_qpidd(False, tmp_path_factory.mktemp("qpidd-stock"))
    yield broker
    broker.stop()


@pytest.fixture
def qpidd_fresh(tmp_path: Path) -> Iterator[Callable[[bool], Qpidd]]:
    """A factory ``start(qmf1) -> Qpidd`` of private brokers (to restart or kill).

    Every broker it started is stopped at teardown.
    """
    started: list[Qpidd] = []

    def start(qmf1: bool) -> Qpidd:
        broker = _start_qpidd(qmf1, tmp_path / f"qpidd-{len(started)}")
        started.append(broker)
        return broker

    yield start
    errors: list[str] = []
    for broker in started:
        try:
            broker.stop()
        except QpiddError as exc:
            errors.append(str(exc))
    if errors:
        pytest.fail("; ".join(errors), pytrace=False)


def _python27() -> str | None:
    """The Python 2.7 the classic tools' ``run`` script would pick, or None."""
    if os.environ.get("PYTHON2"):
        return os.environ["PYTHON2"]
    pyenv = Path(os.environ.get("PYENV_ROOT", str(Path.home() / ".pyenv")))
    for candidate in sorted(pyenv.glob("versions/2.7*/bin/python2.7")):
        if os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which("python2.7")


ClassicTools = Callable[..., tuple[int, str, str]]


@pytest.fixture(scope="session")
def classic_tools() -> ClassicTools:
    """A callable ``run(tool, *args, timeout=30.0) -> (rc, stdout, stderr)`` running the
    classic qpid tools (``../shared/classic-tools/run``)."""
    if not CLASSIC_TOOLS_RUN.exists():
        _unavailable(f"classic qpid tools not found: {CLASSIC_TOOLS_RUN} is absent")
    if _python27() is None:
        _unavailable("classic qpid tools need Python 2.7 ($PYTHON2, pyenv 2.7.x or python2.7)")

    def run(tool: str, *args: str, timeout: float = 30.0) -> tuple[int, str, str]:
        argv: Sequence[str] = ["bash", str(CLASSIC_TOOLS_RUN), tool, *args]
        try:
            done = subprocess.run(
                argv, capture_output=True, text=True, timeout=timeout, check=False
            )
        except subprocess.TimeoutExpired:
            pytest.fail(f"{tool} {' '.join(args)} did not finish within {timeout}s", pytrace=False)
        return done.returncode, done.stdout, done.stderr

    return run


@pytest.fixture
def needs_qpidd() -> None:
    """The benchmark smoke tests' needs: the shared qpidd build and a Python 2.7 (the
    classic tools).  Skipped without them, except in CI, where they must run."""
    from benchmarks.qpidd.broker import QPIDD_HOME, QpiddError, python2, qpidd_binary

    why = None
    if qpidd_binary() is None:
        why = f"no qpidd build at {QPIDD_HOME} (../shared/qpidd)"
    else:
        try:
            python2()
        except QpiddError as exc:
            why = str(exc)
    if why is not None:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the qpidd benchmark smoke tests: {why}")
        pytest.skip(why)


#: loggers whose level, filters, handlers and propagation a tool run in this process
#: changes (the ``qmf`` tools set up the logging of the process they run in)
_TOOL_LOGGERS = ("", "qmf_async", "qmf_async.session", "qmf_async.transport", "aiormq",
                 "pamqp")


@pytest.fixture(autouse=True)
def _logging_as_it_was() -> Iterator[None]:
    """Put the logging set-up back after each test, so a tool run in-process (``main()``
    of ``qmf``) cannot hide the records later tests look for."""
    saved = []
    for name in _TOOL_LOGGERS:
        logger = logging.getLogger(name)
        saved.append((logger, logger.level, list(logger.filters), list(logger.handlers),
                      logger.propagate))
    yield
    for logger, level, filters, handlers, propagate in saved:
        logger.setLevel(level)
        logger.filters[:] = filters
        logger.handlers[:] = handlers
        logger.propagate = propagate
