#!/bin/bash
# mmdebstrap --customize-hook for hutch recipes (runs on the host, as root, after the packages are
# installed and before mmdebstrap's cleanup).
#   rootfs-customize.sh CHROOT RECIPE_DIR...   (parent recipes first)
# For each recipe: copy files/ over / (owned by root:root, modes kept; existing directories keep
# their metadata), then run setup.sh inside the chroot with /bin/sh -e. The recipe's name is in
# $HUTCH_RECIPE during setup.sh.
set -euo pipefail
root=$1
shift
[ -d "$root" ] || { echo "rootfs-customize: $root is not a directory" >&2; exit 1; }
for recipe in "$@"; do
  name=${recipe##*/}
  if [ -d "$recipe/files" ]; then
    echo "I: hutch: recipe $name: copying files/ into the tree" >&2
    tar -C "$recipe/files" --owner=0 --group=0 --numeric-owner -cf - . |
      tar -C "$root" --no-overwrite-dir --keep-directory-symlink --numeric-owner -xpf -
  fi
  if [ -f "$recipe/setup.sh" ]; then
    echo "I: hutch: recipe $name: running setup.sh in the chroot" >&2
    script=$(mktemp "$root/tmp/hutch-setup-XXXXXX")
    cat "$recipe/setup.sh" >"$script"
    chmod 0755 "$script"
    if ! chroot "$root" /usr/bin/env -i HUTCH_RECIPE="$name" PATH=/usr/sbin:/usr/bin:/sbin:/bin \
      HOME=/root LC_ALL=C.UTF-8 DEBIAN_FRONTEND=noninteractive /bin/sh -e "/tmp/${script##*/}" >&2; then
      rm -f "$script"
      echo "E: hutch: recipe $name: setup.sh failed" >&2
      exit 1
    fi
    rm -f "$script"
  fi
done
