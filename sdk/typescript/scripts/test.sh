#!/usr/bin/env bash
# The TypeScript SDK's tests: npm ci, build, unit tests, then integration tests against a real
# hutchd with real boxes (test/integration/run.ts starts one with tests/support/hutchd_daemon.py).
#
#   sdk/typescript/scripts/test.sh           # everything (integration needs root and /dev/kvm or TCG)
#   sdk/typescript/scripts/test.sh --unit    # npm ci, build, unit tests only
#
# The integration tests use HUTCH_BUILD_DIR (hutchd, hutch-agent, ...) and HUTCH_TEST_IMAGE (the
# base guest image directory); when they are not set, the repository's own scripts build both
# (scripts/common.sh: cmake + ninja, scripts/build-image.sh, cached in /var/cache/hutch).
# Needs Node 20 or newer and npm; the registry is whatever npm is configured to use.
set -euo pipefail

sdk_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
repo_dir=$(cd "$sdk_dir/../.." && pwd)
unit_only=0
node_args=()
for arg in "$@"; do
  case "$arg" in
    --unit) unit_only=1 ;;
    *) node_args+=("$arg") ;;
  esac
done

log() { printf '\n==> %s\n' "$*" >&2; }

node_major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$node_major" -lt 20 ]; then
  echo "sdk/typescript: Node $(node --version) is too old; @hutch/sdk needs Node 20 or newer" >&2
  exit 1
fi

cd "$sdk_dir"
log "npm ci"
npm ci --no-audit --no-fund
log "Building (tsc)"
npm run --silent build
npm run --silent build:test
log "Unit tests"
node --test build-test/test/unit/

if [ "$unit_only" -eq 1 ]; then
  exit 0
fi

if [ -z "${HUTCH_TEST_DAEMON:-}" ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "sdk/typescript: the integration tests start hutchd and need root (or run with --unit)" >&2
    exit 1
  fi
  build_given=${HUTCH_BUILD_DIR:-}
  # shellcheck source=../../../scripts/common.sh
  source "$repo_dir/scripts/common.sh"
  if [ -z "$build_given" ]; then
    # Idempotent and incremental: a no-op when the packages are there and the build is current.
    "$repo_dir/scripts/install-deps.sh"
    hutch_build
  fi
  if [ -z "${HUTCH_TEST_IMAGE:-}" ]; then
    HUTCH_TEST_IMAGE=$(cd "$repo_dir" && hutch_image base)
  fi
  export HUTCH_BUILD_DIR HUTCH_TEST_IMAGE
fi
log "Integration tests (hutchd from ${HUTCH_BUILD_DIR:-the given daemon}, image ${HUTCH_TEST_IMAGE:-})"
node build-test/test/integration/run.js "${node_args[@]+"${node_args[@]}"}"
