#!/usr/bin/env bash
# `systemd-analyze verify` passes, without a single warning, on both units, and the units keep
# the service contract docs/DEPLOY.md describes (Type=notify + watchdog, restart policy,
# unprivileged user, hardening, directories). verify needs ExecStart's binary to exist, so it
# runs on a copy of each unit whose /usr/bin/rxfleet-* path is rewritten to the built binary.
#   systemd_units_test.sh SOURCE_DIR AGENT_BINARY SERVER_BINARY
# An empty or missing binary path skips that unit's verify (exit 77 if nothing was verified).
set -euo pipefail
src="${1:?usage: systemd_units_test.sh SOURCE_DIR AGENT_BINARY SERVER_BINARY}"
agent_bin="${2:-}"
server_bin="${3:-}"
command -v systemd-analyze >/dev/null || { echo "FAIL: systemd-analyze not installed (package systemd)" >&2; exit 1; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
failures=0
verified=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

# require UNIT LINE...: each LINE must be present verbatim.
require() {
  local unit="$1"
  shift
  for line in "$@"; do
    grep -qxF -- "$line" "$unit" || fail "$(basename "$unit"): missing \"$line\""
  done
}

common=(
  "Type=notify" "NotifyAccess=main" "WatchdogSec=30s" "Restart=on-failure" "RestartSec=5s"
  "User=rxfleet" "Group=rxfleet" "NoNewPrivileges=yes" "ProtectSystem=strict"
  "ProtectHome=yes" "PrivateTmp=yes" "CapabilityBoundingSet=" "AmbientCapabilities="
  "ConfigurationDirectory=rxfleet" "WantedBy=multi-user.target"
)

check_unit() {
  local name="$1" program="$2" binary="$3"
  local unit="$src/deploy/systemd/$name"
  [ -f "$unit" ] || { fail "$unit missing"; return; }
  grep -qE "^ExecStart=/usr/bin/$program( |\$)" "$unit" ||
    fail "$name: ExecStart must start /usr/bin/$program (the packages install it there)"
  if [ -z "$binary" ] || [ ! -x "$binary" ]; then
    echo "SKIP verify of $name: $program is not built in this tree (${binary:-no target})"
    return
  fi
  mkdir -p "$tmp/$program"
  sed "s|^ExecStart=/usr/bin/$program|ExecStart=$binary|" "$unit" > "$tmp/$program/$name"
  if ! (cd "$tmp/$program" && systemd-analyze verify --man=no "$name") > "$tmp/out" 2>&1; then
    cat "$tmp/out" >&2
    fail "systemd-analyze verify $name failed"
  elif [ -s "$tmp/out" ]; then
    cat "$tmp/out" >&2
    fail "systemd-analyze verify $name printed warnings"
  else
    verified=$((verified + 1))
  fi
  # Type=notify: systemd waits for READY=1 (TimeoutStartSec) and kills the service when
  # WATCHDOG=1 stops; a program that never calls sd_notify would fail to start.
  # grep reads all of readelf's output (no -q): with pipefail, an early exit would kill
  # readelf with SIGPIPE and fail the pipeline for a binary that does call sd_notify.
  if ! readelf --dyn-syms -W "$binary" 2>/dev/null | grep -E ' sd_(pid_)?notify(f)?(@|$)' >/dev/null; then
    no_notify+=("$program")
  fi
}
no_notify=()

agent="$src/deploy/systemd/rxfleet-agent.service"
server="$src/deploy/systemd/rxfleet-server.service"
require "$agent" "${common[@]}" "StateDirectory=rxfleet/agent" "RuntimeDirectory=rxfleet" \
  "DevicePolicy=closed" "DeviceAllow=char-usb_device rw" \
  "EnvironmentFile=-/etc/rxfleet/agent.env"
require "$server" "${common[@]}" "StateDirectory=rxfleet" "PrivateDevices=yes" \
  "EnvironmentFile=-/etc/rxfleet/server.env"
# /run/rxfleet belongs to the agent: systemd deletes a RuntimeDirectory when its unit stops.
if grep -q '^RuntimeDirectory=' "$server"; then fail "rxfleet-server.service must not own a RuntimeDirectory"; fi
# The agent must not see a private /dev (it would hide /dev/bus/usb).
if grep -q '^PrivateDevices=yes' "$agent"; then fail "rxfleet-agent.service: PrivateDevices hides /dev/bus/usb"; fi

check_unit rxfleet-agent.service rxfleet-agent "$agent_bin"
check_unit rxfleet-server.service rxfleet-server "$server_bin"

if [ "$failures" -ne 0 ]; then
  echo "systemd units: $failures failure(s)" >&2
  exit 1
fi
if [ "$verified" -eq 0 ]; then
  echo "systemd units: contract checked; verify skipped: neither rxfleet-agent nor rxfleet-server is built"
  exit 77
fi
if [ ${#no_notify[@]} -gt 0 ]; then
  echo "SKIP: verify clean on $verified unit(s), but ${no_notify[*]} does not call sd_notify yet:"
  echo "      a Type=notify unit would time out waiting for READY=1 (docs/DEPLOY.md, systemd units)"
  exit 77
fi
echo "systemd units: contract checked, systemd-analyze verify clean on $verified unit(s), programs notify"
