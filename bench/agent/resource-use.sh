#!/usr/bin/env bash
# Whole-process resource use of rxfleet-agent, for docs/PERFORMANCE.md ("Agent resource use").
#
#  (a) Memory: the agent managing four emulated adapters with traffic (rxfleet-emulate, lab
#      bench/agent/four-adapters.yaml), metrics on and scraped every second; its resident set is
#      read from /proc/PID/status once a second after it has settled. CPU is not measured here:
#      under umockdev a libusb client holding a handle busy-polls the device node, so its CPU
#      figures mean nothing (docs/EMULATOR.md, "USB behaviour").
#  (b) CPU: the agent without emulation (whatever adapters this host has; none on a build host),
#      --standalone with the metrics endpoint on and its 1 s sampler, and
#      prometheus-node-exporter (default collectors) in the same run, both scraped every second
#      by this script. CPU seconds per minute = (utime + stime growth) / elapsed * 60, from
#      /proc/PID/stat over the measured window.
#
# Usage: bench/agent/resource-use.sh [--build-dir DIR] [--duration SECONDS] [--settle SECONDS]
#   --build-dir  where rxfleet-agent and rxfleet-emulate were built (default build/release)
#   --duration   measured window of each part (default 60)
#   --settle     time after start-up before measuring (default 10)
# Needs: bash, procps, iproute2 (ss), prometheus-node-exporter (scripts/install-deps).
# Prints the machine facts and a Markdown table on stdout; progress on stderr.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build_dir="$repo/build/release"
duration=60
settle=10
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build_dir=$(cd "$2" && pwd); shift 2 ;;
    --duration) duration=$2; shift 2 ;;
    --settle) settle=$2; shift 2 ;;
    -h | --help) sed -n '2,23p' "$0"; exit 0 ;;
    *) echo "resource-use: unknown argument $1" >&2; exit 2 ;;
  esac
done

agent="$build_dir/agent/rxfleet-agent"
emulate="$build_dir/tools/emulator/rxfleet-emulate"
node_exporter=$(command -v prometheus-node-exporter || true)
for f in "$agent" "$emulate"; do
  [ -x "$f" ] || { echo "resource-use: $f not built" >&2; exit 2; }
done
[ -n "$node_exporter" ] || { echo "resource-use: prometheus-node-exporter missing (scripts/install-deps)" >&2; exit 2; }

