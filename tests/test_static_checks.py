"""``mypy --strict`` stays clean over ``qmf_async/``, ruff over every Python file of the
project (the package, tests, benchmarks, examples, scripts; settings in pyproject.toml)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent


def _run(module: str, *args: str) -> tuple[int, str]:
    if importlib.util.find_spec(module) is None:
        pytest.fail(f"{module} is not installed (pip install -e '.[test]')", pytrace=False)
    proc = subprocess.run([sys.executable, "-m", module, *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    return proc.returncode, proc.stdout + proc.stderr


def test_mypy_strict_is_clean() -> None:
    rc, output = _run("mypy", "--no-incremental")
    assert rc == 0, output


def test_ruff_is_clean() -> None:
    rc, output = _run("ruff", "check", "--no-cache", ".")
    assert rc == 0, output


def test_test_transports_conform_to_the_transport_protocol() -> None:
    """The fake and in-memory transports the unit tests inject are typed Transports
    (each module ends with a check mypy fails when a method or property is missing)."""
    rc, output = _run("mypy", "--strict", "--no-incremental", "tests/fake_transport.py",
                      "tests/memory_bus.py")
    assert rc == 0, output
