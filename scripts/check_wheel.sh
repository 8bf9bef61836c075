#!/usr/bin/env bash
# The package as users get it: build the sdist and the wheel, check their metadata
# (twine check), install the wheel into a new venv outside the repository once per
# extra set a user would pick, and run a smoke check from each:
#
#   core          import qmf_async; qmf --version; a tool says which extra it needs
#   cli,amqp10    (a qpidd operator, the old install line: amqp10 is an empty alias)
#                 qmf stat -b HOST:PORT -q --json against a stock qpidd, in clear and over
#                 TLS with a client certificate (socat as the TLS terminator, the one the
#                 suite uses), on Python 3.11;
#   cli           the same on 3.12 and 3.13 with the cli extra alone
#   cli           (RabbitMQ) qmf stat -b against RabbitMQ with the management-broker
#                 role and an agent (examples/demo_agent.py) started from the same venv;
#                 and against the stock qpidd (AMQP 1.0 is built in)
#   collector     qmf collect --help
#   bridge        python -m qmf_async.bridge.rabbitmq --help; qmf bridge names its extra
#   prometheus    (alone) qmf exporter against the stock qpidd serves its broker's
#                 metrics; the rules and dashboard are installed
#   classic       (alone) import qmf.console and qpidtoollibs; a classic script on the qpidd
#   web           (alone) the dashboard example (examples/web_dashboard/app.py) against the
#                 stock qpidd answers /api/objects/queue
#
# Each extra brings what its commands need to reach both buses, so the venvs of
# prometheus, classic and web hold that extra alone.  Every venv installs with
# --only-binary=:all: (wheels only, as on a host without a compiler): AMQP 1.0 is pure
# Python and no extra pulls python-qpid-proton (which has no wheel on PyPI).
#
# Needs a running RabbitMQ on localhost:5672 (scripts/rabbitmq.sh) and qpidd
# (../shared/qpidd or $QPIDD_HOME; scripts/qpidd.sh); without qpidd the qpidd checks are
# skipped with a note, except when $CI is set, where that is a failure.
# Prints one line per check; exits non-zero on the first failure, with its output.
# Environment: WHEEL_CHECK_AMQP_URL (default amqp://guest:guest@localhost:5672/) is the
# RabbitMQ the cli check uses; PYTHON (default python3), PYTHON312 and PYTHON313 (default:
# pyenv's 3.12/3.13, else python3.12/python3.13) are the interpreters; WHEEL_CHECK_DIR
# (default a new temporary folder).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
WORK="${WHEEL_CHECK_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/qmf-wheel-check.XXXXXX")}"
RABBIT_URL="${WHEEL_CHECK_AMQP_URL:-amqp://guest:guest@localhost:5672/}"
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore PIP_NO_INPUT=1
mkdir -p "$WORK"
LOG="$WORK/check.log"
QPIDD_DIR=""
PIDS=()
SOCAT_PID=""  # the TLS terminator: kept for every qpidd check, stopped at the end

cleanup() {
    local pid
    for pid in "${PIDS[@]}" $SOCAT_PID; do
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true  # (errexit: a killed process's status ends the trap)
    done
    [ -n "$QPIDD_DIR" ] && bash "$ROOT/scripts/qpidd.sh" stop "$QPIDD_DIR" >/dev/null 2>&1
    return 0
}
trap cleanup EXIT

die() {
    echo "check_wheel.sh: $*" >&2
    exit 1
}

# run WHAT CMD...: the command's output goes to the log; on failure the log is shown
run() {
    local what="$1"
    shift
    : >"$LOG"
    if ! "$@" >>"$LOG" 2>&1; then
        cat "$LOG" >&2
        die "failed: $what ($*)"
    fi
}

