#!/usr/bin/env bash
# Server fan-out benchmark: for each "AGENTS:CHANNELS" pair and each server under test, start a
# fresh server (rxfleet-server: empty database in a temporary directory, HTTP off; the
# yardstick: bench/server/yardstick.cc, a minimal callback-API fan-out server), connect AGENTS
# protocol-level agents over CHANNELS TCP connections with rxfleet-loadgen, time CHANGES policy
# changes until every agent ACKed, and read the server's resident memory. Prints one table row
# per run and server; the loadgen's JSON and log and the server's log (with the fan-out loop
# time of every push) go to OUT_DIR (default: a temporary directory, removed). Everything runs
# on loopback; every process started is stopped.
#
#   bench/server/fanout.sh [--build-dir build/release] [--changes 5] [--debounce 100ms]
#                          [--servers "yardstick rxfleet"] [--server-args "ARGS"]
#                          [--loadgen-args "ARGS"] [--out DIR] [AGENTS:CHANNELS ...]
# Default runs: 100:100 1000:1000 10000:100. --server-args go to rxfleet-server (e.g.
# "--agent-completion-queues 16"), --loadgen-args to rxfleet-loadgen (e.g. "--grpc-arg
# grpc.http2.bdp_probe=0" for the agents' channels). "server CPU s/change" is the server's
# user + system CPU from the first change to the last, over the changes. p50/p99 are over the
# changes (nearest rank: with 5 changes p99 is the slowest) of the time from the ApplyPolicy
# call until the last agent ACKed.
set -euo pipefail

build_dir=build/release
changes=5
debounce=100ms
out_dir=
servers="yardstick rxfleet"
server_args=
loadgen_args=
runs=()
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build_dir=$2; shift 2 ;;
    --changes) changes=$2; shift 2 ;;
    --debounce) debounce=$2; shift 2 ;;
    --servers) servers=$2; shift 2 ;;
    --server-args) server_args=$2; shift 2 ;;
    --loadgen-args) loadgen_args=$2; shift 2 ;;
    --out) out_dir=$2; shift 2 ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    *) runs+=("$1"); shift ;;
  esac
done
[ ${#runs[@]} -gt 0 ] || runs=(100:100 1000:1000 10000:100)

server_bin="$build_dir/server/rxfleet-server"
yardstick_bin="$build_dir/bench/server/rxfleet-fanout-yardstick"
loadgen_bin="$build_dir/bench/server/rxfleet-loadgen"
for f in "$server_bin" "$yardstick_bin" "$loadgen_bin"; do
  [ -x "$f" ] || { echo "fanout.sh: missing $f (cmake --build $build_dir --target rxfleet-server rxfleet-fanout-yardstick rxfleet-loadgen)" >&2; exit 2; }
done

tmp=$(mktemp -d)
[ -n "$out_dir" ] || out_dir=$tmp/out
mkdir -p "$out_dir"
server_pid=
cleanup() {
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid"; wait "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT

# Both processes need one descriptor per connection: raise the soft limit to the hard one.
ulimit -n "$(ulimit -Hn)"

echo "# $(date -u +%FT%TZ) $(nproc) cores, $(uname -r), fd limit $(ulimit -n), debounce $debounce, load average $(cut -d' ' -f1-3 /proc/loadavg)"
[ -z "$server_args" ] || echo "# rxfleet-server $server_args"
[ -z "$loadgen_args" ] || echo "# rxfleet-loadgen $loadgen_args"
printf '| server | agents | connections | connect s | server RSS idle MiB | with agents MiB | KiB/agent | change->all ACKed p50 / p99 ms | server CPU s/change | load avg |\n'
printf '|---|---|---|---|---|---|---|---|---|---|\n'
for run in "${runs[@]}"; do
  agents=${run%%:*}
  channels=${run##*:}
  for kind in $servers; do
    log="$out_dir/$kind-$agents-$channels.log"
    : >"$log"
    case "$kind" in
      rxfleet)
        # shellcheck disable=SC2086  # --server-args is a list of arguments
        "$server_bin" --insecure --listen 127.0.0.1:0 --db "$tmp/server-$agents-$channels.db" \
          --http-listen none --push-debounce "$debounce" $server_args 2>"$log" & ;;
      yardstick)
        "$yardstick_bin" --listen 127.0.0.1:0 2>"$log" & ;;
      *) echo "fanout.sh: unknown server '$kind' (yardstick or rxfleet)" >&2; exit 2 ;;
    esac
    server_pid=$!
    port=
    for _ in $(seq 100); do
      port=$(sed -n 's/.*(port \([0-9]*\),.*/\1/p' "$log" | head -n1)
      [ -n "$port" ] && break
      sleep 0.1
    done
    [ -n "$port" ] || { echo "fanout.sh: $kind did not start:" >&2; cat "$log" >&2; exit 1; }
    sleep 1  # idle memory after start-up
    json="$out_dir/loadgen-$kind-$agents-$channels.json"
    # shellcheck disable=SC2086  # --loadgen-args is a list of arguments
    "$loadgen_bin" --server "127.0.0.1:$port" --agents "$agents" --channels "$channels" \
      --changes "$changes" --server-pid "$server_pid" $loadgen_args >"$json" \
      2>"$out_dir/loadgen-$kind-$agents-$channels.log" \
      || echo "fanout.sh: loadgen reported failures for $kind $run (see $out_dir)" >&2
    load=$(cut -d' ' -f1 /proc/loadavg)
    kill -TERM "$server_pid"; wait "$server_pid" 2>/dev/null || true
    server_pid=
    python3 - "$json" "$kind" "$load" <<'PY'
import json, math, sys
s = json.load(open(sys.argv[1]))
alls = sorted(c["all_ms"] for c in s["changes"])
def rank(p):
    return alls[max(0, math.ceil(p * len(alls)) - 1)] if alls else 0
print("| {} | {:,} | {:,} | {:.1f} | {:.1f} | {:.1f} | {:.1f} | {:.0f} / {:.0f} | {:.2f} | {} |".format(
    sys.argv[2], s["agents"], s["channels"], s["connect_seconds"], s["server_rss_idle_kib"] / 1024,
    s["server_rss_connected_kib"] / 1024, s["server_kib_per_agent"], rank(0.5), rank(0.99),
    s.get("server_cpu_seconds_per_change", 0), sys.argv[3]))
PY
  done
done