work=$(mktemp -d "${TMPDIR:-/tmp}/rxfleet-resource-use.XXXXXX")
started=()  # PIDs this script started; stopped on every exit path
cleanup() {
  for pid in "${started[@]}"; do
    kill -TERM "$pid" 2>/dev/null || true
  done
  for pid in "${started[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log() { echo "resource-use: $*" >&2; }
clk_tck=$(getconf CLK_TCK)
page_kib=$(($(getconf PAGESIZE) / 1024))

now_ns() { date +%s%N; }

# Sleeps until absolute time $1 (ns since the epoch); returns at once if it has passed.
sleep_until() {
  local left=$(($1 - $(now_ns)))
  if [ "$left" -gt 0 ]; then
    sleep "$(printf '%d.%09d' $((left / 1000000000)) $((left % 1000000000)))"
  fi
}

# GET http://127.0.0.1:$1/metrics over bash's /dev/tcp; the body goes to stdout.
scrape() {
  local fd
  exec {fd}<>"/dev/tcp/127.0.0.1/$1" || return 1
  printf 'GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&"$fd"
  sed '1,/^\r$/d' <&"$fd"
  exec {fd}>&-
}

# utime + stime of PID $1, in clock ticks (fields 14 and 15 of /proc/PID/stat).
cpu_ticks() {
  local stat
  stat=$(<"/proc/$1/stat")
  stat=${stat##*) }
  # shellcheck disable=SC2086
  set -- $stat
  echo $((${12} + ${13}))
}

rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
hwm_kib() { awk '/^VmHWM:/ {print $2}' "/proc/$1/status"; }
mib() { awk -v k="$1" 'BEGIN {printf "%.1f", k / 1024}'; }

# Waits (at most 60 s) for the agent's "metrics endpoint on http://HOST:PORT/metrics" in log $1.
metrics_port() {
  local deadline=$(($(now_ns) + 60000000000)) port
  while [ "$(now_ns)" -lt "$deadline" ]; do
    port=$(sed -n 's|.*metrics endpoint on http://[^ ]*:\([0-9][0-9]*\)/metrics.*|\1|p' "$1" 2>/dev/null | head -n1)
    if [ -n "$port" ]; then
      echo "$port"
      return 0
    fi
    sleep 0.1
  done
  log "no metrics endpoint in $1:"
  cat "$1" >&2
  return 1
}

# A TCP port on 127.0.0.1 nobody listens on.
free_port() {
  local port
  for _ in $(seq 1 100); do
    port=$((20000 + RANDOM % 20000))
    if ! ss -Htln "sport = :$port" | grep -q .; then
      echo "$port"
      return 0
    fi
  done
  return 1
}

# The PID of the rxfleet-agent below the emulator PID $1 (its direct child).
agent_below() {
  local deadline=$(($(now_ns) + 30000000000)) pid
  while [ "$(now_ns)" -lt "$deadline" ]; do
    for pid in $(pgrep -P "$1" || true); do
      if [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "rxfleet-agent" ]; then
        echo "$pid"
        return 0
      fi
    done
    sleep 0.1
  done
  return 1
}

median() { sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : int((v[NR / 2] + v[NR / 2 + 1]) / 2)}'; }

load_start=$(cut -d' ' -f1-3 /proc/loadavg)

# ---- (a) memory with four emulated adapters ----
log "(a) agent under rxfleet-emulate with 4 adapters: ${settle}s settle + ${duration}s"
mkdir -p "$work/a/tmp"
TMPDIR="$work/a/tmp" "$emulate" --lab "$repo/bench/agent/four-adapters.yaml" \
  --timeout $((settle + duration + 60)) -- \
  "$agent" --standalone --metrics-address 127.0.0.1:0 --status-socket none \
  --state-dir "$work/a/state" 2>"$work/a/agent.log" &
emu_pid=$!
started+=("$emu_pid")
a_port=$(metrics_port "$work/a/agent.log")
a_pid=$(agent_below "$emu_pid") || { log "agent process not found below the emulator"; exit 1; }
start=$(now_ns)
for ((i = 1; i <= settle; i++)); do
  scrape "$a_port" >/dev/null
  sleep_until $((start + i * 1000000000))
done
: >"$work/a/rss"
start=$(now_ns)
for ((i = 1; i <= duration; i++)); do
  scrape "$a_port" >"$work/a/last.txt"
  rss_kib "$a_pid" >>"$work/a/rss"
  sleep_until $((start + i * 1000000000))
done
a_applied=$(grep -c '^rxfleet_adapter_state{.*state="applied"} 1' "$work/a/last.txt" || true)
a_rss_median=$(median <"$work/a/rss")
a_rss_max=$(sort -n "$work/a/rss" | tail -n1)
a_hwm=$(hwm_kib "$a_pid")
a_bytes=$(wc -c <"$work/a/last.txt")
kill -TERM "$emu_pid"
a_exit=0
wait "$emu_pid" || a_exit=$?
started=()
[ "$a_exit" -eq 0 ] || { log "(a) the agent exited with $a_exit"; cat "$work/a/agent.log" >&2; exit 1; }
[ "$a_applied" -eq 4 ] || log "(a) warning: $a_applied of 4 adapters applied at the end"

# ---- (b) CPU without emulation, beside node_exporter ----
log "(b) agent without emulation and prometheus-node-exporter, scraped every 1 s: ${settle}s settle + ${duration}s"
mkdir -p "$work/b"
"$agent" --standalone --metrics-address 127.0.0.1:0 --status-socket none \
  --state-dir "$work/b/state" 2>"$work/b/agent.log" &
b_pid=$!
started+=("$b_pid")
b_port=$(metrics_port "$work/b/agent.log")
ne_port=$(free_port) || { log "no free port for node_exporter"; exit 1; }
"$node_exporter" --web.listen-address="127.0.0.1:$ne_port" 2>"$work/b/node-exporter.log" &
ne_pid=$!
started+=("$ne_pid")
deadline=$(($(now_ns) + 30000000000))
until scrape "$ne_port" >/dev/null 2>&1; do
  [ "$(now_ns)" -lt "$deadline" ] || { log "node_exporter never answered"; cat "$work/b/node-exporter.log" >&2; exit 1; }
  sleep 0.1
done
start=$(now_ns)
for ((i = 1; i <= settle; i++)); do
  scrape "$b_port" >/dev/null
  scrape "$ne_port" >/dev/null
  sleep_until $((start + i * 1000000000))
done
b_ticks0=$(cpu_ticks "$b_pid")
ne_ticks0=$(cpu_ticks "$ne_pid")
t0=$(now_ns)
for ((i = 1; i <= duration; i++)); do
  scrape "$b_port" >"$work/b/agent.txt"
  scrape "$ne_port" >"$work/b/node-exporter.txt"
  sleep_until $((t0 + i * 1000000000))
done
b_ticks1=$(cpu_ticks "$b_pid")
ne_ticks1=$(cpu_ticks "$ne_pid")
t1=$(now_ns)
b_rss=$(rss_kib "$b_pid")
ne_rss=$(rss_kib "$ne_pid")
b_adapters=$(grep -c '^rxfleet_adapter_info{' "$work/b/agent.txt" || true)
b_bytes=$(wc -c <"$work/b/agent.txt")
ne_bytes=$(wc -c <"$work/b/node-exporter.txt")
per_minute() {
  awk -v d="$1" -v hz="$clk_tck" -v ns="$((t1 - t0))" 'BEGIN {printf "%.2f", d / hz / (ns / 1e9) * 60}'
}
b_cpu=$(per_minute $((b_ticks1 - b_ticks0)))
ne_cpu=$(per_minute $((ne_ticks1 - ne_ticks0)))
elapsed=$(awk -v ns="$((t1 - t0))" 'BEGIN {printf "%.1f", ns / 1e9}')
kill -TERM "$b_pid" "$ne_pid"
b_exit=0
wait "$b_pid" || b_exit=$?
wait "$ne_pid" || true
started=()
[ "$b_exit" -eq 0 ] || { log "(b) the agent exited with $b_exit"; cat "$work/b/agent.log" >&2; exit 1; }

load_end=$(cut -d' ' -f1-3 /proc/loadavg)
cpu_model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n1)

cat <<EOF
Machine: $(nproc) cores ($cpu_model), Debian $(cat /etc/debian_version 2>/dev/null || echo '?'), kernel $(uname -r); page $page_kib KiB, CLK_TCK $clk_tck
Load average (1/5/15 min): $load_start at start, $load_end at the end
Versions: rxfleet-agent $("$agent" --version | head -n1); $("$node_exporter" --version 2>&1 | head -n1)

| process | setting | adapters | CPU s/min | RSS MiB | exposition bytes |
|---|---|---|---|---|---|
| rxfleet-agent | (a) under rxfleet-emulate, metrics scraped every 1 s | $a_applied applied | n/a (emulated) | $(mib "$a_rss_median") median, $(mib "$a_rss_max") max over ${duration} s (VmHWM $(mib "$a_hwm")) | $a_bytes |
| rxfleet-agent | (b) no emulation, --standalone, sampler 1 s, scraped every 1 s | $b_adapters | $b_cpu | $(mib "$b_rss") | $b_bytes |
| prometheus-node-exporter | (b) default collectors, scraped every 1 s, same run | - | $ne_cpu | $(mib "$ne_rss") | $ne_bytes |

CPU measured over ${elapsed} s after ${settle} s of settling; RSS in (b) at the end of the window.
EOF
