#!/usr/bin/env bash
# Make `prometheus` and `promtool` available for the exporter's integration tests
# (tests/test_exporter_prometheus.py).
#
# Idempotent and quiet: prints nothing when both commands are (or become) available,
# prints a clear message on stderr and exits non-zero otherwise.
# Installs Debian's `prometheus` package when either command is missing (needs root)
# WITHOUT starting the Debian service: the tests start their own prometheus process on a
# free port, with a temporary configuration and storage, and stop it.  During the
# installation a policy-rc.d that refuses service starts is in place (only when the
# system has none); a service the package started anyway (a system without policy-rc.d
# support) is stopped again.
set -euo pipefail

LOG_DIR="${TMPDIR:-/tmp}"
INSTALL_LOG="$LOG_DIR/qmf-async-prometheus-install.log"
POLICY=/usr/sbin/policy-rc.d

die() {
    echo "prometheus.sh: $*" >&2
    exit 1
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

have_both() {
    command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1
}

have_both && exit 0

command -v apt-get >/dev/null 2>&1 \
    || die "prometheus/promtool are missing and apt-get is not available; install Prometheus and retry"

placed_policy=no
cleanup() {
    if [ "$placed_policy" = yes ]; then
        as_root rm -f "$POLICY" || true
    fi
}
trap cleanup EXIT

if [ ! -e "$POLICY" ]; then
    # 101: "action forbidden by policy": invoke-rc.d starts no service
    if as_root sh -c "printf '#!/bin/sh\nexit 101\n' > $POLICY && chmod 755 $POLICY"; then
        placed_policy=yes
    fi
fi

: >"$INSTALL_LOG"
if ! { as_root apt-get update -qq \
        && as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
            --no-install-recommends prometheus; \
     } >>"$INSTALL_LOG" 2>&1; then
    cat "$INSTALL_LOG" >&2
    die "installing prometheus failed (needs root or passwordless sudo); log: $INSTALL_LOG"
fi

# the Debian service must not run: the tests start their own prometheus
if [ "$placed_policy" = no ] && [ -x /etc/init.d/prometheus ]; then
    as_root /etc/init.d/prometheus stop >>"$INSTALL_LOG" 2>&1 || true
fi

have_both || die "prometheus or promtool still not found after installation; log: $INSTALL_LOG"
