"""Start and stop a fresh qpidd for a benchmark, create many queues, read its CPU.

Python 3 only (the driver and the smoke test use it); the Python 2.7 clients read
qpidd's CPU themselves with the same ``/proc/PID/stat`` arithmetic.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
SHARED = Path(os.environ.get("QMF_SHARED", ROOT.parent / "shared"))
QPIDD_HOME = Path(os.environ.get("QPIDD_HOME", SHARED / "qpidd"))
CLASSIC_HOME = Path(os.environ.get("CLASSIC_TOOLS", SHARED / "classic-tools"))
CLK_TCK = os.sysconf("SC_CLK_TCK")


class QpiddError(RuntimeError):
    """qpidd or a helper it needs could not be found or started."""


def qpidd_binary() -> Path | None:
    """The qpidd binary, or None when the shared build is absent."""
    exe = QPIDD_HOME / "bin" / "qpidd"
    return exe if exe.is_file() and os.access(exe, os.X_OK) else None


def proc_cpu(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (``/proc/PID/stat`` utime+stime).

    Raises:
        OSError: the process is gone.
    """
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def python2() -> str:
    """A Python 2.7 interpreter, found the way classic-tools/run finds one.

    Raises:
        QpiddError: none is installed.
    """
    cands = [os.environ.get("PYTHON2", "")]
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    if pyenv.is_dir():
        cands += [str(p / "bin" / "python2.7") for p in sorted(pyenv.glob("2.7*"))]
    cands.append(shutil.which("python2.7") or "")
    for c in cands:
        if c and os.access(c, os.X_OK):
            return c
    raise QpiddError("no Python 2.7 interpreter (set PYTHON2)")


def classic_lib() -> Path:
    """A private copy of classic-tools/lib (the 0-10 spec cache is written beside the
    spec on first use, so the shared folder stays untouched), as classic-tools/run does.

    Raises:
        QpiddError: the classic tools are absent.
    """
    src = CLASSIC_HOME / "lib"
    if not src.is_dir():
        raise QpiddError(f"classic tools not found at {CLASSIC_HOME}")
    cache = Path(os.environ.get("TMPDIR", "/tmp")) / "qpid-classic-tools"
    lib = cache / "lib"
    if not lib.is_dir():
        cache.mkdir(parents=True, exist_ok=True)
        tmp = cache / f"lib.{os.getpid()}"
        shutil.copytree(src, tmp)
        try:
            tmp.rename(lib)
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
    return lib


def python2_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(classic_lib())
    return env


class Qpidd:
    """A fresh qpidd on a free port with its own data directory (QMF v1 on).

    Use as a context manager, or call :meth:`start` and :meth:`stop`.
    """

    def __init__(self, *, qmf2: bool = True, pub_interval: int = 10,
                 workdir: Path | None = None) -> None:
        self.qmf2 = qmf2
        self.pub_interval = pub_interval
        self.workdir = workdir
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self._tmp: tempfile.TemporaryDirectory[str] | None = None

    @property
    def pid(self) -> int:
        if self.proc is None:
            raise QpiddError("qpidd is not running")
        return self.proc.pid

    @property
    def url(self) -> str:
        return f"amqp://127.0.0.1:{self.port}/"

    def command(self, data_dir: Path, log: Path) -> list[str]:
        exe = qpidd_binary()
        if exe is None:
            raise QpiddError(f"qpidd not found at {QPIDD_HOME}/bin/qpidd")
        return [str(exe), "--port", str(self.port), "--interface", "127.0.0.1",
                "--auth", "no", "--no-module-dir",
                "--load-module", str(QPIDD_HOME / "modules" / "amqp.so"),
                "--data-dir", str(data_dir), "--mgmt-enable", "yes",
                "--mgmt-qmf1", "yes", "--mgmt-qmf2", "yes" if self.qmf2 else "no",
                "--mgmt-pub-interval", str(self.pub_interval),
                "--log-to-stderr", "no", "--log-to-file", str(log)]

    def start(self, timeout: float = 20.0) -> Qpidd:
        """Start qpidd and wait until its port accepts connections.

        Raises:
            QpiddError: qpidd is absent, exited, or did not listen within ``timeout``.
        """
        if self.workdir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="qpidd-bench-")
            base = Path(self._tmp.name)
        else:
            base = self.workdir
            base.mkdir(parents=True, exist_ok=True)
        data = Path(tempfile.mkdtemp(prefix="data-", dir=base))
        self.log = base / "qpidd.log"
        why = ""
        for _attempt in range(3):  # a free port can be taken between probe and bind
            self.port = free_port()
            proc = self.proc = subprocess.Popen(self.command(data, self.log),
                                                stdin=subprocess.DEVNULL,
                                                stdout=subprocess.DEVNULL,
                                                stderr=subprocess.PIPE)
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                if proc.poll() is not None:
                    break
                try:
                    with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                        return self
                except OSError:
                    time.sleep(0.05)
            else:
                self.stop()
                raise QpiddError(f"qpidd did not listen on {self.port} within {timeout} s")
            err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
            log = self.log.read_text(errors="replace") if self.log.exists() else ""
            why = f"qpidd exited with {proc.returncode}: {(err + log).strip()[-300:]}"
            self._end_process(timeout)
        self.stop()
        raise QpiddError(why)

    def stop(self, timeout: float = 10.0) -> None:
        """Stop qpidd (SIGTERM, then SIGKILL after ``timeout``) and remove its files."""
        self._end_process(timeout)
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def _end_process(self, timeout: float) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout)
        if self.proc is not None and self.proc.stderr:
            self.proc.stderr.close()
        self.proc = None

    def cpu(self) -> float:
        """qpidd's CPU seconds so far."""
        return proc_cpu(self.pid)

    def __enter__(self) -> Qpidd:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def create_queues(port: int, count: int, *, prefix: str = "bench-q-",
                  method: str = "declare", timeout: float = 600.0) -> dict[str, Any]:
    """Create ``count`` queues on the qpidd at ``port`` with the Python 2.7 helper
    ``make_queues.py`` (``declare``: pipelined 0-10 queue.declare commands, then one
    sync; ``messaging``: ``qpid.messaging`` senders with ``{create: always}``).
    Returns the helper's JSON (``created``, ``seconds``).

    Raises:
        QpiddError: the helper failed or timed out.
    """
    cmd = [python2(), str(HERE / "make_queues.py"), "--port", str(port),
           "--count", str(count), "--prefix", prefix, "--method", method]
    try:
        out = subprocess.run(cmd, env=python2_env(), capture_output=True, text=True,
                             timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise QpiddError(f"creating {count} queues took over {timeout} s") from exc
    if out.returncode != 0:
        raise QpiddError(f"make_queues failed: {out.stderr.strip()[-500:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


if __name__ == "__main__":  # manual use: start one and print its port until ^C
    with Qpidd() as q:
        print(q.port, q.pid, flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            sys.exit(0)


def session_takes(setting: str) -> bool:
    """Whether the Session of the tree under test takes ``setting``: a field of its
    ``SessionOptions``, or a keyword of an older tree's constructor (the benchmarks run
    against older commits too)."""
    import inspect

    from qmf_async import console

    options = getattr(console, "SessionOptions", None)
    if options is not None:
        import attrs

        return setting in attrs.fields_dict(options)
    return setting in inspect.signature(console.Session.__init__).parameters
