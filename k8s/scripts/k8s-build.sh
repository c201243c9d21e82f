#!/usr/bin/env bash
# Builds kube-apiserver, kube-scheduler and kube-controller-manager from Debian's own archive:
# the `kubernetes` *source* package (Kubernetes 1.20.2), compiled with Debian's Go (golang-go) as
# debian/rules does; kubectl is Debian's own `kubernetes-client` binary package of the same
# source version, unpacked beside them (not installed: it would clash with another kubectl).
# Prints the directory of the binaries on its last line. control-plane.sh runs it; run it alone
# to build ahead of time.
#
# The binaries are cached under ${HUTCH_CACHE_DIR:-/var/cache/hutch}/k8s/<key>, where the key
# hashes the source package version, the golang-go version and this file; a second build is
# a directory lookup. The unpacked source tree, with Kubernetes' own Go build cache inside it
# (_output/local/go/cache), is kept under k8s/tree/<source version>_<Go version>: a rebuild
# after a change of this file recompiles only what changed (Go's cache is keyed by content).
# HUTCH_K8S_DROP_TREE=1 deletes it after a build. Nothing fetched here is committed.
#
# The deb-src entry is derived at run time from the host's own apt sources (deb822 files in
# /etc/apt/sources.list.d and one-line /etc/apt/sources.list), written to a private apt
# directory under the cache: the system's apt configuration is not changed.
set -euo pipefail

HUTCH_CACHE_DIR=${HUTCH_CACHE_DIR:-/var/cache/hutch}
K8S_CACHE=$HUTCH_CACHE_DIR/k8s
SCRIPT=$(readlink -f "${BASH_SOURCE[0]}")
# What is built, and with what. The Debian tree is Kubernetes 1.20.2 (see docs/capacity.md).
WHAT=(cmd/kube-apiserver cmd/kube-scheduler cmd/kube-controller-manager)
SRC_PKG=kubernetes
GO_PKG=golang-go
BUILD_PKGS=(golang-go rsync jq dpkg-dev make)

# Kubernetes 1.20 vendors github.com/modern-go/reflect2 v1.0.1, whose map iteration faults under
# Go 1.18 and newer: built with Debian's Go 1.19, kube-apiserver died with SIGSEGV in
# reflect2's UnsafeIterate (json-iterator's sortKeysMapEncoder) on the first custom object it
# encoded. v1.0.2 is the release that fixed it; it replaces the vendored copy before the build.
REFLECT2_VERSION=v1.0.2

say() { printf 'control-plane: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

need_root() { [ "$(id -u)" -eq 0 ] || die "must run as root to install packages (try: sudo $0 $*)"; }

# Installs Debian packages that are missing (the project's scripts install what they use).
apt_install() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  need_root
  say "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q --no-install-recommends "${missing[@]}" >&2 ||
    { apt-get update -q >&2 && apt-get install -y -q --no-install-recommends "${missing[@]}" >&2; }
}

# The candidate version of a binary package in the host's apt index (no network).
candidate() {
  local v
  v=$(apt-cache policy "$1" 2>/dev/null | awk '/Candidate:/ {print $2}')
  if [ -z "$v" ] || [ "$v" = "(none)" ]; then
    need_root
    apt-get update -q >&2
    v=$(apt-cache policy "$1" 2>/dev/null | awk '/Candidate:/ {print $2}')
  fi
  [ -n "$v" ] && [ "$v" != "(none)" ] || die "apt knows no package '$1': is this Debian 12 with its main archive in the apt sources?"
  printf '%s\n' "$v"
}

# The version of the `kubernetes` source package, read from the binary package built from it
# (kubernetes-client), so that the cache key needs no network.
source_version() {
  local v
  v=$(candidate kubernetes-client)
  local src
  src=$(apt-cache show "kubernetes-client=$v" | awk -F': ' '/^Source:/ {print $2; exit}')
  if [[ $src =~ \((.*)\) ]]; then v=${BASH_REMATCH[1]}; fi
  printf '%s\n' "$v"
}

cache_key() {
  local srcv gov sh
  srcv=$(source_version)
  gov=$(candidate "$GO_PKG")
  sh=$(sha256sum "$SCRIPT" | cut -c1-16)
  printf '%s\n' "$(printf '%s\n' "$SRC_PKG=$srcv" "$GO_PKG=$gov" "script=$sh" "${WHAT[*]}" |
    sha256sum | cut -c1-20)"
}

