"""Run the code blocks of one page in one process (tests/test_docs.py starts it).

Reads ``{"blocks": [{"id", "language", "source", "env"}, ...]}`` as JSON on stdin and
runs the blocks in order, each Python block as a ``__main__`` script of its own (a
fresh namespace; its ``print`` output captured), each shell block with ``bash -e -o
pipefail``; ``env`` is set for the block (``QMF_URL``...).  After each block one JSON
line ``{"id", "ok", "stdout", "error"}`` goes to the original stdout; anything else the
blocks write to file descriptor 1 goes to stderr.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import traceback


def _run_python(source: str, name: str) -> tuple[bool, str, str]:
    out = io.StringIO()
    namespace = {"__name__": "__main__", "__file__": name}
    try:
        code = compile(source, name, "exec")
        with contextlib.redirect_stdout(out):
            exec(code, namespace)
    except SystemExit as exc:
        if exc.code not in (None, 0):
            return False, out.getvalue(), f"SystemExit({exc.code!r})"
    except BaseException:
        return False, out.getvalue(), traceback.format_exc(limit=-8)
    return True, out.getvalue(), ""


def _run_shell(source: str, timeout: float) -> tuple[bool, str, str]:
    try:
        done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", source],
                              capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        return False, str(exc.stdout or ""), f"did not finish within {timeout} s"
    return done.returncode == 0, done.stdout, (
        "" if done.returncode == 0 else f"exit {done.returncode}: {done.stderr[-3000:]}")


def main() -> int:
    request = json.load(sys.stdin)
    results = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # stray writes to fd 1 (a C library, a child) go to stderr
    sys.stdout = io.TextIOWrapper(os.fdopen(1, "wb", buffering=0), write_through=True)
    for block in request["blocks"]:
        saved = dict(os.environ)
        os.environ.update(block["env"])
        try:
            if block["language"] == "python":
                ok, stdout, error = _run_python(block["source"], block["id"])
            else:
                ok, stdout, error = _run_shell(block["source"], float(block["timeout"]))
        finally:
            os.environ.clear()
            os.environ.update(saved)
        results.write(json.dumps({"id": block["id"], "ok": ok, "stdout": stdout,
                                  "error": error}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
