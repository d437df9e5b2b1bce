#!/usr/bin/env bash
# The packaged server options work with the built server: RXFLEET_SERVER_OPTS from
# deploy/config/server.env, as rxfleet-server.service passes them, is accepted; the server opens
# its database, serves /healthz and /sd/agents, and stops cleanly on SIGTERM. The listen ports
# and the database path are moved to port 0 and a temp dir so the test touches nothing else.
#   server_config_test.sh SOURCE_DIR SERVER_BINARY
set -euo pipefail
src="${1:?usage: server_config_test.sh SOURCE_DIR SERVER_BINARY}"
server="${2:-}"
if [ -z "$server" ] || [ ! -x "$server" ]; then
  echo "SKIP: rxfleet-server is not built in this tree (${server:-no target})"
  exit 77
fi
tmp="$(mktemp -d)"
pid=""
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT

unit="$src/deploy/systemd/rxfleet-server.service"
[ "$(sed -n 's/^ExecStart=//p' "$unit")" = '/usr/bin/rxfleet-server $RXFLEET_SERVER_OPTS' ] ||
  { echo "FAIL: unexpected ExecStart in $unit" >&2; exit 1; }
opts="$(sed -n 's/^RXFLEET_SERVER_OPTS="\(.*\)"$/\1/p' "$src/deploy/config/server.env")"
[ -n "$opts" ] || { echo "FAIL: server.env sets no RXFLEET_SERVER_OPTS" >&2; exit 1; }
# The database must be where the unit may write (StateDirectory=rxfleet).
[[ " $opts " == *" --db /var/lib/rxfleet/"* ]] ||
  { echo "FAIL: server.env --db must be below /var/lib/rxfleet: $opts" >&2; exit 1; }
# TLS files as /etc/rxfleet/tls/ holds them, from a throwaway CA made with scripts/rxfleet-certs.
[[ " $opts " == *" --tls-cert /etc/rxfleet/tls/"* ]] ||
  { echo "FAIL: server.env must use TLS files from /etc/rxfleet/tls/: $opts" >&2; exit 1; }
"$src/scripts/rxfleet-certs" --dir "$tmp/gen" ca >/dev/null
"$src/scripts/rxfleet-certs" --dir "$tmp/gen" server localhost --ip 127.0.0.1 >/dev/null
mkdir -p "$tmp/tls"
cp "$tmp/gen/ca.crt" "$tmp/tls/ca.crt"
cp "$tmp/gen/server-localhost.crt" "$tmp/tls/server.crt"
cp "$tmp/gen/server-localhost.key" "$tmp/tls/server.key"
test_opts="$(sed -E 's#(--(http-)?listen) [^ ]*:[0-9]+#\1 127.0.0.1:0#g; s#--db /var/lib/rxfleet/#--db '"$tmp"'/#; s#/etc/rxfleet/tls/#'"$tmp"'/tls/#g' <<< "$opts")"

# The output file exists before the background job opens it: the wait loop reads it at once.
: > "$tmp/out"
# shellcheck disable=SC2086 # split like systemd splits an unquoted $VAR
"$server" $test_opts > "$tmp/out" 2>&1 &
pid=$!
http=""
for _ in $(seq 1 100); do
  http="$(sed -n 's/.*HTTP on port \([0-9]*\).*/\1/p' "$tmp/out")"
  if [ -n "$http" ] || ! kill -0 "$pid" 2>/dev/null; then break; fi
  sleep 0.1
done
fail=0
if [ -z "$http" ]; then
  echo "FAIL: the server did not come up with the packaged options ($test_opts):" >&2
  cat "$tmp/out" >&2
  fail=1
else
  [ -f "$tmp/server.db" ] || { echo "FAIL: no database at $tmp/server.db" >&2; fail=1; }
  if command -v curl >/dev/null 2>&1; then
    curl -sf "http://127.0.0.1:$http/healthz" > /dev/null || { echo "FAIL: /healthz" >&2; fail=1; }
    curl -sf "http://127.0.0.1:$http/sd/agents" | grep -q '^\[' ||
      { echo "FAIL: /sd/agents is not a JSON array" >&2; fail=1; }
  fi
fi
kill -TERM "$pid" 2>/dev/null || true
rc=0
wait "$pid" || rc=$?
pid=""
if [ "$rc" -ne 0 ]; then
  echo "FAIL: the server exited with $rc after SIGTERM" >&2
  cat "$tmp/out" >&2
  fail=1
fi
[ "$fail" -eq 0 ] || exit 1
echo "server config: server.env options accepted ($opts), endpoints up, clean stop"
