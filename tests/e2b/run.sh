#!/usr/bin/env bash
# The E2B compatibility suites: the official, unmodified E2B SDKs (npm `e2b`, PyPI `e2b`, two
# pinned versions of each) drive ONE real hutchd through its E2B facade, configured only by
# E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY (docs/e2b.md).
#
#   tests/e2b/run.sh [SUITE...]      SUITE: js-latest js-old py-latest py-old (default: all four)
#
# Every suite runs even when another fails; the exit status is 1 when any failed.
# Env: HUTCH_BUILD_DIR (default build/), HUTCH_TEST_IMAGE (the base guest image directory;
# default the newest $HUTCH_CACHE_DIR/images/base-*), HUTCH_E2B_DIR (the daemon's scratch
# directory, default a new /tmp/hutch-e2b.XXXXXX), E2B_TEST_FILTER (only the tests whose names
# match: a regex for node --test-name-pattern, a pytest -k expression), HUTCH_E2B_TRACE=1 (every
# SDK request and answer logged by tests/e2b/trace-proxy.mjs into the scratch directory).
# Needs root (hutchd jails QEMU), Node 20.18.1 or newer with npm, python3 with venv. npm and pip
# use the host's own registry configuration; the venvs live outside the repository
# (~/.cache/hutch/e2b-venv-<hash of the requirements file>).
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
export HUTCH_BUILD_DIR=${HUTCH_BUILD_DIR:-$ROOT/build}
SUITE_NAME=tests/e2b
# shellcheck source=../support/client_suite.sh
source "$ROOT/tests/support/client_suite.sh"
log() { suite_log "$@"; }
die() { suite_die "$@"; }

all_suites=(js-latest js-old py-latest py-old)
suites=("$@")
[ ${#suites[@]} -eq 0 ] && suites=("${all_suites[@]}")
want_js=0 want_py=0
for s in "${suites[@]}"; do
  case "$s" in
    js-latest|js-old) want_js=1 ;;
    py-latest|py-old) want_py=1 ;;
    *) die "unknown suite '$s' (one of: ${all_suites[*]})" ;;
  esac
done

suite_check_build
suite_default_image
# E2B's SDKs assume a user "user" with home /home/user (images/base/setup.sh makes it).
if command -v debugfs >/dev/null &&
  ! debugfs -R 'cat /etc/passwd' "$HUTCH_TEST_IMAGE/rootfs.img" 2>/dev/null | grep -q '^user:'; then
  echo "tests/e2b: warning: $HUTCH_TEST_IMAGE has no user 'user'; rebuild the base image from the current images/base/setup.sh" >&2
fi

# ---- Node: the two npm versions side by side (npm aliases, package-lock.json) -------------
# e2b 2.51 needs Node 20.18.1 or newer.
[ "$want_js" = 1 ] && suite_npm_ci "$HERE"

# ---- Python: one venv per pinned requirements file (hashes checked) -------------------------
python=${PYTHON:-python3}
venv_for() {  # venv_for latest|old -> prints the venv's directory
  local req="$HERE/requirements-$1.txt" key venv
  key=$(sha256sum "$req" | cut -c1-12)
  venv=${XDG_CACHE_HOME:-$HOME/.cache}/hutch/e2b-venv-$key
  if [ ! -f "$venv/.complete" ]; then
    log "Making the venv for requirements-$1.txt in $venv"
    rm -rf "$venv"
    "$python" -m venv "$venv" >&2 || return 1
    "$venv/bin/python" -m pip install -q --require-hashes --no-deps -r "$req" >&2 || return 1
    touch "$venv/.complete"
  fi
  echo "$venv"
}
declare -A venvs=()
if [ "$want_py" = 1 ]; then
  if ! "$python" -c 'import venv, ensurepip' 2>/dev/null; then
    command -v apt-get >/dev/null || die "python3 with venv is needed"
    log "Installing python3-venv (Debian)"
    apt-get install -y -q python3 python3-venv >/dev/null ||
      { apt-get update -q >/dev/null && apt-get install -y -q python3 python3-venv >/dev/null; } ||
      die "cannot install python3-venv"
  fi
  for s in "${suites[@]}"; do
    case "$s" in py-*) venvs[$s]=$(venv_for "${s#py-}") || die "cannot make the venv for $s" ;; esac
  done
