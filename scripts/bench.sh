#!/usr/bin/env bash
# Measures autox against the `helm upgrade --install` baseline on the local
# control plane and prints a markdown table (see BENCHMARKS.md).
#
#   scripts/bench.sh                      200 triggers × 2 releases
#   scripts/bench.sh --triggers 1000      the 1,000-trigger run
#   scripts/bench.sh --selector --triggers 1000
#                                         one selector spec, 1,000 objects × 1 release
#   scripts/bench.sh --baseline-sample 200 --triggers 1000
#                                         time the baseline on 200 releases only
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
exec go run ./scripts/bench "$@"
