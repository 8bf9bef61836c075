"""A Spark standalone cluster (one master, one worker) from the installed pyspark, on
127.0.0.1 with ephemeral ports, for the tests and benchmarks that run the pipeline
with ``--master spark://127.0.0.1:PORT``.

    with StandaloneCluster(tmp_dir, cores=2, memory="2g") as cluster:
        print(cluster.master_url)          # spark://127.0.0.1:PORT

Both are JVMs started with pyspark's ``bin/spark-class``
(``org.apache.spark.deploy.master.Master`` and ``...worker.Worker``), each in a session
of its own; every wait has a deadline, and leaving the block stops both (SIGTERM, then
SIGKILL).  The executors run Python (when a job needs it) with this interpreter
(``PYSPARK_PYTHON``).

    python benchmarks/spark_cluster.py [--seconds 60]   # start one, print its URL
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType

_MASTER_URL = re.compile(r"Starting Spark master at (spark://[\w.\-]+:\d+)")
_REGISTERED = "Successfully registered with master"


class ClusterError(RuntimeError):
    """The standalone cluster could not be started (the message says why)."""


def spark_home() -> Path:
    """The installed pyspark's folder (it holds ``bin/spark-class`` and ``jars/``).

    Raises:
        ClusterError: pyspark is not installed or has no ``bin/spark-class``.
    """
    try:
        import pyspark
    except ImportError as exc:
        raise ClusterError("pyspark is not installed") from exc
    home = Path(pyspark.__file__).resolve().parent
    if not (home / "bin" / "spark-class").exists():
        raise ClusterError(f"{home} has no bin/spark-class")
    return home


class StandaloneCluster:
    """One master and one worker on 127.0.0.1; use as a context manager."""

    def __init__(self, directory: Path, *, cores: int = 2, memory: str = "2g",
                 start_timeout: float = 90.0) -> None:
        self.directory = Path(directory)
        self.cores = cores
        self.memory = memory
        self.start_timeout = start_timeout
        self.master_url = ""
        self._procs: list[subprocess.Popen[bytes]] = []

    def _env(self) -> dict[str, str]:
        home = spark_home()
        env = dict(os.environ)
        env.update({"SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1",
                    "SPARK_LOG_DIR": str(self.directory), "PYSPARK_PYTHON": sys.executable,
                    "SPARK_NO_DAEMONIZE": "1"})
        return env

    def _spawn(self, name: str, args: list[str]) -> Path:
        log = self.directory / f"{name}.log"
        with open(log, "wb") as out:
            self._procs.append(subprocess.Popen(
                [str(spark_home() / "bin" / "spark-class"), *args], stdout=out,
                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=self._env(),
                start_new_session=True))
        return log

    def _wait_for(self, log: Path, pattern: re.Pattern[str] | str, what: str) -> str:
        deadline = time.monotonic() + self.start_timeout
        proc = self._procs[-1]
        while time.monotonic() < deadline:
            text = log.read_text(errors="replace") if log.exists() else ""
            if isinstance(pattern, str):
                if pattern in text:
                    return pattern
            elif (match := pattern.search(text)) is not None:
                return match.group(1)
            if proc.poll() is not None:
                raise ClusterError(f"the Spark {what} exited ({proc.returncode}): "
                                   f"{text[-2000:]}")
            time.sleep(0.2)
        raise ClusterError(f"the Spark {what} was not ready within {self.start_timeout}s "
                           f"(see {log})")

    def start(self) -> StandaloneCluster:
        """Start the master, then the worker, and wait until it registered.

        Raises:
            ClusterError: either did not start in time (both are stopped then).
        """
        self.directory.mkdir(parents=True, exist_ok=True)
        try:
            log = self._spawn("master", ["org.apache.spark.deploy.master.Master",
                                         "--host", "127.0.0.1", "--port", "0",
                                         "--webui-port", "0"])
            self.master_url = self._wait_for(log, _MASTER_URL, "master")
            log = self._spawn("worker", ["org.apache.spark.deploy.worker.Worker",
                                         self.master_url, "--host", "127.0.0.1",
                                         "--port", "0", "--webui-port", "0",
                                         "--cores", str(self.cores), "--memory", self.memory,
                                         "--work-dir", str(self.directory / "work")])
            self._wait_for(log, _REGISTERED, "worker")
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, timeout: float = 20.0) -> None:
        """Stop the worker, then the master (SIGTERM, SIGKILL after ``timeout``).

        Raises:
            Nothing.
        """
        for proc in reversed(self._procs):
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    continue
                try:
                    proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    try:
                        os.killpg(proc.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                    proc.wait(timeout)
        self._procs.clear()

    def __enter__(self) -> StandaloneCluster:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


_CONNECT_STARTED = "Spark Connect server started at"


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class ConnectServer(StandaloneCluster):
    """A Spark Connect server (``sc://127.0.0.1:PORT``, local master) from the installed
    pyspark: ``bin/spark-submit`` of ``SparkConnectServer``, as its
    ``sbin/start-connect-server.sh`` does, in the foreground; use as a context manager."""

    def __init__(self, directory: Path, *, master: str = "local[2]",
                 start_timeout: float = 120.0) -> None:
        super().__init__(directory, start_timeout=start_timeout)
        self.master = master
        self.port = 0
        self.url = ""

    def start(self) -> ConnectServer:
        """Start the server and wait until it listens.

        Raises:
            ClusterError: it did not start in time (it is stopped then).
        """
        self.directory.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        log = self.directory / "connect.log"
        try:
            with open(log, "wb") as out:
                self._procs.append(subprocess.Popen(
                    [str(spark_home() / "bin" / "spark-submit"), "--class",
                     "org.apache.spark.sql.connect.service.SparkConnectServer",
                     "--name", "Spark Connect server", "--master", self.master,
                     "--conf", f"spark.connect.grpc.binding.port={self.port}",
                     "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
                     "--conf", "spark.driver.bindAddress=127.0.0.1",
                     "--conf", "spark.driver.host=127.0.0.1",
                     "--conf", "spark.ui.enabled=false"],
                    stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                    env=self._env(), start_new_session=True))
            self._wait_for(log, _CONNECT_STARTED, "Connect server")
        except BaseException:
            self.stop()
            raise
        self.url = f"sc://127.0.0.1:{self.port}"
        return self

    def __enter__(self) -> ConnectServer:
        return self.start()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dir", default=None, help="logs and work folder (default: a new one)")
    p.add_argument("--cores", type=int, default=2)
    p.add_argument("--memory", default="2g")
    p.add_argument("--seconds", type=float, default=60.0, help="keep it up this long")
    args = p.parse_args()
    import tempfile

    directory = Path(args.dir or tempfile.mkdtemp(prefix="qmf-spark-cluster-"))
    with StandaloneCluster(directory, cores=args.cores, memory=args.memory) as cluster:
        print(cluster.master_url, flush=True)
        time.sleep(args.seconds)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
