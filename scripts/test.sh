#!/usr/bin/env bash
# Runs the whole test suite: lint, unit tests, and end-to-end tests that boot real boxes.
# Run as root from the repository root: sudo scripts/test.sh
set -euo pipefail
source "$(dirname "$0")/common.sh"

"$HUTCH_ROOT/scripts/install-deps.sh"
hutch_build
"$HUTCH_ROOT/scripts/lint.sh"
HUTCH_TEST_IMAGE=$(hutch_image base)
export HUTCH_TEST_IMAGE
log "Running tests (unit, then end to end with image $HUTCH_TEST_IMAGE)"
cd "$HUTCH_BUILD_DIR"
ctest --output-on-failure --timeout 1200 "$@"
