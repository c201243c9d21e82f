#!/usr/bin/env bash
# A real Kubernetes control plane for hutch's capacity work (docs/capacity.md), built from
# Debian's own archive (k8s-build.sh: kube-apiserver, kube-scheduler, kube-controller-manager and
# kubectl from the `kubernetes` source package, compiled with Debian's Go) and run against
# Debian's etcd-server, all on loopback with certificates made here for each run.
#
#   control-plane.sh build          builds (or finds cached) binaries; prints their directory
#   control-plane.sh start DIR [--no-controller-manager] [--scheduler-config FILE] [--address IP]
#                                   starts etcd + apiserver + scheduler (+ controller-manager)
#                                   with state, certificates, logs and kubeconfigs in DIR; the
#                                   apiserver on IP (default 127.0.0.1: a test's own bridge
#                                   address when nodes in other network namespaces must reach it)
#   control-plane.sh stop DIR       stops what `start DIR` started (by the pids it recorded)
#   control-plane.sh env DIR        prints the KUBECONFIG and PATH exports for DIR
set -euo pipefail

SCRIPT=$(readlink -f "${BASH_SOURCE[0]}")
HERE=$(dirname "$SCRIPT")
RUN_PKGS=(etcd-server openssl curl python3)

say() { printf 'control-plane: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }
need_root() { [ "$(id -u)" -eq 0 ] || die "must run as root to install packages (try: sudo $0 $*)"; }

apt_install() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  need_root
  say "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q --no-install-recommends "${missing[@]}" >&2 ||
    { apt-get update -q >&2 && apt-get install -y -q --no-install-recommends "${missing[@]}" >&2; }
}

cmd_build() { "$HERE/k8s-build.sh" | tail -n 1; }

# N distinct free loopback ports, held together while they are picked (two picks one after the
# other may return the same port). Another process may still take one before it is used:
# start_ready() then starts that component again on a new one.
free_ports() {
  python3 -c 'import socket, sys
ss = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in ss: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in ss))' "$1"
}

# Makes the certificates of a control plane on loopback in $1/pki: a CA, the apiserver's serving
# certificate, client certificates for the admin, the scheduler and the controller-manager, and
# the service-account key pair. Each run makes its own; nothing is shared between runs.
make_pki() {
  local pki=$1/pki address=$2
  mkdir -p "$pki"
  (
    cd "$pki"
    umask 077
    openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=hutch-k8s-ca" \
      -keyout ca.key -out ca.crt 2>/dev/null
    cert() { # name subject [extfile]
      openssl req -newkey rsa:2048 -nodes -subj "$2" -keyout "$1.key" -out "$1.csr" 2>/dev/null
      openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 30 \
        ${3:+-extfile "$3"} -out "$1.crt" 2>/dev/null
      rm -f "$1.csr"
    }
    local san=IP:127.0.0.1
    [ "$address" = 127.0.0.1 ] || san="IP:$address,$san"
    printf '%s\n' "subjectAltName=$san,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,IP:10.96.0.1" \
      "extendedKeyUsage=serverAuth" >apiserver.ext
    cert apiserver "/CN=kube-apiserver" apiserver.ext
    printf 'extendedKeyUsage=clientAuth\n' >client.ext
    cert admin "/O=system:masters/CN=hutch-admin" client.ext
    cert scheduler "/CN=system:kube-scheduler" client.ext
    cert controller-manager "/CN=system:kube-controller-manager" client.ext
    openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
  )
}

# kubeconfig FILE USER: a kubeconfig for the apiserver at $APISERVER with USER's certificate.
write_kubeconfig() {
  local file=$1 user=$2 pki=$DIR/pki
  cat >"$file" <<KC
apiVersion: v1
kind: Config
clusters:
- name: hutch
  cluster:
    server: $APISERVER
    certificate-authority: $pki/ca.crt
users:
- name: $user
  user:
    client-certificate: $pki/$user.crt
    client-key: $pki/$user.key
contexts:
- name: hutch
  context: {cluster: hutch, user: $user, namespace: default}
current-context: hutch
KC
}

# Starts one process in its own session (so that stop can end its group), logging to DIR/logs.
launch() {
  local name=$1
  shift
  setsid "$@" >"$DIR/logs/$name.log" 2>&1 </dev/null &
  LAUNCHED=$!
  echo "$LAUNCHED $name" >>"$DIR/pids"
}

