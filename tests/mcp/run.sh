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
cache_root=${HUTCH_CACHE_DIR:-/var/cache/hutch}

log() { printf '\n==> %s\n' "$*" >&2; }
die() { echo "tests/mcp: $*" >&2; exit 1; }

files=("$@")
[ ${#files[@]} -eq 0 ] && files=(sdk.test.mjs stdio.test.mjs inspector.test.mjs)

[ "$(id -u)" = 0 ] || die "needs root: hutchd jails every QEMU"
[ -x "$HUTCH_BUILD_DIR/src/daemon/hutchd" ] || die "$HUTCH_BUILD_DIR/src/daemon/hutchd is missing (build hutch first)"
[ -x "$HUTCH_BUILD_DIR/src/cli/hutch" ] || die "$HUTCH_BUILD_DIR/src/cli/hutch is missing (build hutch first)"
if [ -z "${HUTCH_TEST_IMAGE:-}" ]; then
  HUTCH_TEST_IMAGE=$(ls -td "$cache_root"/images/base-*/ 2>/dev/null | head -n1)
  HUTCH_TEST_IMAGE=${HUTCH_TEST_IMAGE%/}
  [ -n "$HUTCH_TEST_IMAGE" ] || die "no base guest image in $cache_root/images (scripts/build-image.sh) and HUTCH_TEST_IMAGE is not set"
fi
export HUTCH_TEST_IMAGE

command -v node >/dev/null && command -v npm >/dev/null || die "Node 20.18.1+ and npm are needed (Debian 12's nodejs is too old)"
node -e 'const [a,b,c]=process.versions.node.split(".").map(Number); process.exit(a>20||(a===20&&(b>18||(b===18&&c>=1)))?0:1)' ||
  die "Node $(node --version) is too old; the MCP SDK tests need >= 20.18.1"
stamp=$(sha256sum "$HERE/package-lock.json" | cut -c1-16)
if [ "$(cat "$HERE/node_modules/.hutch-lock" 2>/dev/null)" != "$stamp" ]; then
  log "npm ci (tests/mcp/package-lock.json)"
  # The Inspector 1.x declares Node >= 22.7.5 but its CLI runs on 20 (engine-strict is off).
  (cd "$HERE" && npm ci --no-audit --no-fund --loglevel=error) || die "npm ci failed"
  echo "$stamp" >"$HERE/node_modules/.hutch-lock"
fi

# ---- One hutchd ------------------------------------------------------------------------------
made_dir=0
if [ -z "${HUTCH_MCP_DIR:-}" ]; then dir=$(mktemp -d /tmp/hutch-mcp.XXXXXX); made_dir=1; else dir=$HUTCH_MCP_DIR; fi
# Copies of the binaries, in the build tree's layout: others may relink build/ while the suite
# runs, and hutchd starts hutch-jail (and the egress proxy) for every box.
snap=$dir/build
for rel in src/daemon/hutchd src/cli/hutch src/jail/hutch-jail src/egress/proxy/hutch-egress \
  src/jail/hutch-ram-preload.so; do
  src=$HUTCH_BUILD_DIR/$rel
  mkdir -p "$(dirname "$snap/$rel")"
  for _ in $(seq 180); do
    if [ -e "$src" ] && [ $(($(date +%s) - $(stat -c %Y "$src"))) -ge 3 ]; then
      cp -p "$src" "$snap/$rel" && break
    fi
    case "$rel" in *hutch-egress|*.so) [ -e "$src" ] || break ;; esac
    sleep 1
  done
  case "$rel" in *hutch-egress|*.so) ;; *) [ -x "$snap/$rel" ] || die "cannot copy $src (is a build running?)" ;; esac
done
log "Starting hutchd (image $HUTCH_TEST_IMAGE, state in $dir)"
daemon_json=$(HUTCH_BUILD_DIR=$snap python3 "$ROOT/tests/support/hutchd_daemon.py" start --dir "$dir") ||
  die "hutchd did not start; see $dir/hutchd.log"
stop_daemon() {
  log "Stopping hutchd (its log: $dir/hutchd.log)"
  python3 "$ROOT/tests/support/hutchd_daemon.py" stop --dir "$dir" || true
  [ "$made_dir" = 1 ] && rm -rf "$dir/state" "$dir/build"
  return 0
}
trap stop_daemon EXIT
field() { python3 -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]] or "")' "$daemon_json" "$1"; }
http_url=$(field http_url)
socket=$(field socket)
[ -n "$http_url" ] || die "hutchd has no plain-HTTP loopback listener (daemon.json: $daemon_json)"
# A second owner, made the way an operator would: hutch key create.
key_b=$("$snap/src/cli/hutch" --socket "$socket" --json key create mcp-owner-b |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["key"])') || die "hutch key create failed"

export HUTCH_MCP_URL=$http_url/mcp HUTCH_MCP_HTTP_URL=$http_url HUTCH_MCP_SOCKET=$socket
export HUTCH_MCP_KEY_A=$(field key) HUTCH_MCP_KEY_B=$key_b HUTCH_MCP_CLI=$snap/src/cli/hutch
unset HUTCH_HOST HUTCH_API_KEY HUTCH_SOCKET
log "MCP endpoint $HUTCH_MCP_URL; hutch mcp through $socket"

t0=$(date +%s)
(cd "$HERE" && node --test --test-concurrency=1 --test-reporter=spec \
  ${MCP_TEST_FILTER:+--test-name-pattern="$MCP_TEST_FILTER"} "${files[@]}")
rc=$?
log "tests/mcp: $([ $rc = 0 ] && echo passed || echo "FAILED, exit $rc") in $(($(date +%s) - t0)) s"
exit $rc
