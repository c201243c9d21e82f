#!/usr/bin/env bash
# Runs the whole test suite: lint, unit tests, end-to-end tests that boot real boxes, the API
# contract's tests and both SDKs' tests against a real hutchd.
# Run as root from the repository root: sudo scripts/test.sh
set -euo pipefail
source "$(dirname "$0")/common.sh"

"$HUTCH_ROOT/scripts/install-deps.sh"
# The guest images need only hutch-agent from the build: it is built first, and the images are
# made (or found in the image cache, keyed by their inputs) beside the rest of the build. On a
# fresh machine that overlaps two slow steps of about 20 minutes each (ccache and the image cache
# make both quick afterwards).
hutch_build hutch-agent
images=$(mktemp -d)
trap 'rm -rf "$images"' EXIT
(
  for recipe in base docker node python web systemd; do
    hutch_image "$recipe" >"$images/$recipe" || {
      echo "test.sh: the guest image '$recipe' failed to build (above)" >&2
      exit 1
    }
  done
) 2>"$images/log" &
images_pid=$!
hutch_build
"$HUTCH_ROOT/scripts/lint.sh" --format
# clang-tidy takes a core for half an hour when its cache is cold. The end-to-end tests leave a
# core idle much of the time (a TCG guest is one busy thread): tidy runs beside them at the
# lowest priority, so it takes only what they leave, and is waited for at the end.
tidy_log=$(mktemp)
nice -n 19 setsid "$HUTCH_ROOT/scripts/lint.sh" --tidy >"$tidy_log" 2>&1 &
tidy_pid=$!
trap 'kill -- "-$tidy_pid" 2>/dev/null || true; rm -rf "$tidy_log" "$images"' EXIT
log "Waiting for the guest images (built beside the build)"
images_ok=true
wait "$images_pid" || images_ok=false
cat "$images/log" >&2
$images_ok || exit 1
HUTCH_TEST_IMAGE=$(cat "$images/base")
# The VMM backend's own e2e tests boot the same kernel, initrd and root disk.
HUTCH_TEST_KERNEL=$HUTCH_TEST_IMAGE/vmlinux
HUTCH_TEST_INITRD=$HUTCH_TEST_IMAGE/initrd.img
HUTCH_TEST_ROOTFS=$HUTCH_TEST_IMAGE/rootfs.img
HUTCH_TEST_CONSOLE_EXPECT="hutch-agent"
# The docker template (Docker Engine + compose in the box): its e2e tests skip without it.
HUTCH_TEST_DOCKER_IMAGE=$(cat "$images/docker")
# The dev templates: npm and pip in them, from a stand-in registry (tests/e2e/registry_test.cc).
HUTCH_TEST_NODE_IMAGE=$(cat "$images/node")
HUTCH_TEST_PYTHON_IMAGE=$(cat "$images/python")
# The web template: Chromium driven by Playwright in a box (tests/e2e/web_test.cc).
HUTCH_TEST_WEB_IMAGE=$(cat "$images/web")
# The systemd template: systemd as PID 1, the agent its service (tests/e2e/systemd_test.cc).
HUTCH_TEST_SYSTEMD_IMAGE=$(cat "$images/systemd")
export HUTCH_TEST_DOCKER_IMAGE HUTCH_TEST_NODE_IMAGE HUTCH_TEST_PYTHON_IMAGE HUTCH_TEST_WEB_IMAGE
export HUTCH_TEST_SYSTEMD_IMAGE
export HUTCH_TEST_IMAGE HUTCH_TEST_KERNEL HUTCH_TEST_INITRD HUTCH_TEST_ROOTFS HUTCH_TEST_CONSOLE_EXPECT
export HUTCH_BUILD_DIR
# Every suite runs, so that one run shows every failure; the exit status says whether any failed.
failed=()
# Two lanes side by side. ctest runs the unit tests, then the end-to-end tests on real boxes, one
# at a time. Beside it, one after another: clients someone else wrote, against a real hutchd with
# real boxes (a real Kubernetes control plane with hutch's controller, node agents and gateway
# (k8s/tests); the OpenAPI validator and schemathesis (tests/api); the SDKs' own suites with
# their pinned dependencies; E2B's own SDKs (tests/e2b); the MCP Inspector (tests/mcp); the
# dashboard in Chromium (tests/dashboard)), then the fuzz and soak smoke runs. A lane mostly
# waits on its TCG guests, so two keep both cores busy. Every hutchd (the e2e harness's and each suite's) has
# its own state directory, and takes a uid range no other holds. The client lane's output is
# printed when ctest ends and followed until the lane ends.
lanes=$(mktemp -d)
trap 'kill -- "-$tidy_pid" 2>/dev/null || true; rm -rf "$tidy_log" "$lanes" "$images"' EXIT
# A suite runs in a session of its own under a watchdog: past its limit (HUTCH_SUITE_TIMEOUT
# seconds, 1200 by default; the Kubernetes suite, which may build Kubernetes on a fresh machine,
# twice that) the watchdog lists every process on the host, so that the log shows what hung, and
# ends the suite's session. A suite is not started once the run is past HUTCH_LANE_BUDGET seconds
# (4500 by default: CI stops a run at 5400), and none runs past it: both are failures that name
# the suite. One stuck suite once ran a whole CI run out of time with nothing in its log.
suite_limit=${HUTCH_SUITE_TIMEOUT:-1200}
lane_budget=${HUTCH_LANE_BUDGET:-4500}
lane() {
  local name=$1
  shift
  local suite limit pid watchdog started
  : >"$lanes/$name.failed"
  for suite in "$@"; do
    limit=$suite_limit
    [[ $suite == */k8s/tests/run.sh ]] && limit=$((2 * suite_limit))
    if ((lane_budget - SECONDS < limit)); then limit=$((lane_budget - SECONDS)); fi
    if ((limit <= 0)); then
      log "[$name] $suite: not started, the run is past its budget of ${lane_budget}s" >>"$lanes/$name.log" 2>&1
      echo "$suite (not started: out of time)" >>"$lanes/$name.failed"
      continue
    fi
    log "[$name] $suite" >>"$lanes/$name.log" 2>&1
    started=$SECONDS
    # shellcheck disable=SC2086  # a suite is a command line
    setsid bash $suite >>"$lanes/$name.log" 2>&1 &
    pid=$!
    (
      trap 'kill "$!" 2>/dev/null; exit 0' TERM
      sleep "$limit" &
      wait "$!"
      log "[$name] $suite: still running after ${limit}s; ending it. Every process on the host:"
      ps -eo pid,ppid,sid,etime,time,stat,args --forest | cut -c1-300
      kill -TERM -- "-$pid" 2>/dev/null
      sleep 30
      kill -KILL -- "-$pid" 2>/dev/null
    ) >>"$lanes/$name.log" 2>&1 &
    watchdog=$!
    if ! wait "$pid"; then
      echo "$suite" >>"$lanes/$name.failed"
    fi
    kill "$watchdog" 2>/dev/null || true
    wait "$watchdog" 2>/dev/null || true
    log "[$name] $suite: ended after $((SECONDS - started))s" >>"$lanes/$name.log" 2>&1
  done
}
# The Kubernetes suite first: on a fresh machine its builds (cached by their inputs afterwards)
# take CPU that ctest's first, quick tests leave. schemathesis fuzzes for 90 s here; the long run
# (HUTCH_FUZZ_TIME=1800) is written down in tests/api/README.md.
log "Client suites and the fuzz and soak smoke runs, beside ctest: Kubernetes, tests/api, the TypeScript SDK, MCP, the Python SDK, E2B's SDKs, the dashboard in Chromium, fuzz, soak"
: >"$lanes/clients.log"
(export HUTCH_FUZZ_TIME=${HUTCH_FUZZ_TIME:-90}; lane clients "$HUTCH_ROOT/k8s/tests/run.sh" \
  "$HUTCH_ROOT/tests/api/run.sh" "$HUTCH_ROOT/sdk/typescript/scripts/test.sh" \
  "$HUTCH_ROOT/tests/mcp/run.sh" "$HUTCH_ROOT/sdk/python/scripts/test.sh --integration" \
  "$HUTCH_ROOT/tests/e2b/run.sh" "$HUTCH_ROOT/tests/dashboard/run.sh" \
  "$HUTCH_ROOT/scripts/fuzz.sh --time ${HUTCH_FUZZ_SMOKE_TIME:-20}" "$HUTCH_ROOT/scripts/soak.sh") &
