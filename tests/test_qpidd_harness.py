"""The qpidd harness itself: scripts/qpidd.sh and the fixtures start a real qpidd that
answers what the transports rely on, restart it on the same port, and stop it."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.qpidd

ROOT = Path(__file__).resolve().parent.parent


def _answer_to(port: int, header: bytes) -> bytes:
    """What qpidd sends back to a protocol header (read with a deadline)."""
    with socket.create_connection(("127.0.0.1", port), timeout=5.0) as sock:
        sock.sendall(header)
        data = b""
        deadline = time.monotonic() + 5.0
        while len(data) < 8 and time.monotonic() < deadline:
            chunk = sock.recv(8 - len(data))
            if not chunk:
                break
            data += chunk
        return data


def test_qpidd_answers_the_headers_the_transports_rely_on(qpidd_v1: Any) -> None:
    # AMQP 1.0 with SASL: answered in kind
    assert _answer_to(qpidd_v1.port, b"AMQP\x03\x01\x00\x00") == b"AMQP\x03\x01\x00\x00"
    # AMQP 0-9-1: answered with qpidd's own header (0-10), which is how the
    # console knows to go on over 1.0
    answer = _answer_to(qpidd_v1.port, b"AMQP\x00\x00\x09\x01")
    assert answer.startswith(b"AMQP") and answer != b"AMQP\x00\x00\x09\x01"
    assert answer == b"AMQP\x01\x01\x00\x0a"


@pytest.mark.parametrize("which", ["qpidd_v1", "qpidd_stock"])
def test_the_classic_tools_manage_the_harness_qpidd(which: str, request: pytest.FixtureRequest,
                                                    classic_tools: Any) -> None:
    qpidd = request.getfixturevalue(which)
    name = f"harness-{which}-{os.getpid()}"
    rc, _, err = classic_tools("qpid-config", "-b", qpidd.address, "add", "queue", name)
    assert rc == 0, err
    rc, out, err = classic_tools("qpid-stat", "-b", qpidd.address, "-q")
    assert rc == 0, err
    assert name in out


def test_restart_keeps_the_port_and_stop_frees_it(qpidd_fresh: Any) -> None:
    qpidd = qpidd_fresh(qmf1=False)
    port, first_pid = qpidd.port, qpidd.pid
    assert qpidd.alive() and qpidd.cpu_seconds() >= 0.0
    qpidd.restart()
    assert qpidd.port == port and qpidd.pid != first_pid and qpidd.alive()
    assert _answer_to(port, b"AMQP\x03\x01\x00\x00").startswith(b"AMQP")
    qpidd.stop()
    deadline = time.monotonic() + 10
    while qpidd.alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not qpidd.alive()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1.0).close()
    qpidd.stop()  # idempotent


@pytest.mark.parametrize("ci", [False, True])
def test_without_qpidd_the_tests_skip_and_ci_fails(tmp_path: Path, ci: bool) -> None:
    test = tmp_path / "test_needs_qpidd.py"
    test.write_text(textwrap.dedent("""
        def test_it(qpidd_v1):
            pass
    """))
    (tmp_path / "conftest.py").write_text(
        f"import sys; sys.path.insert(0, {str(ROOT)!r})\n"
        "from tests.conftest import qpidd_v1  # noqa: F401\n")
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["QPIDD_HOME"] = str(tmp_path / "no-qpidd-here")
    if ci:
        env["CI"] = "true"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
                           str(test)], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    out = proc.stdout + proc.stderr
    assert "qpidd not found" in out
    if ci:
        assert proc.returncode != 0 and ("1 error" in out or "1 failed" in out), out
        assert "CI must run the qpidd tests" in out
    else:
        assert proc.returncode == 0 and "1 skipped" in out, out
