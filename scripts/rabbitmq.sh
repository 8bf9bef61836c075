#!/usr/bin/env bash
# Make a local RabbitMQ answer on localhost:5672 (guest/guest).
#
# Idempotent and quiet: prints nothing when the broker is (or becomes) available,
# prints a clear message on stderr and exits non-zero otherwise.
# Installs the Debian package when rabbitmq-server is missing (needs root), starts
# the broker detached (no systemd needed) and waits until it is ready.
#
# Environment:
#   RABBITMQ_WAIT   seconds to wait for the broker to come up (default 120)
set -euo pipefail

HOST=127.0.0.1
PORT=5672
DEADLINE_S="${RABBITMQ_WAIT:-120}"
LOG_DIR="${TMPDIR:-/tmp}"
INSTALL_LOG="$LOG_DIR/qmf-async-rabbitmq-install.log"
START_LOG="$LOG_DIR/qmf-async-rabbitmq-start.log"
PATH="$PATH:/usr/sbin:/sbin:/usr/lib/rabbitmq/bin"

die() {
    echo "rabbitmq.sh: $*" >&2
    exit 1
}

port_open() {
    # bash's /dev/tcp; the subshell keeps the descriptor from leaking.
    (exec 3<>"/dev/tcp/$HOST/$PORT") 2>/dev/null
}

as_root() {
    if [ "$(id -u)" -eq 0 ]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo -n "$@"
    else
        return 1
    fi
}

if port_open; then
    exit 0
fi

if ! command -v rabbitmq-server >/dev/null 2>&1; then
    command -v apt-get >/dev/null 2>&1 \
        || die "rabbitmq-server is not installed and apt-get is not available; install RabbitMQ and retry"
    : >"$INSTALL_LOG"
    if ! { as_root apt-get update -qq \
            && as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq rabbitmq-server; \
         } >>"$INSTALL_LOG" 2>&1; then
        cat "$INSTALL_LOG" >&2
        die "installing rabbitmq-server failed (needs root or passwordless sudo); log: $INSTALL_LOG"
    fi
    command -v rabbitmq-server >/dev/null 2>&1 \
        || die "rabbitmq-server still not found after installation; log: $INSTALL_LOG"
fi

# Another start may be under way (or the node runs but its listener is not up yet):
# only start a node when rabbitmqctl cannot reach one.
if ! rabbitmqctl -q status >/dev/null 2>&1; then
    : >"$START_LOG"
    if ! as_root rabbitmq-server -detached >>"$START_LOG" 2>&1; then
        cat "$START_LOG" >&2
        die "'rabbitmq-server -detached' failed; log: $START_LOG"
    fi
fi

deadline=$((SECONDS + DEADLINE_S))
while :; do
    if rabbitmqctl -q status >/dev/null 2>&1 && port_open; then
        exit 0
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
        {
            echo "--- rabbitmq-server -detached output ($START_LOG):"
            cat "$START_LOG" 2>/dev/null || true
            echo "--- rabbitmqctl status:"
            rabbitmqctl status 2>&1 | tail -n 20 || true
            for f in /var/log/rabbitmq/*.log; do
                [ -f "$f" ] || continue
                echo "--- tail of $f:"
                tail -n 20 "$f"
            done
        } >&2
        die "RabbitMQ did not come up on $HOST:$PORT within ${DEADLINE_S}s"
    fi
    sleep 1
done
