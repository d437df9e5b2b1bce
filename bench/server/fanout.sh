#!/usr/bin/env bash
# Server fan-out benchmark: for each "AGENTS:CHANNELS" pair, start a fresh rxfleet-server
# (empty database in a temporary directory, HTTP off), connect AGENTS protocol-level agents over
# CHANNELS TCP connections with rxfleet-loadgen, time CHANGES policy changes until every agent
# ACKed, and read the server's resident memory. Prints one table row per run; the loadgen's
# JSON and log and the server's log (with the fan-out loop time of every push) go to OUT_DIR
# (default: a temporary directory, removed). Everything runs on loopback; every process started
# is stopped.
#
#   bench/server/fanout.sh [--build-dir build/release] [--changes 5] [--debounce 100ms]
#                          [--out DIR] [AGENTS:CHANNELS ...]
# Default runs: 100:100 1000:1000 10000:100.
set -euo pipefail

build_dir=build/release
changes=5
debounce=100ms
out_dir=
runs=()
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build_dir=$2; shift 2 ;;
    --changes) changes=$2; shift 2 ;;
    --debounce) debounce=$2; shift 2 ;;
    --out) out_dir=$2; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) runs+=("$1"); shift ;;
  esac
done
[ ${#runs[@]} -gt 0 ] || runs=(100:100 1000:1000 10000:100)

server_bin="$build_dir/server/rxfleet-server"
loadgen_bin="$build_dir/bench/server/rxfleet-loadgen"
for f in "$server_bin" "$loadgen_bin"; do
  [ -x "$f" ] || { echo "fanout.sh: missing $f (cmake --build $build_dir --target rxfleet-server rxfleet-loadgen)" >&2; exit 2; }
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

echo "# $(date -u +%FT%TZ) $(nproc) cores, $(uname -r), fd limit $(ulimit -n), debounce $debounce"
printf '| agents | connections | connect s | server RSS idle MiB | with agents MiB | KiB/agent | change->all ACKed p50 / max ms |\n'
printf '|---|---|---|---|---|---|---|\n'
for run in "${runs[@]}"; do
  agents=${run%%:*}
  channels=${run##*:}
  db="$tmp/server-$agents-$channels.db"  # a fresh database per run
  port_file="$out_dir/server-$agents-$channels.log"
  : >"$port_file"
  "$server_bin" --insecure --listen 127.0.0.1:0 --db "$db" --http-listen none --push-debounce "$debounce" \
    2>"$port_file" &
  server_pid=$!
  port=
  for _ in $(seq 100); do
    port=$(sed -n 's/.*(port \([0-9]*\),.*/\1/p' "$port_file" | head -n1)
    [ -n "$port" ] && break
    sleep 0.1
  done
  [ -n "$port" ] || { echo "fanout.sh: server did not start:" >&2; cat "$port_file" >&2; exit 1; }
  sleep 1  # idle memory after start-up
  json="$out_dir/loadgen-$agents-$channels.json"
  "$loadgen_bin" --server "127.0.0.1:$port" --agents "$agents" --channels "$channels" \
    --changes "$changes" --server-pid "$server_pid" >"$json" 2>"$out_dir/loadgen-$agents-$channels.log" \
    || echo "fanout.sh: loadgen reported failures for $run (see $out_dir)" >&2
  kill -TERM "$server_pid"; wait "$server_pid" 2>/dev/null || true
  server_pid=
  python3 - "$json" <<'PY'
import json, statistics, sys
s = json.load(open(sys.argv[1]))
alls = [c["all_ms"] for c in s["changes"]]
print("| {:,} | {:,} | {:.1f} | {:.1f} | {:.1f} | {:.1f} | {:.0f} / {:.0f} |".format(
    s["agents"], s["channels"], s["connect_seconds"], s["server_rss_idle_kib"] / 1024,
    s["server_rss_connected_kib"] / 1024, s["server_kib_per_agent"],
    statistics.median(alls) if alls else 0, max(alls) if alls else 0))
PY
done
