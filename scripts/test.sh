#!/usr/bin/env bash
# Run the test suite: set up .venv, make sure a local RabbitMQ runs, then pytest.
#
#   scripts/test.sh                         -> all tests
#   scripts/test.sh tests/test_transport.py -> arguments go to pytest
#   scripts/test.sh -m "not slow"
#
# QMF_TEST_URL (default amqp://guest:guest@localhost:5672/) names the broker; a local
# RabbitMQ is started only when it points at this machine.  Exits with pytest's code.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

bash scripts/setup.sh test cli collector pipeline connect docs web amqp10 bridge
bash scripts/browser.sh
export QMF_TEST_URL="${QMF_TEST_URL:-amqp://guest:guest@localhost:5672/}"
case "$QMF_TEST_URL" in
    *@localhost[:/]* | *@127.0.0.1[:/]* | *://localhost[:/]* | *://127.0.0.1[:/]* \
        | *@localhost | *@127.0.0.1 | *://localhost | *://127.0.0.1)
        bash scripts/rabbitmq.sh
        ;;
esac

if [ -n "${QPIDD_HOME:-}" ] || [ -d "$ROOT/../shared/qpidd" ]; then
    bash scripts/qpidd.sh install
fi

set +e
.venv/bin/python -m pytest "$@"
exit $?
