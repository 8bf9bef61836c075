"""A real Prometheus for the exporter's tests: started on a free port with a temporary
configuration and storage, scraping given targets every second; stopped by the test.

``bash scripts/prometheus.sh`` installs Debian's prometheus (not its service).
"""

from __future__ import annotations

import json
import re
import select
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .qpidd import ROOT

#: seconds Prometheus may take to answer its readiness endpoint
START_WAIT_S = 30.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Prometheus:
    """One prometheus process; ``query`` answers PromQL through its HTTP API."""

    def __init__(self, binary: str, directory: Path, targets: Sequence[str],
                 job: str = "qpidd", interval: str = "1s", jobs: str = "") -> None:
        """``jobs``: more scrape configurations, YAML list items at the indentation of
        ``scrape_configs`` (``  - job_name: ...``)."""
        self.port = free_port()
        directory.mkdir(parents=True, exist_ok=True)
        config = directory / "prometheus.yml"
        config.write_text(
            "global:\n"
            f"  scrape_interval: {interval}\n  evaluation_interval: {interval}\n"
            "scrape_configs:\n"
            f"  - job_name: {job}\n    scrape_timeout: {interval}\n"
            f"    static_configs:\n      - targets: {json.dumps(list(targets))}\n" + jobs)
        self.log = directory / "prometheus.log"
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [binary, f"--config.file={config}", f"--storage.tsdb.path={directory / 'data'}",
                 f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"],
                stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + START_WAIT_S
        while True:
            try:
                with urllib.request.urlopen(f"{self.base}/-/ready", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"prometheus did not start: {self.log.read_text()[-2000:]}")
            time.sleep(0.2)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def query(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        """The instant vector of ``expr`` (now, or at the Unix time ``at``).

        Raises:
            AssertionError: Prometheus answered an error.
        """
        params = {"query": expr}
        if at is not None:
            params["time"] = f"{at:.3f}"
        url = f"{self.base}/api/v1/query?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                answer = json.load(r)
        except urllib.error.HTTPError as exc:
            raise AssertionError(f"{expr}: {exc.read().decode(errors='replace')}") from exc
        assert answer["status"] == "success", answer
        return list(answer["data"]["result"])

    def targets(self) -> dict[str, dict[str, Any]]:
        """The active targets by job name: ``health`` ("up", "down", "unknown"),
        ``lastError`` ...."""
        with urllib.request.urlopen(f"{self.base}/api/v1/targets?state=active",
                                    timeout=10) as r:
            answer = json.load(r)
        return {t["labels"]["job"]: t for t in answer["data"]["activeTargets"]}

    def value(self, expr: str, at: float | None = None) -> float | None:
        """The value of a one-series ``expr``, None when it has no series."""
        result = self.query(expr, at)
        assert len(result) <= 1, result
        return float(result[0]["value"][1]) if result else None

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)


class ExporterProcess:
    """``qmf exporter`` in a subprocess on a free port (read from its first note)."""

    def __init__(self, *args: str, wait: float = 30.0) -> None:
        env_path = str(ROOT)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "qmf_async.tools.cli", "exporter", "--listen",
             "127.0.0.1:0", *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=env_path)
        assert self.process.stderr is not None
        deadline = time.monotonic() + wait
        line = b""
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self.process.stderr], [], [], max(0.0, left))
            if not ready:
                self.stop()
                raise AssertionError(f"qmf exporter said nothing within {wait}s")
            chunk = self.process.stderr.read1(1)  # type: ignore[attr-defined]
            if not chunk:
                raise AssertionError(f"qmf exporter ended: {line!r}")
            line += chunk
        found = re.search(rb":(\d+)/metrics", line)
        assert found, line
        self.port = int(found.group(1))
        self.target = f"127.0.0.1:{self.port}"

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://{self.target}/metrics", timeout=10) as r:
            return str(r.read().decode())

    def stop(self) -> str:
        """Stop it (SIGTERM); returns its stderr."""
        if self.process.poll() is None:
            self.process.terminate()
        try:
            _, err = self.process.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            _, err = self.process.communicate(timeout=5)
        return str(err.decode(errors="replace"))


def prometheus_binaries() -> tuple[str, str] | None:
    """(prometheus, promtool), or None when either is missing."""
    prom, tool = shutil.which("prometheus"), shutil.which("promtool")
    return (prom, tool) if prom and tool else None
