"""Where a test run's time and CPU go, per test module (hooks ``tests/conftest.py`` uses).

Each test's wall time and the machine's busy CPU time while it ran (every process: the
brokers, Spark's JVMs and the subprocesses a test starts count too, read from
``/proc/stat``) are summed per module; the terminal summary lists the modules with the
most CPU.  A module's "cores" is its CPU over its wall time: near 0 a module waits
(timers, brokers), near the machine's core count it computes.  Under pytest-xdist the
other workers' tests share the machine, so the summary is printed by serial runs only.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

_STAT = Path("/proc/stat")
_HZ = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_SHOWN = 25

#: module -> [wall seconds, busy CPU seconds, tests]
_totals: dict[str, list[float]] = {}
_started: dict[str, tuple[float, float]] = {}


def _busy_seconds() -> float:
    """The machine's busy CPU time since boot (all cores), or 0.0 without ``/proc``."""
    try:
        fields = _STAT.read_text().split("\n", 1)[0].split()[1:]
    except OSError:
        return 0.0
    # user nice system idle iowait irq softirq steal (guest time is already in user)
    values = [int(v) for v in fields[:8]]
    busy = sum(values) - values[3] - values[4]
    return busy / _HZ


def pytest_runtest_logstart(nodeid: str, location: tuple[str, int | None, str]) -> None:
    _started[nodeid] = (time.monotonic(), _busy_seconds())


def pytest_runtest_logfinish(nodeid: str, location: tuple[str, int | None, str]) -> None:
    began = _started.pop(nodeid, None)
    if began is None:
        return
    module = nodeid.split("::", 1)[0].rsplit("/", 1)[-1].removesuffix(".py")
    row = _totals.setdefault(module, [0.0, 0.0, 0.0])
    row[0] += time.monotonic() - began[0]
    row[1] += _busy_seconds() - began[1]
    row[2] += 1


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER") or not _totals or _busy_seconds() == 0.0:
        return
    if terminalreporter.config.getoption("numprocesses", None):
        return  # the controller of an xdist run: its workers ran the tests
    wall = sum(r[0] for r in _totals.values())
    cpu = sum(r[1] for r in _totals.values())
    write = terminalreporter.write_line
    terminalreporter.section("time and machine CPU per test module")
    write(f"all {len(_totals)} modules: {wall:.0f} s of wall time, {cpu:.0f} s of CPU "
          f"(on average {cpu / max(wall, 1e-9):.2f} of {os.cpu_count()} cores busy)")
    write(f"{'module':<44} {'tests':>5} {'wall s':>8} {'CPU s':>8} {'cores':>6}")
    for module, (w, c, n) in sorted(_totals.items(), key=lambda kv: -kv[1][1])[:_SHOWN]:
        write(f"{module:<44} {int(n):>5} {w:>8.1f} {c:>8.1f} {c / max(w, 1e-9):>6.2f}")
