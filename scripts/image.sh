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
#   scripts/image.sh                                 push to a local registry (scripts/registry.sh start)
#   scripts/image.sh --registry ghcr.io/you          push to ghcr.io/you/autox:<version> (docker login credentials)
#   scripts/image.sh --version v0.1.0 --platforms linux/amd64,linux/arm64 --repository autox
#   scripts/image.sh --insecure --registry host:5000 plain HTTP to a registry not on loopback
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

registry=""
repository=autox
version=""
platforms=linux/amd64,linux/arm64
insecure=()
while [ $# -gt 0 ]; do
  case "$1" in
    --registry) registry=$2; shift 2 ;;
    --repository) repository=$2; shift 2 ;;
    --version) version=$2; shift 2 ;;
    --platforms) platforms=$2; shift 2 ;;
    --insecure) insecure=(--insecure); shift ;;
    -h|--help) sed -n '2,15p' "$0" >&2; exit 0 ;;
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

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
binaries=()
IFS=, read -r -a list <<<"$platforms"
for p in "${list[@]}"; do
  IFS=/ read -r os arch variant <<<"$p"
  echo "image.sh: building autox $version for $p" >&2
  mkdir -p "$out/$os-$arch"
  envs=(CGO_ENABLED=0 "GOOS=$os" "GOARCH=$arch")
  if [ "$arch" = arm ] && [ -n "$variant" ]; then envs+=("GOARM=${variant#v}"); fi
  # -buildid= and -trimpath: no build path or random id in the binary.
  env "${envs[@]}" go build -trimpath \
    -ldflags "-s -w -buildid= -X main.version=$version" -o "$out/$os-$arch/autox" .
  binaries+=(--binary "$p=$out/$os-$arch/autox")
done

go run ./scripts/image "${binaries[@]}" "${insecure[@]}" --version "$version" --revision "$revision" \
  --created "$created" --push "$registry/$repository:$version"
