# shellcheck shell=bash disable=SC2034 # globals are shared between the sourced step files
# Shared helpers for the guest image pipeline (sourced by scripts/build-image.sh and friends).
# Bash only; callers run with `set -euo pipefail`. Everything here writes progress to stderr:
# stdout of build-image.sh is reserved for its result (the image directory).

HUTCH_IMAGE_T0=${HUTCH_IMAGE_T0:-$(date +%s%N)}

# log MSG...: one progress line with the seconds elapsed since the build started.
log() {
  local now
  now=$(date +%s%N)
  printf '[hutch-image %6.1fs] %s\n' "$(((now - HUTCH_IMAGE_T0) / 1000000))e-3" "$*" >&2
}

die() {
  printf 'build-image: error: %s\n' "$*" >&2
  exit 1
}

need_cmd() {
  local c
  for c in "$@"; do
    command -v "$c" >/dev/null 2>&1 ||
      die "'$c' is not installed; run scripts/install-deps.sh (as root) first"
  done
}

sha256_file() { sha256sum "$1" | cut -d' ' -f1; }
sha256_str() { printf '%s' "$1" | sha256sum | cut -d' ' -f1; }

# hash_tree DIR: prints one line per regular file or symlink under DIR, sorted, as
# "<sha256-or-link-target> <x|-> <relative path>", so a content, mode (executable bit) or
# name change in the tree changes the digest of this listing.
hash_tree() {
  local dir=$1 rel
  (
    cd "$dir" || exit 1
    find . \( -type f -o -type l \) -print0 | LC_ALL=C sort -z |
      while IFS= read -r -d '' rel; do
        if [ -L "$rel" ]; then
          printf 'link:%s - %s\n' "$(readlink "$rel")" "$rel"
        else
          printf '%s %s %s\n' "$(sha256_file "$rel")" "$([ -x "$rel" ] && echo x || echo -)" "$rel"
        fi
      done
  )
}

# json_str STRING: STRING as a JSON string literal (escapes \ " and control characters).
json_str() {
  local s=$1
  s=${s//\\/\\\\}
  s=${s//\"/\\\"}
  s=${s//$'\n'/\\n}
  s=${s//$'\t'/\\t}
  s=${s//$'\r'/\\r}
  printf '"%s"' "$s"
}

# ---------------------------------------------------------------------------------------------
# Host apt configuration. Mirrors are never hard-coded: they come from /etc/apt/sources.list,
# sources.list.d/*.list (one-line style) and sources.list.d/*.sources (deb822).

host_suite() {
  local codename=
  if [ -r /etc/os-release ]; then
    codename=$(. /etc/os-release && printf '%s' "${VERSION_CODENAME:-}")
  fi
  [ -n "$codename" ] || die "cannot tell the host's Debian suite (no VERSION_CODENAME in /etc/os-release)"
  printf '%s\n' "$codename"
}

# _emit_source TYPES URIS SUITES COMPONENTS SIGNED_BY SUITE: prints one-line sources entries
# ("deb [signed-by=K] URI SUITE COMPONENTS") for every deb type, URI and suite that belongs to
# SUITE (SUITE itself or SUITE-something: -updates, -security, -backports).
_emit_source() {
  local types=$1 uris=$2 suites=$3 comps=$4 signed=$5 want=$6 t u s opt=
  [ -n "$signed" ] && [ -e "$signed" ] && opt="[signed-by=$signed] "
  for t in $types; do
    [ "$t" = deb ] || continue
    for u in $uris; do
      for s in $suites; do
        case "$s" in "$want" | "$want"-*) ;; *) continue ;; esac
        printf 'deb %s%s %s %s\n' "$opt" "${u%/}" "$s" "$comps"
      done
    done
  done
}

# _parse_deb822 FILE SUITE
_parse_deb822() {
  local file=$1 want=$2 line key val types='' uris='' suites='' comps='' signed='' enabled=yes
  flush() {
    if [ -n "$types" ] && [ -n "$uris" ] && [ -n "$suites" ] && [ "$enabled" != no ]; then
      _emit_source "$types" "$uris" "$suites" "$comps" "$signed" "$want"
    fi
    types='' uris='' suites='' comps='' signed='' enabled=yes
  }
  while IFS= read -r line || [ -n "$line" ]; do
    case "$line" in '#'*) continue ;; esac
    if [ -z "${line//[[:space:]]/}" ]; then
      flush
      continue
    fi
    case "$line" in
      [[:space:]]*) # continuation line (multi-line Signed-By key block or list): ignore
        continue ;;
    esac
    key=${line%%:*}
    val=${line#*:}
    val=${val#"${val%%[![:space:]]*}"}
    case "${key,,}" in
      types) types=$val ;;
      uris) uris=$val ;;
      suites) suites=$val ;;
      components) comps=$val ;;
      signed-by) signed=$val ;;
      enabled) enabled=${val,,} ;;
    esac
  done <"$file"
  flush
}

