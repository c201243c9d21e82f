#!/usr/bin/env bash
# A private OCI registry on loopback for the tests: Debian's CNCF distribution registry
# (docker-registry 2.8) with TLS from a throw-away CA and htpasswd (bcrypt) basic auth.
#
#   registry.sh start DIR [--plain-http] [--no-auth]
#       Starts a registry on 127.0.0.1 at a free port, state in DIR (storage, config, certs,
#       htpasswd, registry.log), waits until /v2/ answers, and prints shell assignments:
#         REGISTRY=127.0.0.1:PORT REGISTRY_URL=https://127.0.0.1:PORT
#         REGISTRY_USER=hutch-test REGISTRY_PASSWORD=<random>
#         REGISTRY_CA=DIR/ca.crt REGISTRY_CERT_DIR=DIR/certs.d/127.0.0.1:PORT REGISTRY_PID=<pid>
#       one per line, quoted for the shell (use: eval "$(registry.sh start DIR)"); the same lines
#       are kept in DIR/env. --plain-http: plain HTTP, REGISTRY_CA and REGISTRY_CERT_DIR empty.
#       --no-auth: anyone may pull and push, REGISTRY_USER and REGISTRY_PASSWORD empty.
#   registry.sh env DIR
#       Prints DIR/env again.
#   registry.sh stop DIR
#       Stops the registry started in DIR and waits until it is gone (idempotent).
#   registry.sh push DIR OCI_LAYOUT:TAG REPO:TAG [--all] [-- SKOPEO_COPY_ARGS...]
#       skopeo copy oci:OCI_LAYOUT:TAG docker://$REGISTRY/REPO:TAG with the registry's CA and
#       credentials; --all copies every image of an index (multi-arch), not only this host's.
#       SKOPEO_COPY_ARGS go to skopeo copy as they are (e.g. --format v2s2).
set -euo pipefail

USER_NAME=hutch-test
prog=registry.sh

die() {
  printf '%s: error: %s\n' "$prog" "$*" >&2
  exit 1
}
usage() {
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
  exit 64
}

# free_port: a TCP port on 127.0.0.1 nobody listens on right now (the kernel picks it).
free_port() {
  python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}

# alive PID: the process exists and has not exited (a zombie or a dying process counts as gone).
alive() {
  local state
  [ -n "$1" ] && [ -r "/proc/$1/stat" ] || return 1
  state=$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 1
  [ -n "$state" ] && [ "$state" != Z ] && [ "$state" != X ] && [ "$state" != x ]
}

# is_registry PID DIR: PID is alive and is the registry serving DIR/config.yml.
is_registry() {
  local pid=$1 dir=$2 cmd
  alive "$pid" || return 1
  cmd=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) || return 1
  [[ $cmd == *docker-registry*"$dir/config.yml"* ]]
}

make_certs() {
  local dir=$1
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 30 \
    -subj /CN=hutch-test-registry-ca -keyout "$dir/ca.key" -out "$dir/ca.crt" \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign \
    2>/dev/null
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -subj /CN=localhost -keyout "$dir/server.key" -out "$dir/server.csr" 2>/dev/null
  printf '%s\n' 'basicConstraints=critical,CA:FALSE' 'keyUsage=critical,digitalSignature' \
    'extendedKeyUsage=serverAuth' 'subjectAltName=IP:127.0.0.1,DNS:localhost' >"$dir/server.ext"
  openssl x509 -req -in "$dir/server.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" \
    -CAcreateserial -days 30 -extfile "$dir/server.ext" -out "$dir/server.crt" 2>/dev/null
  chmod 0600 "$dir/ca.key" "$dir/server.key"
  rm -f "$dir/server.csr" "$dir/server.ext" "$dir/ca.srl"
}

