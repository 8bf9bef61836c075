#!/usr/bin/env bash
# A genuine qpidd for the tests, benchmarks and demos (from ../shared/qpidd or $QPIDD_HOME).
#
#   scripts/qpidd.sh install
#       make qpidd's runtime libraries present (Debian packages; needs root when missing)
#   scripts/qpidd.sh start [--qmf1 yes|no] [--port N] [--dir DIR] [--pub-interval S] [-- ARGS]
#       start qpidd in the background on 127.0.0.1 (a free port unless --port), with a
#       fresh data directory under DIR (default: a new temporary directory), QMF v2 on and
#       QMF v1 as asked (default: qpidd's stock default, no), --auth no, the AMQP 1.0
#       module; wait until it accepts connections; print shell-evaluable lines:
#       QPIDD_PORT=... QPIDD_PID=... QPIDD_DIR=... QPIDD_URL=amqp://127.0.0.1:PORT/
#   scripts/qpidd.sh stop DIR
#       stop the qpidd started with that DIR (SIGTERM, then SIGKILL after a deadline)
#   scripts/qpidd.sh home
#       print the qpidd folder that would be used (exit 1 when there is none)
#
# Quiet on success but for the lines above; one clear line on stderr and exit 1 on failure.
# Environment: QPIDD_HOME (the folder with bin/qpidd), QPIDD_WAIT (start deadline, s, 20).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PACKAGES=(libboost-program-options1.74.0 libnss3 libuuid1 libqpid-proton11)

die() {
    echo "qpidd.sh: $*" >&2
    exit 1
}

home() {
    local h="${QPIDD_HOME:-$ROOT/../shared/qpidd}"
    [ -x "$h/bin/qpidd" ] || return 1
    (cd "$h" && pwd)
}

missing_libraries() {
    local h="$1"
    ldd "$h/bin/qpidd" "$h/modules/amqp.so" 2>/dev/null | grep -q "not found"
}

cmd_install() {
    local h
    h="$(home)" || die "no qpidd: ../shared/qpidd is absent and QPIDD_HOME is unset"
    missing_libraries "$h" || return 0
    [ "$(id -u)" = 0 ] || die "qpidd needs ${PACKAGES[*]} (run as root to install them)"
    local log="${TMPDIR:-/tmp}/qmf-async-qpidd-install.log"
    if ! { apt-get install -y --no-install-recommends "${PACKAGES[@]}" >"$log" 2>&1 \
           || { apt-get update >>"$log" 2>&1 \
                && apt-get install -y --no-install-recommends "${PACKAGES[@]}" >>"$log" 2>&1; }; }; then
        tail -20 "$log" >&2
        die "installing ${PACKAGES[*]} failed (log: $log)"
    fi
    if missing_libraries "$h"; then
        ldd "$h/bin/qpidd" "$h/modules/amqp.so" | grep "not found" >&2
        die "qpidd's libraries are still missing after the install"
    fi
}

free_port() {
    "${PYTHON:-python3}" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

port_open() {
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

cmd_start() {
    local qmf1=no port="" dir="" interval=1
    local extra=()
    while [ "$#" -gt 0 ]; do
        case "$1" in
            --qmf1) qmf1="${2:?--qmf1 yes|no}"; shift 2 ;;
            --port) port="${2:?--port N}"; shift 2 ;;
            --dir) dir="${2:?--dir DIR}"; shift 2 ;;
            --pub-interval) interval="${2:?--pub-interval S}"; shift 2 ;;
            --) shift; extra=("$@"); break ;;
            *) die "start: unknown option $1" ;;
        esac
    done
    case "$qmf1" in yes|no) ;; *) die "--qmf1 takes yes or no, not $qmf1" ;; esac
    local h
    h="$(home)" || die "no qpidd: ../shared/qpidd is absent and QPIDD_HOME is unset"
    missing_libraries "$h" && die "qpidd's libraries are missing: run scripts/qpidd.sh install"
    [ -n "$port" ] || port="$(free_port)"
    if [ -z "$dir" ]; then
        dir="$(mktemp -d "${TMPDIR:-/tmp}/qmf-async-qpidd.XXXXXX")"
    fi
    mkdir -p "$dir/data"
    port_open "$port" && die "port $port is already in use"
    echo "$port" >"$dir/port"
    echo "$qmf1 $interval ${extra[*]:-}" >"$dir/options"
    # the same command line on every (re)start of this DIR
    nohup "$h/bin/qpidd" --port "$port" --interface 127.0.0.1 --auth no \
        --no-module-dir --load-module "$h/modules/amqp.so" \
        --data-dir "$dir/data" \
        --mgmt-enable yes --mgmt-qmf1 "$qmf1" --mgmt-qmf2 yes \
        --mgmt-pub-interval "$interval" \
        --log-to-stderr no --log-to-file "$dir/qpidd.log" ${extra[@]+"${extra[@]}"} \
        >"$dir/qpidd.out" 2>&1 </dev/null &
    local pid=$!
    echo "$pid" >"$dir/pid"
    local deadline=$((SECONDS + ${QPIDD_WAIT:-20}))
    until port_open "$port"; do
        if ! kill -0 "$pid" 2>/dev/null; then
            tail -5 "$dir/qpidd.out" "$dir/qpidd.log" >&2 2>/dev/null || true
            die "qpidd exited during start-up (log: $dir/qpidd.log)"
        fi
        if [ "$SECONDS" -ge "$deadline" ]; then
            kill -9 "$pid" 2>/dev/null || true
            tail -5 "$dir/qpidd.log" >&2 2>/dev/null || true
            die "qpidd did not accept connections on port $port within ${QPIDD_WAIT:-20} s"
        fi
        sleep 0.05
    done
    echo "QPIDD_PORT=$port"
    echo "QPIDD_PID=$pid"
    echo "QPIDD_DIR=$dir"
    echo "QPIDD_URL=amqp://127.0.0.1:$port/"
}

cmd_stop() {
    local dir="${1:?stop DIR}"
    [ -f "$dir/pid" ] || return 0
    local pid
    pid="$(cat "$dir/pid")"
    if kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid" 2>/dev/null || true
        local deadline=$((SECONDS + 10))
        while kill -0 "$pid" 2>/dev/null; do
            if [ "$SECONDS" -ge "$deadline" ]; then
                kill -KILL "$pid" 2>/dev/null || true
                break
            fi
            sleep 0.05
        done
    fi
    rm -f "$dir/pid"
}

case "${1:-}" in
    install) shift; cmd_install "$@" ;;
    start) shift; cmd_start "$@" ;;
    stop) shift; cmd_stop "$@" ;;
    home) home ;;
    *) die "usage: qpidd.sh install | start [--qmf1 yes|no] [--port N] [--dir DIR] [--pub-interval S] [-- ARGS] | stop DIR | home" ;;
esac