# expect_fail WHAT PATTERN CMD...: the command fails with exit 2 and one line on stderr
# matching PATTERN
expect_missing_extra() {
    local what="$1" pattern="$2" rc=0
    shift 2
    "$@" >"$WORK/out" 2>"$WORK/err" || rc=$?
    if [ "$rc" -ne 2 ] || [ "$(wc -l <"$WORK/err")" -ne 1 ] || ! grep -q -- "$pattern" "$WORK/err"; then
        echo "exit $rc; stdout:" >&2
        cat "$WORK/out" >&2
        echo "stderr:" >&2
        cat "$WORK/err" >&2
        die "failed: $what: expected exit 2 and one line matching '$pattern'"
    fi
}

# python_version X.Y: $PYTHONXY, else pyenv's X.Y, else pythonX.Y on PATH (empty: none)
python_version() {
    local ver="$1" named="PYTHON${1/./}"
    if [ -n "${!named:-}" ]; then
        echo "${!named}"
        return
    fi
    local candidate
    for candidate in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$ver"*/bin/python"$ver"; do
        [ -x "$candidate" ] && { echo "$candidate"; return; }
    done
    command -v "python$ver" || true
}

# --- build and check the distributions ------------------------------------------------
run "a venv for build and twine" "$PYTHON" -m venv "$WORK/tools"
run "installing build and twine" "$WORK/tools/bin/pip" install -q build twine
run "building the sdist and the wheel" \
    "$WORK/tools/bin/python" -m build --outdir "$WORK/dist" "$ROOT"
WHEEL="$(ls "$WORK"/dist/qmf_async-*.whl)"
SDIST="$(ls "$WORK"/dist/qmf_async-*.tar.gz)"
run "twine check" "$WORK/tools/bin/twine" check --strict "$WHEEL" "$SDIST"
echo "check_wheel: built and twine-checked $(basename "$WHEEL") and $(basename "$SDIST")"
# the wheel holds the package data the tools and the bridge read at run time
run "the wheel's contents" "$WORK/tools/bin/python" - "$WHEEL" <<'PY'
import sys, zipfile
names = set(zipfile.ZipFile(sys.argv[1]).namelist())
for need in ("qmf_async/py.typed", "qmf_async/__init__.py", "qmf_async/tools/cli/__init__.py"):
    assert need in names, f"{need} is missing from the wheel"
assert any(n.startswith("qmf_async/bridge/") and n.endswith(".xml") for n in names), \
    "the bridge's schema XML is missing from the wheel"
assert not any(n.startswith(("tests/", "benchmarks/", "examples/")) for n in names), \
    "the wheel carries test or example files"
PY

# --- a stock qpidd -------------------------------------------------------------------
QPIDD_PORT=""
if [ -n "${QPIDD_HOME:-}" ] || [ -x "$ROOT/../shared/qpidd/bin/qpidd" ]; then
    out="$(bash "$ROOT/scripts/qpidd.sh" start --qmf1 no --dir "$WORK/qpidd")" \
        || die "qpidd did not start"
    QPIDD_DIR="$WORK/qpidd"
    QPIDD_PORT="$(sed -n 's/^QPIDD_PORT=//p' <<<"$out")"
elif [ -n "${CI:-}" ]; then
    die "no qpidd (../shared/qpidd or \$QPIDD_HOME), and CI must run the qpidd checks"
else
    echo "check_wheel: no qpidd (../shared/qpidd or \$QPIDD_HOME): the qpidd checks are skipped"
fi

# venv NAME PYTHON EXTRAS: a new venv outside the repository with the wheel installed
venv() {
    local name="$1" python="$2" extras="$3" spec="$WHEEL"
    [ -n "$extras" ] && spec="$WHEEL[$extras]"
    run "a venv for $name" "$python" -m venv "$WORK/venv-$name"
    run "installing $spec (wheels only)" "$WORK/venv-$name/bin/pip" install -q \
        --only-binary=:all: "$spec"
}

