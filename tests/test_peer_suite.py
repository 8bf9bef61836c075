"""The Apache Qpid projects' own tests of the classic APIs (``../shared/peer-suite``:
the upstream qpid-python and qpid-cpp suites, unchanged, run by their runner
``qpid-python-test``) against this project's ``qmf.console``, ``qpidtoollibs`` and
``qmf.client``, on genuine qpidd brokers the harness starts.

The suites that exercise the layer most: ``qmfv2`` (Console callbacks on a v1-only and a
v2-only qpidd), ``management`` and ``msg_groups`` with QMF v1 on and on a stock qpidd,
and ``qmf_client`` (AMQP 1.0 ``BrokerAgent``, with its fake-server reconnect tests; its
tests import proton, so it runs in the proton_peer tier of scripts/test.sh).  Every test
passes but the ones Python 3 itself blocks (the 0-10 client, see docs/classic.md).
About 60 s here; skipped when ``../shared`` is absent.

``QMF_PEER_PYTHON=/path/to/python3.12`` (scripts/test_pythons.sh sets it for the
3.12 and 3.13 venvs) runs the ``qmfv2`` suite with that interpreter too: the harness
stays on this one, the tests and the classic layer run on that one, with
``tests/peer_compat`` on their path (Python 3.12 removed what the tests' own 0-10 client
and base classes import: ``ssl.wrap_socket``, ``imp``, the ``unittest`` aliases).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from .conftest import need_proton

pytestmark = pytest.mark.qpidd

ROOT = Path(__file__).resolve().parent.parent
PEER = ROOT.parent / "shared" / "peer-suite"
#: Python 3.12+ shims for the tests' own code, never for the layer under test
COMPAT = ROOT / "tests" / "peer_compat"
#: another interpreter to run the qmfv2 suite on (scripts/test_pythons.sh)
OTHER_PYTHON = os.environ.get("QMF_PEER_PYTHON", "")
QPIDD = ROOT.parent / "shared" / "qpidd" / "bin" / "qpidd"

#: fail under Python 3 in the 0-10 client or the test itself, whatever the console does
#: (the peer-suite README): never expected to pass
BLOCKERS = frozenset({
    "qpid_tests.broker_0_10.management.ManagementTest.test_broker_connectivity_oldAPI",
    "qpid_tests.broker_0_10.management.ManagementTest.test_reroute_queue",
    "qpid_tests.broker_0_10.stats.BrokerStatsTests.test_enqueues_dequeues",
    "qpid_tests.broker_0_10.stats.BrokerStatsTests.test_exchange_stats",
    "qpid_tests.broker_0_10.stats.BrokerStatsTests.test_transactional_enqueues_dequeues",
})

#: race qpidd in the test itself: the test's 0-10 client opens a session without waiting
#: for the broker's ``attached`` and asks for the broker's session objects at once (on a
#: busy machine the broker may not have made it yet); one that fails is run again alone
RACY = frozenset({
    "qpid_tests.broker_0_10.management.ManagementTest.test_connection_close",
    "qpid_tests.broker_0_10.management.ManagementTest.test_connection_stats",
})

#: tests in these suites and how many of them pass: (suite, --mgmt-qmf1) -> passes
EXPECTED = {
    ("qmfv2", "yes"): 6,
    ("management", "yes"): 16,
    ("msg_groups", "yes"): 8,
    ("management", "no"): 16,
    ("msg_groups", "no"): 8,
}
RUNS = {
    "yes": ["qmfv2", "management", "msg_groups"],
    "no": ["management", "msg_groups"],
}


def _free_base() -> int:
    """A harness port base whose four ports nobody listens on (5690-5696)."""
    for base in (5696, 5692, 5694, 5690, 5693, 5691, 5695):
        busy = False
        for port in range(base, base + 4):
            with socket.socket() as s:
                s.settimeout(0.2)
                busy = busy or s.connect_ex(("127.0.0.1", port)) == 0
        if not busy:
            return base
    pytest.skip("every peer-suite port base (5690-5696) is in use")


def _run(mode: str, out: Path, suites: list[str], tests: tuple[str, ...] = (),
         python: str = sys.executable) -> dict[str, object]:
    """One harness run of ``suites`` (only ``tests`` when given) with the tests on
    ``python``; its results.json."""
    path = [str(ROOT)]
    if python != sys.executable:  # the shims load only on 3.12+ (sitecustomize checks)
        path.append(str(COMPAT))
    if os.environ.get("PYTHONPATH"):  # the proton_peer tier's proton (qmf_client's tests)
        path.append(os.environ["PYTHONPATH"])
    env = {**os.environ, "PEER_PROJECT_ROOT": str(ROOT), "PYTHONPATH": os.pathsep.join(path)}
    for _attempt in range(3):  # another run may take the free ports first: pick again
        argv = [sys.executable, str(PEER / "run"), "--python", python,
                "--impl", "peer_project_console", "--toollibs-impl", "peer_project_toollibs",
                "--client-impl", "peer_project_client", "--path", str(PEER / "impls_project"),
                "--suite", ",".join(suites), "--qmf1", mode, "--port", str(_free_base()),
                "--progress", "no", "--json", str(out)]
        for name in tests:
            argv += ["--test", name]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=env,
                              check=False)
        if out.exists() or "is in use" not in done.stdout + done.stderr:
            break
    if not out.exists():
        pytest.fail(f"the harness wrote no results (rc {done.returncode}):\n"
                    f"{done.stdout[-3000:]}\n{done.stderr[-2000:]}")
    results: dict[str, object] = json.loads(out.read_text())
    return results


@pytest.fixture(scope="module")
def peer_results(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], dict[str, object]]:
    """``results(mode)``: the harness's results with ``--mgmt-qmf1 mode`` (run once)."""
    if not (PEER / "run").exists():
        pytest.skip(f"the conformance suite is absent ({PEER}: ../shared is not there)")
    if not QPIDD.exists():
        pytest.skip(f"no qpidd build at {QPIDD}")
    cache: dict[str, dict[str, object]] = {}

    def results(mode: str) -> dict[str, object]:
        if mode not in cache:
            out = _run(mode, tmp_path_factory.mktemp(f"peer-{mode}") / "results.json",
                       RUNS[mode])
            suites = out["suites"]
            assert isinstance(suites, dict)
            for suite, found in suites.items():
                for name, result in found["tests"].items():
                    if name in RACY and result["status"] != "pass":
                        again = _run(mode, tmp_path_factory.mktemp("peer-again") / "r.json",
                                     [suite], (name,))["suites"]
                        assert isinstance(again, dict)
                        found["tests"][name] = again[suite]["tests"][name]
            cache[mode] = out
        return cache[mode]

    return results


