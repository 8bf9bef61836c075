"""A genuine qpidd for tests: a thin handle on ``scripts/qpidd.sh``.

The script is the one source of truth for qpidd's command line; this module runs it,
reads the ``QPIDD_*`` lines it prints, and offers ``stop``/``restart`` and the broker's
CPU time (for benchmarks).
"""

from __future__ import annotations

import os
import shlex
import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "qpidd.sh"
SHARED_QPIDD = ROOT.parent / "shared" / "qpidd"

#: Seconds the script waits for the port (passed as ``--wait``).
START_WAIT_S = 20.0


class QpiddError(RuntimeError):
    """qpidd could not be found, started or stopped (the message says why)."""


def qpidd_home() -> Path | None:
    """The qpidd folder (``$QPIDD_HOME``, else ``<repo>/../shared/qpidd``), or None.

    Raises:
        Nothing.
    """
    env = os.environ.get("QPIDD_HOME")
    if env:
        return Path(env) if (Path(env) / "bin" / "qpidd").exists() else None
    return SHARED_QPIDD if (SHARED_QPIDD / "bin" / "qpidd").exists() else None


def _run_script(args: Sequence[str], timeout: float) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            ["bash", str(SCRIPT), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise QpiddError(f"scripts/qpidd.sh {args[0]} did not finish within {timeout}s") from exc


def port_accepts(port: int, timeout: float = 0.5) -> bool:
    """True when something accepts TCP connections on 127.0.0.1:``port``.

    Raises:
        Nothing.
    """
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout):
            return True
    except OSError:
        return False


