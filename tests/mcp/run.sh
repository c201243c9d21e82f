#!/usr/bin/env bash
# hutch's MCP server (docs/mcp.md) driven by clients someone else wrote, pinned in
# package-lock.json: the MCP TypeScript SDK's own Client (Streamable HTTP with a key, and stdio
# through `hutch mcp`) and the MCP Inspector's CLI, against ONE real hutchd booting real boxes.
#
#   tests/mcp/run.sh [TEST FILE...]     default: sdk.test.mjs stdio.test.mjs inspector.test.mjs
#
# The hutchd comes from tests/support/hutchd_daemon.py (its own state directory, uid range and
# network-namespace prefix), as for the other client suites.
# Env: HUTCH_BUILD_DIR (default build/), HUTCH_TEST_IMAGE (the base guest image directory;
# default the newest $HUTCH_CACHE_DIR/images/base-*), HUTCH_MCP_DIR (the daemon's scratch
# directory, default a new /tmp/hutch-mcp.XXXXXX), MCP_TEST_FILTER (a regex for node's
# --test-name-pattern). Needs root (hutchd jails QEMU) and Node 20.18.1 or newer with npm.
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
export HUTCH_BUILD_DIR=${HUTCH_BUILD_DIR:-$ROOT/build}
SUITE_NAME=tests/mcp
# shellcheck source=../support/client_suite.sh
source "$ROOT/tests/support/client_suite.sh"

files=("$@")
[ ${#files[@]} -eq 0 ] && files=(sdk.test.mjs stdio.test.mjs inspector.test.mjs)

suite_check_build
suite_default_image
# The Inspector 1.x declares Node >= 22.7.5 but its CLI runs on 20 (npm's engine-strict is off).
suite_npm_ci "$HERE"

made_dir=0
if [ -z "${HUTCH_MCP_DIR:-}" ]; then dir=$(mktemp -d /tmp/hutch-mcp.XXXXXX); made_dir=1; else dir=$HUTCH_MCP_DIR; fi
suite_start_hutchd "$dir" "$made_dir"
http_url=$(suite_field http_url)
socket=$(suite_field socket)
[ -n "$http_url" ] || suite_die "hutchd has no plain-HTTP loopback listener (daemon.json: $SUITE_DAEMON_JSON)"
# A second owner, made the way an operator would: hutch key create.
key_b=$("$SUITE_CLI" --socket "$socket" --json key create mcp-owner-b |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["key"])') || suite_die "hutch key create failed"

export HUTCH_MCP_URL=$http_url/mcp HUTCH_MCP_HTTP_URL=$http_url HUTCH_MCP_SOCKET=$socket
export HUTCH_MCP_KEY_A=$(suite_field key) HUTCH_MCP_KEY_B=$key_b HUTCH_MCP_CLI=$SUITE_CLI
unset HUTCH_HOST HUTCH_API_KEY HUTCH_SOCKET
suite_log "MCP endpoint $HUTCH_MCP_URL; hutch mcp through $socket"

t0=$(date +%s)
(cd "$HERE" && node --test --test-concurrency=1 --test-reporter=spec \
  ${MCP_TEST_FILTER:+--test-name-pattern="$MCP_TEST_FILTER"} "${files[@]}")
rc=$?
suite_log "tests/mcp: $([ $rc = 0 ] && echo passed || echo "FAILED, exit $rc") in $(($(date +%s) - t0)) s"
exit $rc
