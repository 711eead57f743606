#!/usr/bin/env bash
# The one-command demo: builds (once) and starts a local kube-apiserver and
# etcd, creates a Deployment, runs autox with testdata/demo/config.yaml and
# shows the experiment release appear, upgrade and disappear.
#
#   scripts/demo.sh          run the sequence and exit
#   scripts/demo.sh --keep   leave the cluster and autox running until Ctrl-C
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
exec go run ./scripts/demo "$@"
