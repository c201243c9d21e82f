#!/usr/bin/env bash
# Placement at scale (issue 19 item 4): the real kube-scheduler 1.20 and the real
# hutch-controller against hundreds of simulated nodes (Node objects, no kubelet) and thousands
# of Boxes; once with the scheduler's defaults and once with hutch's scheduler configuration.
# Writes one JSON result per configuration to ${OUT:-/tmp/hutch-placement}/ and prints them.
#
#   NODES=200 BOXES=2000 FORKS=500 FILL=4000 k8s/tests/placement_sim.sh [default|hutch ...]
set -euo pipefail
K8S=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CP=$K8S/scripts/control-plane.sh
OUT=${OUT:-/tmp/hutch-placement}
mkdir -p "$OUT"
BIN=$("$K8S/scripts/build-go.sh" | tail -n 1)
configs=("$@")
[ ${#configs[@]} -gt 0 ] || configs=(default hutch)
for conf in "${configs[@]}"; do
  [ -f "$K8S/config/scheduler-$conf.yaml" ] || { echo "no scheduler configuration $K8S/config/scheduler-$conf.yaml" >&2; exit 2; }
  dir=$(mktemp -d /tmp/hutch-k8s-sim.XXXXXX)
  ctl_pid=
  cleanup() {
    [ -n "$ctl_pid" ] && kill "$ctl_pid" 2>/dev/null && wait "$ctl_pid" 2>/dev/null
    "$CP" stop "$dir"
    [ -n "${HUTCH_K8S_KEEP:-}" ] || rm -rf "$dir"
  }
  trap cleanup EXIT
  # No controller-manager: simulated nodes send no heartbeats, and nothing here needs its
  # garbage collector; the scheduler and the apiserver are what is measured.
  "$CP" start "$dir" --no-controller-manager --scheduler-config "$K8S/config/scheduler-$conf.yaml"
  # shellcheck disable=SC1091
  . "$dir/env"
  kubectl apply -f "$K8S/crds/" >/dev/null
  kubectl wait --for condition=established --timeout=60s crd/boxes.hutch.dev >/dev/null
  "$BIN/hutch-controller" --qps 400 --workers 8 ${CONTROLLER_ARGS:-} >"$dir/logs/controller.log" 2>&1 &
  ctl_pid=$!
  /usr/bin/time -v "$BIN/hutch-sim" --nodes "${NODES:-200}" --boxes "${BOXES:-2000}" --forks "${FORKS:-500}" \
    --fill "${FILL:-4000}" --note "$conf ${CONTROLLER_ARGS:-}" >"$OUT/$conf.json" 2>"$dir/logs/sim.log" ||
    { tail -n 30 "$dir/logs/sim.log" "$dir/logs/controller.log" >&2; exit 1; }
  grep -E 'Maximum resident|Elapsed' "$dir/logs/sim.log" >&2 || true
  for p in kube-apiserver kube-scheduler etcd; do
    pid=$(awk -v n="$p" '$2 == n {print $1}' "$dir/pids")
    [ -n "$pid" ] && echo "$p: $(ps -o rss=,cputime= -p "$pid" | awk '{printf "RSS %d MiB, CPU %s", $1/1024, $2}')" >&2
  done
  echo "== $conf" >&2
  cat "$OUT/$conf.json"
  cleanup
  trap - EXIT
done
