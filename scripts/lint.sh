#!/usr/bin/env bash
# clang-format (must be clean) and clang-tidy (warnings are errors) over the sources.
#
#   scripts/lint.sh            both
#   scripts/lint.sh --format   clang-format only (seconds)
#   scripts/lint.sh --tidy     clang-tidy only (needs the build's compile_commands.json)
set -euo pipefail
source "$(dirname "$0")/common.sh"
cd "$HUTCH_ROOT"
what=${1:-all}
case "$what" in
  all | --format | --tidy) ;;
  *)
    echo "lint.sh: unknown argument '$what' (use --format, --tidy or nothing)" >&2
    exit 64
    ;;
esac

if [ "$what" != --tidy ]; then
  mapfile -t files < <(git ls-files 'src/*.cc' 'src/*.h' 'tests/*.cc' 'tests/*.h' 'bench/*.cc' \
    'bench/*.h' 'fuzz/*.cc' 'fuzz/*.h')
  log "clang-format: ${#files[@]} files"
  clang-format --dry-run --Werror "${files[@]}"
  if [ "$what" = --format ]; then exit 0; fi
fi

mapfile -t units < <(git ls-files 'src/*.cc' 'tests/*.cc' 'bench/*.cc' 'fuzz/*.cc' |
  grep -v '_test\.cc$')
log "clang-tidy: ${#units[@]} translation units (units unchanged since a clean run are skipped)"
if ! python3 "$HUTCH_ROOT/scripts/tidy.py" --build "$HUTCH_BUILD_DIR" --cache "$HUTCH_CACHE_DIR" \
  "${units[@]}"; then
  echo "lint: clang-tidy found problems (above)" >&2
  exit 1
fi
echo "lint: clean" >&2