# write_config DIR PORT TLS AUTH: the registry's config.yml (format of Debian's
# /etc/docker/registry/config.yml, distribution 2.8).
write_config() {
  local dir=$1 port=$2 tls=$3 auth=$4
  {
    printf '%s\n' 'version: 0.1' 'log:' '  level: info' '  fields:' '    service: registry' \
      'storage:' '  filesystem:' "    rootdirectory: $dir/storage" '  delete:' \
      '    enabled: true' '  maintenance:' '    uploadpurging:' '      enabled: false' \
      'http:' "  addr: 127.0.0.1:$port" "  secret: $(openssl rand -hex 16)" '  headers:' \
      '    X-Content-Type-Options: [nosniff]'
    if [ "$tls" = yes ]; then
      printf '%s\n' '  tls:' "    certificate: $dir/server.crt" "    key: $dir/server.key"
    fi
    if [ "$auth" = yes ]; then
      printf '%s\n' 'auth:' '  htpasswd:' '    realm: hutch-test-registry' \
        "    path: $dir/htpasswd"
    fi
    printf '%s\n' 'health:' '  storagedriver:' '    enabled: false'
  } >"$dir/config.yml"
}

cmd_start() {
  local dir='' tls=yes auth=yes
  while [ $# -gt 0 ]; do
    case "$1" in
      --plain-http) tls=no ;;
      --no-auth) auth=no ;;
      -*) die "start: unknown option '$1'" ;;
      *)
        [ -z "$dir" ] || die "start: one DIR only"
        dir=$1
        ;;
    esac
    shift
  done
  [ -n "$dir" ] || usage
  command -v docker-registry >/dev/null || die "docker-registry is not installed (scripts/install-deps.sh)"
  mkdir -p "$dir/storage"
  dir=$(cd "$dir" && pwd)
  if [ -f "$dir/registry.pid" ] && is_registry "$(cat "$dir/registry.pid")" "$dir"; then
    die "a registry already runs for $dir (pid $(cat "$dir/registry.pid")); stop it first"
  fi
  rm -rf "$dir/certs.d" "$dir/env"

  local password='' scheme=http curl_tls=()
  if [ "$auth" = yes ]; then
    command -v htpasswd >/dev/null || die "htpasswd is not installed (apache2-utils)"
    password=$(openssl rand -hex 16)
    htpasswd -Bbn "$USER_NAME" "$password" >"$dir/htpasswd" 2>/dev/null
    chmod 0600 "$dir/htpasswd"
  fi
  if [ "$tls" = yes ]; then
    make_certs "$dir"
    scheme=https
    curl_tls=(--cacert "$dir/ca.crt")
  fi

  local attempt port pid code deadline log_size
  for attempt in 1 2 3 4 5 6 7 8; do
    port=$(free_port)
    write_config "$dir" "$port" "$tls" "$auth"
    printf '\n=== %s start: 127.0.0.1:%s (attempt %d)\n' "$(date -Is)" "$port" "$attempt" \
      >>"$dir/registry.log"
    log_size=$(stat -c %s "$dir/registry.log")
    # Its own session, no terminal, stdout not the caller's: $(registry.sh start) returns.
    setsid docker-registry serve "$dir/config.yml" </dev/null >>"$dir/registry.log" 2>&1 &
    pid=$!
    echo "$pid" >"$dir/registry.pid"
    deadline=$((SECONDS + 30))
    code=000
    while [ $SECONDS -lt $deadline ]; do
      if ! kill -0 "$pid" 2>/dev/null; then break; fi
      code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "${curl_tls[@]}" \
        "$scheme://127.0.0.1:$port/v2/" || true)
      case "$code" in 200 | 401) break ;; esac
      sleep 0.1
    done
    case "$code" in
      200 | 401)
        if { [ "$auth" = yes ] && [ "$code" = 401 ]; } || { [ "$auth" = no ] && [ "$code" = 200 ]; }; then
          break
        fi
        kill "$pid" 2>/dev/null || true
        die "the registry on port $port answered /v2/ with $code (auth=$auth); see $dir/registry.log"
        ;;
    esac
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    if tail -c +$((log_size + 1)) "$dir/registry.log" | grep -q 'address already in use'; then
      continue # someone took the port between free_port and the registry's bind: another one
    fi
    rm -f "$dir/registry.pid"
    die "the registry did not come up on 127.0.0.1:$port: $(tail -n 15 "$dir/registry.log")"
  done
  is_registry "$pid" "$dir" || die "could not start the registry (ports kept being taken); see $dir/registry.log"

  local host=127.0.0.1:$port ca='' certdir=''
  if [ "$tls" = yes ]; then
    certdir=$dir/certs.d/$host
    mkdir -p "$certdir"
    cp "$dir/ca.crt" "$certdir/ca.crt"
    ca=$dir/ca.crt
  fi
  local user=''
  [ "$auth" = no ] || user=$USER_NAME
  {
    printf 'REGISTRY=%q\n' "$host"
    printf 'REGISTRY_URL=%q\n' "$scheme://$host"
    printf 'REGISTRY_USER=%q\n' "$user"
    printf 'REGISTRY_PASSWORD=%q\n' "$password"
    printf 'REGISTRY_CA=%q\n' "$ca"
    printf 'REGISTRY_CERT_DIR=%q\n' "$certdir"
    printf 'REGISTRY_PID=%q\n' "$pid"
  } >"$dir/env.tmp"
  mv "$dir/env.tmp" "$dir/env"
  cat "$dir/env"
}

