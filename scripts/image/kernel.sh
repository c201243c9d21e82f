# shellcheck shell=bash disable=SC2034 # globals are shared between the sourced step files
# Kernel step (sourced by scripts/build-image.sh after lib.sh).
#
#   resolve_kernel CACHE         sets KERNEL_PKG / KERNEL_PKG_VERSION (the versioned package
#                                that linux-image-cloud-amd64 depends on, and its candidate version)
#   build_kernel CACHE           ensures CACHE/kernel/<pkg>_<version>/ exists; sets KERNEL_DIR,
#                                KERNEL_RELEASE (uname -r) and KERNEL_KEY (<pkg>_<version>)
#   extract_vmlinux BZIMAGE OUT  unpacks the compressed payload of a bzImage into an ELF vmlinux
#
# Cache entry layout: vmlinux (uncompressed ELF, PVH entry), config, System.map, release,
# modules/<release>/ (the package's module tree with depmod's index files).

KERNEL_META_PACKAGE=${HUTCH_KERNEL_PACKAGE:-linux-image-cloud-amd64}
KERNEL_CACHE_FORMAT=1 # bump when the layout of a kernel cache entry changes

# apt-cache parses every package list on each call (~0.7 s here: the host keeps no pkgcache.bin),
# so the answer is remembered per state of the host's apt lists and sources.
_apt_state_hash() {
  {
    printf '%s\n' "$KERNEL_META_PACKAGE"
    stat -c '%n %s %Y' /var/lib/apt/lists/*_Packages* /etc/apt/sources.list \
      /etc/apt/sources.list.d/* /etc/apt/preferences /etc/apt/preferences.d/* 2>/dev/null || true
  } | sha256sum | cut -c1-16
}

resolve_kernel() {
  local cache=$1 memo dep ver
  memo="$cache/kernel/.resolved/$(_apt_state_hash)"
  if [ -s "$memo" ]; then
    read -r KERNEL_PKG KERNEL_PKG_VERSION <"$memo"
    [ -n "$KERNEL_PKG" ] && [ -n "$KERNEL_PKG_VERSION" ] && return 0
  fi
  dep=$(apt-cache show --no-all-versions "$KERNEL_META_PACKAGE" 2>/dev/null |
    sed -n 's/^Depends: *//p' | tr ',' '\n' | sed 's/^ *//; s/ .*//' |
    grep -E '^linux-image-.*-cloud-amd64$' | head -n1) || true
  [ -n "$dep" ] || die "apt does not know $KERNEL_META_PACKAGE or what it depends on; run 'apt-get update' (as root) and retry"
  ver=$(apt-cache show --no-all-versions "$dep" 2>/dev/null | sed -n 's/^Version: *//p' | head -n1)
  [ -n "$ver" ] || die "apt has no candidate version of $dep; run 'apt-get update' (as root) and retry"
  KERNEL_PKG=$dep KERNEL_PKG_VERSION=$ver
  mkdir -p "${memo%/*}"
  printf '%s %s\n' "$dep" "$ver" >"$memo.tmp.$$" && mv -f "$memo.tmp.$$" "$memo"
}

# _decompress_tool FORMAT: the command that turns FORMAT on stdin into plain bytes on stdout.
_decompress_tool() {
  case "$1" in
    gzip) echo "gzip -dc" ;;
    xz) echo "xz -dc" ;;
    zstd) echo "zstd -dcq" ;;
    lzma) echo "xz --format=lzma -dc" ;;
    lz4) echo "lz4 -dcq" ;;
    bzip2) echo "bzip2 -dc" ;;
    lzo) echo "lzop -dc" ;;
  esac
}

# Magic numbers as written by the kernel's compressors (same list as scripts/extract-vmlinux).
_KERNEL_MAGICS=(
  "xz:\\xfd7zXZ\\x00"
  "zstd:\\x28\\xb5\\x2f\\xfd"
  "gzip:\\x1f\\x8b\\x08"
  "lzma:\\x5d\\x00\\x00\\x00"
  "lz4:\\x02\\x21\\x4c\\x18"
  "bzip2:BZh"
  "lzo:\\x89\\x4c\\x5a\\x4f\\x00\\x0d\\x0a\\x1a\\x0a"
)

_is_pvh_vmlinux() {
  readelf -h "$1" >/dev/null 2>&1 || return 1
  # Xen ELF note type 0x12 = XEN_ELFNOTE_PHYS32_ENTRY, the PVH entry point QEMU boots through.
  LC_ALL=C readelf -n "$1" 2>/dev/null |
    grep -E 'Xen[[:space:]]+0x[0-9a-f]+[[:space:]]+(.*\(0x00000012\)|.*PHYS32_ENTRY)' >/dev/null
}

# _try_payload IMG OFFSET LENGTH FORMAT OUT: decompresses LENGTH bytes (0 = to the end) at byte
# OFFSET of IMG with FORMAT into OUT; succeeds if OUT is an ELF. Decompressors may complain
# about the size word the kernel appends after the stream: only the result is checked.
_try_payload() {
  local img=$1 off=$2 len=$3 fmt=$4 out=$5 tool
  tool=$(_decompress_tool "$fmt")
  command -v "${tool%% *}" >/dev/null 2>&1 || {
    log "kernel: payload is $fmt but '${tool%% *}' is not installed (scripts/install-deps.sh)"
    return 1
  }
  if [ "$len" -gt 0 ]; then
    tail -c +"$((off + 1))" "$img" | head -c "$len" | $tool >"$out" 2>/dev/null || true
  else
    tail -c +"$((off + 1))" "$img" | $tool >"$out" 2>/dev/null || true
  fi
  readelf -h "$out" >/dev/null 2>&1
}

