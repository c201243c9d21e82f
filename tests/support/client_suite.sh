# Sourced by the client suites' run.sh (tests/e2b, tests/mcp): what each needs around its
# clients, written once. Each suite gets its own hutchd (tests/support/hutchd_daemon.py: its own
# state directory, uid range and network-namespace prefix), from copies of the binaries.
#
#   suite_check_build                  root, hutchd and hutch built (exits otherwise)
#   suite_default_image                exports HUTCH_TEST_IMAGE (default: the newest built base)
#   suite_npm_ci DIR                   Node 20.18.1+; npm ci in DIR when its lockfile changed
#   suite_start_hutchd DIR MADE        copies the binaries into DIR/build, starts hutchd there;
#                                      sets SUITE_DAEMON_JSON and SUITE_CLI, and a trap that
#                                      stops it on exit (and, when MADE=1, removes its state)
#   suite_field NAME                   a field of SUITE_DAEMON_JSON (http_url, socket, key...)
# The caller sets SUITE_NAME (for messages) and HUTCH_BUILD_DIR.

suite_log() { printf '\n==> %s\n' "$*" >&2; }
suite_die() { echo "${SUITE_NAME:-tests}: $*" >&2; exit 1; }

suite_check_build() {
  [ "$(id -u)" = 0 ] || suite_die "needs root: hutchd jails every QEMU"
  [ -x "$HUTCH_BUILD_DIR/src/daemon/hutchd" ] || suite_die "$HUTCH_BUILD_DIR/src/daemon/hutchd is missing (build hutch first)"
  [ -x "$HUTCH_BUILD_DIR/src/cli/hutch" ] || suite_die "$HUTCH_BUILD_DIR/src/cli/hutch is missing (build hutch first)"
}

suite_default_image() {
  local cache_root=${HUTCH_CACHE_DIR:-/var/cache/hutch}
  if [ -z "${HUTCH_TEST_IMAGE:-}" ]; then
    HUTCH_TEST_IMAGE=$(ls -td "$cache_root"/images/base-*/ 2>/dev/null | head -n1)
    HUTCH_TEST_IMAGE=${HUTCH_TEST_IMAGE%/}
    [ -n "$HUTCH_TEST_IMAGE" ] || suite_die "no base guest image in $cache_root/images (scripts/build-image.sh) and HUTCH_TEST_IMAGE is not set"
  fi
  export HUTCH_TEST_IMAGE
}

suite_npm_ci() {
  local dir=$1 stamp
  command -v node >/dev/null && command -v npm >/dev/null || suite_die "Node 20.18.1+ and npm are needed (Debian 12's nodejs is too old)"
  node -e 'const [a,b,c]=process.versions.node.split(".").map(Number); process.exit(a>20||(a===20&&(b>18||(b===18&&c>=1)))?0:1)' ||
    suite_die "Node $(node --version) is too old; the suite needs >= 20.18.1"
  stamp=$(sha256sum "$dir/package-lock.json" | cut -c1-16)
  if [ "$(cat "$dir/node_modules/.hutch-lock" 2>/dev/null)" != "$stamp" ]; then
    suite_log "npm ci ($dir/package-lock.json)"
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error) || suite_die "npm ci failed"
    echo "$stamp" >"$dir/node_modules/.hutch-lock"
  fi
}

suite_start_hutchd() {
  SUITE_DIR=$1
  SUITE_MADE_DIR=$2
  local root snap rel src
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  # Copies of the binaries, in the build tree's layout: others may relink build/ while the
  # suite runs, and hutchd starts hutch-jail (and the egress proxy) for every box.
  snap=$SUITE_DIR/build
  for rel in src/daemon/hutchd src/cli/hutch src/jail/hutch-jail src/egress/proxy/hutch-egress \
    src/jail/hutch-ram-preload.so; do
    src=$HUTCH_BUILD_DIR/$rel
    mkdir -p "$(dirname "$snap/$rel")"
    # A file being relinked may be missing or half written for a moment: copy it once it
    # exists and is 3 s old (the optional ones, egress and the preload library, only if they
    # exist).
    for _ in $(seq 180); do
      if [ -e "$src" ] && [ $(($(date +%s) - $(stat -c %Y "$src"))) -ge 3 ]; then
        cp -p "$src" "$snap/$rel" && break
      fi
      case "$rel" in *hutch-egress|*.so) [ -e "$src" ] || break ;; esac
      sleep 1
    done
    case "$rel" in *hutch-egress|*.so) ;; *) [ -x "$snap/$rel" ] || suite_die "cannot copy $src (is a build running?)" ;; esac
  done
  SUITE_CLI=$snap/src/cli/hutch
  SUITE_ROOT=$root
  suite_log "Starting hutchd (image $HUTCH_TEST_IMAGE, state in $SUITE_DIR)"
  SUITE_DAEMON_JSON=$(HUTCH_BUILD_DIR=$snap python3 "$root/tests/support/hutchd_daemon.py" start --dir "$SUITE_DIR") ||
    suite_die "hutchd did not start; see $SUITE_DIR/hutchd.log"
  trap suite_stop_hutchd EXIT
}

suite_stop_hutchd() {
  suite_log "Stopping hutchd (its log: $SUITE_DIR/hutchd.log)"
  python3 "$SUITE_ROOT/tests/support/hutchd_daemon.py" stop --dir "$SUITE_DIR" || true
  # The state (template snapshots, ~0.5 GB) and the binaries' copies go; the logs stay.
  [ "$SUITE_MADE_DIR" = 1 ] && rm -rf "$SUITE_DIR/state" "$SUITE_DIR/build"
  return 0
}

suite_field() {
  python3 -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]] or "")' "$SUITE_DAEMON_JSON" "$1"
}
