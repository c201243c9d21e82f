# shellcheck shell=bash disable=SC2034 # globals are shared between the sourced step files
# Initramfs step (sourced by scripts/build-image.sh after lib.sh and kernel.sh).
#
#   initramfs_key                 prints the cache key: sha256 over the kernel key, the init
#                                 script, the module list, the busybox-static version and this file
#   build_initramfs CACHE         ensures CACHE/initramfs/<key16>/initrd.img; sets INITRD_DIR,
#                                 INITRD_KEY, INITRD_MODULES (names loaded, in order)
#   resolve_modules MODDIR NAME.. prints the .ko paths (relative to MODDIR) to load, dependencies
#                                 first, built-in modules skipped
#
# The archive holds: /init (scripts/image/init), /bin/busybox (busybox-static) with a symlink per
# applet, /lib/modules/*.ko (flat) and /lib/modules/load.order, /dev/console, and the empty
# mount points /dev /proc /sys /newroot. cpio newc, compressed with zstd when the kernel has
# CONFIG_RD_ZSTD (gzip otherwise).

IMAGE_LIB_DIR=${IMAGE_LIB_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)}
INIT_SCRIPT="$IMAGE_LIB_DIR/init"
INITRAMFS_MODULE_LIST="$IMAGE_LIB_DIR/initramfs.modules"
BUSYBOX_BIN=${HUTCH_BUSYBOX:-/bin/busybox}

_module_names_from_list() {
  sed 's/#.*//' "$INITRAMFS_MODULE_LIST" | tr -s ' \t' '\n' | sed '/^$/d'
}

initramfs_key() {
  local bbver
  bbver=$(dpkg-query -W -f='${Version}' busybox-static 2>/dev/null || sha256_file "$BUSYBOX_BIN")
  {
    printf 'initramfs-v1\nkernel %s\nbusybox %s\n' "$KERNEL_KEY" "$bbver"
    printf 'init %s\nmodules %s\nbuilder %s\n' "$(sha256_file "$INIT_SCRIPT")" \
      "$(sha256_file "$INITRAMFS_MODULE_LIST")" "$(sha256_file "$IMAGE_LIB_DIR/initramfs.sh")"
  } | sha256sum | cut -d' ' -f1
}

