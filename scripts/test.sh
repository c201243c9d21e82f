#!/usr/bin/env bash
# Runs the whole test suite: lint, unit tests, and end-to-end tests that boot real boxes.
# Run as root from the repository root: sudo scripts/test.sh
set -euo pipefail
source "$(dirname "$0")/common.sh"

"$HUTCH_ROOT/scripts/install-deps.sh"
hutch_build
"$HUTCH_ROOT/scripts/lint.sh"
HUTCH_TEST_IMAGE=$(hutch_image base)
# The VMM backend's own e2e tests boot the same kernel, initrd and root disk.
HUTCH_TEST_KERNEL=$HUTCH_TEST_IMAGE/vmlinux
HUTCH_TEST_INITRD=$HUTCH_TEST_IMAGE/initrd.img
HUTCH_TEST_ROOTFS=$HUTCH_TEST_IMAGE/rootfs.img
HUTCH_TEST_CONSOLE_EXPECT="hutch-agent"
# The docker template (Docker Engine + compose in the box): its e2e tests skip without it.
HUTCH_TEST_DOCKER_IMAGE=$(hutch_image docker)
export HUTCH_TEST_DOCKER_IMAGE
export HUTCH_TEST_IMAGE HUTCH_TEST_KERNEL HUTCH_TEST_INITRD HUTCH_TEST_ROOTFS HUTCH_TEST_CONSOLE_EXPECT
log "Running tests (unit, then end to end with image $HUTCH_TEST_IMAGE)"
cd "$HUTCH_BUILD_DIR"
ctest --output-on-failure --timeout 1200 "$@"
