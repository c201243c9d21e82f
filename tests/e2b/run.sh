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

made_dir=0
if [ -z "${HUTCH_E2B_DIR:-}" ]; then dir=$(mktemp -d /tmp/hutch-e2b.XXXXXX); made_dir=1; else dir=$HUTCH_E2B_DIR; fi

# ---- Two registries on loopback for the template builder's image tests (tests/registry) -----
# Debian's docker-registry, each with TLS from its own CA (both given to hutchd with
# --registry-certs, Docker's certs.d layout) and filled with images tests/registry/images.sh
# builds (a Debian minbase): "open" anyone may pull from (fromImage, fromDockerfile's FROM, the
# CLI's e2b.Dockerfile); "auth" needs basic
# auth, and the host is not logged in to it, so only a build's own credentials pull from it
# (fromImage(ref, {username, password}): E2B's fromImageRegistry). hutchd may pull from these
# two only (--allowed-registry). Without docker-registry and skopeo those tests are skipped.
registry_script=$ROOT/tests/registry/registry.sh
registries=()
stop_registries() {
  local r
  for r in "${registries[@]}"; do bash "$registry_script" stop "$r" >/dev/null 2>&1; done
  [ "$made_dir" = 1 ] && for r in "${registries[@]}"; do rm -rf "$r/storage"; done
  return 0
}
start_registries() {
  local images debian open_env auth_env
  command -v docker-registry >/dev/null && command -v skopeo >/dev/null && command -v umoci >/dev/null ||
    { echo "tests/e2b: no docker-registry/skopeo/umoci (scripts/install-deps.sh): the fromImage tests are skipped" >&2; return 1; }
  log "Registries on loopback for the template tests (tests/registry/images.sh debian)"
  images=$(bash "$ROOT/tests/registry/images.sh" "$dir/images" debian) || return 1
  debian=$(awk '$1 == "debian" {print $2}' <<<"$images")
  registries=("$dir/registry-open" "$dir/registry-auth")
  open_env=$(bash "$registry_script" start "$dir/registry-open" --no-auth) || return 1
  auth_env=$(bash "$registry_script" start "$dir/registry-auth") || return 1
  bash "$registry_script" push "$dir/registry-open" "$debian:latest" test/debian:latest >&2 &&
    bash "$registry_script" push "$dir/registry-auth" "$debian:latest" private/debian:latest >&2 ||
    return 1
  mkdir -p "$dir/certs.d"
  local r cert_dir
  for r in "${registries[@]}"; do
    cert_dir=$(eval "$(bash "$registry_script" env "$r")"; echo "$REGISTRY_CERT_DIR")
    cp -r "$cert_dir" "$dir/certs.d/"
  done
  E2B_TEST_REGISTRY=$(eval "$open_env"; echo "$REGISTRY")
  E2B_TEST_REGISTRY_AUTH=$(eval "$auth_env"; echo "$REGISTRY")
  E2B_TEST_REGISTRY_USER=$(eval "$auth_env"; echo "$REGISTRY_USER")
  E2B_TEST_REGISTRY_PASSWORD=$(eval "$auth_env"; echo "$REGISTRY_PASSWORD")
  export E2B_TEST_REGISTRY E2B_TEST_REGISTRY_AUTH E2B_TEST_REGISTRY_USER E2B_TEST_REGISTRY_PASSWORD
  export HUTCHD_EXTRA_ARGS="${HUTCHD_EXTRA_ARGS:-} --registry-certs $dir/certs.d --allowed-registry $E2B_TEST_REGISTRY --allowed-registry $E2B_TEST_REGISTRY_AUTH"
}
trap stop_registries EXIT
start_registries || { stop_registries; registries=(); echo "tests/e2b: the registries did not start: the fromImage tests are skipped" >&2; }

# hutch's node and python templates, when built (scripts/test.sh sets these, as for the e2e
# tests): the npmInstall and pipInstall tests build from them, and skip without them.
for t in node:HUTCH_TEST_NODE_IMAGE python:HUTCH_TEST_PYTHON_IMAGE; do
  var=${t#*:}
  image=${!var:-}
  if [ -n "$image" ] && [ -f "$image/rootfs.img" ]; then
    mkdir -p "$dir/state/templates" && ln -sfn "$image" "$dir/state/templates/${t%%:*}"
  fi
done

# Boxes of an image boot the base template's kernel with its modules, which hutchd finds in its
# image cache's kernel/ (tests/support/hutchd_daemon.py links only the host's built images).
cache_root=${HUTCH_CACHE_DIR:-/var/cache/hutch}
if [ -d "$cache_root/kernel" ] && [ ! -e "$dir/image-cache/kernel" ]; then
  mkdir -p "$dir/image-cache" && ln -s "$cache_root/kernel" "$dir/image-cache/kernel"
fi

# ---- One hutchd for every suite -------------------------------------------------------------
suite_start_hutchd "$dir" "$made_dir"
trap 'suite_stop_hutchd; stop_registries' EXIT
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
  local s=$1 rc t0 t1 proxy_pid= image_tests=
  t0=$(date +%s)
  # The builds from images (each a pull, an unpack and a boot under TCG) run with the newest
  # SDKs only, to keep CI's time: the older SDKs' builds are tested from hutch's base
  # (template.test.mjs, test_template.py).
  case $s in *-latest) image_tests=1 ;; esac
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
      (cd "$HERE" && E2B_SDK="e2b-${s#js-}" node --test --test-concurrency=1 --test-force-exit --test-timeout=900000 --test-reporter=spec \
        ${E2B_TEST_FILTER:+--test-name-pattern="$E2B_TEST_FILTER"} js/lifecycle.test.mjs js/commands.test.mjs js/files.test.mjs js/errors.test.mjs \
        js/semantics.test.mjs js/remote.test.mjs js/template.test.mjs ${image_tests:+js/template_image.test.mjs})
      rc=$? ;;
    py-*)
      (cd "$HERE/py" && PYTHONDONTWRITEBYTECODE=1 "${venvs[$s]}/bin/python" -m pytest -p no:cacheprovider -ra --timeout 900 \
        ${E2B_TEST_FILTER:+-k "$E2B_TEST_FILTER"} test_lifecycle.py test_commands.py test_files.py test_async.py test_errors.py \
        test_semantics.py test_remote.py test_template.py ${image_tests:+test_template_image.py})
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
