#!/usr/bin/env bash
# Builds the OCI test images (see README.md) as OCI image layouts, each cached under
# $HUTCH_CACHE_DIR/test-images/<name>-<key12>, keyed by a sha256 of its inputs: the shell
# functions that build it (so editing one image rebuilds only that one), ocitool.py, hello.c,
# the versions of the tools and packages that go into it, and for `debian` the host's suite and
# the candidate versions of every package mmdebstrap's minbase installs. A second run is
# instant.
#
#   tests/registry/images.sh OUT_DIR [NAME...]
#
# Builds NAME... (default: all) and prints one "NAME PATH" line per image on stdout, PATH being
# the cached OCI layout (tag `latest` in each; `arm64only` also has tag `manifest`). OUT_DIR gets
# the same lines in OUT_DIR/images.txt and a symlink OUT_DIR/NAME -> PATH for each image.
# Progress goes to stderr. Building `debian` needs root (mmdebstrap --mode=root, ~1 minute).
#
# Each image is built in a temp directory beside the cache entry and renamed into place, under
# a per-entry flock, so an interrupted build never leaves half an image and concurrent runs
# build each image once.
set -euo pipefail

REG_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
HUTCH_ROOT=$(cd "$REG_DIR/../.." && pwd)
# shellcheck source-path=SCRIPTDIR source=../../scripts/image/lib.sh
source "$HUTCH_ROOT/scripts/image/lib.sh"
OCITOOL="$REG_DIR/ocitool.py"

T0=$SECONDS
log() { printf '[test-images %4ds] %s\n' $((SECONDS - T0)) "$*" >&2; }
die() {
  printf 'images.sh: error: %s\n' "$*" >&2
  exit 1
}

ALL_IMAGES=(debian systemd busybox static layers multiarch arm64only zstd)
CACHE_ROOT=${HUTCH_CACHE_DIR:-/var/cache/hutch}/test-images
ARCH=$(dpkg --print-architecture)
# The path a normal image gets; also the mtime-independent bits that every image shares.
STD_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

pkg_version() { dpkg-query -W -f='${Version}' "$1" 2>/dev/null || echo none; }

# umoci_start LAYOUT TAG: an empty layout with a new, layerless image TAG.
umoci_start() {
  umoci init --layout "$1"
  umoci new --image "$1:$2"
}

# add_layer LAYOUT:TAG TAR COMMENT: appends TAR verbatim (umoci gzips it).
add_layer() {
  umoci raw add-layer --image "$1" --history.created_by "$3" "$2"
}

# ---------------------------------------------------------------------------------------------
# The images. build_NAME OUT WORK: writes the OCI layout OUT, with WORK as scratch space.

