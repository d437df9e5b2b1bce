#!/usr/bin/env bash
# The packaged agent configuration works with the built agent: the command line of
# rxfleet-agent.service (--config /etc/rxfleet/agent.yaml $RXFLEET_AGENT_OPTS from agent.env)
# is accepted, the agent starts in the configured mode, serves its metrics and status socket,
# and stops cleanly on SIGTERM (what systemctl stop sends). Paths that would touch this
# machine (sysfs, procfs, state, socket, port) are redirected to a temp dir and port 0.
#   agent_config_test.sh SOURCE_DIR AGENT_BINARY
set -euo pipefail
src="${1:?usage: agent_config_test.sh SOURCE_DIR AGENT_BINARY}"
agent="${2:-}"
if [ -z "$agent" ] || [ ! -x "$agent" ]; then
  echo "SKIP: rxfleet-agent is not built in this tree (${agent:-no target})"
  exit 77
fi
tmp="$(mktemp -d)"
pid=""
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
mkdir -p "$tmp/sys" "$tmp/proc" "$tmp/policies.d" "$tmp/state"

unit="$src/deploy/systemd/rxfleet-agent.service"
exec_start="$(sed -n 's/^ExecStart=//p' "$unit")"
[ "$exec_start" = '/usr/bin/rxfleet-agent --config /etc/rxfleet/agent.yaml $RXFLEET_AGENT_OPTS' ] ||
  { echo "FAIL: unexpected ExecStart in $unit: $exec_start" >&2; exit 1; }
# The environment file as systemd reads it (KEY="value" lines, comments).
RXFLEET_AGENT_OPTS="$(sed -n 's/^RXFLEET_AGENT_OPTS="\(.*\)"$/\1/p' "$src/deploy/config/agent.env")"
# The packaged default sets no mode flag: the agent runs its loop by default.
grep -q '^RXFLEET_AGENT_OPTS=' "$src/deploy/config/agent.env" ||
  { echo "FAIL: agent.env sets no RXFLEET_AGENT_OPTS" >&2; exit 1; }

# The output file exists before the background job opens it: the wait loop reads it at once.
: > "$tmp/out"
# shellcheck disable=SC2086 # split like systemd splits an unquoted $VAR
"$agent" --config "$src/deploy/config/agent.yaml" $RXFLEET_AGENT_OPTS \
  --policy-file "$tmp/policies.d" --sysfs-root "$tmp/sys" --procfs-root "$tmp/proc" \
  --state-dir "$tmp/state" --status-socket "$tmp/agent.sock" --metrics-address 127.0.0.1:0 \
  > "$tmp/out" 2>&1 &
pid=$!
# Wait (bounded, 30 s: CI machines may be busy) for both endpoints.
port=""
for _ in $(seq 1 300); do
  port="$(sed -n 's|.*metrics endpoint on http://127.0.0.1:\([0-9]*\)/metrics.*|\1|p' "$tmp/out")"
  if [ -n "$port" ] && [ -S "$tmp/agent.sock" ]; then break; fi
  if ! kill -0 "$pid" 2>/dev/null; then break; fi
  sleep 0.1
done
fail=0
if [ -z "$port" ] || [ ! -S "$tmp/agent.sock" ]; then
  echo "FAIL: the agent did not come up with the packaged configuration:" >&2
  cat "$tmp/out" >&2
  fail=1
else
  mode="$(stat -c %a "$tmp/agent.sock")"
  [ "$mode" = 660 ] || { echo "FAIL: status socket mode $mode, expected 660 (group rxfleet)" >&2; fail=1; }
  if command -v curl >/dev/null 2>&1; then
    curl -sf "http://127.0.0.1:$port/metrics" | grep '^# TYPE rxfleet_' >/dev/null ||
      { echo "FAIL: no rxfleet metrics on port $port" >&2; fail=1; }
  fi
fi
kill -TERM "$pid" 2>/dev/null || true
rc=0
wait "$pid" || rc=$?
pid=""
if [ "$rc" -ne 0 ]; then
  echo "FAIL: the agent exited with $rc after SIGTERM" >&2
  cat "$tmp/out" >&2
  fail=1
fi
[ "$fail" -eq 0 ] || exit 1
echo "agent config: agent.yaml + agent.env ($RXFLEET_AGENT_OPTS) accepted, endpoints up, clean stop"