@pytest.mark.parametrize(("suite", "mode"), sorted(EXPECTED, key=lambda k: (k[1], k[0])))
def test_the_upstream_suite_passes(peer_results: Callable[[str], dict[str, object]],
                                   suite: str, mode: str) -> None:
    suites: Any = peer_results(mode)["suites"]
    assert isinstance(suites, dict)
    tests = suites[suite]["tests"]
    failed = {name: f"{t['status']}: {t['reason']}" for name, t in tests.items()
              if t["status"] != "pass"}
    unexpected = {name: why for name, why in failed.items()
                  if name not in BLOCKERS}
    assert not unexpected, f"{suite} (--mgmt-qmf1 {mode}): {unexpected}"
    passed = sum(1 for t in tests.values() if t["status"] == "pass")
    assert passed == EXPECTED[suite, mode], f"{suite}: {passed} passed, {failed}"


@pytest.mark.skipif(not OTHER_PYTHON, reason="QMF_PEER_PYTHON names no other interpreter")
def test_the_callback_suite_passes_on_another_python(
        tmp_path: Path) -> None:
    if not (PEER / "run").exists() or not QPIDD.exists():
        pytest.skip(f"the conformance suite or qpidd is absent ({PEER}, {QPIDD})")
    done = subprocess.run([OTHER_PYTHON, "-c", "import sys; print(sys.version.split()[0])"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, f"QMF_PEER_PYTHON={OTHER_PYTHON} does not run: {done.stderr}"
    out = _run("yes", tmp_path / "results.json", ["qmfv2"], python=OTHER_PYTHON)
    suites: Any = out["suites"]
    tests = suites["qmfv2"]["tests"]
    failed = {name: f"{t['status']}: {t['reason']}" for name, t in tests.items()
              if t["status"] != "pass"}
    assert len(tests) == EXPECTED["qmfv2", "yes"] and not failed, (done.stdout, failed)


@pytest.mark.proton_peer
def test_the_qmf_client_suite_passes(tmp_path: Path) -> None:
    """qpid-cpp's ``qmf_client`` tests against our ``qmf.client`` (9 of 9).  The tests
    themselves import proton (their reconnect cases run a fake server on it), so they run
    in the proton_peer tier; our ``qmf.client`` does not use it."""
    need_proton()
    if not (PEER / "run").exists() or not QPIDD.exists():
        pytest.skip(f"the conformance suite or qpidd is absent ({PEER}, {QPIDD})")
    out = _run("yes", tmp_path / "results.json", ["qmf_client"])
    suites: Any = out["suites"]
    tests = suites["qmf_client"]["tests"]
    failed = {name: f"{t['status']}: {t['reason']}" for name, t in tests.items()
              if t["status"] != "pass"}
    assert len(tests) == 9 and not failed, failed
