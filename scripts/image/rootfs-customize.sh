#!/bin/bash
# mmdebstrap --customize-hook for hutch recipes (runs on the host, as root, after the packages are
# installed and before mmdebstrap's cleanup).
#   rootfs-customize.sh CHROOT RECIPE_DIR...   (parent recipes first)
# For each recipe: copy files/ over / (owned by root:root, modes kept; existing directories keep
# their metadata), install its pinned npm packages (the `npm` file) under /usr/local, then run
# setup.sh inside the chroot with /bin/sh -e. The recipe's name is in
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
  if [ -f "$recipe/npm" ]; then
    # Pinned npm packages, fetched by the host's npm (its own registry configuration), checked
    # against the recipe's integrity and installed globally (/usr/local) without the network:
    # they must have no dependencies.
    command -v npm >/dev/null ||
      { echo "E: hutch: recipe $name lists npm packages: install npm on the host (scripts/install-deps.sh)" >&2; exit 1; }
    stage=$(mktemp -d)
    while read -r spec integrity; do
      [ -n "$spec" ] || continue
      echo "I: hutch: recipe $name: npm package $spec" >&2
      packed=$(cd "$stage" && npm pack --json --silent "$spec") ||
        { echo "E: hutch: recipe $name: npm pack $spec failed" >&2; rm -rf "$stage"; exit 1; }
      read -r got file < <(printf '%s' "$packed" |
        python3 -c 'import json, sys; d = json.load(sys.stdin)[0]; print(d["integrity"], d["filename"])')
      if [ "$got" != "$integrity" ]; then
        echo "E: hutch: recipe $name: $spec has integrity $got, the recipe pins ${integrity:-nothing}" >&2
        rm -rf "$stage"
        exit 1
      fi
      npm install --global --prefix "$root/usr/local" --offline --no-audit --no-fund \
        --loglevel=error "$stage/$file" >&2 ||
        { echo "E: hutch: recipe $name: installing $spec failed (a recipe's npm packages must have no dependencies)" >&2; rm -rf "$stage"; exit 1; }
    done < <(sed 's/#.*//' "$recipe/npm")
    rm -rf "$stage"
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
