#!/usr/bin/env bash
# A local OCI registry for autox's image, on a machine without a container
# engine: the distribution/v3 registry (scripts/registry), built once and
# cached outside the repository like the control plane, with its storage in
# the cache too, so pushed images survive a restart.
#
#   scripts/registry.sh build   build if needed, print the binary's path
#   scripts/registry.sh start   start it (if not running), print host:port
#   scripts/registry.sh stop    stop the one `start` started
#   scripts/registry.sh addr    print host:port
#
#   AUTOX_REGISTRY_ADDR   where it listens (default 127.0.0.1:5001; keep it on loopback: plain HTTP)
#   AUTOX_CACHE_DIR       cache root (default ~/.cache/autox)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$here")
root=${AUTOX_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/autox}/registry
addr=${AUTOX_REGISTRY_ADDR:-127.0.0.1:5001}
pidfile="$root/registry-${addr//[:\/]/_}.pid"

build() {
  local dist src
  dist=$(cd "$repo" && go list -m -f '{{.Version}}' github.com/distribution/distribution/v3)
  # Keyed by the registry's version and the source of the command around it.
  src=$(cat "$here/registry/main.go" "$repo/go.sum" | sha256sum | cut -c1-12)
  local bin="$root/registry-$dist-$src-$(go env GOOS)-$(go env GOARCH)/registry"
  if [ ! -x "$bin" ]; then
    echo "registry.sh: building the registry ($dist) into $(dirname "$bin")" >&2
    mkdir -p "$(dirname "$bin")"
    (cd "$repo" && CGO_ENABLED=0 go build -trimpath -o "$bin.tmp.$$" ./scripts/registry) >&2
    mv "$bin.tmp.$$" "$bin"
  fi
  echo "$bin"
}

# answers: a registry's GET /v2/ answers 200 on addr (bash's /dev/tcp: no curl needed).
answers() {
  local status
  status=$(timeout 2 bash -c 'exec 3<>"/dev/tcp/${1%:*}/${1##*:}" && printf "GET /v2/ HTTP/1.0\r\nHost: %s\r\n\r\n" "$1" >&3 && head -n1 <&3' _ "$addr" 2>/dev/null) || return 1
  [[ $status == "HTTP/1."?" 200"* ]]
}

running_pid() { # the pid `start` recorded, if that process still runs our binary
  [ -f "$pidfile" ] || return 1
  local pid
  pid=$(cat "$pidfile")
  [ -n "$pid" ] && [ -d "/proc/$pid" ] && case "$(readlink "/proc/$pid/exe" 2>/dev/null)" in "$root"/*) echo "$pid" ;; *) return 1 ;; esac
}

case "${1:-}" in
  build) build ;;
  addr) echo "$addr" ;;
  start)
    if answers; then echo "$addr"; exit 0; fi
    bin=$(build)
    mkdir -p "$root/data"
    nohup "$bin" --addr "$addr" --root "$root/data" >"$root/registry.log" 2>&1 </dev/null &
    echo $! >"$pidfile"
    for _ in $(seq 100); do
      if answers; then
        echo "registry.sh: registry on http://$addr (pid $(cat "$pidfile"); stop: scripts/registry.sh stop)" >&2
        echo "$addr"
        exit 0
      fi
      sleep 0.1
    done
    echo "registry.sh: the registry did not answer on $addr; see $root/registry.log" >&2
    exit 1
    ;;
  stop)
    if pid=$(running_pid); then
      kill "$pid"
      rm -f "$pidfile"
      echo "registry.sh: stopped the registry on $addr (pid $pid)" >&2
    else
      echo "registry.sh: no registry started by this script on $addr" >&2
    fi
    ;;
  *)
    sed -n '2,14p' "${BASH_SOURCE[0]}" >&2
    exit 2
    ;;
esac
