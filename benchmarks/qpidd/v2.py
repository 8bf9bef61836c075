"""Helpers of the QMF v2 benchmarks (``benchmarks/v2_filter.py``, ``benchmarks/qpidd_v2.py``):
a qpidd with QMF v1 on or off, running a client process and reading its JSON line and
its peak memory from the kernel (``wait4``), and the QMF v2 request properties qpidd
expects over AMQP 1.0."""

from __future__ import annotations

import json
import os
import selectors
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.qpidd.broker import Qpidd

#: application properties of a v2 request to qpidd's broker agent (``qmf.opcode`` added)
APP_ID = "x-amqp-0-10.app-id"
QMF2 = "qmf2"


class V2Qpidd(Qpidd):
    """A fresh qpidd with QMF v2 on and QMF v1 ``qmf1`` (off: the stock default)."""

    def __init__(self, *, qmf1: bool = False, pub_interval: int = 10,
                 workdir: Path | None = None) -> None:
        super().__init__(qmf2=True, pub_interval=pub_interval, workdir=workdir)
        self.qmf1 = qmf1

    def command(self, data_dir: Path, log: Path) -> list[str]:
        cmd = super().command(data_dir, log)
        cmd[cmd.index("--mgmt-qmf1") + 1] = "yes" if self.qmf1 else "no"
        return cmd


def run_measured(cmd: Sequence[str], *, env: dict[str, str] | None = None,
                 timeout: float = 300.0) -> dict[str, Any]:
    """Run ``cmd`` to its end and measure it from outside: wall seconds, peak RSS
    (KiB, from ``wait4``: the process and the children it waited for) and CPU seconds.

    Raises:
        RuntimeError: it failed or ran longer than ``timeout`` (then it is killed).
    """
    t0 = time.monotonic()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: exec the command with its output to the pipes
        try:
            os.dup2(out_w, 1)
            os.dup2(err_w, 2)
            os.close(out_r)
            os.close(err_r)
            if env is None:
                os.execvp(cmd[0], list(cmd))
            else:
                os.execvpe(cmd[0], list(cmd), env)
        finally:
            os._exit(127)
    os.close(out_w)
    os.close(err_w)
    chunks: dict[int, list[bytes]] = {out_r: [], err_r: []}
    open_fds = [out_r, err_r]
    sel = selectors.DefaultSelector()
    for fd in open_fds:
        sel.register(fd, selectors.EVENT_READ)
    deadline = t0 + timeout
    try:
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                os.kill(pid, 9)
                os.waitpid(pid, 0)
                raise RuntimeError(f"{cmd[0]} ran longer than {timeout} s")
            for key, _ in sel.select(timeout=min(left, 1.0)):
                data = os.read(key.fd, 65536)
                if data:
                    chunks[key.fd].append(data)
                else:
                    sel.unregister(key.fd)
                    os.close(key.fd)
        _, status, ru = os.wait4(pid, 0)
    finally:
        sel.close()
    wall = time.monotonic() - t0
    code = os.waitstatus_to_exitcode(status)
    out = b"".join(chunks[out_r]).decode(errors="replace")
    err = b"".join(chunks[err_r]).decode(errors="replace")
    return {"returncode": code, "stdout": out, "stderr": err, "seconds": wall,
            "max_rss_kb": ru.ru_maxrss, "cpu": ru.ru_utime + ru.ru_stime}


def last_json(out: dict[str, Any], what: str) -> dict[str, Any]:
    """The JSON object on the last line of a measured run's stdout.

    Raises:
        RuntimeError: the run failed or printed no JSON.
    """
    lines = out["stdout"].strip().splitlines()
    if out["returncode"] != 0 or not lines:
        raise RuntimeError(f"{what} failed ({out['returncode']}): {out['stderr'].strip()[-800:]}")
    try:
        result: dict[str, Any] = json.loads(lines[-1])
    except json.JSONDecodeError as exc:
        raise RuntimeError(f"{what} printed no JSON: {lines[-1][:200]!r}") from exc
    return result
