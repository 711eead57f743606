#!/usr/bin/env bash
# Builds the real kube-apiserver and etcd from the Go module proxy (module
# scripts/controlplane) and caches them outside the repository, keyed by their
# versions, so only the first run pays the ~7 minute build.
#
# Prints the directory holding both binaries; tests and the demo pass it to
# controller-runtime's envtest as KUBEBUILDER_ASSETS.
#
#   scripts/controlplane.sh            build if needed, print the directory
#   AUTOX_CACHE_DIR=/x scripts/...     use another cache root
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mod="$here/controlplane"

version_of() { # module path -> version pinned in controlplane/go.mod
  awk -v m="$1" '$1==m && $2 ~ /^v/ {print $2; exit} $1=="require" && $2==m {print $3; exit}' "$mod/go.mod"
}
k8s=$(version_of k8s.io/kubernetes)
etcd=$(version_of go.etcd.io/etcd/server/v3)
[ -n "$k8s" ] && [ -n "$etcd" ] || { echo "controlplane.sh: cannot read versions from $mod/go.mod" >&2; exit 1; }

root=${AUTOX_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/autox}
# Bump build= when the build flags below change, so stale caches are not reused.
build=2
dir="$root/controlplane/kube-apiserver-$k8s-etcd-$etcd-$(go env GOOS)-$(go env GOARCH)-build$build"

if [ ! -x "$dir/kube-apiserver" ] || [ ! -x "$dir/etcd" ]; then
  # Test packages may ask at the same time: one builds, the others wait.
  mkdir -p "$root/controlplane"
  if command -v flock >/dev/null; then
    exec 9>"$root/controlplane/.build.lock"
    flock 9
  fi
fi
if [ ! -x "$dir/kube-apiserver" ] || [ ! -x "$dir/etcd" ]; then
  echo "controlplane.sh: building kube-apiserver $k8s and etcd $etcd into $dir (first time only, several minutes)" >&2
  tmp="$dir.tmp.$$"
  trap 'rm -rf "$tmp"' EXIT
  mkdir -p "$tmp"
  (
    cd "$mod"
    # -trimpath and no VCS stamping keep the build independent of the checkout.
    # The version stamp is what `kubectl version` and Helm's kubeVersion checks read.
    minor=${k8s#v1.}; minor=${minor%%.*}
    vpkg=k8s.io/component-base/version
    CGO_ENABLED=0 go build -trimpath -o "$tmp/kube-apiserver" \
      -ldflags "-X $vpkg.gitVersion=$k8s -X $vpkg.gitMajor=1 -X $vpkg.gitMinor=$minor -X $vpkg.gitTreeState=clean" \
      k8s.io/kubernetes/cmd/kube-apiserver
    CGO_ENABLED=0 go build -trimpath -o "$tmp/etcd" ./etcd
  ) >&2
  rm -rf "$dir"
  mv "$tmp" "$dir"
  trap - EXIT
fi
echo "$dir"
