#!/usr/bin/env bash
# The dashboard's browser tests: builds the page if needed (web/dashboard/build.sh), starts a
# real hutchd (tests/support/hutchd_daemon.py, which also stops it and removes its boxes at the
# end, on failure too), and runs dashboard.test.mjs with Node's test runner in Debian's Chromium
# (headless), driven by playwright-core (pinned in package-lock.json).
#
#   tests/dashboard/run.sh
#
# Needs root (hutchd jails every QEMU), a built hutch (HUTCH_BUILD_DIR, default build/), a
# guest image (HUTCH_TEST_IMAGE, default the newest in /var/cache/hutch/images), Node 20 or
# newer with npm, and chromium (scripts/install-deps.sh; CHROMIUM=PATH for another binary).
# Screenshots go to docs/images/ (HUTCH_DASHBOARD_SCREENSHOTS=DIR for elsewhere).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=${HUTCH_BUILD_DIR:-$repo/build}
export HUTCH_BUILD_DIR=$build

log() { printf '\n==> %s\n' "$*" >&2; }

CHROMIUM=${CHROMIUM:-$(command -v chromium || true)}
if [ -z "$CHROMIUM" ] || [ ! -x "$CHROMIUM" ]; then
  echo "tests/dashboard: no chromium; install it (scripts/install-deps.sh) or set CHROMIUM" >&2
  exit 1
fi
export CHROMIUM
export HUTCH_CLI=$build/src/cli/hutch
for binary in "$build/src/daemon/hutchd" "$HUTCH_CLI"; do
  if [ ! -x "$binary" ]; then
    echo "tests/dashboard: $binary is missing: build hutch first (scripts/common.sh hutch_build)" >&2
    exit 1
  fi
done

# The page: rebuilt when any of its sources is newer than the built index.html.
dashboard=$repo/web/dashboard
built=$dashboard/dist/index.html
if [ ! -f "$built" ] || [ -n "$(find "$dashboard/src" "$dashboard/scripts" "$dashboard/package.json" \
  "$dashboard/package-lock.json" "$dashboard/tsconfig.json" -newer "$built" -print -quit)" ]; then
  log "Building the dashboard"
  "$dashboard/build.sh"
fi

cd "$here"
stamp=node_modules/.package-lock.json
if [ ! -f "$stamp" ] || [ package-lock.json -nt "$stamp" ] || [ package.json -nt "$stamp" ]; then
  log "npm ci (tests/dashboard)"
  nice -n 10 npm ci --no-audit --no-fund
fi

dir=$(mktemp -d /tmp/hutch-dashboard.XXXXXX)
# At the end, on failure too: remove the boxes, stop hutchd; keep its state and log only when
# something failed.
stop() {
  local status=$?
  python3 "$repo/tests/support/hutchd_daemon.py" stop --dir "$dir" || true
  if [ "$status" -eq 0 ]; then
    rm -rf "$dir"
  else
    echo "tests/dashboard: failed; hutchd's log is $dir/hutchd.log" >&2
  fi
}
trap stop EXIT
log "Starting hutchd ($build, state in $dir)"
# The page from this tree, whatever the build's source tree is.
export HUTCHD_EXTRA_ARGS="${HUTCHD_EXTRA_ARGS:-} --ui-dir $dashboard/dist"
python3 "$repo/tests/support/hutchd_daemon.py" start --dir "$dir" >"$dir/daemon.out"
export HUTCH_DAEMON_JSON=$dir/daemon.json

log "Browser tests (Chromium $("$CHROMIUM" --version 2>/dev/null | grep -o '[0-9][0-9.]*' | head -n 1))"
node --test --test-reporter=spec "$here/dashboard.test.mjs"