# Starts NAME with @PORT@ in its command line replaced by a free port and waits (SECONDS) until
# HEALTH (a curl URL with @PORT@) answers; when the port was taken meanwhile ("address already
# in use" in its log), starts it again on another, up to three times. Sets PORT.
start_ready() { # name seconds health-url command...
  local name=$1 seconds=$2 health=$3 attempt
  shift 3
  for attempt in 1 2 3; do
    PORT=$(free_ports 1)
    launch "$name" "${@//@PORT@/$PORT}"
    if wait_for "$name" "$seconds" curl -fsSk -m 5 "${health//@PORT@/$PORT}"; then return 0; fi
    grep -q 'address already in use' "$DIR/logs/$name.log" || return 1
    say "$name lost port $PORT to another process before binding it; starting it again"
  done
  return 1
}

wait_for() { # what seconds command...
  local what=$1 deadline=$((SECONDS + $2))
  shift 2
  until "$@" >/dev/null 2>&1; do
    # The process launched last is the one waited for: if it is gone, waiting is over.
    if [ $SECONDS -ge $deadline ] || ! kill -0 "${LAUNCHED:-$$}" 2>/dev/null; then
      say "$what did not become ready; the last lines of its log:"
      tail -n 20 "$DIR/logs/$what.log" >&2 || true
      return 1
    fi
    sleep 0.3
  done
}

