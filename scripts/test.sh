#!/usr/bin/env bash
# Runs the whole test suite: lint, unit tests, end-to-end tests that boot real boxes, the API
# contract's tests and both SDKs' tests against a real hutchd.
# Run as root from the repository root: sudo scripts/test.sh
set -euo pipefail
source "$(dirname "$0")/common.sh"

"$HUTCH_ROOT/scripts/install-deps.sh"
hutch_build
"$HUTCH_ROOT/scripts/lint.sh" --format
# clang-tidy takes a core for half an hour when its cache is cold. The end-to-end tests leave a
# core idle much of the time (a TCG guest is one busy thread): tidy runs beside them at the
# lowest priority, so it takes only what they leave, and is waited for at the end.
tidy_log=$(mktemp)
nice -n 19 setsid "$HUTCH_ROOT/scripts/lint.sh" --tidy >"$tidy_log" 2>&1 &
tidy_pid=$!
trap 'kill -- "-$tidy_pid" 2>/dev/null || true; rm -f "$tidy_log"' EXIT
HUTCH_TEST_IMAGE=$(hutch_image base)
# The VMM backend's own e2e tests boot the same kernel, initrd and root disk.
HUTCH_TEST_KERNEL=$HUTCH_TEST_IMAGE/vmlinux
HUTCH_TEST_INITRD=$HUTCH_TEST_IMAGE/initrd.img
HUTCH_TEST_ROOTFS=$HUTCH_TEST_IMAGE/rootfs.img
HUTCH_TEST_CONSOLE_EXPECT="hutch-agent"
# The docker template (Docker Engine + compose in the box): its e2e tests skip without it.
HUTCH_TEST_DOCKER_IMAGE=$(hutch_image docker)
# The dev templates: npm and pip in them, from a stand-in registry (tests/e2e/registry_test.cc).
HUTCH_TEST_NODE_IMAGE=$(hutch_image node)
HUTCH_TEST_PYTHON_IMAGE=$(hutch_image python)
# The web template: Chromium driven by Playwright in a box (tests/e2e/web_test.cc).
HUTCH_TEST_WEB_IMAGE=$(hutch_image web)
# The systemd template: systemd as PID 1, the agent its service (tests/e2e/systemd_test.cc).
HUTCH_TEST_SYSTEMD_IMAGE=$(hutch_image systemd)
export HUTCH_TEST_DOCKER_IMAGE HUTCH_TEST_NODE_IMAGE HUTCH_TEST_PYTHON_IMAGE HUTCH_TEST_WEB_IMAGE
export HUTCH_TEST_SYSTEMD_IMAGE
export HUTCH_TEST_IMAGE HUTCH_TEST_KERNEL HUTCH_TEST_INITRD HUTCH_TEST_ROOTFS HUTCH_TEST_CONSOLE_EXPECT
export HUTCH_BUILD_DIR
# Every suite runs, so that one run shows every failure; the exit status says whether any failed.
failed=()
log "Running tests (unit, then end to end with image $HUTCH_TEST_IMAGE)"
(cd "$HUTCH_BUILD_DIR" && ctest --output-on-failure --timeout 1200 "$@") || failed+=(ctest)
"$HUTCH_ROOT/scripts/fuzz.sh" --time "${HUTCH_FUZZ_SMOKE_TIME:-20}" || failed+=(fuzz)
# Clients someone else wrote, against a real hutchd with real boxes: the OpenAPI validator and
# schemathesis (tests/api), the SDKs' own suites with their pinned dependencies, E2B's own SDKs
# (tests/e2b), the MCP Inspector (tests/mcp), the dashboard in Chromium (tests/dashboard), and
# a real Kubernetes control plane with hutch's controller, node agents and gateway (k8s/tests).
# Each suite starts its own hutchd (its own state, uid range and network namespaces), so they
# run in two lanes side by side: a lane mostly waits on its TCG guests, and two keep both cores
# busy. Each lane's output is printed when it ends.
lanes=$(mktemp -d)
trap 'kill -- "-$tidy_pid" 2>/dev/null || true; rm -rf "$tidy_log" "$lanes"' EXIT
lane() {
  local name=$1
  shift
  local suite
  : >"$lanes/$name.failed"
  for suite in "$@"; do
    log "[$name] $suite" >>"$lanes/$name.log" 2>&1
    # shellcheck disable=SC2086  # a suite is a command line
    bash $suite >>"$lanes/$name.log" 2>&1 || echo "$suite" >>"$lanes/$name.failed"
  done
}
log "Client suites in two lanes: tests/api, the TypeScript SDK, MCP, Kubernetes | the Python SDK, E2B's SDKs, the dashboard in Chromium"
# schemathesis fuzzes for 90 s here; the long run (HUTCH_FUZZ_TIME=1800) is written down in
# tests/api/README.md.
(export HUTCH_FUZZ_TIME=${HUTCH_FUZZ_TIME:-90}; lane a "$HUTCH_ROOT/tests/api/run.sh" \
  "$HUTCH_ROOT/sdk/typescript/scripts/test.sh" "$HUTCH_ROOT/tests/mcp/run.sh" \
  "$HUTCH_ROOT/k8s/tests/run.sh") &
lane_a=$!
lane b "$HUTCH_ROOT/sdk/python/scripts/test.sh --integration" "$HUTCH_ROOT/tests/e2b/run.sh" \
  "$HUTCH_ROOT/tests/dashboard/run.sh" &
lane_b=$!
wait "$lane_a" "$lane_b" || true
for name in a b; do
  log "Lane $name's output"
  cat "$lanes/$name.log" >&2
  while read -r suite; do
    [ -n "$suite" ] && failed+=("${suite#"$HUTCH_ROOT"/}")
  done <"$lanes/$name.failed"
done
log "clang-tidy (run beside the tests)"
if ! wait "$tidy_pid"; then failed+=(clang-tidy); fi
cat "$tidy_log" >&2
if [ ${#failed[@]} -ne 0 ]; then
  echo "test.sh: failed: ${failed[*]}" >&2
  exit 1
fi
echo "test.sh: every suite passed" >&2
