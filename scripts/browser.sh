#!/usr/bin/env bash
# Make Debian's Chromium available for the browser tests (playwright drives the system
# browser; nothing is downloaded by playwright).  Idempotent, quiet on success.
set -euo pipefail

if command -v chromium >/dev/null 2>&1 || [ -x /usr/bin/chromium ]; then
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1 || [ "$(id -u)" -ne 0 ]; then
    echo "browser.sh: chromium is missing and cannot be installed here (needs root and apt-get);" \
         "the browser tests will be skipped" >&2
    exit 0
fi
LOG="${TMPDIR:-/tmp}/qmf-async-browser.$$.log"
if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } \
        >"$LOG" 2>&1; then
    cat "$LOG" >&2
    rm -f "$LOG"
    echo "browser.sh: installing chromium failed" >&2
    exit 1
fi
rm -f "$LOG"
