#!/usr/bin/env bash
# Make a local RabbitMQ answer on localhost:5672 (guest/guest), with its management
# HTTP API on http://127.0.0.1:15672/api/ (plugin rabbitmq_management, which the
# RabbitMQ bridge reads).
#
# Idempotent and quiet: prints nothing when the broker is (or becomes) available,
# prints a clear message on stderr and exits non-zero otherwise.
# Installs the Debian package when rabbitmq-server is missing (needs root), starts
# the broker detached (no systemd needed), enables the management plugin, sets the
# statistics interval and waits until both the broker and the API answer.
#
# Statistics interval: RabbitMQ refreshes the figures its API reports (queue depths,
# message counters) every collect_statistics_interval (5 s by default), and its
# management collectors sample at the smallest granularity of
# sample_retention_policies (5 s by default); both are set to RABBITMQ_STATS_INTERVAL
# at run time (not persisted: the script sets them again after a restart). Queues
# and channels that existed before keep the interval they started with.
#
# A private node (the test suite gives each pytest-xdist worker one, so that a test may
# restart, stall or fill its broker without touching another worker's tests):
#
#   scripts/rabbitmq.sh --node NAME --port N --api-port N --dist-port N --dir DIR
#       start (or find running) node NAME@localhost with AMQP on 127.0.0.1:N, its
#       management API on 127.0.0.1:API_PORT, data, logs and configuration in DIR
#       (made when absent, owned by the rabbitmq user: DIR and its parents must be
#       readable by that user); Erlang distribution on DIST_PORT (default N + 20000);
#       same statistics interval
#   scripts/rabbitmq.sh --stop --node NAME --dir DIR
#       stop that node and remove DIR (idempotent)
#
# rabbitmqctl and rabbitmq-plugins reach a private node when RABBITMQ_NODENAME names it.
#
# Environment:
#   RABBITMQ_WAIT            seconds to wait for the broker to come up (default 120)
#   RABBITMQ_STATS_INTERVAL  statistics interval in whole seconds (default 1; 5 is
#                            RabbitMQ's own default)
set -euo pipefail

HOST=127.0.0.1
PORT=5672
API_PORT=15672
DEADLINE_S="${RABBITMQ_WAIT:-120}"
STATS_S="${RABBITMQ_STATS_INTERVAL:-1}"
LOG_DIR="${TMPDIR:-/tmp}"
INSTALL_LOG="$LOG_DIR/qmf-async-rabbitmq-install.log"
START_LOG="$LOG_DIR/qmf-async-rabbitmq-start.log"
PATH="$PATH:/usr/sbin:/sbin:/usr/lib/rabbitmq/bin"

die() {
    echo "rabbitmq.sh: $*" >&2
    exit 1
}

NODE=""
NODE_DIR=""
DIST_PORT=""
STOP=no
while [ "$#" -gt 0 ]; do
    case "$1" in
        --node) NODE="${2:?--node needs a name}"; shift 2 ;;
        --port) PORT="${2:?--port needs a number}"; shift 2 ;;
        --api-port) API_PORT="${2:?--api-port needs a number}"; shift 2 ;;
        --dist-port) DIST_PORT="${2:?--dist-port needs a number}"; shift 2 ;;
        --dir) NODE_DIR="${2:?--dir needs a folder}"; shift 2 ;;
        --stop) STOP=yes; shift ;;
        *) die "unknown argument: $1 (see the comment at the top of this script)" ;;
    esac
done
API="http://127.0.0.1:$API_PORT/api/overview"

if [ -n "$NODE" ]; then
    [ -n "$NODE_DIR" ] || die "--node needs --dir"
    export RABBITMQ_NODENAME="$NODE@localhost"
    export RABBITMQ_NODE_PORT="$PORT" RABBITMQ_DIST_PORT="${DIST_PORT:-$((PORT + 20000))}"
    export RABBITMQ_NODE_IP_ADDRESS="$HOST"
    export RABBITMQ_CONFIG_FILE="$NODE_DIR/rabbitmq.conf"
    export RABBITMQ_MNESIA_BASE="$NODE_DIR/mnesia" RABBITMQ_LOG_BASE="$NODE_DIR/log"
    export RABBITMQ_ENABLED_PLUGINS_FILE="$NODE_DIR/enabled_plugins"
    export RABBITMQ_PID_FILE="$NODE_DIR/rabbitmq.pid"
    START_LOG="$NODE_DIR/start.log"
    if [ "$STOP" = yes ]; then
        if command -v rabbitmqctl >/dev/null 2>&1; then
            rabbitmqctl -q stop >/dev/null 2>&1 || true
        fi
        rm -rf "$NODE_DIR"
        exit 0
    fi
