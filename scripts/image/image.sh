# shellcheck shell=bash disable=SC2034 # globals are shared between the sourced step files
# Final image step (sourced by scripts/build-image.sh after the other steps).
#
#   image_key                     prints the cache key: sha256 over the rootfs key, the agent's
#                                 sha256, the kernel and initramfs keys and this file
#   build_image CACHE AGENT       ensures CACHE/images/<name>-<key12>/ with vmlinux, initrd.img,
#                                 rootfs.img and manifest.json; sets IMAGE_DIR
#
# rootfs.img: raw ext4 made with mkfs.ext4 -d from the rootfs tarball's tree plus the kernel's
# modules (/lib/modules/<release>) and the agent (/usr/sbin/hutch-agent, 0755). Size: the tree
# plus max(30 %, 512 MiB) of free space, rounded up to 64 MiB. All files are made read-only:
# boxes run on qcow2 overlays whose backing file is rootfs.img.

IMAGE_LIB_DIR=${IMAGE_LIB_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)}

# What the image expects on the kernel command line ({...} is filled in by the VMM).
IMAGE_CMDLINE_BASE="console=ttyS0 root=/dev/vda rw quiet"
IMAGE_CMDLINE_TEMPLATE="$IMAGE_CMDLINE_BASE tsc=reliable tsc_early_khz={host_tsc_khz} hutch.hostname={hostname}"

image_key() {
  {
    printf 'image-v1\nrootfs %s\nagent %s\n' "$ROOTFS_KEY" "$AGENT_SHA256"
    printf 'kernel %s\ninitramfs %s\nbuilder %s\n' "$KERNEL_KEY" "$INITRD_KEY" \
      "$(sha256_file "$IMAGE_LIB_DIR/image.sh")"
  } | sha256sum | cut -d' ' -f1
}

# _in_tree TREE PATH: PATH inside TREE, resolving a top-level symlink such as lib -> usr/lib
# inside the tree (never on the host).
_in_tree() {
  local tree=$1 path=${2#/} top rest target
  top=${path%%/*}
  rest=${path#*/}
  if [ -L "$tree/$top" ]; then
    target=$(readlink "$tree/$top")
    printf '%s/%s/%s\n' "$tree" "${target#/}" "$rest"
  else
    printf '%s/%s\n' "$tree" "$path"
  fi
}

_write_manifest() {
  local out=$1 f sizes=() created
  created=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  for f in vmlinux initrd.img rootfs.img; do
    sizes+=("    $(json_str "$f"): $(stat -c %s "$2/$f")")
  done
  local mods=() m
  for m in $INITRD_MODULES; do mods+=("$(json_str "$m")"); done
  {
    printf '{\n'
    printf '  "format": 1,\n'
    printf '  "name": %s,\n' "$(json_str "$RECIPE_NAME")"
    printf '  "recipe_hash": %s,\n' "$(json_str "$ROOTFS_KEY")"
    printf '  "image_key": %s,\n' "$(json_str "$IMAGE_KEY")"
    printf '  "suite": %s,\n' "$(json_str "$(host_suite)")"
    printf '  "arch": %s,\n' "$(json_str "$ROOTFS_ARCH")"
    printf '  "kernel_version": %s,\n' "$(json_str "$KERNEL_RELEASE")"
    printf '  "kernel_package": %s,\n' "$(json_str "$KERNEL_PKG")"
    printf '  "kernel_package_version": %s,\n' "$(json_str "$KERNEL_PKG_VERSION")"
    printf '  "initramfs_key": %s,\n' "$(json_str "$INITRD_KEY")"
    printf '  "initramfs_modules": [%s],\n' "$(
      IFS=,
      echo "${mods[*]}"
    )"
    printf '  "agent_sha256": %s,\n' "$(json_str "$AGENT_SHA256")"
    printf '  "agent_path": "/usr/sbin/hutch-agent",\n'
    printf '  "agent_port": "hutch.agent",\n'
    printf '  "root_device": "/dev/vda",\n'
    printf '  "rootfs_format": "raw",\n'
    printf '  "rootfs_fs": "ext4",\n'
    printf '  "rootfs_label": "hutch-root",\n'
    printf '  "created": %s,\n' "$(json_str "$created")"
    printf '  "files": {\n%s\n  },\n' "$(
      IFS=$'\n'
      echo "${sizes[*]}" | sed '$!s/$/,/'
    )"
    printf '  "kernel_cmdline": %s,\n' "$(json_str "$IMAGE_CMDLINE_BASE")"
    printf '  "kernel_cmdline_template": %s\n' "$(json_str "$IMAGE_CMDLINE_TEMPLATE")"
    printf '}\n'
  } >"$out"
}

