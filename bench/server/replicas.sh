#!/usr/bin/env bash
# Replica fan-out benchmark: for each AGENTS count, in one invocation, three configurations on
# fresh databases: (sqlite) one rxfleet-server on an SQLite file, (postgresql) one on a
# PostgreSQL database, (replicas) three replicas on one PostgreSQL database (distinct
# --replica-id). rxfleet-loadgen spreads AGENTS protocol-level agents over the servers (agent i
# on server i % n, one TCP connection per agent unless --channels), applies CHANGES policy
# changes through the first server and times each from the ApplyPolicy call until every agent
# on every server ACKed. PostgreSQL is a throwaway cluster of its own
# (tests/support/postgres-fixture: Unix socket only, fsync off), removed on exit with every
# process started. Prints one table row per run and configuration; the loadgen's JSON and log
# and the servers' logs go to OUT_DIR (default: a temporary directory, removed).
#
#   bench/server/replicas.sh [--build-dir build/release] [--changes 5] [--debounce 100ms]
#                            [--channels 0] [--configs "sqlite postgresql replicas"]
#                            [--server-args "ARGS"] [--out DIR] [AGENTS ...]
# Default runs: 300 3000. --channels 0 = one connection per agent (else that many connections
# over all servers). --config-poll-interval stays at its default (2 s): replicas other than the
# first are woken by NOTIFY. p50/p99 are over the changes (nearest rank: with 5 changes p99 is
# the slowest) of the time from the ApplyPolicy call until the last agent ACKed. RSS is the sum
# over the configuration's servers with the agents connected.
set -euo pipefail

build_dir=build/release
changes=5
debounce=100ms
channels=0
configs="sqlite postgresql replicas"
server_args=
out_dir=
runs=()
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build_dir=$2; shift 2 ;;
    --changes) changes=$2; shift 2 ;;
    --debounce) debounce=$2; shift 2 ;;
    --channels) channels=$2; shift 2 ;;
    --configs) configs=$2; shift 2 ;;
    --server-args) server_args=$2; shift 2 ;;
    --out) out_dir=$2; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) runs+=("$1"); shift ;;
  esac
