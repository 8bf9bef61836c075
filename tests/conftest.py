"""Shared fixtures: the RabbitMQ URL of the integration tests, genuine qpidd brokers and
the classic qpid tools."""

from __future__ import annotations

import logging
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import urlsplit

import pytest

from ._cpu_report import (  # noqa: F401  (pytest's hooks: time and CPU per module)
    pytest_runtest_logfinish,
    pytest_runtest_logstart,
    pytest_terminal_summary,
)
from .qpidd import ROOT, Qpidd, QpiddError, qpidd_home

DEFAULT_URL = "amqp://guest:guest@localhost:5672/"


#: why a ``proton_peer`` test skips: python-qpid-proton is no dependency of the suite, only
#: of its proton tier (scripts/test.sh installs it with ``pip install --target`` and runs
#: ``PYTHONPATH=<that dir> pytest -m proton_peer``)
PROTON_PEER_REASON = ("python-qpid-proton (an independent AMQP 1.0 peer) is installed for "
                      "the proton_peer tier only: scripts/test.sh runs it")


def need_proton() -> Any:
    """The ``proton`` module for a ``proton_peer`` test (a skip naming the tier without)."""
    return pytest.importorskip("proton", reason=PROTON_PEER_REASON)


# the automatic transport's file of AMQP 1.0 places is off in the tests (brokers come
# and go on random ports); tests/test_startup_imports.py turns it on where it checks it
os.environ.setdefault("QMF_PROTOCOL_CACHE", "")


# --- a RabbitMQ node per pytest-xdist worker -----------------------------------------
#
# Under pytest-xdist (``scripts/test.sh`` runs the suite with ``-n``) each worker gets a
# private RabbitMQ node (``scripts/rabbitmq.sh --node``), so a test may restart, stall,
# fill or reconfigure its broker, or list all of its queues and connections, without
# touching the tests of another worker.  The worker's environment names that node from
# the start: ``QMF_TEST_URL`` (AMQP), ``QMF_RABBITMQ_API`` (management API) and
# ``RABBITMQ_NODENAME`` (what rabbitmqctl and rabbitmq-plugins reach), and subprocesses
# the tests start inherit it; the node itself is started by the first test that asks
# for ``amqp_url`` (a worker that runs no RabbitMQ test starts none) and stopped when
# the worker ends.  Without xdist, when ``QMF_TEST_URL`` names another host, or with
# ``QMF_TEST_SHARED_BROKER=1``, every test uses that one broker, as before.

_private_node: dict[str, str] = {}
_private_node_started: list[bool] = []


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def _wants_private_node() -> bool:
    if not os.environ.get("PYTEST_XDIST_WORKER") or os.environ.get("QMF_TEST_SHARED_BROKER"):
        return False
    host = urlsplit(os.environ.get("QMF_TEST_URL", DEFAULT_URL)).hostname
    if host not in ("localhost", "127.0.0.1", None):
        return False
    return bool(shutil.which("rabbitmq-server")
                or shutil.which("rabbitmq-server", path="/usr/sbin:/sbin"))


def _rabbitmq_script(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(ROOT / "scripts" / "rabbitmq.sh"), *args],
                          capture_output=True, text=True, timeout=timeout, check=False)


def pytest_configure(config: pytest.Config) -> None:
    _quick_spark_jvms()
    if not _wants_private_node():
        return
    worker = os.environ["PYTEST_XDIST_WORKER"]
    name = f"qmf-test-{worker}-{os.getpid()}"
    amqp, api, dist = _free_ports(3)
    # the rabbitmq user runs the node: its folder lies directly in the (world-readable)
    # temporary directory, not under pytest's private one
    _private_node.update(
        name=name, dir=str(Path(tempfile.gettempdir()) / name),
        amqp=str(amqp), api=str(api), dist=str(dist))
    os.environ["QMF_TEST_URL"] = f"amqp://guest:guest@localhost:{amqp}/"
    os.environ["QMF_RABBITMQ_API"] = f"http://guest:guest@localhost:{api}/"
    os.environ["RABBITMQ_NODENAME"] = f"{name}@localhost"
    os.environ["RABBITMQ_ENABLED_PLUGINS_FILE"] = f"{_private_node['dir']}/enabled_plugins"


