#!/usr/bin/env bash
# libFuzzer runs of the fuzz targets (fuzz/, docs/reliability.md "Fuzzing"): builds them with
# clang-14, AddressSanitizer and UBSan in build-fuzz (only they and the libraries they link),
# runs each for SECONDS over a copy of its seed corpus, keeps the inputs of crashes in
# fuzz/crashes/ and exits non-zero when any target crashed. Logs: build-fuzz/fuzz-logs/.
#
#   scripts/fuzz.sh [--time SECONDS] [target...]    default: 60 s each, every target
#   scripts/fuzz.sh --time 600 dns                  a long run of one
set -euo pipefail
source "$(dirname "$0")/common.sh"

seconds=60
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --time)
      seconds=$2
      shift 2
      ;;
    --time=*)
      seconds=${1#--time=}
      shift
      ;;
    -h | --help)
      sed -n '2,8p' "$0"
      exit 0
      ;;
    -*)
      echo "fuzz.sh: unknown option '$1' (use --time SECONDS and target names)" >&2
      exit 64
      ;;
    *)
      targets+=("$1")
      shift
      ;;
  esac
done
if [ ${#targets[@]} -eq 0 ]; then
  mapfile -t targets < <(cd "$HUTCH_ROOT/fuzz" && ls -- *_fuzz.cc | sed 's/_fuzz\.cc$//')
fi
for t in "${targets[@]}"; do
  if [ ! -f "$HUTCH_ROOT/fuzz/${t}_fuzz.cc" ]; then
    echo "fuzz.sh: no target '$t' (fuzz/${t}_fuzz.cc)" >&2
    exit 64
  fi
done

build=${HUTCH_FUZZ_BUILD_DIR:-$HUTCH_ROOT/build-fuzz}
log "Building ${#targets[@]} fuzz targets (clang-14, ASan + UBSan) in $build"
launcher=()
if command -v ccache >/dev/null; then
  export CCACHE_DIR=${CCACHE_DIR:-$HUTCH_CACHE_DIR/ccache} CCACHE_BASEDIR=$HUTCH_ROOT
  export CCACHE_NOHASHDIR=1 CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-8G}
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
# -O1 and assertions on (no NDEBUG): Beast's and nlohmann's own checks count as crashes.
cmake -S "$HUTCH_ROOT" -B "$build" -G Ninja -DHUTCH_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++-14 \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1" "${launcher[@]}" \
  >/dev/null
ninja -C "$build" "${targets[@]/%/_fuzz}"

crashes=$HUTCH_ROOT/fuzz/crashes
logs=$build/fuzz-logs
mkdir -p "$crashes" "$logs"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
if [ -x /usr/lib/llvm-14/bin/llvm-symbolizer ]; then
  export ASAN_SYMBOLIZER_PATH=/usr/lib/llvm-14/bin/llvm-symbolizer
fi
failed=()
for t in "${targets[@]}"; do
  corpus=$work/$t
  mkdir -p "$corpus"
  cp -- "$HUTCH_ROOT/fuzz/corpus/$t/"* "$corpus/"
  log "Fuzzing $t for $seconds s (seeds: $(find "$corpus" -type f | wc -l))"
  if "$build/fuzz/${t}_fuzz" "$corpus" -max_total_time="$seconds" -rss_limit_mb=2048 \
    -timeout=30 -print_final_stats=1 -artifact_prefix="$crashes/$t-" >"$logs/$t.log" 2>&1; then
    # The last status line: executions, coverage (cov), features (ft), corpus size.
    grep -E '^#[0-9]+' "$logs/$t.log" | tail -n 1 >&2 || true
    grep -E '^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)' \
      "$logs/$t.log" >&2 || true
  else
    tail -n 80 "$logs/$t.log" >&2
    failed+=("$t")
  fi
done
if [ ${#failed[@]} -ne 0 ]; then
  echo "fuzz.sh: crashes in ${failed[*]}: the inputs are in fuzz/crashes/ (reproduce:" \
    "$build/fuzz/NAME_fuzz fuzz/crashes/FILE)" >&2
  exit 1
fi
echo "fuzz.sh: ${#targets[@]} targets ran ${seconds} s each without a crash" >&2