# Writes deb-src entries for the host's Debian suites into $1/sources.list.d, derived from the
# host's own apt configuration (same URIs, suites, components and keyrings).
derive_deb_src() {
  local out=$1/sources.list.d codename f
  codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
  [ -n "$codename" ] || die "cannot tell the Debian codename from /etc/os-release"
  mkdir -p "$out"
  : >"$out/deb-src.sources"
  # deb822 files: copy each enabled stanza of Types deb whose suites are this release's.
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -e "$f" ] || continue
    awk -v cn="$codename" '
      function flush() {
        if (n && types ~ /(^|[ \t])deb([ \t]|$)/ && suites ~ cn && enabled !~ /^[ \t]*no/) {
          print "Types: deb-src"
          for (i = 1; i <= n; i++) if (lines[i] !~ /^Types:/) print lines[i]
          print ""
        }
        n = 0; types = ""; suites = ""; enabled = ""
      }
      /^#/ { next }
      /^[ \t]*$/ { flush(); next }
      { lines[++n] = $0 }
      /^Types:/ { types = substr($0, 7) }
      /^Suites:/ { suites = substr($0, 8) }
      /^Enabled:/ { enabled = substr($0, 9) }
      END { flush() }
    ' "$f" >>"$out/deb-src.sources"
  done
  # One-line format: deb [opts] URI suite components...
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -e "$f" ] || continue
    awk -v cn="$codename" '$1 == "deb" && $0 ~ cn { $1 = "deb-src"; print }' "$f" \
      >>"$out/deb-src.list"
  done
  grep -q . "$out"/deb-src.* || die "found no Debian '$codename' entry in /etc/apt to derive a deb-src entry from"
}

# Fetches and unpacks the source package into $2 with a private apt state under $1.
fetch_source() {
  local aptdir=$1 dest=$2 version=$3
  derive_deb_src "$aptdir"
  mkdir -p "$aptdir/lists/partial" "$aptdir/cache/archives/partial" "$dest"
  local opts=(-o "Dir::Etc::SourceList=/dev/null" -o "Dir::Etc::SourceParts=$aptdir/sources.list.d"
    -o "Dir::State::Lists=$aptdir/lists" -o "Dir::Cache=$aptdir/cache"
    -o "APT::Sandbox::User=root" -o "Debug::NoLocking=1")
  say "fetching the Sources index for the derived deb-src entries"
  apt-get "${opts[@]}" update -q >&2
  say "fetching source package $SRC_PKG=$version"
  (cd "$dest" && apt-get "${opts[@]}" source -q "$SRC_PKG=$version" >&2)
}

