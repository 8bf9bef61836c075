"""User-facing failures of the servers and the tools that need no broker to show: each
is one line on stderr (no traceback) with its own exit code (docs/tools.md)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DASHBOARD = ROOT / "examples" / "web_dashboard" / "app.py"
#: nothing listens there: the servers start anyway and retry in the background
NOWHERE = "127.0.0.1:1"


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


def _run(*argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "QMF_URL"}
    return subprocess.run([sys.executable, *argv], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env=env, check=False)


def test_qmf_exporter_on_a_busy_port(busy_port: int) -> None:
    done = _run("-m", "qmf_async", "exporter", "-b", NOWHERE, "--quiet",
                "--listen", f"127.0.0.1:{busy_port}")
    assert (done.returncode, done.stderr) == (
        8, f"qmf exporter: error: cannot listen on 127.0.0.1:{busy_port}: "
           "address already in use\n")


def test_the_dashboard_on_a_busy_port(busy_port: int) -> None:
    done = _run(str(DASHBOARD), "--url", NOWHERE, "--port", str(busy_port))
    assert (done.returncode, done.stderr) == (
        8, f"web_dashboard: error: cannot listen on 127.0.0.1:{busy_port}: "
           "address already in use\n")

