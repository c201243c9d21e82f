#!/usr/bin/env bash
# The Kubernetes suite (issue 19, docs/capacity.md), as CI runs it: Kubernetes 1.20 built from
# Debian's source package (cached by its inputs) and hutch's Go programs; their vet and unit
# tests; the real apiserver serving hutch's CRDs (crd_test.sh); a placement simulation with the
# real scheduler at CI scale (placement_sim.sh; the figures in docs/capacity.md come from the
# full-size run); and two hutchd nodes with real boxes (nodes_test.sh). Every part runs; the exit
# status says whether any failed. Needs root (apt the first time, hutchd, QEMU) and Go >= 1.21.
#
#   HUTCH_BUILD_DIR=build k8s/tests/run.sh
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
K8S=$(cd "$HERE/.." && pwd)
ROOT=$(cd "$K8S/.." && pwd)
export HUTCH_BUILD_DIR=${HUTCH_BUILD_DIR:-$ROOT/build}
say() { printf '==> [k8s] %s\n' "$*" >&2; }
failed=()

say "Kubernetes 1.20 from Debian's source package (cached by inputs)"
"$K8S/scripts/control-plane.sh" build >/dev/null || failed+=(kubernetes-build)
say "hutch's Kubernetes programs"
"$K8S/scripts/build-go.sh" >/dev/null || failed+=(go-build)
say "go vet and the Go unit tests"
(cd "$K8S" && go vet ./... && go test ./...) || failed+=(go-test)

if [ ${#failed[@]} -eq 0 ]; then
  say "crd_test.sh: the real apiserver serving hutch's CRDs"
  bash "$HERE/crd_test.sh" || failed+=(crd_test)

  # 150 nodes: more than the 100 the default scheduler stops scoring at, so the two
  # configurations differ as they do at full size.
  say "placement_sim.sh at CI scale: ${SIM_NODES:=150} nodes, ${SIM_BOXES:=600} boxes, ${SIM_FORKS:=150} forks"
  out=$(mktemp -d)
  if NODES=$SIM_NODES BOXES=$SIM_BOXES FORKS=$SIM_FORKS FILL=${SIM_FILL:-2500} OUT=$out \
    bash "$HERE/placement_sim.sh" default hutch >/dev/null; then
    # What must hold at any scale: every box of the first wave and every fork is placed (the
    # cluster has room for them); the fill ends with the scheduler's own reason; hutch's
    # scheduler configuration (score every node, node affinity weighed 5) keeps nearly every
    # fork on its parent's node, and more of them than the defaults, which score a sample.
    if jq -e -s --argjson forks "$SIM_FORKS" '
        (.[0].waves[0].unschedulable == 0) and (.[1].waves[0].unschedulable == 0)
        and (.[0].forks_bound == $forks) and (.[1].forks_bound == $forks)
        and (.[1].fork_locality_pct >= 90) and (.[1].fork_locality_pct > .[0].fork_locality_pct)
        and ((.[1].waves | last | .first_unschedulable_reason) | test("Insufficient (cpu|memory)"))' \
      "$out/default.json" "$out/hutch.json" >/dev/null; then
      say "placement: $(jq -r -s 'map("\(.scheduler_config | split(" ")[0]): forks on their parent node \(.fork_locality_pct) %, CPU requested when full \(.cpu_requested_pct_of_allocatable_when_full) %") | join("; ")' "$out/default.json" "$out/hutch.json")"
    else
      cat "$out"/*.json >&2
      failed+=(placement_sim-results)
    fi
  else
    failed+=(placement_sim)
  fi
  rm -rf "$out"

  say "nodes_test.sh: two hutchd nodes, real boxes"
  HUTCH_BIN=$HUTCH_BUILD_DIR bash "$HERE/nodes_test.sh" || failed+=(nodes_test)
fi

if [ ${#failed[@]} -ne 0 ]; then
  say "failed: ${failed[*]}"
  exit 1
fi
say "every part passed"
