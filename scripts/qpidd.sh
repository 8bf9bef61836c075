#!/usr/bin/env bash
# A genuine qpidd (Apache Qpid C++ broker) for tests, benchmarks and demos.
#
#   scripts/qpidd.sh install
#       Make qpidd's runtime libraries (and certutil/pk12util, libnss3-tools, for
#       the SSL listener of the TLS tests) present (apt-get, needs root); quiet when fine.
#   scripts/qpidd.sh start [--qmf1 yes|no] [--qmf2 yes|no] [--port N] [--dir DIR]
#                          [--pub-interval S] [--wait S] [-- extra qpidd args]
#       Start qpidd in the background on 127.0.0.1 and wait until its port accepts
#       connections.  Prints shell-evaluable lines:
#           QPIDD_PORT=…  QPIDD_PID=…  QPIDD_DIR=…  QPIDD_URL=amqp://127.0.0.1:PORT/
#       DIR (default: a new `mktemp -d`) holds data/ (the broker's data directory,
#       created when absent: a new DIR gives a fresh one, starting again with the same
#       DIR and --port is a broker restart), qpidd.log, qpidd.out and qpidd.pid.
#   scripts/qpidd.sh stop DIR
#       Stop the qpidd started with DIR (SIGTERM, then SIGKILL after the deadline).
#       Idempotent.
#
# qpidd is looked up in $QPIDD_HOME, then <repo>/../shared/qpidd (bin/qpidd,
# modules/amqp.so).  Errors are one line on stderr and a non-zero exit.
#
# Environment:
#   QPIDD_HOME       the qpidd folder (bin/, lib/, modules/)
#   QPIDD_WAIT       seconds to wait for the port (default 20; --wait overrides)
#   QPIDD_STOP_WAIT  seconds to wait after SIGTERM before SIGKILL (default 10)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
HOST=127.0.0.1

die() {
    echo "qpidd.sh: $*" >&2
    exit 1
}

usage() {
    cat >&2 <<'EOF'
usage: qpidd.sh install
       qpidd.sh start [--qmf1 yes|no] [--qmf2 yes|no] [--port N] [--dir DIR] [--pub-interval S] [--wait S] [-- qpidd args]
       qpidd.sh stop DIR
EOF
    exit 2
}

find_home() {
    local home
    if [ -n "${QPIDD_HOME:-}" ]; then
        home="$QPIDD_HOME"
        [ -x "$home/bin/qpidd" ] || die "QPIDD_HOME=$home has no executable bin/qpidd"
    else
        home="$ROOT/../shared/qpidd"
        [ -x "$home/bin/qpidd" ] \
            || die "qpidd not found: set QPIDD_HOME or provide $home/bin/qpidd"
        home="$(cd "$home" && pwd)"
    fi
    [ -f "$home/modules/amqp.so" ] || die "$home/modules/amqp.so is missing"
    printf '%s\n' "$home"
}

port_open() {
    # bash's /dev/tcp; the subshell keeps the descriptor from leaking.
    (exec 3<>"/dev/tcp/$HOST/$1") 2>/dev/null
}

# True while PID runs and is not a zombie.
alive() {
    local state
    [ -r "/proc/$1/stat" ] || return 1
    state="$(sed -e 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)" || return 1
    [ -n "$state" ] && [ "$state" != "Z" ] && [ "$state" != "X" ]
}

# True when PID is a running qpidd (guards against a recycled pid).
is_qpidd() {
    alive "$1" && tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | grep -q 'qpidd'
}

free_port() {
    if command -v python3 >/dev/null 2>&1; then
        python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()'
        return
    fi
    local port
    for _ in $(seq 1 200); do
        port=$((20000 + RANDOM % 40000))
        if ! port_open "$port"; then
            echo "$port"
            return
        fi
    done
    die "no free port found"
}