def _start_private_node() -> None:
    """Start this worker's node (once).

    Raises:
        pytest.fail: the node did not start (with the script's reason).
    """
    if _private_node_started:
        return
    node = _private_node
    try:
        done = _rabbitmq_script("--node", node["name"], "--port", node["amqp"],
                                "--api-port", node["api"], "--dist-port", node["dist"],
                                "--dir", node["dir"], timeout=300)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the RabbitMQ node {node['name']} did not start within 300 s",
                    pytrace=False)
    _private_node_started.append(True)  # stopped at the end even when it half started
    if done.returncode != 0:
        pytest.fail(f"the RabbitMQ node {node['name']} did not start: "
                    f"{done.stderr.strip()[-2000:]}", pytrace=False)


def pytest_unconfigure(config: pytest.Config) -> None:
    for conf in _spark_conf_dirs:
        shutil.rmtree(conf, ignore_errors=True)
    if _private_node_started:
        _rabbitmq_script("--stop", "--node", _private_node["name"], "--dir",
                         _private_node["dir"], timeout=120)
        _private_node_started.clear()


# --- how the suite is spread over the workers ------------------------------------------
#
# ``scripts/test.sh`` runs ``-n N --dist loadscope``, and here that means: each test
# module is one unit of work (its module-scoped brokers, vhosts and event loops are set
# up once), the Spark modules share one unit (one worker runs their JVMs, one at a
# time), and the units are handed out longest first, so that the long ones do not end
# the run on one worker while the others wait.  (pytest-xdist's own ``loadgroup`` does
# not group on this pytest: it renames node ids, which pytest 9 no longer reads.)

#: modules that run on one worker, one after the other (Spark's JVMs are heavy)
_SHARED_WORKER = {
    "test_pipeline": "spark", "test_pipeline_qpidd": "spark", "test_pipeline_cluster": "spark",
    "test_pipeline_connect": "spark", "test_bench_telemetry": "spark",
}

#: the longest units, in the order they are started (from the runs in
#: docs/benchmarks.md, "Test suite"); every other module follows in collection order
_LONGEST_FIRST = [
    "spark", "test_load", "test_faults", "test_hostile", "test_security", "test_slow_consumer",
    "test_bridge_rabbitmq", "test_session_v2", "test_tools_stock_qpidd", "test_session_qpidd",
    "test_examples", "test_web_dashboard", "test_cli_tools", "test_parity_stat_qpidd",
    "test_session_integration", "test_static_checks", "test_docs", "test_classic_qpidd",
]


#: units that keep a core busy (JVMs, floods, storms, TLS handshakes, type checking):
#: at most ``_MAX_HEAVY`` of them run at once, so the timing of the others holds
_HEAVY = frozenset({"spark", "test_load", "test_hostile", "test_faults", "test_security",
                    "test_static_checks", "test_docs"})
_MAX_HEAVY = 2


