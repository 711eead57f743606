#!/usr/bin/env bash
# Runs every test of autox: unit tests, integration tests against a real
# kube-apiserver and etcd, and end-to-end tests of the built binary, all with
# the race detector. The first run builds the control plane (several minutes,
# cached under ~/.cache/autox afterwards).
#
#   scripts/test.sh                 everything
#   scripts/test.sh -run TestX ./e2e  extra arguments go to `go test`
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# No build output in git: every clone downloads every tracked file. Test inputs
# under testdata/ may be large; nothing else over 2 MB may be tracked.
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  oversized=$(git ls-files -z | xargs -0 -r stat -c $'%s\t%n' 2>/dev/null |
    awk -F'\t' '$1 > 2*1024*1024 && $2 !~ /^testdata\// {printf "  %s (%d bytes)\n", $2, $1}')
  if [ -n "$oversized" ]; then
    echo "tracked files over 2 MB outside testdata/ (build outputs? remove them with git rm --cached and ignore them):" >&2
    echo "$oversized" >&2
    exit 1
  fi
fi

KUBEBUILDER_ASSETS=$(scripts/controlplane.sh)
export KUBEBUILDER_ASSETS

unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt needed: $unformatted" >&2
  exit 1
fi
go vet ./...
if [ $# -eq 0 ]; then
  set -- ./...
fi
go test -race -count=1 -timeout 45m "$@"