fi

# ---- One hutchd for every suite -------------------------------------------------------------
made_dir=0
if [ -z "${HUTCH_E2B_DIR:-}" ]; then dir=$(mktemp -d /tmp/hutch-e2b.XXXXXX); made_dir=1; else dir=$HUTCH_E2B_DIR; fi
suite_start_hutchd "$dir" "$made_dir"
daemon_json=$SUITE_DAEMON_JSON
snap=$dir/build
field() { suite_field "$1"; }
http_url=$(field http_url)
socket=$(field socket)
key_a=$(field key)
[ -n "$http_url" ] || die "hutchd has no plain-HTTP loopback listener (daemon.json: $daemon_json)"
# A second owner, made the way an operator would: hutch key create.
key_b=$("$snap/src/cli/hutch" --socket "$socket" --json key create e2b-owner-b |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["key"])') || die "hutch key create failed"

export E2B_API_URL=$http_url E2B_SANDBOX_URL=$http_url E2B_API_KEY=$key_a E2B_TEST_KEY_B=$key_b
# For the remote-use tests: the HTTPS listener and hutchd's self-signed certificate.
export E2B_TEST_HTTPS_URL=$(field https_url) E2B_TEST_CA_CERT=$(field ca_cert)
# Nothing else: no E2B_DOMAIN, no debug mode.
unset E2B_DOMAIN E2B_DEBUG E2B_ACCESS_TOKEN
log "E2B_API_URL=E2B_SANDBOX_URL=$http_url"

failed=()
summary=()
run_suite() {
  local s=$1 rc t0 t1 proxy_pid=
  t0=$(date +%s)
  log "Suite $s"
  export E2B_API_URL=$http_url E2B_SANDBOX_URL=$http_url
  if [ "${HUTCH_E2B_TRACE:-0}" = 1 ]; then
    # Every SDK request and answer, one JSON line each, in $dir/trace-$s.jsonl.
    node "$HERE/trace-proxy.mjs" "$http_url" "$dir/trace-$s.jsonl" >"$dir/proxy-$s.url" &
    proxy_pid=$!
    for _ in $(seq 50); do [ -s "$dir/proxy-$s.url" ] && break; sleep 0.1; done
    E2B_API_URL=$(cat "$dir/proxy-$s.url") E2B_SANDBOX_URL=$E2B_API_URL
    log "Tracing $s through $E2B_API_URL into $dir/trace-$s.jsonl"
  fi
  case "$s" in
    js-*)
      # --test-force-exit: e2b 2.14.1 leaves a 60 s timer behind a failed commands.connect.
      (cd "$HERE" && E2B_SDK="e2b-${s#js-}" node --test --test-concurrency=1 --test-force-exit --test-reporter=spec \
        ${E2B_TEST_FILTER:+--test-name-pattern="$E2B_TEST_FILTER"} js/lifecycle.test.mjs js/commands.test.mjs js/files.test.mjs js/errors.test.mjs \
        js/semantics.test.mjs js/remote.test.mjs js/template.test.mjs)
      rc=$? ;;
    py-*)
      (cd "$HERE/py" && PYTHONDONTWRITEBYTECODE=1 "${venvs[$s]}/bin/python" -m pytest -p no:cacheprovider -ra \
        ${E2B_TEST_FILTER:+-k "$E2B_TEST_FILTER"} test_lifecycle.py test_commands.py test_files.py test_async.py test_errors.py \
        test_semantics.py test_remote.py test_template.py)
      rc=$? ;;
  esac
  [ -n "$proxy_pid" ] && kill "$proxy_pid" 2>/dev/null
  t1=$(date +%s)
  if [ "$rc" = 0 ]; then summary+=("$s: passed ($((t1 - t0)) s)"); else
    summary+=("$s: FAILED, exit $rc ($((t1 - t0)) s)"); failed+=("$s"); fi
}
for s in "${suites[@]}"; do run_suite "$s"; done

log "Summary"
printf '  %s\n' "${summary[@]}" >&2
[ ${#failed[@]} -eq 0 ]