done
[ ${#runs[@]} -gt 0 ] || runs=(300 3000)

here=$(cd "$(dirname "$0")" && pwd)
fixture="$here/../../tests/support/postgres-fixture"
server_bin="$build_dir/server/rxfleet-server"
loadgen_bin="$build_dir/bench/server/rxfleet-loadgen"
for f in "$server_bin" "$loadgen_bin"; do
  [ -x "$f" ] || { echo "replicas.sh: missing $f (cmake --build $build_dir --target rxfleet-server rxfleet-loadgen)" >&2; exit 2; }
done
command -v createdb >/dev/null || { echo "replicas.sh: createdb not found (postgresql-client)" >&2; exit 2; }

tmp=$(mktemp -d)
# The cluster's directory must be reachable by the `postgres` user when running as root.
pg_dir=$(mktemp -d /tmp/rxfleet-pg.XXXXXX)
[ -n "$out_dir" ] || out_dir=$tmp/out
mkdir -p "$out_dir"
server_pids=()
pg_started=
stop_servers() {
  local pid
  for pid in "${server_pids[@]}"; do
    kill -TERM "$pid" 2>/dev/null || true
  done
  for pid in "${server_pids[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  server_pids=()
}
cleanup() {
  stop_servers
  if [ -n "$pg_started" ]; then "$fixture" stop "$pg_dir" || true; fi
  rm -rf "$tmp" "$pg_dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Every process needs one descriptor per connection: raise the soft limit to the hard one.
ulimit -n "$(ulimit -Hn)"

pg_started=1
"$fixture" start "$pg_dir" >/dev/null
pg_user=rxfleet
pg_port=5432
pg_db=0
uri=
addresses=()

# Starts one rxfleet-server on database $1 with log $2 (more arguments go to the server);
# appends its PID to server_pids and its address to addresses.
start_server() {
  local db=$1 log=$2 port=
  shift 2
  : >"$log"
  # shellcheck disable=SC2086  # --server-args is a list of arguments
  "$server_bin" --insecure --listen 127.0.0.1:0 --db "$db" --http-listen none \
    --push-debounce "$debounce" "$@" $server_args >/dev/null 2>"$log" &
  server_pids+=($!)
  for _ in $(seq 150); do
    port=$(sed -n 's/.*(port \([0-9]*\),.*/\1/p' "$log" | head -n1)
    [ -n "$port" ] && break
    sleep 0.1
  done
  [ -n "$port" ] || { echo "replicas.sh: rxfleet-server did not start:" >&2; cat "$log" >&2; exit 1; }
  addresses+=("127.0.0.1:$port")
}

# Creates a fresh PostgreSQL database and sets uri to it.
new_pg_db() {
  pg_db=$((pg_db + 1))
  local name="bench_$pg_db"
  createdb -h "$pg_dir" -p "$pg_port" -U "$pg_user" "$name"
  uri="postgresql:///$name?host=$pg_dir&port=$pg_port&user=$pg_user"
}

echo "# $(date -u +%FT%TZ) $(nproc) cores, $(uname -r), fd limit $(ulimit -n), debounce $debounce, config-poll-interval default, $("$server_bin" --version 2>/dev/null | head -n1), PostgreSQL $(pg_config --version 2>/dev/null | cut -d' ' -f2), load average $(cut -d' ' -f1-3 /proc/loadavg)"
[ -z "$server_args" ] || echo "# rxfleet-server $server_args"
printf '| agents | servers | backend | agents per server | connect s | server RSS MiB (sum) | change->all ACKed p50 / p99 ms | load avg |\n'
printf '|---|---|---|---|---|---|---|---|\n'
for agents in "${runs[@]}"; do
  for config in $configs; do
    tag="$config-$agents"
    addresses=()
    case "$config" in
      sqlite)
        start_server "$tmp/$tag.db" "$out_dir/server-$tag.log" ;;
      postgresql)
        new_pg_db
        start_server "$uri" "$out_dir/server-$tag.log" ;;
      replicas)
        new_pg_db
        for r in 1 2 3; do
          start_server "$uri" "$out_dir/server-$tag-r$r.log" --replica-id "bench-r$r"
        done ;;
      *) echo "replicas.sh: unknown configuration '$config' (sqlite, postgresql, replicas)" >&2; exit 2 ;;
    esac
    backend=sqlite
    [ "$config" = sqlite ] || backend=postgresql
    json="$out_dir/loadgen-$tag.json"
    servers_csv=$(IFS=,; echo "${addresses[*]}")
    pids_csv=$(IFS=,; echo "${server_pids[*]}")
    "$loadgen_bin" --server "$servers_csv" --agents "$agents" --channels "$channels" \
      --changes "$changes" --server-pid "$pids_csv" >"$json" 2>"$out_dir/loadgen-$tag.log" \
      || echo "replicas.sh: loadgen reported failures for $tag (see $out_dir)" >&2
    load=$(cut -d' ' -f1 /proc/loadavg)
    stop_servers
    python3 - "$json" "${#addresses[@]}" "$backend" "$load" <<'PY'
import json, math, sys
s = json.load(open(sys.argv[1]))
alls = sorted(c["all_ms"] for c in s["changes"])
def rank(p):
    return alls[max(0, math.ceil(p * len(alls)) - 1)] if alls else 0
per = s.get("server_agents", [s["agents"]])
print("| {:,} | {} | {} | {} | {:.1f} | {:.1f} | {:.0f} / {:.0f} | {} |".format(
    s["agents"], sys.argv[2], sys.argv[3], " + ".join("{:,}".format(n) for n in per),
    s["connect_seconds"], s["server_rss_connected_kib"] / 1024, rank(0.5), rank(0.99),
    sys.argv[4]))
PY
  done
done