# stat_qpidd NAME: qmf stat -q --json against the stock qpidd lists its queues, in clear
# and (when the TLS terminator runs) over TLS with a client certificate
stat_qpidd() {
    local bin="$WORK/venv-$1/bin"
    [ -n "$QPIDD_PORT" ] || return 0
    run "qmf stat -q --json against qpidd ($1)" \
        "$bin/qmf" stat -b "127.0.0.1:$QPIDD_PORT" -q --json --timeout 20
    "$bin/python" - "$LOG" <<'PY' || die "qmf stat -q --json ($1) printed no queue list"
import json, sys
rows = json.load(open(sys.argv[1]))
assert isinstance(rows, list), rows
PY
    [ -n "$TLS_PORT" ] || return 0
    run "qmf stat -q --json against qpidd over TLS ($1)" \
        "$bin/qmf" stat -b "amqps://localhost:$TLS_PORT" -q --json --timeout 20 \
        --ssl-trustfile "$PKI/ca.pem" --ssl-certificate "$PKI/client.pem" \
        --ssl-key "$PKI/client.key"
    "$bin/python" - "$LOG" <<'PY' || die "qmf stat -q --json over TLS ($1) printed no queue list"
import json, sys
rows = json.load(open(sys.argv[1]))
assert isinstance(rows, list), rows
PY
}

cd "$WORK"  # nothing of the repository is importable from here

# core alone
venv core "$PYTHON" ""
bin="$WORK/venv-core/bin"
run "import qmf_async (core)" "$bin/python" -c "import qmf_async, qmf_async.wire, qmf_async.agent"
run "qmf --version (core)" "$bin/qmf" --version
expect_missing_extra "qmf stat without the cli extra" "pip install 'qmf-async\[cli\]'" \
    "$bin/qmf" stat -b 127.0.0.1:5672
echo "check_wheel: core: import, qmf --version, qmf stat names the cli extra"

# a TLS terminator in front of the stock qpidd (this qpidd build has no TLS module):
# socat with certificates made by tests/pki.py (a CA, a server and a client certificate)
TLS_PORT=""
PKI="$WORK/pki"
if [ -n "$QPIDD_PORT" ] && command -v socat >/dev/null && command -v openssl >/dev/null; then
    mkdir -p "$PKI"
    run "certificates for the TLS terminator" "$PYTHON" -c \
        "import sys; sys.path.insert(0, sys.argv[1]); from pathlib import Path; \
from pki import Pki; Pki(Path(sys.argv[2]))" "$ROOT/tests" "$PKI"
    TLS_PORT="$("$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
    socat "OPENSSL-LISTEN:$TLS_PORT,bind=127.0.0.1,reuseaddr,fork,cert=$PKI/server.pem,key=$PKI/server.key,cafile=$PKI/ca.pem,verify=1" \
        "TCP:127.0.0.1:$QPIDD_PORT" >/dev/null 2>&1 &
    SOCAT_PID=$!
    for _ in $(seq 100); do
        "$PYTHON" -c "import socket, sys; socket.create_connection(('127.0.0.1', int(sys.argv[1])), 0.2)" \
            "$TLS_PORT" 2>/dev/null && break
        sleep 0.05
    done
elif [ -n "$QPIDD_PORT" ]; then
    [ -n "${CI:-}" ] && die "no socat or openssl for the TLS check (apt-get install socat openssl)"
    echo "check_wheel: no socat or openssl: the TLS checks are skipped"
fi

# a qpidd operator, on 3.11, 3.12 and 3.13
for py in "$PYTHON" "$(python_version 3.12)" "$(python_version 3.13)"; do
    if [ -z "$py" ]; then
        [ -n "${CI:-}" ] && die "no Python 3.12 or 3.13 (pyenv's, or python3.1X; set PYTHON312/PYTHON313)"
        echo "check_wheel: no Python 3.12 or 3.13: that check is skipped"
        continue
    fi
    ver="$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
    # the old install line on the first Python (amqp10: an empty alias), cli alone on
    # 3.12 and 3.13
    extras="cli"
    [ "$py" = "$PYTHON" ] && extras="cli,amqp10"
    venv "${extras/,/-}-$ver" "$py" "$extras"
    bin="$WORK/venv-${extras/,/-}-$ver/bin"
    run "qmf --version ($extras, $ver)" "$bin/qmf" --version
    expect_missing_extra "qmf bridge without the bridge extra ($ver)" \
        "pip install 'qmf-async\[cli,bridge\]'" "$bin/qmf" bridge rabbitmq
    stat_qpidd "${extras/,/-}-$ver"
    echo "check_wheel: $extras on Python $ver (wheels only): qmf --version, qmf stat -q --json on a stock qpidd${TLS_PORT:+, in clear and over TLS}"
