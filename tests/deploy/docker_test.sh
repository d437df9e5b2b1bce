#!/usr/bin/env bash
# deploy/docker/: the compose stack's files.
#   docker_test.sh SOURCE_DIR files    compose's Prometheus and Grafana files are the deployment's
#                                      own with only the service addresses changed; every file
#                                      compose.yaml mounts and the Dockerfile copies exists;
#                                      promtool accepts the Prometheus configuration.
#   docker_test.sh SOURCE_DIR compose  `docker compose config` (or docker-compose's) validates
#                                      compose.yaml; exit 77 (skipped) when neither exists.
# No image is built here: building needs network access to Debian's and Docker's registries.
set -euo pipefail
src="${1:?usage: docker_test.sh SOURCE_DIR files|compose}"
mode="${2:?usage: docker_test.sh SOURCE_DIR files|compose}"
dir="$src/deploy/docker"
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

case "$mode" in
  compose)
    # The compose plugin when docker has it, else Debian's docker-compose (scripts/install-deps).
    if command -v docker >/dev/null && docker compose version >/dev/null 2>&1; then
      compose=(docker compose)
    elif command -v docker-compose >/dev/null; then
      compose=(docker-compose)
    else
      echo "SKIP: neither docker's compose plugin nor docker-compose is installed"
      exit 77
    fi
    (cd "$dir" && "${compose[@]}" -f compose.yaml config -q)
    echo "${compose[*]} config: compose.yaml valid"
    exit 0
    ;;
  files) ;;
  *) echo "unknown mode $mode" >&2; exit 2 ;;
esac

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# Derived files: the deployment's file with the compose service address, nothing else.
# Comment lines are left out of the comparison (each file says what it is).
strip() { grep -v '^ *#' | sed '/^$/d'; }
if ! diff -u <(sed 's/rxfleet-server\.lan:9478/server:9478/g' "$src/deploy/prometheus/prometheus.yml" | strip) \
     <(strip < "$dir/prometheus.yml") >&2; then
  fail "deploy/docker/prometheus.yml differs from deploy/prometheus/prometheus.yml beyond the server address"
fi
if ! diff -u <(sed 's#url: http://localhost:9090#url: http://prometheus:9090#' \
                   "$src/deploy/grafana/provisioning/datasources/rxfleet.yml" | strip) \
     <(strip < "$dir/grafana-datasource.yml") >&2; then
  fail "deploy/docker/grafana-datasource.yml differs from the provisioned data source beyond its url"
fi
# promtool with the rules where compose mounts them.
mkdir -p "$tmp/rules"
cp "$dir/prometheus.yml" "$tmp/prometheus.yml"
cp "$src"/deploy/prometheus/rules/*.yml "$tmp/rules/"
promtool check config "$tmp/prometheus.yml" >/dev/null || fail "promtool rejects deploy/docker/prometheus.yml"
# Mounted host paths exist (relative to deploy/docker/).
while IFS= read -r path; do
  [ -e "$dir/$path" ] || fail "compose.yaml mounts $path, which does not exist"
done < <(sed -n 's/^ *- \(\.\{1,2\}\/[^:]*\):.*/\1/p' "$dir/compose.yaml")
grep -q 'dockerfile: deploy/docker/Dockerfile' "$dir/compose.yaml" || fail "compose.yaml does not build deploy/docker/Dockerfile"
# The Dockerfile: multi-stage on Debian 12, the project's own scripts, non-root, health check.
df="$dir/Dockerfile"
[ "$(grep -c '^FROM debian:12' "$df")" -eq 2 ] || fail "Dockerfile: expected two debian:12 stages"
grep -q 'scripts/install-deps' "$df" || fail "Dockerfile does not use scripts/install-deps"
grep -q 'cmake --preset release' "$df" || fail "Dockerfile does not build with the release preset"
grep -q '^USER rxfleet' "$df" || fail "Dockerfile does not switch to the rxfleet user"
grep -A2 '^HEALTHCHECK' "$df" | grep -q '/healthz' || fail "Dockerfile has no /healthz HEALTHCHECK"
[ -x "$src/scripts/install-deps" ] || fail "scripts/install-deps missing"
if command -v hadolint >/dev/null; then hadolint "$df" || fail "hadolint"; fi

if [ "$failures" -ne 0 ]; then
  echo "docker files: $failures failure(s)" >&2
  exit 1
fi
echo "docker files: derived configuration matches, mounts exist, Dockerfile checks pass"
