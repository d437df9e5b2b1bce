#!/usr/bin/env bash
# deploy/haproxy/haproxy.cfg: `haproxy -c` accepts it, with no warning other than the example
# server names not resolving here, and it keeps what docs/DEPLOY.md says of it (TCP mode,
# least connections, keepalive, long timeouts, /healthz checks on the HTTP port).
# Exit 77 (skipped) when haproxy is not installed (scripts/install-deps installs it).
set -euo pipefail
src="${1:?usage: haproxy_test.sh SOURCE_DIR}"
cfg="$src/deploy/haproxy/haproxy.cfg"
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

if ! command -v haproxy >/dev/null; then
  echo "SKIP: haproxy is not installed"
  exit 77
fi

out="$(haproxy -c -f "$cfg" 2>&1)" || { echo "$out" >&2; fail "haproxy -c rejects $cfg"; }
# The servers are the compose services' names, unknown outside compose: HAProxy disables them
# at check time (init-addr none lets it start anyway). Any other warning is a failure.
others="$(grep -F '[WARNING]' <<<"$out" | grep -v 'could not resolve address' || true)"
if [ -n "$others" ]; then
  echo "$others" >&2
  fail "haproxy -c warns about $cfg"
fi

# What docs/DEPLOY.md relies on. Comments are left out.
body="$(sed 's/#.*//' "$cfg")"
need() { grep -Eq "$1" <<<"$body" || fail "haproxy.cfg: no line matching '$1'"; }
need '^ *mode tcp$'
need '^ *balance leastconn$'
need '^ *option tcpka$'
need '^ *timeout tunnel [0-9]+h$'
need '^ *timeout client [0-9]+h$'
need '^ *timeout server [0-9]+h$'
need '^ *option httpchk$'
need '^ *http-check send meth GET uri /healthz'
need '^ *http-check expect status 200$'
need '^ *default-server .*check port 9478'
need '^ *bind :7443$'
[ "$(grep -Ec '^ *server [a-z0-9-]+ [a-z0-9.-]+:7443$' <<<"$body")" -ge 2 ] ||
  fail "haproxy.cfg: fewer than two servers on port 7443"

if [ "$failures" -ne 0 ]; then
  echo "haproxy config: $failures failure(s)" >&2
  exit 1
fi
echo "haproxy config: haproxy -c accepts it; TCP mode, leastconn, /healthz checks on port 9478"