done

# a RabbitMQ user: the cli extra alone
venv cli "$PYTHON" "cli"
bin="$WORK/venv-cli/bin"
# start_ready LOG CMD...: start a process, wait for its "ready" line (30 s at most)
start_ready() {
    local log="$1" deadline=$((SECONDS + 30))
    shift
    "$@" >"$log" 2>&1 &
    PIDS+=($!)
    until grep -q "ready" "$log"; do
        kill -0 "${PIDS[-1]}" 2>/dev/null || { cat "$log" >&2; die "exited: $*"; }
        [ "$SECONDS" -lt "$deadline" ] || { cat "$log" >&2; die "not ready in 30 s: $*"; }
        sleep 0.2
    done
}
# the management-broker role and the demo agent (a script beside the package, as a user
# would run one of their own) from the same venv
start_ready "$WORK/role.log" "$bin/python" -m qmf_async.agent.broker --url "$RABBIT_URL" \
    --interval 1
start_ready "$WORK/agent.log" "$bin/python" "$ROOT/examples/demo_agent.py" --url "$RABBIT_URL" \
    --interval 1
run "qmf stat -b against RabbitMQ (cli)" \
    "$bin/qmf" stat -b "$RABBIT_URL" -q --json --timeout 20
"$bin/python" - "$LOG" <<'PY' || die "qmf stat -q --json (cli, RabbitMQ) did not list the demo agent's queues"
import json, sys
rows = json.load(open(sys.argv[1]))
assert isinstance(rows, list) and rows, rows
PY
for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
PIDS=()
stat_qpidd cli
run "no python-qpid-proton in the cli venv" "$bin/python" -c \
    "import importlib.util as u; assert u.find_spec('proton') is None, 'proton installed'"
echo "check_wheel: cli: qmf stat on RabbitMQ with the role, and on the stock qpidd (no proton)"

# the collector
venv collector "$PYTHON" "collector"
run "qmf collect --help (collector)" "$WORK/venv-collector/bin/qmf" collect --help
run "the collector imports pyarrow" "$WORK/venv-collector/bin/python" -c \
    "import pyarrow, qmf_async.tools.collector"
echo "check_wheel: collector: qmf collect --help"

# the RabbitMQ bridge
venv bridge "$PYTHON" "bridge"
bin="$WORK/venv-bridge/bin"
run "the bridge's --help (bridge)" "$bin/python" -m qmf_async.bridge.rabbitmq --help
run "qmf --version (bridge)" "$bin/qmf" --version
expect_missing_extra "qmf bridge without the cli extra" "pip install 'qmf-async\[cli,bridge\]'" \
    "$bin/qmf" bridge rabbitmq
echo "check_wheel: bridge: python -m qmf_async.bridge.rabbitmq --help; qmf bridge names its extra"

# the classic synchronous API (qmf.console, qpidtoollibs), as an old script uses it
venv classic "$PYTHON" "classic"
# the classic extra alone (an empty extra: AMQP 1.0 for qpidd is built in)
run "import qmf.console and qpidtoollibs (classic)" "$WORK/venv-classic/bin/python" -c \
    "import qmf.console, qpidtoollibs; assert qmf.console.Session and qpidtoollibs.BrokerAgent"
if [ -n "$QPIDD_PORT" ]; then
    run "a classic script against qpidd (classic)" "$WORK/venv-classic/bin/python" - \
        "127.0.0.1:$QPIDD_PORT" <<'PY'
