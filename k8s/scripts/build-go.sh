#!/usr/bin/env bash
# Builds hutch's Kubernetes programs (hutch-controller, hutch-node, hutch-gateway, hutch-sim)
# into ${HUTCH_BUILD_DIR:-build}/k8s and prints that directory on its last line. Needs a Go
# toolchain of 1.21 or newer on PATH (it fetches the go.mod's Go release from the Go module
# proxy if it is older); modules come from the Go module proxy `go env GOPROXY` names.
set -euo pipefail
K8S=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${HUTCH_BUILD_DIR:-$K8S/../build}/k8s
command -v go >/dev/null || { echo "build-go: no go on PATH; install Go 1.21 or newer" >&2; exit 1; }
v=$(go env GOVERSION 2>/dev/null || true)
case $v in
go1.2[1-9]* | go1.[3-9][0-9]* | go[2-9]*) ;;
*) echo "build-go: $(command -v go) is ${v:-too old (no GOVERSION)}; hutch's Kubernetes programs need Go 1.21 or newer (Debian 12's golang-go 1.19 builds Kubernetes itself, not these)" >&2; exit 1 ;;
esac
mkdir -p "$OUT"
cd "$K8S"
nice -n 10 go build -p 2 -o "$OUT/" ./cmd/... >&2
printf '%s\n' "$(cd "$OUT" && pwd)"