resolve_modules() {
  local moddir=$1
  shift
  local -A path_of=() deps_of=() builtin=() builtin_alias=() alias_of=() softpre_of=() seen=()
  local line path deps name a target
  # _modname PATH: sets REPLY to the module name of PATH (no subshell: modules.dep is long).
  _modname() {
    REPLY=${1##*/}
    REPLY=${REPLY%%.ko*}
    REPLY=${REPLY//-/_}
  }
  while IFS= read -r line; do
    path=${line%%:*}
    deps=${line#*:}
    _modname "$path"
    path_of[$REPLY]=$path
    deps_of[$REPLY]=$deps
  done <"$moddir/modules.dep"
  if [ -r "$moddir/modules.builtin" ]; then
    while IFS= read -r path; do _modname "$path" && builtin[$REPLY]=1; done <"$moddir/modules.builtin"
  fi
  if [ -r "$moddir/modules.builtin.modinfo" ]; then
    while IFS= read -r line; do
      [[ $line == *.alias=* ]] || continue
      builtin_alias[${line#*.alias=}]=1
    done < <(tr '\0' '\n' <"$moddir/modules.builtin.modinfo")
  fi
  if [ -r "$moddir/modules.alias" ]; then
    while read -r _ a target; do
      [[ $a == *[\*\?\[]* ]] && continue
      [ -n "${alias_of[$a]:-}" ] || alias_of[$a]=$target
    done <"$moddir/modules.alias"
  fi
  if [ -r "$moddir/modules.softdep" ]; then
    while read -r _ name line; do
      line=${line#pre: }
      softpre_of[$name]=${line%%post:*}
    done < <(grep '^softdep ' "$moddir/modules.softdep" | grep ' pre: ' || true)
  fi

  # _visit NAME REQUIRED: emits NAME's dependencies, then NAME itself.
  _visit() {
    local n=${1//-/_} required=$2 dep
    [ -z "${seen[$n]:-}" ] || return 0
    seen[$n]=1
    if [ -z "${path_of[$n]:-}" ]; then
      if [ -n "${builtin[$n]:-}" ] || [ -n "${builtin_alias[$n]:-}" ]; then
        log "initramfs: $n is built into the kernel"
        return 0
      fi
      if [ -n "${alias_of[$n]:-}" ]; then
        log "initramfs: $n is an alias of ${alias_of[$n]}"
        _visit "${alias_of[$n]}" "$required"
        return
      fi
      [ "$required" = required ] && die "kernel module '$n' does not exist in $moddir (fix scripts/image/initramfs.modules)"
      log "initramfs: optional soft dependency $n not found, skipped"
      return 0
    fi
    for dep in ${softpre_of[$n]:-}; do _visit "$dep" optional; done
    for dep in ${deps_of[$n]}; do _modname "$dep" && _visit "$REPLY" required; done
    printf '%s\n' "${path_of[$n]}"
  }
  for name in "$@"; do _visit "$name" required; done
}

build_initramfs() {
  local cache=$1 root dir tmp st moddir rel m comp n=0
  INITRD_KEY=$(initramfs_key)
  root="$cache/initramfs"
  dir="$root/${INITRD_KEY:0:16}"
  INITRD_DIR=$dir
  if [ -f "$dir/initrd.img" ]; then
    INITRD_MODULES=$(tr '\n' ' ' <"$dir/modules")
    log "initramfs: cached ($dir)"
    return 0
  fi
  need_cmd cpio "$BUSYBOX_BIN"
  [ "$(id -u)" -eq 0 ] || die "building the initramfs needs root (it creates /dev/console): run as root or with sudo"
  lock_key "$root" "${INITRD_KEY:0:16}"
  if [ -f "$dir/initrd.img" ]; then
    unlock_key
    INITRD_MODULES=$(tr '\n' ' ' <"$dir/modules")
    log "initramfs: cached ($dir)"
    return 0
  fi
  remove_stale_tmp "$root" "${INITRD_KEY:0:16}"
  new_tmp_dir "$root" "${INITRD_KEY:0:16}"
  tmp=$TMP_DIR
  st="$tmp/stage"
  moddir="$KERNEL_DIR/modules/$KERNEL_RELEASE"
  log "initramfs: resolving modules for $KERNEL_RELEASE"
  local order
  local names
  mapfile -t names < <(_module_names_from_list)
  order=$(resolve_modules "$moddir" "${names[@]}")
  mkdir -p "$st"/{bin,sbin,usr/bin,usr/sbin,dev,proc,sys,newroot,lib/modules}
  : >"$tmp/modules"
  : >"$st/lib/modules/load.order"
  while IFS= read -r rel; do
    [ -n "$rel" ] || continue
    m=${rel##*/}
    case "$m" in
      *.ko) cp "$moddir/$rel" "$st/lib/modules/$m" ;;
      *.ko.xz) xz -dc "$moddir/$rel" >"$st/lib/modules/${m%.xz}" ;;
      *.ko.zst) zstd -dcq "$moddir/$rel" >"$st/lib/modules/${m%.zst}" ;;
      *.ko.gz) gzip -dc "$moddir/$rel" >"$st/lib/modules/${m%.gz}" ;;
      *) die "unexpected module file $rel" ;;
    esac
    m=${m%.ko*}.ko
    printf '%s\n' "$m" >>"$st/lib/modules/load.order"
    m=${m%.ko}
    printf '%s\n' "${m//-/_}" >>"$tmp/modules"
    n=$((n + 1))
  done <<<"$order"
  log "initramfs: $n modules: $(tr '\n' ' ' <"$tmp/modules")"
  if LC_ALL=C readelf -l "$BUSYBOX_BIN" 2>/dev/null | grep INTERP >/dev/null; then
    die "$BUSYBOX_BIN is dynamically linked; install busybox-static"
  fi
  cp "$BUSYBOX_BIN" "$st/bin/busybox"
  local applet
  while IFS= read -r applet; do
    if [ -z "$applet" ] || [ -e "$st/$applet" ] || [ -L "$st/$applet" ]; then continue; fi
    mkdir -p "$st/${applet%/*}"
    ln -s /bin/busybox "$st/$applet"
  done < <("$BUSYBOX_BIN" --list-full)
  install -m 0755 "$INIT_SCRIPT" "$st/init"
  mknod -m 0600 "$st/dev/console" c 5 1
  find "$st" -exec touch -h -d @0 {} +
  comp="gzip -9n"
  if grep -q '^CONFIG_RD_ZSTD=y' "$KERNEL_DIR/config"; then comp="zstd -19 -q"; fi
  log "initramfs: packing cpio (newc, ${comp%% *})"
  (cd "$st" && find . -mindepth 1 -print0 | LC_ALL=C sort -z |
    cpio --null --create --format=newc --reproducible --owner=0:0 --quiet) | $comp >"$tmp/initrd.img"
  cp "$INIT_SCRIPT" "$tmp/init"
  rm -rf "$st"
  chmod 0755 "$tmp"
  chmod 0644 "$tmp"/*
  mv -T "$tmp" "$dir"
  unlock_key
  INITRD_MODULES=$(tr '\n' ' ' <"$dir/modules")
  log "initramfs: $(stat -c %s "$dir/initrd.img") bytes, cached as $dir"
}