# _parse_one_line FILE SUITE
_parse_one_line() {
  local file=$1 want=$2 line type opts signed uri suite comps
  local -a f
  while IFS= read -r line || [ -n "$line" ]; do
    line=${line%%#*}
    read -r -a f <<<"$line" || true
    [ ${#f[@]} -ge 3 ] || continue
    type=${f[0]}
    [ "$type" = deb ] || continue
    signed=
    if [[ ${f[1]} == \[* ]]; then
      opts=
      local i=1
      while :; do
        opts+=" ${f[$i]}"
        [[ ${f[$i]} == *']' ]] && break
        i=$((i + 1))
        [ $i -lt ${#f[@]} ] || break
      done
      f=("${f[0]}" "${f[@]:$((i + 1))}")
      if [[ $opts =~ signed-by=([^][:space:]]+) ]]; then signed=${BASH_REMATCH[1]}; fi
    fi
    [ ${#f[@]} -ge 3 ] || continue
    uri=${f[1]} suite=${f[2]} comps="${f[*]:3}"
    _emit_source deb "$uri" "$suite" "$comps" "$signed" "$want"
  done <"$file"
}

# apt_mirror_lines [SUITE]: the host's apt sources for SUITE as one-line entries, deduplicated.
apt_mirror_lines() {
  local want=${1:-$(host_suite)} f
  {
    if [ -r /etc/apt/sources.list ]; then _parse_one_line /etc/apt/sources.list "$want"; fi
    for f in /etc/apt/sources.list.d/*.list; do
      if [ -r "$f" ]; then _parse_one_line "$f" "$want"; fi
    done
    for f in /etc/apt/sources.list.d/*.sources; do
      if [ -r "$f" ]; then _parse_deb822 "$f" "$want"; fi
    done
  } | awk '!seen[$0]++'
}

# ---------------------------------------------------------------------------------------------
# Cache entries: build into a temp sibling, rename into place under a per-key flock.

# lock_key DIR NAME: takes an exclusive lock on DIR/.locks/NAME.lock, waiting (with a message)
# if another build holds it. Sets LOCK_FD; release with unlock_key.
lock_key() {
  local dir=$1 name=$2 fd
  mkdir -p "$dir/.locks"
  exec {fd}>"$dir/.locks/$name.lock"
  if ! flock -n "$fd"; then
    log "waiting for another build of $name to finish..."
    flock "$fd"
  fi
  LOCK_FD=$fd
}

unlock_key() {
  if [ -n "${LOCK_FD:-}" ]; then
    exec {LOCK_FD}>&-
    LOCK_FD=
  fi
}

# Temp paths registered here are removed when the script exits (normally or not).
HUTCH_TMP_PATHS=()
cleanup_tmp() {
  local p
  for p in "${HUTCH_TMP_PATHS[@]}"; do
    [ -n "$p" ] && [ -e "$p" ] && rm -rf --one-file-system "$p"
  done
  return 0
}

# new_tmp_dir PARENT TAG: creates PARENT/.tmp-TAG-XXXXXX, sets TMP_DIR to it and removes it when
# the script exits. (Not called in $(...): the registration must happen in this shell.)
new_tmp_dir() {
  mkdir -p "$1"
  TMP_DIR=$(mktemp -d "$1/.tmp-$2-XXXXXX")
  HUTCH_TMP_PATHS+=("$TMP_DIR")
}

# scratch_parent NEED_BYTES FALLBACK: prints a directory for a big short-lived tree. Unpacking
# the root filesystem on this host's disk took 7-10 s of kernel time against 0.5 s on tmpfs, so
# /dev/shm (or $HUTCH_IMAGE_SCRATCH) is used when it is a tmpfs with NEED_BYTES + 1 GiB free.
scratch_parent() {
  local need=$1 fallback=$2 dir=${HUTCH_IMAGE_SCRATCH:-/dev/shm} avail
  if [ -d "$dir" ] && [ -w "$dir" ] && [ "$(stat -f -c %T "$dir" 2>/dev/null)" = tmpfs ]; then
    avail=$(($(stat -f -c '%a * %S' "$dir")))
    if [ "$avail" -gt $((need + (1 << 30))) ]; then
      printf '%s\n' "$dir"
      return 0
    fi
  fi
  printf '%s\n' "$fallback"
}

# remove_stale_tmp PARENT TAG: removes leftovers of interrupted builds of TAG (call under lock).
remove_stale_tmp() {
  local d
  for d in "$1"/.tmp-"$2"-*; do
    [ -e "$d" ] && rm -rf --one-file-system "$d"
  done
  return 0
}