# Replaces vendor/github.com/modern-go/reflect2 with $REFLECT2_VERSION from the Go module proxy
# (the one `go env GOPROXY` names), keeping the tree's vendor/modules.txt untouched.
fix_reflect2() {
  local tree=$1 goroot=$2 root=$3 dir
  local vend=$tree/vendor/github.com/modern-go/reflect2
  [ -d "$vend" ] || die "$vend is missing: is this the Kubernetes 1.20 tree?"
  if [ "$(cat "$vend/.hutch-version" 2>/dev/null)" = "$REFLECT2_VERSION" ]; then return 0; fi
  dir=$(cd "$root" && GOFLAGS= GOMODCACHE=$root/gomod GOPATH=$root/gopath GO111MODULE=on \
    "$goroot/bin/go" mod download -json "github.com/modern-go/reflect2@$REFLECT2_VERSION" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [ -n "$dir" ] && [ -f "$dir/reflect2.go" ] ||
    die "cannot download github.com/modern-go/reflect2@$REFLECT2_VERSION from the Go module proxy ($("$goroot/bin/go" env GOPROXY))"
  rm -f "$vend"/*.go
  cp "$dir"/*.go "$vend/"
  chmod u+w "$vend"/*.go
  printf '%s\n' "$REFLECT2_VERSION" >"$vend/.hutch-version"
  say "vendored reflect2 replaced by $REFLECT2_VERSION (v1.0.1 faults under Go 1.18+)"
}

# Kubernetes 1.20's OpenAPI validators (vendored kube-openapi and go-openapi, which validate
# custom objects) take a value for null when reflect.DeepEqual finds reflect.Zero(type) equal to
# reflect.ValueOf(data): comparing two reflect.Value structs, which never matched under the Go it
# was written for, but matches for "" (and 0, false) since Go 1.18 points both at the same zero
# value. Built with Debian's Go 1.19, every empty string in a custom object was refused
# ('status.message in body must be of type string: "null"'). Later kube-openapi tests
# `data == nil` alone, which is what this restores in both copies.
fix_zero_value_check() {
  local tree=$1 f n=0
  local bad='data == nil || reflect.DeepEqual(reflect.Zero(reflect.TypeOf(data)), reflect.ValueOf(data))'
  for f in vendor/k8s.io/kube-openapi/pkg/validation/validate/type.go vendor/github.com/go-openapi/validate/type.go; do
    if grep -qF "$bad" "$tree/$f"; then
      sed -i "s/data == nil || reflect.DeepEqual(reflect.Zero(reflect.TypeOf(data)), reflect.ValueOf(data))/data == nil/" "$tree/$f"
      n=$((n + 1))
    elif ! grep -q 'if data == nil {' "$tree/$f"; then
      die "$f has neither the zero-value check to fix nor the fixed one: is this the Kubernetes 1.20 tree?"
    fi
  done
  [ $n -eq 0 ] || say "OpenAPI validators: empty strings are values again, not null ($n files)"
}

cmd_build() {
  local key dir
  key=$(cache_key)
  dir=$K8S_CACHE/$key
  if [ -x "$dir/bin/kube-apiserver" ] && [ -f "$dir/BUILT" ]; then
    say "cached: $dir (key $key)"
    printf '%s\n' "$dir/bin"
    return 0
  fi
  apt_install "${BUILD_PKGS[@]}"
  local srcv gov
  srcv=$(source_version)
  gov=$(candidate "$GO_PKG")
  # Debian's Go, not whatever else is on PATH: the goroot of the installed golang-go.
  local goroot
  goroot=$(readlink -f /usr/lib/go) || die "golang-go is installed but /usr/lib/go is missing"
  [ -x "$goroot/bin/go" ] || die "no go binary in $goroot/bin"
  local tree_root=$K8S_CACHE/tree/$(printf '%s_%s' "$srcv" "$gov" | tr -c 'A-Za-z0-9.+_-' _)
  local t0=$SECONDS
  if [ ! -f "$tree_root/FETCHED" ]; then
    rm -rf "$tree_root"
    fetch_source "$tree_root/apt" "$tree_root/src" "$srcv"
    touch "$tree_root/FETCHED"
  fi
  local tree
  tree=$(find "$tree_root/src" -mindepth 1 -maxdepth 1 -type d -name "$SRC_PKG-*" | head -n 1)
  [ -n "$tree" ] || die "apt-get source unpacked no $SRC_PKG-* directory in $tree_root/src"
  fix_reflect2 "$tree" "$goroot" "$tree_root"
  fix_zero_value_check "$tree"
  local t1=$SECONDS
  say "building ${WHAT[*]} with $($goroot/bin/go version) in $tree (nice 10, 2 jobs)"
  (
    cd "$tree"
    # As debian/rules builds it: Debian's Go first on PATH, static binaries (no cgo). The Go
    # build cache is the tree's own (hack/lib/golang.sh sets GOCACHE under _output).
    # `providerless` leaves out the in-tree cloud providers (AWS, Azure, GCE, OpenStack,
    # vSphere SDKs), which a loopback control plane never uses and which were most of the
    # build's time; hack/lib/golang.sh passes the tag named in GOFLAGS to every `go build`.
    export PATH=$goroot/bin:$PATH GOROOT=$goroot GOPROXY=off GO111MODULE=on
    export GOFLAGS="-mod=vendor -tags=providerless"
    export CGO_ENABLED=0 GOTOOLCHAIN=local GOMAXPROCS=2 HOME=$tree_root
    export KUBE_BUILD_PLATFORMS=linux/amd64 KUBE_VERBOSE=${KUBE_VERBOSE:-1}
    nice -n 10 make WHAT="${WHAT[*]}" >&2
  )
  local t2=$SECONDS
  rm -rf "$dir/bin.tmp"
  mkdir -p "$dir/bin.tmp"
  local w
  for w in "${WHAT[@]}"; do
    cp "$tree/_output/bin/$(basename "$w")" "$dir/bin.tmp/" ||
      die "the build made no $(basename "$w") in $tree/_output/bin"
  done
  # kubectl: Debian's binary package built from the same source version.
  local deb=$tree_root/deb
  rm -rf "$deb"
  mkdir -p "$deb"
  (cd "$deb" && apt-get download -q "kubernetes-client=$srcv" >&2) ||
    die "cannot download Debian's kubernetes-client $srcv (run apt-get update as root and retry)"
  dpkg-deb -x "$deb"/kubernetes-client_*.deb "$deb/x"
  cp "$deb/x/usr/bin/kubectl" "$dir/bin.tmp/kubectl" || die "kubernetes-client $srcv has no usr/bin/kubectl"
  rm -rf "$deb" "$dir/bin"
  mv "$dir/bin.tmp" "$dir/bin"
  printf 'source=%s=%s\ngo=%s=%s (%s)\nscript=%s\nfetch_s=%d\nbuild_s=%d\n' \
    "$SRC_PKG" "$srcv" "$GO_PKG" "$gov" "$($goroot/bin/go version)" \
    "$(sha256sum "$SCRIPT" | cut -c1-16)" $((t1 - t0)) $((t2 - t1)) >"$dir/BUILT"
  say "built in $((t2 - t1)) s (fetch $((t1 - t0)) s); cached in $dir"
  [ -z "${HUTCH_K8S_DROP_TREE:-}" ] || rm -rf "$tree_root"
  printf '%s\n' "$dir/bin"
}

cmd_build "$@"