cmd_start() {
  local dir=${1:-}
  [ -n "$dir" ] || die "usage: control-plane.sh start DIR [--no-controller-manager] [--scheduler-config FILE]"
  shift
  local with_cm=1 sched_config="" address=127.0.0.1
  while [ $# -gt 0 ]; do
    case $1 in
    --no-controller-manager) with_cm=0 ;;
    --scheduler-config) sched_config=$(readlink -f "$2"); shift ;;
    --address) address=$2; shift ;;
    *) die "unknown option '$1' (try --no-controller-manager, --scheduler-config FILE or --address IP)" ;;
    esac
    shift
  done
  if [ -s "$dir/pids" ]; then die "$dir has a control plane already (stop it with: $0 stop $dir)"; fi
  local bin
  bin=$(cmd_build)
  apt_install "${RUN_PKGS[@]}"
  local etcd_bin
  etcd_bin=$(command -v etcd || true)
  [ -x "$etcd_bin" ] || etcd_bin=/usr/bin/etcd
  [ -x "$etcd_bin" ] || die "etcd-server is installed but no etcd binary was found"
  mkdir -p "$dir/logs"
  DIR=$(readlink -f "$dir")
  : >"$DIR/pids"
  [[ $address =~ ^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "--address wants an IPv4 address of this host, not '$address'"
  make_pki "$DIR" "$address"
  local etcd_port peer_port api_port attempt
  local t0=$SECONDS
  # etcd on loopback without TLS (the apiserver is its only client); fsync off: a test store.
  # Its ports, like the apiserver's, may be taken between their pick and its bind (tests run
  # beside other suites): then it is started again on others, as start_ready does.
  for attempt in 1 2 3; do
    read -r etcd_port peer_port < <(free_ports 2)
    launch etcd "$etcd_bin" --name hutch --data-dir "$DIR/etcd" \
      --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
      --listen-peer-urls "http://127.0.0.1:$peer_port" --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
      --initial-cluster "hutch=http://127.0.0.1:$peer_port" --unsafe-no-fsync
    if wait_for etcd 30 curl -fsS -m 5 "http://127.0.0.1:$etcd_port/health"; then break; fi
    grep -q 'address already in use' "$DIR/logs/etcd.log" && [ $attempt -lt 3 ] || die "etcd did not start"
    say "etcd lost a port to another process before binding it; starting it again"
    rm -rf "$DIR/etcd"
  done
  local pki=$DIR/pki
  for attempt in 1 2 3; do
    api_port=$(free_ports 1)
    APISERVER=https://$address:$api_port
    launch kube-apiserver "$bin/kube-apiserver" \
      --etcd-servers "http://127.0.0.1:$etcd_port" \
      --bind-address "$address" --advertise-address "$address" --secure-port "$api_port" --insecure-port 0 \
      --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
      --client-ca-file "$pki/ca.crt" \
      --service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key" \
      --service-account-issuer https://kubernetes.default.svc --api-audiences https://kubernetes.default.svc \
      --authorization-mode Node,RBAC --service-cluster-ip-range 10.96.0.0/16 \
      --cert-dir "$DIR/apiserver-certs" --allow-privileged=true --v 1
    if wait_for kube-apiserver 120 curl -fsS -m 5 --cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key" "$APISERVER/readyz"; then break; fi
    grep -q 'address already in use' "$DIR/logs/kube-apiserver.log" && [ $attempt -lt 3 ] || die "kube-apiserver did not start"
    say "kube-apiserver lost port $api_port to another process before binding it; starting it again"
  done
  write_kubeconfig "$DIR/admin.kubeconfig" admin
  write_kubeconfig "$DIR/scheduler.kubeconfig" scheduler
  write_kubeconfig "$DIR/controller-manager.kubeconfig" controller-manager
  local sched_args=(--kubeconfig "$DIR/scheduler.kubeconfig")
  if [ -n "$sched_config" ]; then
    # The config names the kubeconfig itself: fill in ours.
    sed "s|@KUBECONFIG@|$DIR/scheduler.kubeconfig|" "$sched_config" >"$DIR/scheduler-config.yaml"
    sched_args=(--config "$DIR/scheduler-config.yaml")
  fi
  start_ready kube-scheduler 60 "https://127.0.0.1:@PORT@/healthz" "$bin/kube-scheduler" "${sched_args[@]}" \
    --authentication-kubeconfig "$DIR/scheduler.kubeconfig" --authorization-kubeconfig "$DIR/scheduler.kubeconfig" \
    --bind-address 127.0.0.1 --secure-port @PORT@ --port 0 --leader-elect=false --v 1
  if [ $with_cm = 1 ]; then
    # Node lifecycle timings shortened so that a dead node agent is noticed in tens of seconds;
    # quotas recounted every 10 s, not 5 min: a quota made before the controller has discovered a
    # new custom resource (it looks every 30 s) counts it only from its next full recount.
    start_ready kube-controller-manager 60 "https://127.0.0.1:@PORT@/healthz" \
      "$bin/kube-controller-manager" --kubeconfig "$DIR/controller-manager.kubeconfig" \
      --authentication-kubeconfig "$DIR/controller-manager.kubeconfig" --authorization-kubeconfig "$DIR/controller-manager.kubeconfig" \
      --bind-address 127.0.0.1 --secure-port @PORT@ --port 0 --leader-elect=false \
      --use-service-account-credentials --service-account-private-key-file "$pki/sa.key" \
      --root-ca-file "$pki/ca.crt" --cluster-signing-cert-file "$pki/ca.crt" --cluster-signing-key-file "$pki/ca.key" \
      --node-monitor-period 2s --node-monitor-grace-period 20s --resource-quota-sync-period 10s --v 1
  fi
  cat >"$DIR/env" <<ENV
export KUBECONFIG=$DIR/admin.kubeconfig
export PATH=$bin:\$PATH
export HUTCH_K8S_APISERVER=$APISERVER
ENV
  say "ready in $((SECONDS - t0)) s: apiserver $APISERVER (kubeconfig $DIR/admin.kubeconfig, env $DIR/env)"
}

cmd_stop() {
  local dir=${1:-}
  [ -n "$dir" ] || die "usage: control-plane.sh stop DIR"
  [ -f "$dir/pids" ] || { say "nothing recorded in $dir/pids"; return 0; }
  local pid name
  # Reverse order: controllers before the apiserver, the apiserver before etcd.
  tac "$dir/pids" | while read -r pid name; do
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
  done
  local deadline=$((SECONDS + 15))
  while read -r pid name; do
    while kill -0 "$pid" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.2; done
    kill -KILL -- "-$pid" 2>/dev/null || true
  done <"$dir/pids"
  : >"$dir/pids"
}

cmd_env() {
  [ -f "${1:-}/env" ] || die "no control plane was started in '${1:-}' (run: $0 start DIR)"
  cat "$1/env"
}

case ${1:-} in
build) shift; cmd_build ;;
start) shift; cmd_start "$@" ;;
stop) shift; cmd_stop "$@" ;;
env) shift; cmd_env "$@" ;;
*) sed -n '2,12p' "$SCRIPT" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