elif [ "$STOP" = yes ]; then
    die "--stop needs --node and --dir (the default node is left running)"
fi

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

case "$STATS_S" in
    ''|*[!0-9]*|0) die "RABBITMQ_STATS_INTERVAL must be a whole number of seconds >= 1" ;;
esac

api_up() {
    # the API answers guest/guest (curl when present, else python3's urllib)
    if command -v curl >/dev/null 2>&1; then
        curl -sf -o /dev/null -m 5 -u guest:guest "$API"
    else
        python3 - "$API" <<'PY' >/dev/null 2>&1
import base64, sys, urllib.request
req = urllib.request.Request(sys.argv[1], headers={
    "Authorization": "Basic " + base64.b64encode(b"guest:guest").decode()})
urllib.request.urlopen(req, timeout=5).read()
PY
    fi
}

# The statistics interval as Erlang terms: collect_statistics_interval (ms) and the
# management agent's sample_retention_policies with S-second samples.
STATS_TERMS="Ms = $((STATS_S * 1000)), S = $STATS_S,
    Policies = [{global, [{605, S}, {3660, 60}, {29400, 600}, {86400, 1800}]},
                {basic, [{605, S}, {3600, 60}]},
                {detailed, [{605, S}]}],
    Same = application:get_env(rabbit, collect_statistics_interval) =:= {ok, Ms}
        andalso application:get_env(rabbitmq_management_agent, sample_retention_policies)
            =:= {ok, Policies},"

stats_interval_set() {
    [ "$(rabbitmqctl -q eval "$STATS_TERMS Same." 2>/dev/null)" = true ]
}

# Set the statistics interval; restart the management applications only when they
# run with another one (their collectors read it when they start).  Run it after
# enabling the plugin: loading the plugin resets its application's settings.
set_stats_interval() {
    rabbitmqctl -q eval "$STATS_TERMS
        ok = application:set_env(rabbit, collect_statistics_interval, Ms),
        ok = application:set_env(rabbitmq_management_agent, sample_retention_policies, Policies),
        Running = lists:keymember(rabbitmq_management_agent, 1, application:which_applications()),
        case Same orelse not Running of
            true -> ok;
            false ->
                application:stop(rabbitmq_management),
                application:stop(rabbitmq_management_agent),
                ok = application:start(rabbitmq_management_agent),
                ok = application:start(rabbitmq_management)
        end." >/dev/null
}

# The broker and its API are up with the wanted interval: nothing to do.
if port_open && api_up && stats_interval_set; then
    exit 0
fi

if ! command -v rabbitmq-server >/dev/null 2>&1; then
    # several private nodes may be set up at once: one installs, the others wait
    exec 9>"$LOG_DIR/qmf-async-rabbitmq-install.lock"
    flock 9
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

if [ -n "$NODE" ]; then
    mkdir -p "$NODE_DIR/mnesia" "$NODE_DIR/log"
    printf 'listeners.tcp.default = %s\nmanagement.tcp.port = %s\nmanagement.tcp.ip = %s\n' \
        "$PORT" "$API_PORT" "$HOST" >"$RABBITMQ_CONFIG_FILE"
    [ -f "$RABBITMQ_ENABLED_PLUGINS_FILE" ] \
        || echo '[rabbitmq_management].' >"$RABBITMQ_ENABLED_PLUGINS_FILE"
    chown -R rabbitmq:rabbitmq "$NODE_DIR" 2>/dev/null || true
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
configured=no
while :; do
    if [ "$configured" = no ] && rabbitmqctl -q status >/dev/null 2>&1; then
        rabbitmq-plugins -q enable rabbitmq_management >/dev/null 2>&1 \
            || die "'rabbitmq-plugins enable rabbitmq_management' failed"
        set_stats_interval || die "setting the statistics interval failed (rabbitmqctl eval)"
        configured=yes
    fi
    if [ "$configured" = yes ] && port_open && api_up; then
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
        die "RabbitMQ did not come up on $HOST:$PORT with its management API ($API) within ${DEADLINE_S}s"
    fi
    sleep 1
done