log_tail() {
    local dir="$1"
    {
        if [ -s "$dir/qpidd.out" ]; then
            echo "--- qpidd output ($dir/qpidd.out):"
            tail -n 20 "$dir/qpidd.out"
        fi
        if [ -f "$dir/qpidd.log" ]; then
            echo "--- tail of $dir/qpidd.log:"
            tail -n 20 "$dir/qpidd.log"
        fi
    } >&2 || true
}

# The missing libraries of an ldd listing, once each, space-separated.
missing_names() {
    awk '{print $1}' <<<"$1" | sort -u | paste -sd' ' -
}

# certutil and pk12util (libnss3-tools) make the NSS certificate database of qpidd's
# SSL listener (the TLS tests); their absence is reported like a missing library.
nss_tools_missing() {
    local tool
    for tool in certutil pk12util; do
        command -v "$tool" >/dev/null 2>&1 || echo "$tool (libnss3-tools) not found"
    done
    # socat terminates TLS in front of qpidd for the native AMQP 1.0 transport's tests
    command -v socat >/dev/null 2>&1 || echo "socat (socat) not found"
}

cmd_install() {
    local home missing
    home="$(find_home)"
    missing="$(ldd "$home/bin/qpidd" "$home/modules/amqp.so" 2>&1 | grep 'not found' || true)"
    missing="$missing$(nss_tools_missing)"
    [ -z "$missing" ] && return 0
    command -v apt-get >/dev/null 2>&1 \
        || die "qpidd libraries missing ($(missing_names "$missing")) and apt-get is not available"
    [ "$(id -u)" -eq 0 ] \
        || die "qpidd libraries missing ($(missing_names "$missing")); run 'scripts/qpidd.sh install' as root"
    local log="${TMPDIR:-/tmp}/qmf-async-qpidd-install.log"
    : >"$log"
    if ! { apt-get update -qq \
            && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
                libboost-program-options1.74.0 libnss3 libuuid1 libqpid-proton11 \
                libnss3-tools socat; \
         } >>"$log" 2>&1; then
        cat "$log" >&2
        die "installing qpidd's runtime packages failed; log: $log"
    fi
    missing="$(ldd "$home/bin/qpidd" "$home/modules/amqp.so" 2>&1 | grep 'not found' || true)"
    missing="$missing$(nss_tools_missing)"
    [ -z "$missing" ] \
        || die "qpidd libraries still missing after installation: $(missing_names "$missing")"
}