# minbase_rootfs WORK [MMDEBSTRAP_ARGS...]: WORK/rootfs.tar, a Debian minbase of the host's
# suite (one ./-prefixed layer as mmdebstrap writes it), with the extra arguments (--include=).
minbase_rootfs() {
  local work=$1 suite mirrors=()
  shift
  need_cmd mmdebstrap
  [ "$(id -u)" -eq 0 ] || die "building a Debian image needs root (mmdebstrap --mode=root)"
  suite=$(host_suite)
  mapfile -t mirrors < <(apt_mirror_lines "$suite")
  [ ${#mirrors[@]} -gt 0 ] || die "no apt source for '$suite' in the host's apt configuration"
  log "mmdebstrap $suite minbase $* from $(printf '%s; ' "${mirrors[@]}")"
  # --skip=output/dev: no device nodes in the layer, as in Docker's official images.
  # shellcheck disable=SC2016 # the hook's $1 is mmdebstrap's, not ours
  mmdebstrap --mode=root --variant=minbase --arch="$ARCH" --format=tar --skip=output/dev "$@" \
    --aptopt='Acquire::Languages "none"' \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin' \
    "$suite" "$work/rootfs.tar" "${mirrors[@]}" >"$work/mmdebstrap.log" 2>&1 ||
    die "mmdebstrap failed: $(tail -n 20 "$work/mmdebstrap.log")"
}

# A Debian minbase of the host's suite.
build_debian() {
  local out=$1 work=$2
  minbase_rootfs "$work"
  umoci_start "$out" latest
  add_layer "$out:latest" "$work/rootfs.tar" "mmdebstrap --variant=minbase $(host_suite)"
  umoci config --image "$out:latest" --no-history --config.env "PATH=$STD_PATH" \
    --config.env LANG=C.UTF-8 --config.workingdir /root --config.cmd bash \
    --config.label org.example.test=debian
}

# The same with systemd and D-Bus (no udev, no systemd-sysv), whose CMD is systemd, as the
# images people run systemd in are (hutch template create --from-image --systemd).
build_systemd() {
  local out=$1 work=$2
  minbase_rootfs "$work" --include=systemd,dbus
  umoci_start "$out" latest
  add_layer "$out:latest" "$work/rootfs.tar" "mmdebstrap --variant=minbase --include=systemd,dbus $(host_suite)"
  umoci config --image "$out:latest" --no-history --config.env "PATH=$STD_PATH" \
    --config.env LANG=C.UTF-8 --config.cmd /lib/systemd/systemd \
    --config.label org.example.test=systemd
}

# busybox-static with every applet as a symlink in /bin, a user `app`, and a full config.
build_busybox() {
  local out=$1 work=$2 r=$2/rootfs applet
  need_cmd busybox
  mkdir -p "$r"/{bin,etc,home/app,root,tmp,proc,sys,dev}
  chmod 0755 "$r" "$r"/{bin,etc,home,home/app,proc,sys,dev}
  chmod 0700 "$r/root"
  chmod 1777 "$r/tmp"
  cp "$(readlink -f "$(command -v busybox)")" "$r/bin/busybox"
  chmod 0755 "$r/bin/busybox"
  for applet in $("$r/bin/busybox" --list); do
    [ "$applet" = busybox ] || ln -s busybox "$r/bin/$applet"
  done
  printf '%s\n' 'root:x:0:0:root:/root:/bin/sh' 'app:x:1000:1000:app:/home/app:/bin/sh' \
    >"$r/etc/passwd"
  printf '%s\n' 'root:x:0:' 'app:x:1000:' >"$r/etc/group"
  chmod 0644 "$r/etc/passwd" "$r/etc/group"
  python3 "$OCITOOL" tree-tar "$r" "$work/layer.tar" --chown home/app=1000:1000
  umoci_start "$out" latest
  add_layer "$out:latest" "$work/layer.tar" "busybox-static $(pkg_version busybox-static)"
  umoci config --image "$out:latest" --no-history --config.env "PATH=$STD_PATH" \
    --config.workingdir /home/app --config.user app \
    --config.entrypoint /bin/sh --config.entrypoint=-c --config.cmd 'echo hello' \
    --config.exposedports 8080/tcp --config.label org.example.test=busybox
}

# One static binary, no shell, no /etc/passwd, a numeric user: like distroless/static:nonroot.
build_static() {
  local out=$1 work=$2 r=$2/rootfs
  need_cmd gcc
  mkdir -p "$r"
  chmod 0755 "$r"
  gcc -static -O2 -s -o "$r/hello" "$REG_DIR/hello.c"
  chmod 0755 "$r/hello"
  python3 "$OCITOOL" tree-tar "$r" "$work/layer.tar"
  umoci_start "$out" latest
  add_layer "$out:latest" "$work/layer.tar" "gcc -static hello.c"
  umoci config --image "$out:latest" --no-history --config.env "PATH=$STD_PATH" \
    --config.env HELLO_ENV=from-image --config.user 65532:65532 \
    --config.entrypoint /hello --config.cmd from-cmd --config.label org.example.test=static
}

# busybox plus three crafted layers: whiteouts, opaque dir, links, xattrs, a file capability.
build_layers() {
  local out=$1 work=$2 n
  cp -a "${IMAGE_PATH[busybox]}" "$out"
  for n in 2 3 4; do
    python3 "$OCITOOL" layers-tar "$n" "$work/layer$n.tar"
    add_layer "$out:latest" "$work/layer$n.tar" "tests/registry/ocitool.py layers-tar $n"
  done
  umoci config --image "$out:latest" --no-history --config.label org.example.test=layers \
    --config.cmd 'ls -la /data'
}

# tiny_arm64 LAYOUT TAG WORK: an image TAG whose config says linux/arm64 and whose one layer
# holds only /etc/arch (no arm64 binary: nothing here can build or run one).
tiny_arm64() {
  local out=$1 tag=$2 work=$3
  mkdir -p "$work/arm64/etc"
  printf 'arm64\n' >"$work/arm64/etc/arch"
  chmod 0755 "$work/arm64" "$work/arm64/etc"
  chmod 0644 "$work/arm64/etc/arch"
  python3 "$OCITOOL" tree-tar "$work/arm64" "$work/arm64.tar"
  umoci new --image "$out:$tag"
  add_layer "$out:$tag" "$work/arm64.tar" "an arm64 stand-in"
  umoci config --image "$out:$tag" --no-history --architecture arm64 --os linux \
    --config.env "PATH=$STD_PATH" --config.cmd /bin/sh --config.label org.example.test=arm64
}

# An index: linux/amd64 -> the busybox image, linux/arm64/v8 -> a tiny arm64 image.
build_multiarch() {
  local out=$1 work=$2
  umoci init --layout "$out"
  tiny_arm64 "$out" arm64 "$work"
  umoci gc --layout "$out"
  python3 "$OCITOOL" import-image "${IMAGE_PATH[busybox]}" latest "$out" amd64
  python3 "$OCITOOL" index "$out" latest amd64=linux/amd64 arm64=linux/arm64/v8
}

# Tag `latest`: an index whose only entry is linux/arm64/v8; tag `manifest`: the same image
# manifest without an index (its config says arm64).
build_arm64only() {
  local out=$1 work=$2
  umoci init --layout "$out"
  tiny_arm64 "$out" manifest "$work"
  umoci gc --layout "$out"
  umoci tag --image "$out:manifest" single
  python3 "$OCITOOL" index "$out" latest single=linux/arm64/v8
}

# The busybox image with its layers recompressed as zstd.
build_zstd() {
  local out=$1 work=$2
  skopeo copy --quiet --dest-compress-format zstd "oci:${IMAGE_PATH[busybox]}:latest" \
    "oci:$out:latest" >&2
  python3 - "$out" <<'EOF' || die "zstd: skopeo did not write zstd layers"
import json, os, sys
out = sys.argv[1]
idx = json.load(open(os.path.join(out, "index.json")))
d = idx["manifests"][0]["digest"].split(":")
m = json.load(open(os.path.join(out, "blobs", d[0], d[1])))
assert all(l["mediaType"].endswith("+zstd") for l in m["layers"]), m["layers"]
EOF
}

# ---------------------------------------------------------------------------------------------
# Keys: what each image is made of.

# PKG=VERSION of each package's candidate version.
candidate_versions() {
  local p
  for p in "$@"; do
    printf '%s=%s\n' "$p" "$(apt-cache policy "$p" | awk '$1 == "Candidate:" {print $2}')"
  done
}

minbase_versions() {
  apt-cache dumpavail | awk 'BEGIN { RS = ""; FS = "\n" }
    { p = v = ""; keep = 0
      for (i = 1; i <= NF; i++) {
        if ($i ~ /^Package: /) p = substr($i, 10)
        else if ($i ~ /^Version: /) v = substr($i, 10)
        else if ($i == "Priority: required" || $i == "Essential: yes") keep = 1
      }
      if (p == "apt") keep = 1
      if (keep) print p, v }' | LC_ALL=C sort
}

image_key() {
  local name=$1
  {
    printf 'test-images-v1 %s arch=%s umoci=%s skopeo=%s STD_PATH=%s\n' "$name" "$ARCH" \
      "$(pkg_version umoci)" "$(pkg_version skopeo)" "$STD_PATH"
    declare -f "build_$name" umoci_start add_layer
    case "$name" in debian | systemd) declare -f minbase_rootfs ;; esac
    case "$name" in multiarch | arm64only) declare -f tiny_arm64 ;; esac
    if [ "$name" != debian ] && [ "$name" != systemd ]; then
      printf 'python3=%s ocitool=%s\n' "$(pkg_version python3)" "$(sha256_file "$OCITOOL")"
    fi
    case "$name" in
      debian | systemd)
        printf 'suite=%s mmdebstrap=%s\n' "$(host_suite)" "$(pkg_version mmdebstrap)"
        minbase_versions
        if [ "$name" = systemd ]; then candidate_versions systemd dbus; fi
        ;;
      busybox) printf 'busybox-static=%s\n' "$(pkg_version busybox-static)" ;;
      static)
        printf 'hello.c=%s gcc-12=%s libc6-dev=%s\n' "$(sha256_file "$REG_DIR/hello.c")" \
          "$(pkg_version gcc-12)" "$(pkg_version libc6-dev)"
        ;;
      layers | multiarch | zstd) printf 'busybox=%s\n' "${IMAGE_PATH[busybox]##*/}" ;;
    esac
  } | sha256sum | cut -d' ' -f1
}

