#!/usr/bin/env bash
# Builds autox's container image without a container engine and pushes it:
# a static binary per platform (CGO off, -trimpath, the version stamped in
# main.version), on a base made by internal/image (users of distroless's
# "nonroot", uid 65532; a CA bundle; /tmp), assembled into one OCI index with
# go-containerregistry (scripts/image). The image is reproducible: the same
# commit and Go version give the same digest (times are the commit's).
# The last line printed is the pushed reference with its digest, to pin in an
# overlay (docs/operations.md "Building the image").
#
# Each binary is cached outside the repository, like the control plane
# (AUTOX_CACHE_DIR, default ~/.cache/autox, under image/), keyed by all that
# determines its bytes: the content of every file git would commit, the Go
# version and build environment, and the build command. So a cached binary is
# the one a build would make, and only a changed tree pays for a build.
#
#   scripts/image.sh                                 push to a local registry (scripts/registry.sh start)
#   scripts/image.sh --registry ghcr.io/you          push to ghcr.io/you/autox:<version> (docker login credentials)
#   scripts/image.sh --version v0.1.0 --platforms linux/amd64,linux/arm64 --repository autox
#   scripts/image.sh --insecure --registry host:5000 plain HTTP to a registry not on loopback
#   scripts/image.sh --no-cache                      build every binary, neither reading nor filling the cache
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

registry=""
repository=autox
version=""
platforms=linux/amd64,linux/arm64
insecure=()
cache=yes
while [ $# -gt 0 ]; do
  case "$1" in
    --registry) registry=$2; shift 2 ;;
    --repository) repository=$2; shift 2 ;;
    --version) version=$2; shift 2 ;;
    --platforms) platforms=$2; shift 2 ;;
    --insecure) insecure=(--insecure); shift ;;
    --no-cache) cache=no; shift ;;
    -h|--help) sed -n '2,22p' "$0" >&2; exit 0 ;;
    *) echo "image.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
if [ -z "$version" ]; then
  version=$(git describe --tags --always --dirty 2>/dev/null || echo dev)
fi
# A reproducible time: SOURCE_DATE_EPOCH if set, else the commit's.
created=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}
if [ -z "$registry" ]; then
  registry=$(scripts/registry.sh start)
fi

# tree_hash: a hash of the content and names of every file git would commit
# (tracked or untracked, not ignored); nothing outside a git work tree, or
# with a Go workspace, whose other modules' sources are not in the tree.
tree_hash() {
  git rev-parse --is-inside-work-tree >/dev/null 2>&1 || return 0
  [ -z "$(go env GOWORK)" ] || return 0
  git ls-files -z -co --exclude-standard | LC_ALL=C sort -zu |
    while IFS= read -r -d '' f; do if [ -f "$f" ]; then printf '%s\0' "$f"; fi; done |
    xargs -0 -r sha256sum | sha256sum | cut -c1-64
}

cache_root=${AUTOX_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/autox}/image
tree=""
if [ "$cache" = yes ]; then
  tree=$(tree_hash)
  [ -n "$tree" ] || echo "image.sh: not a git work tree, or a Go workspace: building without the cache" >&2
fi
if [ -n "$tree" ]; then
  mkdir -p "$cache_root"
  # Several runs may build at once: one builds an entry, the others wait and take it.
  if command -v flock >/dev/null; then
    exec 9>"$cache_root/.lock"
    flock 9
  fi
fi

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
binaries=()
IFS=, read -r -a list <<<"$platforms"
for p in "${list[@]}"; do
  IFS=/ read -r os arch variant <<<"$p"
  mkdir -p "$out/$os-$arch"
  envs=(CGO_ENABLED=0 "GOOS=$os" "GOARCH=$arch")
  if [ "$arch" = arm ] && [ -n "$variant" ]; then envs+=("GOARM=${variant#v}"); fi
  # -buildid= and -trimpath: no build path or random id in the binary.
  build=(go build -trimpath -ldflags "-s -w -buildid= -X main.version=$version")
  bin="$out/$os-$arch/autox"
  binaries+=(--binary "$p=$bin")
  entry=""
  if [ -n "$tree" ]; then
    # The key: the tree, what of the Go environment changes a build's bytes, the command.
    key=$( {
      echo "$tree"
      env "${envs[@]}" go env GOVERSION GOOS GOARCH GOARM GOAMD64 GOARM64 GOEXPERIMENT GOFIPS140 GOFLAGS CGO_ENABLED
      printf '%q ' "${envs[@]}" "${build[@]}"
    } | sha256sum | cut -c1-16)
    entry="$cache_root/autox-$os-$arch${variant:+-$variant}-$key"
    if [ -f "$entry/autox" ]; then
      echo "image.sh: autox $version for $p from the cache ($entry)" >&2
      touch "$entry"
      cp "$entry/autox" "$bin"
      continue
    fi
  fi
  echo "image.sh: building autox $version for $p" >&2
  env "${envs[@]}" "${build[@]}" -o "$bin" .
  if [ -n "$entry" ]; then
    # Whole or not at all: a killed run leaves no half binary under the key.
    rm -rf "$entry.tmp.$$"
    mkdir -p "$entry.tmp.$$"
    cp "$bin" "$entry.tmp.$$/autox"
    rm -rf "$entry"
    mv "$entry.tmp.$$" "$entry"
  fi
done
if [ -n "$tree" ]; then
  # Each changed tree adds a binary per platform: keep the most recently used.
  ls -1dt "$cache_root"/autox-*/ 2>/dev/null | tail -n +9 | xargs -r rm -rf
  exec 9>&-
fi

go run ./scripts/image "${binaries[@]}" "${insecure[@]}" --version "$version" --revision "$revision" \
  --created "$created" --push "$registry/$repository:$version"
