#!/usr/bin/env bash
# Reconnect storm benchmark: start rxfleet-server (fresh database in a temporary directory),
# connect AGENTS protocol-level agents over CHANNELS TCP connections with rxfleet-loadgen
# (--storm-rounds 1), restart the server with SIGTERM on the same port and database, and report
# how long until every agent is connected and has ACKed again, how many streams were refused
# with a retry hint, and the latency of `rxfleetctl get hosts` run back to back during the storm
# (and three times before the restart, for comparison).
# Extra arguments go to both server starts (e.g. --agent-accept-rate 1000000 to lift the limit).
#
#   bench/server/storm.sh [--build-dir build/release] [--agents 10000] [--channels 10000]
#                         [--out DIR] [-- SERVER FLAGS...]
set -euo pipefail

build_dir=build/release
agents=10000
channels=10000
out_dir=
server_flags=()
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build_dir=$2; shift 2 ;;
    --agents) agents=$2; shift 2 ;;
    --channels) channels=$2; shift 2 ;;
    --out) out_dir=$2; shift 2 ;;
    --) shift; server_flags=("$@"); break ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "storm.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
server_bin="$build_dir/server/rxfleet-server"
loadgen_bin="$build_dir/bench/server/rxfleet-loadgen"
ctl_bin="$build_dir/cli/rxfleetctl"
for f in "$server_bin" "$loadgen_bin" "$ctl_bin"; do
  [ -x "$f" ] || { echo "storm.sh: missing $f" >&2; exit 2; }
done
tmp=$(mktemp -d)
[ -n "$out_dir" ] || out_dir=$tmp/out
mkdir -p "$out_dir"
server_pid=
loadgen_pid=
cleanup() {
  for pid in $loadgen_pid $server_pid; do
    if kill -0 "$pid" 2>/dev/null; then kill -TERM "$pid"; wait "$pid" 2>/dev/null || true; fi
  done
  rm -rf "$tmp"
}
trap cleanup EXIT
ulimit -n "$(ulimit -Hn)"

start_server() {  # $1 = port (0 = any), $2 = log file
  "$server_bin" --insecure --listen "127.0.0.1:$1" --db "$tmp/server.db" \
    --http-listen 127.0.0.1:0 "${server_flags[@]}" 2>"$2" &
  server_pid=$!
  for _ in $(seq 300); do
    if grep -q '(port ' "$2"; then return 0; fi
    sleep 0.1
  done
  echo "storm.sh: server did not start:" >&2; cat "$2" >&2; exit 1
}

start_server 0 "$out_dir/server-1.log"
port=$(sed -n 's/.*(port \([0-9]*\),.*/\1/p' "$out_dir/server-1.log" | head -n1)
"$loadgen_bin" --server "127.0.0.1:$port" --agents "$agents" --channels "$channels" \
  --storm-rounds 1 --timeout 600 --settle 0 >"$out_dir/loadgen.json" 2>"$out_dir/loadgen.log" &
loadgen_pid=$!
until grep -q "agents connected; waiting" "$out_dir/loadgen.log"; do
  kill -0 "$loadgen_pid" 2>/dev/null || { cat "$out_dir/loadgen.log" >&2; exit 1; }
  sleep 0.5
done
echo "# $(date -u +%FT%TZ) $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), $agents agents on $channels connections, server flags: ${server_flags[*]:-(defaults)}"
grep "first bundle" "$out_dir/loadgen.log"
# The API's normal time with every agent connected, for comparison.
for i in 1 2 3; do
  t0=$(date +%s.%N)
  "$ctl_bin" --insecure --server "127.0.0.1:$port" get hosts >/dev/null
  echo "get hosts before the restart: $(echo "$(date +%s.%N) - $t0" | bc) s"
done
kill -TERM "$server_pid"; wait "$server_pid" 2>/dev/null || true
restart=$(date +%s.%N)
start_server "$port" "$out_dir/server-2.log"
echo "server restarted in $(echo "$(date +%s.%N) - $restart" | bc) s"
: >"$out_dir/get-hosts.txt"
while kill -0 "$loadgen_pid" 2>/dev/null && ! grep -q "storm round" "$out_dir/loadgen.log"; do
  t0=$(date +%s.%N)
  if "$ctl_bin" --insecure --server "127.0.0.1:$port" get hosts >/dev/null 2>"$tmp/ctl.err"; then rc=0; else rc=$?; fi
  echo "$(echo "$(date +%s.%N) - $t0" | bc) $rc" >>"$out_dir/get-hosts.txt"
done
wait "$loadgen_pid" || echo "storm.sh: loadgen reported failures (see $out_dir)" >&2
loadgen_pid=
grep "storm round" "$out_dir/loadgen.log" || true
http_port=$(sed -n 's/.*HTTP on port \([0-9]*\),.*/\1/p' "$out_dir/server-2.log" | head -n1)
curl -s "http://127.0.0.1:$http_port/metrics" | grep '^rxfleet_server_streams_refused_total' || true
sort -n "$out_dir/get-hosts.txt" | awk '{t[NR]=$1; if ($2 != 0) bad++} END {
  if (NR == 0) { print "get hosts: no call during the storm"; exit }
  printf "get hosts during the storm: %d calls, %d failed, median %.2f s, max %.2f s\n",
    NR, bad, t[int((NR+1)/2)], t[NR] }'
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
