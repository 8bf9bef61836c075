"""A genuine qpidd for the tests, started and stopped through ``scripts/qpidd.sh`` (the one
place that knows its command line)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "qpidd.sh"
CLASSIC_TOOLS = ROOT.parent / "shared" / "classic-tools" / "run"


class QpiddUnavailable(Exception):
    """No qpidd here (no ../shared/qpidd and no $QPIDD_HOME), or it did not start."""


def qpidd_home() -> Path | None:
    """The qpidd folder the script would use, or None."""
    proc = subprocess.run(["bash", str(SCRIPT), "home"], capture_output=True, text=True,
                          timeout=10)
    return Path(proc.stdout.strip()) if proc.returncode == 0 and proc.stdout.strip() else None


class Qpidd:
    """One qpidd process on 127.0.0.1 with its own data directory."""

    def __init__(self, *, qmf1: bool, pub_interval: float = 1.0,
                 extra: tuple[str, ...] = ()) -> None:
        if qpidd_home() is None:
            raise QpiddUnavailable(
                "qpidd not found: ../shared/qpidd is absent and QPIDD_HOME is unset "
                "(scripts/qpidd.sh needs a qpidd build)")
        self.qmf1 = qmf1
        self.pub_interval = pub_interval
        self.extra = extra
        self.dir = Path(tempfile.mkdtemp(prefix="qmf-async-qpidd."))
        self.port = 0
        self.pid = 0
        self._start(port=None)

    @property
    def url(self) -> str:
        return f"amqp://127.0.0.1:{self.port}/"

    @property
    def address(self) -> str:
        """``host:port``, the classic tools' broker form."""
        return f"127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.dir / "qpidd.log"

    def _start(self, port: int | None) -> None:
        args = ["bash", str(SCRIPT), "start", "--qmf1", "yes" if self.qmf1 else "no",
                "--dir", str(self.dir), "--pub-interval", f"{self.pub_interval:g}"]
        if port is not None:
            args += ["--port", str(port)]
        if self.extra:
            args += ["--", *self.extra]
        proc = subprocess.run(args, capture_output=True, text=True, timeout=60)
        if proc.returncode != 0:
            raise QpiddUnavailable(f"qpidd did not start: {proc.stderr.strip()[-800:]}")
        values = dict(line.split("=", 1) for line in proc.stdout.split() if "=" in line)
        self.port = int(values["QPIDD_PORT"])
        self.pid = int(values["QPIDD_PID"])

    def alive(self) -> bool:
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        # a zombie (never reaped) is not alive
        try:
            state = Path(f"/proc/{self.pid}/stat").read_text().split(")")[1].split()[0]
        except (OSError, IndexError):
            return False
        return state != "Z"

    def stop(self) -> None:
        """Stop it (SIGTERM, SIGKILL after 10 s); idempotent."""
        subprocess.run(["bash", str(SCRIPT), "stop", str(self.dir)], capture_output=True,
                       timeout=30)

    def restart(self) -> None:
        """Stop (if running) and start again on the same port and data directory."""
        self.stop()
        deadline = time.monotonic() + 15
        while True:
            try:
                self._start(port=self.port)
                return
            except QpiddUnavailable:
                # the port may linger for a moment after a kill
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def cpu_seconds(self) -> float:
        """User plus system CPU time of the qpidd process so far."""
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def remove(self) -> None:
        """Stop and delete the data directory."""
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __repr__(self) -> str:
        return f"<qpidd {self.address} qmf1={'yes' if self.qmf1 else 'no'} pid={self.pid}>"


def run_classic(tool: str, *args: str, timeout: float = 60.0) -> tuple[int, str, str]:
    """Run one of the classic qpid tools; (exit code, stdout, stderr)."""
    proc = subprocess.run([str(CLASSIC_TOOLS), tool, *args], capture_output=True, text=True,
                          timeout=timeout)
    return proc.returncode, proc.stdout, proc.stderr


def classic_tools_problem() -> str | None:
    """Why the classic tools cannot run here, or None."""
    if not CLASSIC_TOOLS.exists():
        return "the classic tools are absent (../shared/classic-tools)"
    probe = subprocess.run([str(CLASSIC_TOOLS), "no-such-tool"], capture_output=True,
                           text=True, timeout=30)
    if "no Python 2.7" in probe.stderr:
        return "the classic tools need a Python 2.7 (set PYTHON2)"
    return None