cmd_stop() {
  [ $# -eq 1 ] || usage
  local dir=$1 pid i
  [ -d "$dir" ] || return 0
  dir=$(cd "$dir" && pwd)
  [ -f "$dir/registry.pid" ] || return 0
  pid=$(cat "$dir/registry.pid")
  # Identified once by its command line; then waited for by pid until it has exited.
  if is_registry "$pid" "$dir"; then
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do
      alive "$pid" || break
      sleep 0.1
    done
    if alive "$pid"; then
      kill -KILL "$pid" 2>/dev/null || true
      for ((i = 0; i < 50; i++)); do
        alive "$pid" || break
        sleep 0.1
      done
    fi
    ! alive "$pid" || die "registry pid $pid would not stop"
  fi
  rm -f "$dir/registry.pid"
}

cmd_env() {
  [ $# -eq 1 ] || usage
  [ -f "$1/env" ] || die "no registry was started in $1"
  cat "$1/env"
}

cmd_push() {
  [ $# -ge 3 ] || usage
  local dir=$1 src=$2 dest=$3 all=() extra=()
  shift 3
  while [ $# -gt 0 ]; do
    case "$1" in
      --all) all=(--all) ;;
      --)
        shift
        extra=("$@")
        break
        ;;
      *) die "push: unknown argument '$1'" ;;
    esac
    shift
  done
  [[ $src == *:* ]] || die "push: the source must be OCI_LAYOUT:TAG, got '$src'"
  [[ $dest == *:* ]] || die "push: the destination must be REPO:TAG, got '$dest'"
  local layout=${src%:*} tag=${src##*:}
  [ -f "$layout/index.json" ] || die "push: $layout is not an OCI layout (no index.json)"
  [ -f "$dir/env" ] || die "push: no registry was started in $dir"
  # shellcheck disable=SC2034 # set by DIR/env; not all are used here
  local REGISTRY='' REGISTRY_URL='' REGISTRY_USER='' REGISTRY_PASSWORD='' REGISTRY_CA=''
  local REGISTRY_CERT_DIR='' REGISTRY_PID=''
  # shellcheck source=/dev/null
  source "$dir/env"
  is_registry "$REGISTRY_PID" "$(cd "$dir" && pwd)" || die "push: the registry of $dir is not running"
  local args=()
  if [ -n "$REGISTRY_CERT_DIR" ]; then
    args+=(--dest-tls-verify=true --dest-cert-dir "$REGISTRY_CERT_DIR")
  else
    args+=(--dest-tls-verify=false)
  fi
  if [ -n "$REGISTRY_USER" ]; then
    args+=(--dest-creds "$REGISTRY_USER:$REGISTRY_PASSWORD")
  else
    args+=(--dest-no-creds)
  fi
  # Our own trust policy: the host's /etc/containers/policy.json may be stricter or missing.
  printf '{"default":[{"type":"insecureAcceptAnything"}]}\n' >"$dir/policy.json"
  skopeo --policy "$dir/policy.json" copy --quiet --retry-times 2 "${all[@]}" "${args[@]}" \
    "${extra[@]}" "oci:$layout:$tag" "docker://$REGISTRY/$dest" >&2
}

[ $# -ge 1 ] || usage
cmd=$1
shift
case "$cmd" in
  start) cmd_start "$@" ;;
  stop) cmd_stop "$@" ;;
  env) cmd_env "$@" ;;
  push) cmd_push "$@" ;;
  -h | --help | help) usage ;;
  *) die "unknown command '$cmd' (start, stop, env, push)" ;;
esac
