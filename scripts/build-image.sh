#!/usr/bin/env bash
# Builds a hutch guest image: kernel (uncompressed vmlinux), initramfs, root disk (raw ext4) and
# manifest, each step cached under a content hash of its inputs. See docs/guest-image.md.
#
#   scripts/build-image.sh --agent PATH/TO/hutch-agent [--recipe images/base] [--cache DIR]
#                          [--out DIR]
#
# Progress goes to stderr; the last line on stdout is the image directory's absolute path.
set -euo pipefail

HUTCH_IMAGE_T0=$(date +%s%N) # read by log() in image/lib.sh
export HUTCH_IMAGE_T0
REPO_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
IMAGE_LIB_DIR="$REPO_DIR/scripts/image"
# shellcheck source=image/lib.sh
. "$IMAGE_LIB_DIR/lib.sh"
. "$IMAGE_LIB_DIR/kernel.sh"
. "$IMAGE_LIB_DIR/initramfs.sh"
. "$IMAGE_LIB_DIR/rootfs.sh"
. "$IMAGE_LIB_DIR/image.sh"

usage() {
  cat <<USAGE
usage: scripts/build-image.sh --agent PATH/TO/hutch-agent [--recipe images/base] [--cache DIR]
                              [--out DIR]

  --agent FILE   the hutch-agent binary installed as /usr/sbin/hutch-agent (statically linked)
  --recipe DIR   recipe directory, or a recipe name under images/ (default: images/base)
  --cache DIR    cache directory (default: \${HUTCH_CACHE_DIR:-\$HOME/.cache/hutch})
  --out DIR      also point the symlink DIR at the image directory (created or replaced)
  -h, --help     this text

Building needs root (mmdebstrap, device nodes, file ownership); a fully cached image does not.
The last line on stdout is the image directory: vmlinux, initrd.img, rootfs.img, manifest.json.
An image directory never changes once built (boxes' qcow2 overlays point at its rootfs.img): to
pick up newer Debian packages for a recipe, change the recipe (e.g. its "# refreshed:" line).
USAGE
}

agent="" recipe="$REPO_DIR/images/base" cache=${HUTCH_CACHE_DIR:-$HOME/.cache/hutch} out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --agent) agent=${2:?--agent needs a file}; shift 2 ;;
    --agent=*) agent=${1#*=}; shift ;;
    --recipe) recipe=${2:?--recipe needs a directory}; shift 2 ;;
    --recipe=*) recipe=${1#*=}; shift ;;
    --cache) cache=${2:?--cache needs a directory}; shift 2 ;;
    --cache=*) cache=${1#*=}; shift ;;
    --out) out=${2:?--out needs a path}; shift 2 ;;
    --out=*) out=${1#*=}; shift ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument '$1'" ;;
  esac
done

[ -n "$agent" ] || { usage >&2; die "--agent is required: the hutch-agent binary to install in the image"; }
[ -f "$agent" ] || die "agent binary '$agent' does not exist (build it first, e.g. cmake --build build --target hutch-agent)"
[ -x "$agent" ] || die "agent binary '$agent' is not executable (chmod +x it)"
case "$(head -c 4 "$agent" | od -An -c | tr -d ' ')" in
  177ELF* | '#!'*) ;;
  *) die "agent '$agent' is neither an ELF executable nor a #! script: pass the hutch-agent binary" ;;
esac
agent=$(cd "$(dirname "$agent")" && pwd)/$(basename "$agent")
if LC_ALL=C readelf -l "$agent" 2>/dev/null | grep 'Requesting program interpreter' >/dev/null; then
  log "warning: $agent is dynamically linked; hutch-agent should be static (it is PID 1, and each dynamic exec costs ~38 ms under TCG)"
fi
mkdir -p "$cache" || die "cannot create the cache directory $cache"
cache=$(cd "$cache" && pwd)
trap cleanup_tmp EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

need_cmd sha256sum apt-cache readelf flock
load_recipe "$recipe" "$REPO_DIR/images"
AGENT_SHA256=$(sha256_file "$agent")
ROOTFS_KEY=$(rootfs_key)
resolve_kernel "$cache"
KERNEL_KEY="${KERNEL_PKG}_${KERNEL_PKG_VERSION}"
INITRD_KEY=$(initramfs_key)
IMAGE_KEY=$(image_key)
IMAGE_DIR="$cache/images/$RECIPE_NAME-${IMAGE_KEY:0:12}"
log "recipe $RECIPE_NAME ($RECIPE_DIR) key ${ROOTFS_KEY:0:16}; kernel $KERNEL_PKG $KERNEL_PKG_VERSION; agent ${AGENT_SHA256:0:16}; image key ${IMAGE_KEY:0:12}"

if [ -f "$IMAGE_DIR/manifest.json" ]; then
  log "image: cached, nothing to build ($IMAGE_DIR)"
else
  [ "$(id -u)" -eq 0 ] || die "image $RECIPE_NAME-${IMAGE_KEY:0:12} is not in the cache and building it needs root: run 'sudo $0 ...' (or as root)"
  need_cmd apt-get dpkg-deb depmod mmdebstrap mkfs.ext4 cpio zstd
  build_kernel "$cache"
  build_initramfs "$cache"
  build_rootfs "$cache"
  build_image "$cache" "$agent"
  [ "$IMAGE_DIR" = "$cache/images/$RECIPE_NAME-${IMAGE_KEY:0:12}" ] || die "internal error: image key changed during the build"
fi

if [ -n "$out" ]; then
  if [ -e "$out" ] && [ ! -L "$out" ]; then
    die "--out $out exists and is not a symlink; remove it or choose another path"
  fi
  mkdir -p "$(dirname "$out")"
  ln -sfn "$IMAGE_DIR" "$out.tmp.$$"
  mv -T "$out.tmp.$$" "$out"
  log "--out: $out -> $IMAGE_DIR"
fi
log "done"
printf '%s\n' "$IMAGE_DIR"
