#!/usr/bin/env bash
# deploy/ansible/: the playbook and role.
#  1. ansible-playbook --syntax-check of site.yml with the example inventory;
#  2. ansible-lint (profile production, offline) over deploy/ansible/;
#  3. the role against localhost twice, everything written below a scratch root and package and
#     service management off (nothing is installed or enabled on this machine): the first run
#     changes files, the second changes nothing; agent.env sets the server link, and the built
#     agent starts with the written files as the unit runs it.
#   ansible_test.sh SOURCE_DIR [AGENT_BINARY]
set -euo pipefail
src="${1:?usage: ansible_test.sh SOURCE_DIR [AGENT_BINARY]}"
agent="${2:-}"
dir="$src/deploy/ansible"
for tool in ansible-playbook ansible-lint; do
  command -v "$tool" >/dev/null || { echo "FAIL: $tool not installed (scripts/install-deps)" >&2; exit 1; }
done
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# Keep Ansible's own state (tmp, facts, collections cache) in the temp dir.
export HOME="$tmp/home" ANSIBLE_LOCAL_TEMP="$tmp/ansible-tmp" ANSIBLE_REMOTE_TEMP="$tmp/ansible-tmp"
export ANSIBLE_CONFIG="$dir/ansible.cfg" ANSIBLE_NOCOLOR=1 ANSIBLE_RETRY_FILES_ENABLED=0
mkdir -p "$HOME"
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

(cd "$dir" && ansible-playbook --syntax-check -i inventory/hosts.yml site.yml) > "$tmp/syntax.out" 2>&1 ||
  { cat "$tmp/syntax.out" >&2; fail "ansible-playbook --syntax-check site.yml"; }

(cd "$dir" && ansible-lint --offline --profile production -q .) > "$tmp/lint.out" 2>&1 ||
  { cat "$tmp/lint.out" >&2; fail "ansible-lint"; }

root="$tmp/root"
mkdir -p "$root" "$tmp/files"
printf 'test CA\n' > "$tmp/files/ca.pem"
printf 'test certificate\n' > "$tmp/files/agent.pem"
printf 'test key\n' > "$tmp/files/agent.key"
cat > "$tmp/local.yml" <<YAML
---
- name: rxfleet_agent into a scratch root
  hosts: localhost
  connection: local
  gather_facts: false
  vars:
    rxfleet_agent_root: "$root"
    rxfleet_agent_manage_package: false
    rxfleet_agent_manage_service: false
    rxfleet_agent_owner: "$(id -un)"
    rxfleet_agent_group: "$(id -gn)"
    rxfleet_agent_server: "fleet.example.net:7443"
    rxfleet_agent_labels: {site: lab1, rack: "7"}
    rxfleet_agent_tls_ca_src: "$tmp/files/ca.pem"
    rxfleet_agent_tls_cert_src: "$tmp/files/agent.pem"
    rxfleet_agent_tls_key_src: "$tmp/files/agent.key"
  roles:
    - role: "$dir/roles/rxfleet_agent"
YAML
run() {
  ansible-playbook -i localhost, "$tmp/local.yml" > "$tmp/run$1.out" 2>&1 ||
    { cat "$tmp/run$1.out" >&2; fail "role run $1 failed"; return 0; }
  sed -n 's/^localhost *: .*changed=\([0-9]*\).*failed=\([0-9]*\).*/\1 \2/p' "$tmp/run$1.out"
}
first="$(run 1)"
second="$(run 2)"
if ! [ "${first%% *}" -gt 0 ] 2>/dev/null; then fail "first run changed nothing (${first:-no recap})"; fi
[ "$second" = "0 0" ] || { cat "$tmp/run2.out" >&2; fail "second run is not idempotent (changed, failed: ${second:-no recap})"; }

for f in etc/rxfleet/agent.yaml etc/rxfleet/agent.env etc/rxfleet/tls/ca.pem etc/rxfleet/tls/agent.pem \
         etc/rxfleet/tls/agent.key; do
  [ -f "$root/$f" ] || fail "the role did not write /$f"
done
if [ -f "$root/etc/rxfleet/tls/agent.key" ]; then
  mode="$(stat -c %a "$root/etc/rxfleet/tls/agent.key")"
  [ "$mode" = 640 ] || fail "agent.key has mode $mode, expected 640"
fi
grep -qx 'RXFLEET_AGENT_OPTS="--server fleet.example.net:7443 --tls-ca /etc/rxfleet/tls/ca.pem --tls-cert /etc/rxfleet/tls/agent.pem --tls-key /etc/rxfleet/tls/agent.key"' "$root/etc/rxfleet/agent.env" ||
  fail "agent.env does not set the server link: $(grep OPTS "$root/etc/rxfleet/agent.env" || true)"
# The unit's command line with the written files (rxfleet-agent --config agent.yaml
# $RXFLEET_AGENT_OPTS), paths and port redirected to the temp dir: the agent must start in the
# configured mode (its server link keeps retrying the example address) and stop on SIGTERM.
if [ -n "$agent" ] && [ -x "$agent" ] && [ -f "$root/etc/rxfleet/agent.env" ]; then
  mkdir -p "$tmp/sys" "$tmp/proc" "$tmp/policies.d" "$tmp/state"
  opts="$(sed -n 's/^RXFLEET_AGENT_OPTS="\(.*\)"$/\1/p' "$root/etc/rxfleet/agent.env")"
  : > "$tmp/agent.out"
  # shellcheck disable=SC2086 # split like systemd splits an unquoted $VAR
  "$agent" --config "$root/etc/rxfleet/agent.yaml" $opts --sysfs-root "$tmp/sys" \
    --procfs-root "$tmp/proc" --policy-file "$tmp/policies.d" --state-dir "$tmp/state" \
    --status-socket "$tmp/agent.sock" --metrics-address 127.0.0.1:0 > "$tmp/agent.out" 2>&1 &
  pid=$!
  up=false
  for _ in $(seq 1 300); do
    if grep -q 'metrics endpoint on http://127.0.0.1:' "$tmp/agent.out"; then up=true; break; fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -TERM "$pid" 2>/dev/null || true
  rc=0
  wait "$pid" || rc=$?
  if [ "$up" != true ] || [ "$rc" -ne 0 ]; then
    cat "$tmp/agent.out" >&2
    fail "rxfleet-agent with the written agent.yaml and agent.env did not start and stop cleanly (exit $rc)"
  fi
fi

if [ "$failures" -ne 0 ]; then
  echo "ansible: $failures failure(s)" >&2
  exit 1
fi
echo "ansible: syntax check and ansible-lint pass; role idempotent (first run changed ${first%% *}, second 0)"
