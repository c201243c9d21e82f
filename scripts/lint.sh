#!/usr/bin/env bash
# clang-format (must be clean) and clang-tidy (warnings are errors) over the sources.
set -euo pipefail
source "$(dirname "$0")/common.sh"
cd "$HUTCH_ROOT"

mapfile -t files < <(git ls-files 'src/*.cc' 'src/*.h' 'tests/*.cc' 'tests/*.h' 'bench/*.cc' \
  'bench/*.h')
log "clang-format: ${#files[@]} files"
clang-format --dry-run --Werror "${files[@]}"

mapfile -t units < <(git ls-files 'src/*.cc' 'tests/*.cc' 'bench/*.cc' | grep -v '_test\.cc$')
log "clang-tidy: ${#units[@]} translation units"
# Boost 1.74 only enables co_await for GCC; clang 14 has C++20 coroutines too.
out=$(mktemp)
status=0
printf '%s\n' "${units[@]}" | xargs -P "$(nproc)" -n 4 clang-tidy -p "$HUTCH_BUILD_DIR" --quiet \
  --extra-arg=-DBOOST_ASIO_HAS_CO_AWAIT=1 --extra-arg=-DBOOST_ASIO_HAS_STD_COROUTINE=1 \
  --extra-arg=-include --extra-arg=utility \
  --warnings-as-errors='*' >"$out" 2>&1 || status=$?
grep -v -E '^[0-9]+ warnings? (and [0-9]+ errors? )?generated|^Suppressed|^Use -header-filter' "$out" || true
rm -f "$out"
if [ "$status" -ne 0 ]; then
  echo "lint: clang-tidy found problems (above)" >&2
  exit 1
fi
echo "lint: clean" >&2
