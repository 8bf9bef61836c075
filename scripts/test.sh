#!/usr/bin/env bash
# Run the tests: set up .venv, make sure a local RabbitMQ runs (and qpidd's libraries,
# Chromium and Prometheus are there), then pytest, in parallel.
#
#   scripts/test.sh                         -> everything CI checks: the whole suite
#                                              (no proton in its venv), the proton_peer
#                                              tier, then the broker-free tiers on Python 3.12
#                                              and 3.13 (scripts/test_pythons.sh), then
#                                              the wheel and sdist as users install them
#                                              (scripts/check_wheel.sh)
#   scripts/test.sh tests/test_transport.py -> arguments go to pytest (that run only)
#   scripts/test.sh -m "not slow"
#
# The suite runs in this process, one test at a time, by default; QMF_TEST_WORKERS=N runs
# it on N pytest-xdist workers, each with a RabbitMQ node and qpidds of its own
# (tests/conftest.py).  On a 2-core machine the suite is CPU-bound (Spark, the CLI
# subprocesses, floods): 2 workers took 26 min 50 s, no faster than one, with two
# failures from CPU contention, so the parallel mode is not CI's yet (docs/benchmarks.md,
# "Test suite").  A serial run ends with the time and CPU of each test module.
# QMF_TEST_URL (default amqp://guest:guest@localhost:5672/) names the broker; a local
# RabbitMQ is started only when it points at this machine.  Exits non-zero when any
# part failed.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

bash scripts/setup.sh test cli collector pipeline connect docs web amqp10 bridge classic prometheus
bash scripts/browser.sh
bash scripts/prometheus.sh
export QMF_TEST_URL="${QMF_TEST_URL:-amqp://guest:guest@localhost:5672/}"
# The suite starts hundreds of Python processes (the CLIs, examples, tools); with
# PYTHONDONTWRITEBYTECODE set (some images set it) each one compiled qmf_async from
# source again: 0.7 s of CPU per `import qmf_async` instead of 0.5 s, 30% of the CPU
# of the CLI test modules.  Bytecode caches go to __pycache__/ (ignored by git).
unset PYTHONDONTWRITEBYTECODE
case "$QMF_TEST_URL" in
    *@localhost[:/]* | *@127.0.0.1[:/]* | *://localhost[:/]* | *://127.0.0.1[:/]* \
        | *@localhost | *@127.0.0.1 | *://localhost | *://127.0.0.1)
        bash scripts/rabbitmq.sh
        ;;
esac

if [ -n "${QPIDD_HOME:-}" ] || [ -d "$ROOT/../shared/qpidd" ]; then
    bash scripts/qpidd.sh install
fi

full=no
[ "$#" -eq 0 ] && full=yes
# the proton_peer tier's python-qpid-proton, outside .venv (see below)
PROTON_DIR="${QMF_PROTON_DIR:-$ROOT/.proton-peer}"
PROTON_REQ="python-qpid-proton>=0.39"
workers="${QMF_TEST_WORKERS:-0}"
xdist=()
if [ "$workers" != 0 ]; then
    # a test module is one unit of work, the longest first (tests/conftest.py)
    xdist=(-n "$workers" --dist loadscope --no-loadscope-reorder)
fi

set +e
status=0
if [ "$full" = yes ]; then
    .venv/bin/python -m pytest "${xdist[@]}" -m "not proton_peer" || status=$?
    echo
    # The proton_peer tier: python-qpid-proton as an independent AMQP 1.0 peer (a test
    # server, cross-checks of our frame encodings), never a dependency.  It is installed
    # aside (pip --target, not into .venv: the suite above runs with no proton) and put on
    # PYTHONPATH for this tier only.  The build (22 s, it compiles) is cached in the dir.
    echo "== the proton_peer tier (python-qpid-proton as a test peer, $PROTON_DIR)"
    if [ ! -f "$PROTON_DIR/.installed" ]; then
        rm -rf "$PROTON_DIR"
        .venv/bin/pip install -q --target "$PROTON_DIR" "$PROTON_REQ" \
            && touch "$PROTON_DIR/.installed" || status=1
    fi
    # only the modules that hold proton_peer tests (collecting the whole suite costs a minute)
    mapfile -t peer_files < <(grep -l "proton_peer" tests/test_*.py)
    PYTHONPATH="$PROTON_DIR" .venv/bin/python -m pytest -m proton_peer -p no:cacheprovider \
        "${peer_files[@]}" || status=1
    echo
    bash scripts/test_pythons.sh || status=1
    echo
    echo "== the package as users install it (scripts/check_wheel.sh)"
    bash scripts/check_wheel.sh || status=1
else
    .venv/bin/python -m pytest "${xdist[@]}" "$@" || status=$?
fi
exit "$status"
