#!/usr/bin/env bash
# Builds Prometheus's promtool from the Go module proxy (module
# scripts/promtool) and caches it outside the repository, keyed by the
# Prometheus version, so only the first run pays the build (a few minutes).
# The tests of manifests/monitoring run it: `promtool check rules` and
# `promtool test rules` on series recorded from a real autox (e2e).
#
# Prints the path of the binary.
#
#   scripts/promtool.sh                build if needed, print the path
#   AUTOX_CACHE_DIR=/x scripts/...     use another cache root
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mod="$here/promtool"
version=$(awk '$1=="github.com/prometheus/prometheus" {print $2; exit}' "$mod/go.mod")
[ -n "$version" ] || { echo "promtool.sh: cannot read the Prometheus version from $mod/go.mod" >&2; exit 1; }

root=${AUTOX_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/autox}
# Bump build= when the build flags below change, so stale caches are not reused.
build=1
dir="$root/promtool/prometheus-$version-$(go env GOOS)-$(go env GOARCH)-build$build"

if [ ! -x "$dir/promtool" ]; then
  # Test packages may ask at the same time: one builds, the others wait.
  mkdir -p "$root/promtool"
  if command -v flock >/dev/null; then
    exec 9>"$root/promtool/.build.lock"
    flock 9
  fi
fi
if [ ! -x "$dir/promtool" ]; then
  echo "promtool.sh: building promtool $version into $dir (first time only, a few minutes)" >&2
  tmp="$dir.tmp.$$"
  trap 'rm -rf "$tmp"' EXIT
  mkdir -p "$tmp"
  # remove_all_sd: promtool's rule checks need no service discovery, and
  # leaving the cloud SDKs out makes the build much shorter.
  (cd "$mod" && CGO_ENABLED=0 go build -trimpath -tags remove_all_sd -o "$tmp/promtool" github.com/prometheus/prometheus/cmd/promtool) >&2
  rm -rf "$dir"
  mv "$tmp" "$dir"
  trap - EXIT
fi
echo "$dir/promtool"