clients=$!
log "Running tests (unit, then end to end with image $HUTCH_TEST_IMAGE)"
# What each e2e test's hutchd left on the host after its boxes were removed (network namespaces,
# jail cgroups): listed at the end, not yet a failure (tests/e2e/harness.cc reportLeftovers).
HUTCH_TEST_LEAK_LOG=$lanes/leftovers
export HUTCH_TEST_LEAK_LOG
(cd "$HUTCH_BUILD_DIR" && ctest --output-on-failure --timeout 1200 "$@") || failed+=(ctest)
log "ctest done; the client lane's output (followed until the lane ends)"
tail -n +1 --pid="$clients" -f "$lanes/clients.log" >&2
wait "$clients" || true
if [ -s "$HUTCH_TEST_LEAK_LOG" ]; then
  log "Left on the host by e2e tests' hutchd after their boxes were removed (removed by the harness; not a failure yet)"
  cat "$HUTCH_TEST_LEAK_LOG" >&2
fi
while read -r suite; do
  [ -n "$suite" ] && failed+=("${suite#"$HUTCH_ROOT"/}")
done <"$lanes/clients.failed"
log "clang-tidy (run beside the tests)"
if ! wait "$tidy_pid"; then failed+=(clang-tidy); fi
cat "$tidy_log" >&2
if [ ${#failed[@]} -ne 0 ]; then
  echo "test.sh: failed: ${failed[*]}" >&2
  exit 1
fi
echo "test.sh: every suite passed" >&2
