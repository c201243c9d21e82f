# shellcheck shell=bash disable=SC2034 # globals are shared between the sourced step files
# Root filesystem step (sourced by scripts/build-image.sh after lib.sh).
#
#   load_recipe PATH_OR_NAME      validates the recipe, follows `extends`; sets RECIPE_NAME,
#                                 RECIPE_DIR and RECIPE_CHAIN (parent first)
#   rootfs_key                    prints the cache key: sha256 over every file of every recipe in
#                                 the chain, the scripts that build the tree, the suite and arch
#   build_rootfs CACHE            ensures CACHE/rootfs/<name>-<key16>/rootfs.tar; sets ROOTFS_DIR
#
# Recipe directory (images/<name>/), see docs/guest-image.md:
#   packages   package names (whitespace or newline separated, '#' comments), required
#   extends    optional: the name of a parent recipe in the same images/ directory
#   dpkg.cfg   optional: dpkg options, one per line (path-exclude=..., path-include=...)
#   files/     optional: a tree copied over / (owned by root; modes as in the checkout)
#   setup.sh   optional: run with /bin/sh -e inside the chroot after packages and files/

IMAGE_LIB_DIR=${IMAGE_LIB_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)}
ROOTFS_CUSTOMIZE="$IMAGE_LIB_DIR/rootfs-customize.sh"
ROOTFS_ARCH=${HUTCH_IMAGE_ARCH:-amd64}

# load_recipe ARG [IMAGES_DIR]: ARG is a directory (images/base) or a recipe name (base).
load_recipe() {
  local arg=$1 images=${2:-} dir parent depth=0
  if [ -d "$arg" ]; then
    dir=$(cd "$arg" && pwd)
  elif [ -n "$images" ] && [ -d "$images/$arg" ]; then
    dir=$(cd "$images/$arg" && pwd)
  else
    die "unknown recipe '$arg': expected a recipe directory such as images/base (available: $(ls "$images" 2>/dev/null | tr '\n' ' '))"
  fi
  [ -f "$dir/packages" ] || die "recipe $dir has no 'packages' file (see docs/guest-image.md)"
  RECIPE_DIR=$dir
  RECIPE_NAME=${dir##*/}
  [[ $RECIPE_NAME =~ ^[a-z0-9][a-z0-9._-]*$ ]] ||
    die "recipe name '$RECIPE_NAME' must be lowercase letters, digits, '.', '_' or '-'"
  RECIPE_CHAIN=("$dir")
  while [ -f "$dir/extends" ]; do
    parent=$(sed 's/#.*//' "$dir/extends" | tr -d ' \t\n')
    [ -n "$parent" ] || break
    [ -d "${dir%/*}/$parent" ] || die "recipe $dir extends '$parent', which does not exist in ${dir%/*}"
    dir=$(cd "${dir%/*}/$parent" && pwd)
    [ -f "$dir/packages" ] || die "recipe $dir has no 'packages' file"
    depth=$((depth + 1))
    [ $depth -lt 16 ] || die "recipe $RECIPE_DIR: 'extends' chain too long (a cycle?)"
    RECIPE_CHAIN=("$dir" "${RECIPE_CHAIN[@]}")
  done
}

recipe_packages() {
  local d
  for d in "${RECIPE_CHAIN[@]}"; do sed 's/#.*//' "$d/packages"; done |
    tr -s ' \t,' '\n' | sed '/^$/d' | awk '!seen[$0]++'
}

recipe_dpkg_opts() {
  local d
  for d in "${RECIPE_CHAIN[@]}"; do
    if [ -f "$d/dpkg.cfg" ]; then
      sed 's/#.*//; s/^[[:space:]]*//; s/[[:space:]]*$//' "$d/dpkg.cfg"
    fi
  done | sed '/^$/d'
}

rootfs_key() {
  local d
  {
    printf 'rootfs-v1\nsuite %s\narch %s\n' "$(host_suite)" "$ROOTFS_ARCH"
    printf 'builder %s\ncustomize %s\n' "$(sha256_file "$IMAGE_LIB_DIR/rootfs.sh")" \
      "$(sha256_file "$ROOTFS_CUSTOMIZE")"
    for d in "${RECIPE_CHAIN[@]}"; do
      printf 'recipe %s\n' "${d##*/}"
      hash_tree "$d"
    done
  } | sha256sum | cut -d' ' -f1
}

build_rootfs() {
  local cache=$1 root dir tmp suite key pkgs=() opts=() mirrors=() line d
  key=$(rootfs_key)
  ROOTFS_KEY=$key
  root="$cache/rootfs"
  dir="$root/$RECIPE_NAME-${key:0:16}"
  ROOTFS_DIR=$dir
  if [ -f "$dir/rootfs.tar" ]; then
    log "rootfs: cached ($dir)"
    return 0
  fi
  need_cmd mmdebstrap
  [ "$(id -u)" -eq 0 ] || die "building the root filesystem needs root (mmdebstrap --mode=root): run as root or with sudo"
  lock_key "$root" "$RECIPE_NAME-${key:0:16}"
  if [ -f "$dir/rootfs.tar" ]; then
    unlock_key
    log "rootfs: cached ($dir)"
    return 0
  fi
  remove_stale_tmp "$root" "$RECIPE_NAME-${key:0:16}"
  new_tmp_dir "$root" "$RECIPE_NAME-${key:0:16}"
  tmp=$TMP_DIR
  suite=$(host_suite)
  mapfile -t pkgs < <(recipe_packages)
  while IFS= read -r line; do opts+=("--dpkgopt=$line"); done < <(recipe_dpkg_opts)
  mapfile -t mirrors < <(apt_mirror_lines "$suite")
  [ ${#mirrors[@]} -gt 0 ] ||
    die "no apt source for '$suite' in /etc/apt/sources.list or /etc/apt/sources.list.d/ (needed by mmdebstrap)"
  local hook
  hook=$(printf '%q ' "$ROOTFS_CUSTOMIZE")'"$1"'
  for d in "${RECIPE_CHAIN[@]}"; do hook+=" $(printf '%q' "$d")"; done
  log "rootfs: mmdebstrap $suite (minbase, ${#pkgs[@]} extra packages) from ${#mirrors[@]} apt sources: $(printf '%s; ' "${mirrors[@]}")"
  local t0=$SECONDS
  mmdebstrap --mode=root --variant=minbase --arch="$ROOTFS_ARCH" --format=tar \
    --include="$(
      IFS=,
      echo "${pkgs[*]}"
    )" \
    --aptopt='Acquire::Languages "none"' \
    "${opts[@]}" \
    --customize-hook="$hook" \
    --customize-hook="chroot \"\$1\" dpkg-query -W -f='\${Package}\t\${Version}\n' >$(printf '%q' "$tmp/packages.txt")" \
    "$suite" "$tmp/rootfs.tar" "${mirrors[@]}" >&2 ||
    die "mmdebstrap failed (see its output above)"
  log "rootfs: mmdebstrap done in $((SECONDS - t0)) s: $(wc -l <"$tmp/packages.txt") packages, $(($(stat -c %s "$tmp/rootfs.tar") / 1048576)) MiB tarball"
  chmod 0755 "$tmp"
  chmod 0644 "$tmp/rootfs.tar" "$tmp/packages.txt"
  mv -T "$tmp" "$dir"
  unlock_key
  log "rootfs: cached as $dir"
}