import sys
from qmf.console import Session
sess = Session()
try:
    broker = sess.addBroker(sys.argv[1])
    queues = sess.getObjects(_class="queue", _package="org.apache.qpid.broker")
    assert isinstance(queues, list), queues
    (b,) = sess.getObjects(_class="broker")
    result = b.echo(1, "hello")
    assert result.status == 0 and result.body == "hello", result
finally:
    sess.close()
PY
fi
echo "check_wheel: classic: import qmf.console and qpidtoollibs; getObjects and echo on qpidd"

# free_port: a TCP port nothing listens on now
free_port() {
    "$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# serves LOG URL PATTERN: poll URL (30 s at most) until its body matches the Python
# regular expression PATTERN, while the last process started (PIDS) runs
serves() {
    local log="$1" url="$2" pattern="$3"
    "$PYTHON" - "$url" "$pattern" "${PIDS[-1]}" <<'PY' || { cat "$log" >&2; die "$url never served '$pattern'"; }
import os, re, sys, time, urllib.request
url, pattern, pid = sys.argv[1], sys.argv[2], int(sys.argv[3])
deadline = time.monotonic() + 30
while time.monotonic() < deadline:
    try:
        os.kill(pid, 0)
    except OSError:
        sys.exit(f"the server exited before serving {url}")
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            if re.search(pattern, answer.read().decode()):
                sys.exit(0)
    except OSError:
        pass
    time.sleep(0.3)
sys.exit(f"{url} did not serve {pattern!r} within 30 s")
PY
}

stop_started() {
    local pid
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
    PIDS=()
}

# the Prometheus exporter, the prometheus extra alone (it brings cli)
venv exporter "$PYTHON" "prometheus"
bin="$WORK/venv-exporter/bin"
run "qmf exporter --help (prometheus)" "$bin/qmf" exporter --help
run "the exporter's rules and dashboard are in the wheel" "$bin/python" -c \
    "import importlib.resources as r; f = r.files('qmf_async.exporter'); \
assert f.joinpath('rules.yml').read_text() and f.joinpath('dashboard.json').read_text()"
expect_missing_extra "qmf exporter without the prometheus extra" "qmf-async\[prometheus\]" \
    "$WORK/venv-cli/bin/qmf" exporter -b 127.0.0.1:5672
if [ -n "$QPIDD_PORT" ]; then
    port="$(free_port)"
    "$bin/qmf" exporter -b "127.0.0.1:$QPIDD_PORT" --listen "127.0.0.1:$port" \
        >"$WORK/exporter.log" 2>&1 &
    PIDS+=($!)
    serves "$WORK/exporter.log" "http://127.0.0.1:$port/metrics" "(?m)^qpidd_broker_uptime_seconds"
    stop_started
fi
echo "check_wheel: prometheus: qmf exporter --help; /metrics of the stock qpidd; without the extra it names it"

# the web dashboard example, the web extra alone (aiohttp; AMQP 1.0 is built in)
venv web "$PYTHON" "web"
bin="$WORK/venv-web/bin"
run "import aiohttp with qmf_async (web)" "$bin/python" -c \
    "import aiohttp, qmf_async; assert qmf_async.Session"
run "qmf --version (web)" "$bin/qmf" --version
if [ -n "$QPIDD_PORT" ]; then
    port="$(free_port)"
    "$bin/python" "$ROOT/examples/web_dashboard/app.py" -b "127.0.0.1:$QPIDD_PORT" \
        --port "$port" >"$WORK/web.log" 2>&1 &
    PIDS+=($!)
    # the broker object's list: the session reached qpidd over AMQP 1.0
    serves "$WORK/web.log" "http://127.0.0.1:$port/api/objects/broker" "amqp-broker"
    stop_started
fi
echo "check_wheel: web: aiohttp and qmf_async import together; the dashboard on the stock qpidd"

echo "check_wheel: all checks passed ($WORK)"
