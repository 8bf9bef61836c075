#!/usr/bin/env bash
# The broker-free tiers of the suite (codec, protocol cores, session and view units,
# selector), and the upstream qmfv2 conformance suite against the classic layer, on
# every other Python the package supports: 3.12 and 3.13 (the default
# interpreter runs the whole suite in scripts/test.sh).  Each gets a venv of its own,
# .venv-3.12 and .venv-3.13 in the repository root (made by scripts/setup.sh).
#
#   scripts/test_pythons.sh             -> 3.12 and 3.13
#   scripts/test_pythons.sh 3.13        -> that one
#
# The interpreters are found as pythonX.Y on PATH, else in pyenv's versions; a missing
# one is skipped with a note, except when $CI is set, where it is a failure.
# Extra pytest arguments: QMF_PYTEST_ARGS.  Exits non-zero when any run failed.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

# the broker-free test modules (integration, qpidd and proton_peer tests inside them are
# deselected: the AMQP 1.0 codec's cross-checks against proton run in scripts/test.sh's
# proton_peer tier; the sans-I/O AMQP 1.0 engine's own tests run here)
TIERS=(
    tests/test_codec_units.py tests/test_codec_encoders.py tests/test_codec_golden.py
    tests/test_codec_fuzz.py tests/test_amqp10_engine.py tests/test_v2_codec.py
    tests/test_record_view.py tests/test_method_codecs.py tests/test_schema_xml.py
    tests/test_protocol_console.py tests/test_protocol_console_v2.py
    tests/test_protocol_agent.py tests/test_protocol_agent_registration.py
    tests/test_agent_v2_core.py tests/test_agent_records.py tests/test_correlation.py
    tests/test_session_unit.py tests/test_object_view.py tests/test_lazy.py
    tests/test_transport_auto.py tests/test_transport_dispatch.py
    tests/test_selector.py tests/test_fuzz_corpus.py
    tests/test_envelope.py tests/test_agent_rules.py tests/test_role_directory.py
    tests/test_object_view_core.py tests/test_v1route_translate.py
)

# A candidate counts only when it runs: pyenv puts a shim for every version it has on
# PATH, and a shim for a version that is not selected exits 127 ("command not found").
find_python() {
    local ver="$1" candidate
    for candidate in "$(command -v "python$ver" 2>/dev/null || true)" \
            "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$ver".*/bin/"python$ver"; do
        if [ -n "$candidate" ] && [ -x "$candidate" ] \
                && "$candidate" -c 'import sys' >/dev/null 2>&1; then
            echo "$candidate"
            return
        fi
    done
}

[ "$#" -gt 0 ] || set -- 3.12 3.13
status=0
for ver in "$@"; do
    py="$(find_python "$ver")"
    if [ -z "$py" ]; then
        if [ -n "${CI:-}" ]; then
            echo "test_pythons.sh: Python $ver not found, and CI must run on it" >&2
            status=1
        else
            echo "test_pythons.sh: Python $ver not found: skipped"
        fi
        continue
    fi
    PYTHON="$py" VENV="$ROOT/.venv-$ver" bash scripts/setup.sh test amqp10
    echo "== the broker-free tiers on $("$ROOT/.venv-$ver/bin/python" -V)"
    # shellcheck disable=SC2086
    if ! "$ROOT/.venv-$ver/bin/python" -m pytest -q -p no:cacheprovider -n 2 \
            -m "not integration and not qpidd and not proton_peer" "${TIERS[@]}" ${QMF_PYTEST_ARGS:-}; then
        status=1
    fi
    # the upstream Console-callback suite (qmfv2) against the classic layer on this
    # Python, about 15 s (tests/test_peer_suite.py; its harness runs on .venv's Python;
    # skipped when ../shared/peer-suite is absent)
    if [ -x "$ROOT/.venv/bin/python" ] && ! QMF_PEER_PYTHON="$ROOT/.venv-$ver/bin/python" \
            "$ROOT/.venv/bin/python" -m pytest -q -p no:cacheprovider \
            tests/test_peer_suite.py -k another_python; then
        status=1
    fi
done
exit "$status"
