#!/usr/bin/env bash
# The soak (bench/soak.py, docs/reliability.md "Soak"): a mix of box operations on several boxes
# at once, hutchd restarted in the middle, a leak check at the end. Without arguments, the short
# run CI does; the long run is written down in docs/benchmarks.md:
#   scripts/soak.sh                                            # CI: 2 boxes, 80 operations
#   scripts/soak.sh --boxes 4 --ops 1000 --minutes 60 --restarts 6 --json soak.json
# Run as root; HUTCH_BUILD_DIR and HUTCH_TEST_IMAGE as for the other suites.
set -euo pipefail
source "$(dirname "$0")/common.sh"
if [ $# -eq 0 ]; then
  set -- --boxes 2 --ops 80 --restarts 2
fi
exec python3 "$HUTCH_ROOT/bench/soak.py" "$@"