class Qpidd:
    """One qpidd started by ``scripts/qpidd.sh`` (use :meth:`start`)."""

    def __init__(
        self,
        *,
        port: int,
        pid: int,
        directory: Path,
        qmf1: bool,
        pub_interval: int,
        extra: Sequence[str],
        qmf2: bool = True,
    ) -> None:
        self.port = port
        self.pid = pid
        self.directory = directory
        self.qmf1 = qmf1
        self.qmf2 = qmf2
        self.pub_interval = pub_interval
        self.extra = tuple(extra)

    @classmethod
    def start(
        cls,
        *,
        qmf1: bool,
        port: int | None = None,
        directory: Path | None = None,
        pub_interval: int = 1,
        extra: Sequence[str] = (),
        qmf2: bool = True,
    ) -> Qpidd:
        """Start a qpidd and wait until its port accepts connections (``qmf2=False``:
        ``--mgmt-qmf2 no``, a qpidd that publishes QMF v1 only).

        Raises:
            QpiddError: the script failed (its stderr, with the log tail, is the message).
        """
        args = ["start", "--qmf1", "yes" if qmf1 else "no", "--qmf2", "yes" if qmf2 else "no",
                "--pub-interval", str(pub_interval)]
        args += ["--wait", str(int(START_WAIT_S))]
        if port is not None:
            args += ["--port", str(port)]
        if directory is not None:
            args += ["--dir", str(directory)]
        if extra:
            args += ["--", *extra]
        done = _run_script(args, timeout=START_WAIT_S + 10.0)
        if done.returncode != 0:
            raise QpiddError(done.stderr.strip() or f"scripts/qpidd.sh exited {done.returncode}")
        values: dict[str, str] = {}
        for line in done.stdout.splitlines():
            key, sep, value = line.partition("=")
            if sep and key.startswith("QPIDD_"):
                values[key] = shlex.split(value)[0] if value else ""
        try:
            return cls(
                port=int(values["QPIDD_PORT"]),
                pid=int(values["QPIDD_PID"]),
                directory=Path(values["QPIDD_DIR"]),
                qmf1=qmf1,
                pub_interval=pub_interval,
                extra=extra,
                qmf2=qmf2,
            )
        except (KeyError, ValueError) as exc:
            raise QpiddError(f"unexpected output of scripts/qpidd.sh: {done.stdout!r}") from exc

    @property
    def url(self) -> str:
        """``amqp://127.0.0.1:PORT/``."""
        return f"amqp://127.0.0.1:{self.port}/"

    @property
    def address(self) -> str:
        """``127.0.0.1:PORT`` (the classic tools' ``-b`` form)."""
        return f"127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        """The broker's log file."""
        return self.directory / "qpidd.log"

    def log_tail(self, lines: int = 20) -> str:
        """The last ``lines`` lines of the log ("" when there is none).

        Raises:
            Nothing.
        """
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def is_running(self) -> bool:
        """True while the qpidd process runs (a zombie does not count).

        Raises:
            Nothing.
        """
        try:
            stat = Path(f"/proc/{self.pid}/stat").read_text()
        except OSError:
            return False
        state = stat.rpartition(")")[2].split()[0]
        return state not in ("Z", "X")

    def stop(self) -> None:
        """Stop the broker (SIGTERM, SIGKILL after a deadline); idempotent.

        Raises:
            QpiddError: the script could not stop it.
        """
        done = _run_script(["stop", str(self.directory)], timeout=30.0)
        if done.returncode != 0:
            reason = done.stderr.strip() or f"scripts/qpidd.sh stop exited {done.returncode}"
            raise QpiddError(reason)

    def restart(self) -> None:
        """Stop, then start again on the same port and data directory (waits until ready).

        Raises:
            QpiddError: stopping or starting failed.
        """
        self.stop()
        self.start_again()

    def start_again(self) -> None:
        """Start this (stopped) qpidd again on its port and data directory, with the
        same options (the second half of :meth:`restart`, for a test that acts while it
        is down); waits until ready.

        Raises:
            QpiddError: starting failed.
        """
        again = Qpidd.start(
            qmf1=self.qmf1,
            port=self.port,
            directory=self.directory,
            pub_interval=self.pub_interval,
            extra=self.extra,
            qmf2=self.qmf2,
        )
        self.pid = again.pid

    def is_stopped(self) -> bool:
        """True when every thread of the process is stopped (state T in /proc: after
        ``SIGSTOP``).

        Raises:
            Nothing.
        """
        states = []
        for stat in Path(f"/proc/{self.pid}/task").glob("*/stat"):
            try:
                states.append(stat.read_text().rsplit(")", 1)[1].split()[0])
            except (OSError, IndexError):
                continue
        return bool(states) and all(state in ("T", "t") for state in states)

    def cpu_seconds(self) -> float:
        """User plus system CPU seconds the qpidd process has used so far.

        Raises:
            QpiddError: the process is gone.
        """
        try:
            stat = Path(f"/proc/{self.pid}/stat").read_text()
        except OSError as exc:
            raise QpiddError(f"qpidd (pid {self.pid}) is not running") from exc
        # Fields after "(comm)": state is field 3, utime 14, stime 15 (1-based).
        fields = stat.rpartition(")")[2].split()
        ticks = int(fields[11]) + int(fields[12])
        return ticks / os.sysconf("SC_CLK_TCK")

    def wait_port_closed(self, timeout: float = 10.0) -> bool:
        """Poll until nothing accepts on the port; False when ``timeout`` passes first.

        Raises:
            Nothing.
        """
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not port_accepts(self.port, timeout=0.2):
                return True
            time.sleep(0.05)
        return False

    def __repr__(self) -> str:
        return f"Qpidd(port={self.port}, pid={self.pid}, qmf1={self.qmf1}, dir={self.directory})"


def send_messages(address: str, queue: str, count: int) -> None:
    """Put ``count`` messages on ``queue`` with a plain blocking AMQP 1.0 client (on the
    sans-I/O engine, not a transport: ``tests/amqp10_client.py``)."""
    from .amqp10_client import BlockingClient

    with BlockingClient(address, timeout=10) as conn:
        sender = conn.create_sender(queue)
        for i in range(count):
            sender.send(f"m{i}")