def _unit(module: str) -> str:
    return _SHARED_WORKER.get(module, module)


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook: absent without it
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    if config.getoption("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ModuleScheduling(LoadScopeScheduling):  # type: ignore[misc]
        """A module (or a group of modules) is a unit of work."""

        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0].rsplit("/", 1)[-1].removesuffix(".py")
            return _unit(module)

        def _assign_work_unit(self, node: Any) -> None:
            # the first unit in the queue, unless it is heavy and enough heavy ones run
            running = sum(1 for work in self.assigned_work.values()
                          for scope, tests in work.items()
                          if scope in _HEAVY and not all(tests.values()))
            scope = next(iter(self.workqueue))
            if scope in _HEAVY and running >= _MAX_HEAVY:
                scope = next((s for s in self.workqueue if s not in _HEAVY), scope)
            work_unit = self.workqueue.pop(scope)
            self.assigned_work.setdefault(node, {})[scope] = work_unit
            collection = self.registered_collections[node]
            node.send_runtest_some([collection.index(nodeid)
                                    for nodeid, done in work_unit.items() if not done])

    return ModuleScheduling(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # every worker sorts alike, so they all send the same collection
    if os.environ.get("PYTEST_XDIST_WORKER"):
        rank = {name: i for i, name in enumerate(_LONGEST_FIRST)}
        items.sort(key=lambda item: rank.get(_unit(item.path.stem), len(rank)))  # stable


@pytest.fixture(scope="session")
def amqp_url() -> str:
    """URL of the test broker (``QMF_TEST_URL``); fails when nothing answers there."""
    if _private_node:
        _start_private_node()
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


# --- Spark ---------------------------------------------------------------------------
#
# One local SparkSession for every test of a run that wants one (the Spark modules run
# on one worker under xdist), and one local-mode run of the rate benchmark's dataset
# that the cluster and Spark Connect tests compare their tables with.

#: the jobs of the tests are tiny: a JVM that compiles less (C1 only, serial GC) runs
#: them on about 40% less CPU (a ``qmf pipeline`` of 6,000 samples: 70 s of CPU instead
#: of 120 s), with the same results
QUICK_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
QUICK_JVM = {"spark.driver.extraJavaOptions": QUICK_JVM_OPTIONS}


def _quick_spark_jvms() -> None:
    """Every Spark JVM the tests start, in this process or in the ``qmf pipeline``,
    cluster and Spark Connect processes they run, gets :data:`QUICK_JVM_OPTIONS`:
    drivers and executors from a ``spark-defaults.conf`` in a ``SPARK_CONF_DIR`` of
    the run (pyspark ships no conf directory, so nothing else is replaced), the
    standalone master and worker from ``SPARK_DAEMON_JAVA_OPTS``.  A command line's
    own ``--conf`` still wins."""
    if os.environ.get("SPARK_CONF_DIR"):
        return  # the developer's own Spark configuration
    conf = Path(tempfile.mkdtemp(prefix="qmf-test-spark-conf-"))
    (conf / "spark-defaults.conf").write_text(
        f"spark.driver.extraJavaOptions {QUICK_JVM_OPTIONS}\n"
        f"spark.executor.extraJavaOptions {QUICK_JVM_OPTIONS}\n")
    os.environ["SPARK_CONF_DIR"] = str(conf)
    os.environ.setdefault("SPARK_DAEMON_JAVA_OPTS", QUICK_JVM_OPTIONS)
    _spark_conf_dirs.append(conf)


_spark_conf_dirs: list[Path] = []


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """A local[2] SparkSession bound to 127.0.0.1, shared by the whole run."""
    pytest.importorskip("pyspark")
    from qmf_async.tools.pipeline import build_spark

    session = build_spark("local[2]", app_name="qmf-async-tests", bind_host="127.0.0.1",
                          config=QUICK_JVM)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def rates_local(spark: Any, tmp_path_factory: pytest.TempPathFactory
                ) -> tuple[Path, Path, dict[str, Any]]:
    """The rate benchmark's dataset at a small size (6,000 samples of 10 queues, queue 0
    resetting) and the pipeline's tables in local mode: (dataset, out dir, summary)."""
    from qmf_async.tools.pipeline import run_pipeline

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import pipeline_rates

    root = tmp_path_factory.mktemp("rates-local")
    dataset = root / "data"
    info = pipeline_rates.generate(dataset, 6_000, 10)
    assert info["samples"] == 6_000
    summary = run_pipeline(spark, str(dataset), str(root / "out"))
    return dataset, root / "out", summary
