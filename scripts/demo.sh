#!/usr/bin/env bash
# Wire-level demo: set up .venv, make sure a local RabbitMQ runs, run the smoke example.
# QMF_URL (default amqp://guest:guest@localhost:5672/) names the broker.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

bash scripts/setup.sh
bash scripts/rabbitmq.sh
exec .venv/bin/python examples/wire_smoke.py --url "${QMF_URL:-amqp://guest:guest@localhost:5672/}"