extract_vmlinux() {
  local img=$1 out=$2 setup_sects payload_off payload_len off entry fmt magic hex
  # 1. The bzImage setup header says where the payload is (boot protocol >= 2.08):
  #    setup_sects at 0x1f1, "HdrS" at 0x202, payload_offset/payload_length at 0x248/0x24c,
  #    the offset counting from the protected-mode code at (setup_sects + 1) * 512.
  if [ "$(od -An -c -j 0x202 -N4 "$img" | tr -d ' ')" = HdrS ]; then
    setup_sects=$(od -An -tu1 -j 0x1f1 -N1 "$img" | tr -d ' ')
    [ "$setup_sects" -eq 0 ] && setup_sects=4
    read -r payload_off payload_len < <(od -An -tu4 -j 0x248 -N8 "$img")
    off=$(((setup_sects + 1) * 512 + payload_off))
    hex=$(od -An -tx1 -j "$off" -N9 "$img" | tr -d ' \n')
    for entry in "${_KERNEL_MAGICS[@]}"; do
      fmt=${entry%%:*}
      magic=$(printf "${entry#*:}" | od -An -tx1 | tr -d ' \n')
      if [[ $hex == "$magic"* ]]; then
        log "kernel: bzImage payload is $fmt ($payload_len bytes at offset $off)"
        if _try_payload "$img" "$off" "$payload_len" "$fmt" "$out" && _is_pvh_vmlinux "$out"; then
          return 0
        fi
        break
      fi
    done
  fi
  # 2. Fall back to scanning for each compressor's magic, as scripts/extract-vmlinux does.
  for entry in "${_KERNEL_MAGICS[@]}"; do
    fmt=${entry%%:*}
    while read -r off; do
      [ -n "$off" ] || continue
      if _try_payload "$img" "$off" 0 "$fmt" "$out" && _is_pvh_vmlinux "$out"; then
        log "kernel: found a $fmt payload at offset $off by scanning"
        return 0
      fi
    done < <(LC_ALL=C grep -obUaP "${entry#*:}" "$img" 2>/dev/null | cut -d: -f1 | head -n 8)
  done
  rm -f "$out"
  return 1
}

build_kernel() {
  local cache=$1 root dir tmp deb rel
  resolve_kernel "$cache"
  KERNEL_KEY="${KERNEL_PKG}_${KERNEL_PKG_VERSION}"
  [ "$KERNEL_CACHE_FORMAT" = 1 ] || KERNEL_KEY+="_f$KERNEL_CACHE_FORMAT"
  root="$cache/kernel"
  dir="$root/$KERNEL_KEY"
  KERNEL_DIR=$dir
  if [ -f "$dir/release" ]; then
    KERNEL_RELEASE=$(cat "$dir/release")
    log "kernel: cached $KERNEL_PKG $KERNEL_PKG_VERSION ($dir)"
    return 0
  fi
  need_cmd apt-get dpkg-deb readelf depmod
  lock_key "$root" "$KERNEL_KEY"
  if [ -f "$dir/release" ]; then # someone else built it while we waited
    unlock_key
    KERNEL_RELEASE=$(cat "$dir/release")
    log "kernel: cached $KERNEL_PKG $KERNEL_PKG_VERSION ($dir)"
    return 0
  fi
  remove_stale_tmp "$root" "$KERNEL_KEY"
  new_tmp_dir "$root" "$KERNEL_KEY"
  tmp=$TMP_DIR
  log "kernel: downloading $KERNEL_PKG=$KERNEL_PKG_VERSION with apt-get download"
  local sandbox=()
  [ "$(id -u)" -eq 0 ] && sandbox=(-o APT::Sandbox::User=root)
  (cd "$tmp" && apt-get download -q "${sandbox[@]}" "$KERNEL_PKG=$KERNEL_PKG_VERSION" >&2) ||
    die "apt-get download $KERNEL_PKG=$KERNEL_PKG_VERSION failed (stale package lists? run 'apt-get update' as root)"
  deb=$(ls "$tmp"/*.deb)
  log "kernel: unpacking $(basename "$deb")"
  dpkg-deb -x "$deb" "$tmp/pkg"
  rm -f "$deb"
  rel=$(ls "$tmp/pkg/lib/modules" 2>/dev/null | head -n1)
  [ -n "$rel" ] && [ -f "$tmp/pkg/boot/vmlinuz-$rel" ] ||
    die "$KERNEL_PKG does not contain boot/vmlinuz-<release> and lib/modules/<release>"
  log "kernel: extracting the uncompressed vmlinux from vmlinuz-$rel"
  extract_vmlinux "$tmp/pkg/boot/vmlinuz-$rel" "$tmp/vmlinux" ||
    die "could not extract an ELF vmlinux with a PVH (Xen PHYS32_ENTRY) note from vmlinuz-$rel"
  log "kernel: vmlinux is an ELF with the PVH entry note ($(stat -c %s "$tmp/vmlinux") bytes)"
  log "kernel: generating module indexes with depmod"
  depmod -b "$tmp/pkg" -F "$tmp/pkg/boot/System.map-$rel" "$rel" ||
    die "depmod failed for $rel"
  mkdir -p "$tmp/modules"
  mv "$tmp/pkg/lib/modules/$rel" "$tmp/modules/$rel"
  mv "$tmp/pkg/boot/config-$rel" "$tmp/config"
  mv "$tmp/pkg/boot/System.map-$rel" "$tmp/System.map"
  rm -rf "$tmp/pkg"
  printf '%s\n' "$rel" >"$tmp/release"
  chmod -R a+rX "$tmp"
  mv -T "$tmp" "$dir"
  unlock_key
  KERNEL_RELEASE=$rel
  log "kernel: cached $KERNEL_PKG $KERNEL_PKG_VERSION as $dir"
}
