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
