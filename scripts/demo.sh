#!/usr/bin/env bash
# The main demo: set up .venv, make sure a local RabbitMQ runs, start the
# management-broker role and the demo agent, then run the console demo against them
# (queues with statistics, method calls, events); then start the RabbitMQ bridge, fill a
# real RabbitMQ queue with aiormq and show its depth through QMF (`qmf stat`) next to
# `rabbitmqctl list_queues`.  Everything started is stopped on exit.
# QMF_URL (default amqp://guest:guest@localhost:5672/) names the broker.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

bash scripts/setup.sh cli bridge
bash scripts/rabbitmq.sh

URL="${QMF_URL:-amqp://guest:guest@localhost:5672/}"
PY="$ROOT/.venv/bin/python"
LOGDIR="$(mktemp -d "${TMPDIR:-/tmp}/qmf-demo.XXXXXX")"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill -INT "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    rm -rf "$LOGDIR"
}
trap cleanup EXIT

# wait_ready LOGFILE PID WHAT: until the process prints its ready line (20 s at most)
wait_ready() {
    local deadline=$((SECONDS + 20))
    until grep -qi "ready" "$1" 2>/dev/null; do
        if ! kill -0 "$2" 2>/dev/null; then
            echo "demo: $3 exited early:" >&2
            cat "$1" >&2
            exit 1
        fi
        if [ "$SECONDS" -ge "$deadline" ]; then
            echo "demo: $3 did not become ready in 20 s:" >&2
            cat "$1" >&2
            exit 1
        fi
        sleep 0.1
    done
}

"$PY" -m qmf_async.agent.broker --url "$URL" --interval 1 >"$LOGDIR/broker.log" 2>&1 &
pids+=($!)
wait_ready "$LOGDIR/broker.log" "${pids[-1]}" "the management-broker role"

"$PY" examples/demo_agent.py --url "$URL" --interval 1 >"$LOGDIR/agent.log" 2>&1 &
pids+=($!)
wait_ready "$LOGDIR/agent.log" "${pids[-1]}" "the demo agent"

echo "== the demo agent (its queues and traffic are simulated, not RabbitMQ's) =="
"$PY" examples/console_demo.py --url "$URL"

echo
echo "== RabbitMQ itself, through the RabbitMQ bridge =="
"$PY" -m qmf_async.bridge.rabbitmq -b "$URL" --interval 1 --label rabbitmq \
    >"$LOGDIR/bridge.log" 2>&1 &
pids+=($!)
wait_ready "$LOGDIR/bridge.log" "${pids[-1]}" "the RabbitMQ bridge"
"$PY" examples/rabbitmq_bridge_demo.py --url "$URL" --queue demo.real --count 100
echo "\$ qmf stat -q --agent rabbitmq"
QMF_URL="$URL" "$PY" -m qmf_async stat -q --agent rabbitmq
if command -v rabbitmqctl >/dev/null 2>&1; then
    echo "\$ rabbitmqctl list_queues name messages (the same queue, as RabbitMQ counts it)"
    PATH="$PATH:/usr/sbin" rabbitmqctl -q list_queues name messages 2>/dev/null \
        | grep -E "^(name|demo\.real)\b" || true
fi
echo "\$ qmf config del queue demo.real --force --agent rabbitmq   (deletes RabbitMQ's queue)"
QMF_URL="$URL" "$PY" -m qmf_async config del queue demo.real --force --agent rabbitmq
