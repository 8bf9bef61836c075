"""Start-up: ``qmf stat -q`` against the classic ``qpid-stat -q`` on the same broker.

Each command is one whole process (start to exit), its output to a pipe; the commands
alternate (A B [C] A B [C] ...) after one warm-up each, and the figures are the medians
of the wall time and of the process's CPU (user + system of the child, from
``wait4``'s rusage), with the ratio to qpid-stat taken pair by pair.  A busy machine
moves the wall time more than the CPU time: the load average is printed with them.

    python benchmarks/startup.py --port PORT --runs 15 \\
        [--baseline /path/to/other/checkout] [--classic /work/shared/classic-tools/run]

``--tree`` (this checkout by default) and ``--baseline`` are put first on PYTHONPATH
of ``python -m qmf_async``; compile their bytecode first (``python -m compileall -q
qmf_async``) when ``PYTHONDONTWRITEBYTECODE`` is set, as an installed wheel has it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


Command = tuple[list[str], dict[str, str], str | None]


def run_once(argv: list[str], env: dict[str, str], cwd: str | None,
             ) -> tuple[float, float, int, bytes]:
    """One process: (wall s, CPU s, peak RSS KiB, stdout)."""
    with tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, env=env, cwd=cwd)
        assert proc.stdout is not None
        out = proc.stdout.read()  # to EOF, then reap the child with its rusage
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.stdout.close()
        proc.returncode = code = os.waitstatus_to_exitcode(status)
        if code != 0:
            err.seek(0)
            raise SystemExit(f"{argv[:4]}... exited {code}: {err.read().decode()[-500:]}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss, out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, required=True, help="the qpidd's port on 127.0.0.1")
    p.add_argument("--runs", type=int, default=15)
    p.add_argument("--tree", default=str(ROOT), help="checkout whose qmf_async is timed")
    p.add_argument("--baseline", help="another checkout, timed in the same pairs")
    p.add_argument("--classic", default="/work/shared/classic-tools/run",
                   help="the classic tools' runner (`RUN qpid-stat ...`)")
    p.add_argument("--python", default=sys.executable)
    p.add_argument("--args", default="-q", help="the arguments after `stat` (default -q)")
    opts = p.parse_args()

    broker = ["-b", f"127.0.0.1:{opts.port}"]
    args = opts.args.split()
    commands: dict[str, Command] = {}

    def ours(tree: str) -> Command:
        # run in the tree: ``python -m`` puts the working directory first on sys.path
        env = dict(os.environ, PYTHONPATH=tree)
        return [opts.python, "-m", "qmf_async", "stat", *args, *broker], env, tree

    commands["qmf stat"] = ours(opts.tree)
    commands["qpid-stat"] = ([opts.classic, "qpid-stat", *args, *broker], dict(os.environ),
                             None)
    if opts.baseline:
        commands["qmf stat, baseline"] = ours(opts.baseline)

    for argv, env, cwd in commands.values():  # warm-up (page cache, bytecode)
        run_once(argv, env, cwd)
    results: dict[str, list[tuple[float, float, int]]] = {name: [] for name in commands}
    loads = [os.getloadavg()[0]]
    for _ in range(opts.runs):
        for name, (argv, env, cwd) in commands.items():
            wall, cpu, rss, _out = run_once(argv, env, cwd)
            results[name].append((wall, cpu, rss))
        loads.append(os.getloadavg()[0])

    classic = results["qpid-stat"]
    print(f"{opts.runs} rounds, load average (1 min) {min(loads):.2f} to {max(loads):.2f}")
    print(f"{'command':<22} {'wall s':>7} {'CPU s':>7} {'MiB':>6}   paired ratio to qpid-stat")
    summary = {}
    for name, rows in results.items():
        wall = statistics.median(r[0] for r in rows)
        cpu = statistics.median(r[1] for r in rows)
        rss = statistics.median(r[2] for r in rows) / 1024
        wall_ratio = statistics.median(a[0] / b[0] for a, b in zip(rows, classic, strict=True))
        cpu_ratio = statistics.median(a[1] / b[1] for a, b in zip(rows, classic, strict=True))
        print(f"{name:<22} {wall:7.3f} {cpu:7.3f} {rss:6.1f}   "
              f"wall {wall_ratio:.2f}, CPU {cpu_ratio:.2f}")
        summary[name] = {"wall": wall, "cpu": cpu, "rss_mib": rss,
                         "wall_ratio": wall_ratio, "cpu_ratio": cpu_ratio}
    print(json.dumps({"runs": opts.runs, "load": [min(loads), max(loads)], **summary}))


if __name__ == "__main__":
    main()
