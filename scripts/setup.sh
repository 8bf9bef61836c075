#!/usr/bin/env bash
# Create or refresh the virtualenv .venv in the repository root and install qmf-async
# into it (editable) with the given extras (default: test).
#
#   scripts/setup.sh              -> pip install -e '.[test]'
#   scripts/setup.sh test cli     -> pip install -e '.[test,cli]'
#
# Idempotent and quiet: nothing is printed on success; the pip log is shown on failure.
# The install is skipped when pyproject.toml and the extras did not change since the
# last successful run (delete .venv/.qmf-setup-stamp to force it).
# Environment: PYTHON (default python3) is the interpreter the venv is made from; VENV
# (default .venv in the repository root) the venv.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PYTHON="${PYTHON:-python3}"
VENV="${VENV:-$ROOT/.venv}"
LOG="${TMPDIR:-/tmp}/qmf-async-setup.$$.log"
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore PIP_NO_INPUT=1

die() {
    echo "setup.sh: $*" >&2
    exit 1
}

run_logged() {
    if ! "$@" >>"$LOG" 2>&1; then
        cat "$LOG" >&2
        rm -f "$LOG"
        die "failed: $*"
    fi
}

if [ "$#" -eq 0 ]; then
    set -- test
fi
extras="$(IFS=,; echo "$*")"

command -v "$PYTHON" >/dev/null 2>&1 || die "$PYTHON not found; Python >= 3.11 is needed"
"$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
    || die "$("$PYTHON" -V 2>&1) is too old; Python >= 3.11 is needed (set PYTHON=...)"

# (re)create the venv when it is missing or broken (e.g. its interpreter was removed)
if ! "$VENV/bin/python" -c 'import sys' >/dev/null 2>&1; then
    rm -rf "$VENV"
    if ! "$PYTHON" -m venv "$VENV" >"$LOG" 2>&1; then
        # Debian/Ubuntu ship venv/ensurepip separately
        if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" -eq 0 ]; then
            rm -rf "$VENV"
            run_logged apt-get update -qq
            run_logged env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv
            run_logged "$PYTHON" -m venv "$VENV"
        else
            cat "$LOG" >&2
            rm -f "$LOG"
            die "cannot create $VENV (install the python3-venv package?)"
        fi
    fi
fi

stamp="$VENV/.qmf-setup-stamp"
want="$( { cat pyproject.toml; echo "extras=$extras"; } | sha256sum | cut -d' ' -f1)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] \
    && "$VENV/bin/python" -c 'import qmf_async' >/dev/null 2>&1; then
    rm -f "$LOG"
    exit 0
fi

rm -f "$stamp"
run_logged "$VENV/bin/python" -m pip install -q --upgrade pip
run_logged "$VENV/bin/python" -m pip install -q -e ".[$extras]"
echo "$want" >"$stamp"
rm -f "$LOG"