# ensure_image NAME: sets IMAGE_PATH[NAME], building the image unless it is cached.
declare -A IMAGE_PATH=()
ensure_image() {
  local name=$1 key entry dir t
  case "$name" in layers | multiarch | zstd) [ -n "${IMAGE_PATH[busybox]:-}" ] || ensure_image busybox ;; esac
  key=$(image_key "$name")
  entry=$name-${key:0:12}
  dir=$CACHE_ROOT/$entry
  if [ ! -f "$dir/index.json" ]; then
    mkdir -p "$CACHE_ROOT"
    lock_key "$CACHE_ROOT" "$entry"
    if [ ! -f "$dir/index.json" ]; then
      remove_stale_tmp "$CACHE_ROOT" "$entry"
      new_tmp_dir "$CACHE_ROOT" "$entry"
      t=$SECONDS
      log "$name: building ($entry)"
      mkdir "$TMP_DIR/work"
      "build_$name" "$TMP_DIR/layout" "$TMP_DIR/work"
      chmod -R a+rX "$TMP_DIR/layout"
      mv -T "$TMP_DIR/layout" "$dir"
      rm -rf --one-file-system "$TMP_DIR"
      log "$name: built in $((SECONDS - t)) s, $(du -sh "$dir" | cut -f1)"
    fi
    unlock_key
  fi
  IMAGE_PATH[$name]=$dir
}

main() {
  [ $# -ge 1 ] || die "usage: images.sh OUT_DIR [NAME...] (names: ${ALL_IMAGES[*]})"
  local out=$1 names=("${@:2}") name
  [ ${#names[@]} -gt 0 ] || names=("${ALL_IMAGES[@]}")
  for name in "${names[@]}"; do
    [[ " ${ALL_IMAGES[*]} " == *" $name "* ]] || die "unknown image '$name' (names: ${ALL_IMAGES[*]})"
  done
  need_cmd umoci skopeo python3 tar flock sha256sum dpkg-query
  trap cleanup_tmp EXIT
  mkdir -p "$out"
  : >"$out/images.txt.tmp"
  for name in "${names[@]}"; do
    ensure_image "$name"
    ln -sfn "${IMAGE_PATH[$name]}" "$out/$name"
    printf '%s %s\n' "$name" "${IMAGE_PATH[$name]}" | tee -a "$out/images.txt.tmp"
  done
  mv "$out/images.txt.tmp" "$out/images.txt"
}

main "$@"