build_image() {
  local cache=$1 agent=$2 root dir tmp tree used files size headroom moddir
  IMAGE_KEY=$(image_key)
  root="$cache/images"
  dir="$root/$RECIPE_NAME-${IMAGE_KEY:0:12}"
  IMAGE_DIR=$dir
  if [ -f "$dir/manifest.json" ]; then
    log "image: cached ($dir)"
    return 0
  fi
  need_cmd mkfs.ext4 tar
  [ "$(id -u)" -eq 0 ] || die "building the disk image needs root (file ownership in the tree): run as root or with sudo"
  lock_key "$root" "$RECIPE_NAME-${IMAGE_KEY:0:12}"
  if [ -f "$dir/manifest.json" ]; then
    unlock_key
    log "image: cached ($dir)"
    return 0
  fi
  remove_stale_tmp "$root" "$RECIPE_NAME-${IMAGE_KEY:0:12}"
  new_tmp_dir "$root" "$RECIPE_NAME-${IMAGE_KEY:0:12}"
  tmp=$TMP_DIR
  local scratch
  scratch=$(scratch_parent $(($(stat -c %s "$ROOTFS_DIR/rootfs.tar") * 2)) "$tmp")
  if [ "$scratch" = "$tmp" ]; then
    tree="$tmp/tree"
    mkdir "$tree"
  else
    remove_stale_tmp "$scratch" "hutch-tree-$RECIPE_NAME-${IMAGE_KEY:0:12}"
    new_tmp_dir "$scratch" "hutch-tree-$RECIPE_NAME-${IMAGE_KEY:0:12}"
    tree=$TMP_DIR
  fi
  log "image: unpacking the root filesystem tree in $tree"
  tar -C "$tree" --numeric-owner --xattrs --xattrs-include='*' -xpf "$ROOTFS_DIR/rootfs.tar"
  moddir=$(_in_tree "$tree" "/lib/modules")
  log "image: adding kernel modules ($KERNEL_RELEASE) and the agent"
  mkdir -p "$moddir"
  rm -rf "${moddir:?}/$KERNEL_RELEASE"
  cp -a "$KERNEL_DIR/modules/$KERNEL_RELEASE" "$moddir/$KERNEL_RELEASE"
  chown -R 0:0 "$moddir/$KERNEL_RELEASE"
  mkdir -p "$(_in_tree "$tree" /usr/sbin)"
  install -m 0755 -o 0 -g 0 "$agent" "$(_in_tree "$tree" /usr/sbin)/hutch-agent"
  used=$(du -s -B1 "$tree" | cut -f1)
  files=$(find "$tree" -xdev | wc -l)
  headroom=$((used * 30 / 100))
  [ "$headroom" -ge $((512 << 20)) ] || headroom=$((512 << 20))
  # Inodes: twice what the tree holds, at least mkfs's default ratio (one per 16 KiB).
  local inodes=$((files * 2)) overhead
  [ "$inodes" -ge $(((used + headroom) / 16384)) ] || inodes=$(((used + headroom) / 16384))
  # ext4's own overhead on top, so the free space is really there: inode tables (256 bytes
  # each), the journal (64 MiB at most at these sizes), bitmaps/descriptors and the 1 %
  # reserved for root (~4 % in all).
  overhead=$((inodes * 256 + (64 << 20) + (used + headroom) / 25))
  size=$(((used + headroom + overhead + (64 << 20) - 1) / (64 << 20) * (64 << 20)))
  log "image: mkfs.ext4 -d: tree $((used >> 20)) MiB in $files files -> image $((size >> 20)) MiB"
  truncate -s "$size" "$tmp/rootfs.img"
  mkfs.ext4 -q -F -L hutch-root -m 1 -N "$inodes" -E root_owner=0:0 -d "$tree" "$tmp/rootfs.img" ||
    die "mkfs.ext4 -d failed"
  rm -rf --one-file-system "$tree"
  ln "$KERNEL_DIR/vmlinux" "$tmp/vmlinux" 2>/dev/null || cp "$KERNEL_DIR/vmlinux" "$tmp/vmlinux"
  ln "$INITRD_DIR/initrd.img" "$tmp/initrd.img" 2>/dev/null || cp "$INITRD_DIR/initrd.img" "$tmp/initrd.img"
  _write_manifest "$tmp/manifest.json" "$tmp"
  chmod 0444 "$tmp/rootfs.img" "$tmp/manifest.json"
  chmod 0755 "$tmp"
  mv -T "$tmp" "$dir"
  unlock_key
  log "image: built $dir"
}