cmd_start() {
    local qmf1=no qmf2=yes port="" dir="" pub=1 wait_s="${QPIDD_WAIT:-20}"
    local -a extra=()
    while [ $# -gt 0 ]; do
        case "$1" in
            --qmf1)
                [ $# -ge 2 ] || usage
                case "$2" in yes | no) qmf1="$2" ;; *) die "--qmf1 takes yes or no, not '$2'" ;; esac
                shift 2 ;;
            --qmf2)
                [ $# -ge 2 ] || usage
                case "$2" in yes | no) qmf2="$2" ;; *) die "--qmf2 takes yes or no, not '$2'" ;; esac
                shift 2 ;;
            --port)
                [ $# -ge 2 ] || usage
                [[ "$2" =~ ^[0-9]+$ ]] && [ "$2" -ge 1 ] && [ "$2" -le 65535 ] \
                    || die "--port takes a port number (1-65535), not '$2'"
                port="$2"; shift 2 ;;
            --dir)
                [ $# -ge 2 ] || usage
                dir="$2"; shift 2 ;;
            --pub-interval)
                [ $# -ge 2 ] || usage
                [[ "$2" =~ ^[0-9]+$ ]] && [ "$2" -ge 1 ] \
                    || die "--pub-interval takes whole seconds (>= 1), not '$2'"
                pub="$2"; shift 2 ;;
            --wait)
                [ $# -ge 2 ] || usage
                [[ "$2" =~ ^[0-9]+$ ]] || die "--wait takes whole seconds, not '$2'"
                wait_s="$2"; shift 2 ;;
            --)
                shift; extra=("$@"); break ;;
            *)
                die "unknown start option '$1' (see the header of scripts/qpidd.sh)" ;;
        esac
    done

    local home
    home="$(find_home)"
    if [ -z "$dir" ]; then
        dir="$(mktemp -d "${TMPDIR:-/tmp}/qpidd.XXXXXX")"
    else
        mkdir -p "$dir"
        dir="$(cd "$dir" && pwd)"
    fi
    if [ -f "$dir/qpidd.pid" ] && is_qpidd "$(cat "$dir/qpidd.pid")"; then
        die "a qpidd (pid $(cat "$dir/qpidd.pid")) already runs with $dir; stop it first"
    fi
    mkdir -p "$dir/data"
    [ -n "$port" ] || port="$(free_port)"
    if port_open "$port"; then
        die "port $port on $HOST is already in use"
    fi

    : >"$dir/qpidd.out"
    "$home/bin/qpidd" \
        --port "$port" --interface "$HOST" --auth no \
        --no-module-dir --load-module "$home/modules/amqp.so" \
        --data-dir "$dir/data" \
        --mgmt-enable yes --mgmt-qmf1 "$qmf1" --mgmt-qmf2 "$qmf2" \
        --mgmt-pub-interval "$pub" \
        --log-to-stderr no --log-to-file "$dir/qpidd.log" \
        ${extra[@]+"${extra[@]}"} \
        </dev/null >>"$dir/qpidd.out" 2>&1 &
    local pid=$!
    echo "$pid" >"$dir/qpidd.pid"
    echo "$port" >"$dir/qpidd.port"

    local deadline=$((SECONDS + wait_s))
    while :; do
        if ! alive "$pid"; then
            rm -f "$dir/qpidd.pid"
            log_tail "$dir"
            die "qpidd exited during start-up (port $port, dir $dir)"
        fi
        if port_open "$port"; then
            break
        fi
        if [ "$SECONDS" -ge "$deadline" ]; then
            kill -KILL "$pid" 2>/dev/null || true
            rm -f "$dir/qpidd.pid"
            log_tail "$dir"
            die "qpidd did not accept connections on $HOST:$port within ${wait_s}s (dir $dir)"
        fi
        sleep 0.1
    done
    printf 'QPIDD_PORT=%s\nQPIDD_PID=%s\nQPIDD_DIR=%q\nQPIDD_URL=amqp://%s:%s/\n' \
        "$port" "$pid" "$dir" "$HOST" "$port"
}

cmd_stop() {
    [ $# -eq 1 ] || usage
    local dir="$1" pid
    [ -f "$dir/qpidd.pid" ] || return 0
    pid="$(cat "$dir/qpidd.pid")"
    [[ "$pid" =~ ^[0-9]+$ ]] || { rm -f "$dir/qpidd.pid"; return 0; }
    if ! is_qpidd "$pid"; then
        rm -f "$dir/qpidd.pid"
        return 0
    fi
    kill -TERM "$pid" 2>/dev/null || true
    local deadline=$((SECONDS + ${QPIDD_STOP_WAIT:-10}))
    while alive "$pid"; do
        if [ "$SECONDS" -ge "$deadline" ]; then
            kill -KILL "$pid" 2>/dev/null || true
            local kill_deadline=$((SECONDS + 5))
            while alive "$pid"; do
                [ "$SECONDS" -lt "$kill_deadline" ] \
                    || die "qpidd (pid $pid) still runs after SIGKILL"
                sleep 0.1
            done
            break
        fi
        sleep 0.1
    done
    rm -f "$dir/qpidd.pid"
}

[ $# -ge 1 ] || usage
command="$1"
shift
case "$command" in
    install) [ $# -eq 0 ] || usage; cmd_install ;;
    start) cmd_start "$@" ;;
    stop) cmd_stop "$@" ;;
    *) usage ;;
esac
