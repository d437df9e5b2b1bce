#!/usr/bin/env bash
# Every Grafana dashboard in deploy/grafana/dashboards/ parses as JSON, has unique panel ids,
# uses the provisioned data source, and every PromQL expression of its panels and variables is
# valid: Grafana's variables and macros are replaced by sample values, each expression goes into
# a generated rules file, and `promtool check rules` parses them all. Metric names must be
# documented. Provisioning files must reference the data source uid the dashboards use.
#   grafana_dashboard_test.sh SOURCE_DIR
set -euo pipefail
src="${1:?usage: grafana_dashboard_test.sh SOURCE_DIR}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=metric_names.sh
. "$here/metric_names.sh"
for tool in jq promtool; do
  command -v "$tool" >/dev/null || { echo "FAIL: $tool not installed (scripts/install-deps)" >&2; exit 1; }
done
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

uid="rxfleet-prometheus"
ds_file="$src/deploy/grafana/provisioning/datasources/rxfleet.yml"
grep -q "uid: $uid\$" "$ds_file" || fail "$ds_file does not provision data source uid $uid"
grep -q 'type: prometheus$' "$ds_file" || fail "$ds_file: data source is not of type prometheus"
prov="$src/deploy/grafana/provisioning/dashboards/rxfleet.yml"
grep -q 'path: /var/lib/grafana/dashboards/rxfleet$' "$prov" || fail "$prov: unexpected dashboards path"

shopt -s nullglob
dashboards=("$src"/deploy/grafana/dashboards/*.json)
[ ${#dashboards[@]} -gt 0 ] || fail "no dashboards in deploy/grafana/dashboards"
total=0
for dash in "${dashboards[@]}"; do
  name="$(basename "$dash")"
  if ! jq empty "$dash" 2>"$tmp/jq.err"; then
    fail "$name is not valid JSON: $(cat "$tmp/jq.err")"
    continue
  fi
  [ "$(jq -r '.uid // empty' "$dash")" != "" ] || fail "$name has no uid"
  [ "$(jq -r '.title // empty' "$dash")" != "" ] || fail "$name has no title"
  dup_ids="$(jq -r '[.. | objects | select(has("gridPos")) | .id] | group_by(.) | map(select(length > 1) | .[0]) | .[]' "$dash")"
  [ -z "$dup_ids" ] || fail "$name: duplicate panel ids: $dup_ids"
  missing_grid="$(jq -r '[.panels[] | select(has("gridPos") | not) | .title] | .[]' "$dash")"
  [ -z "$missing_grid" ] || fail "$name: panels without gridPos: $missing_grid"
  bad_ds="$(jq -r --arg uid "$uid" '[.. | objects | select(has("datasource")) | .datasource | select(type == "object") | select(.uid != $uid) | .uid] | unique | .[]' "$dash")"
  [ -z "$bad_ds" ] || fail "$name: data source uids other than $uid: $bad_ds"
  empty_targets="$(jq -r '[.panels[] | select(.type != "row") | select((.targets // []) | length == 0) | .title] | .[]' "$dash")"
  [ -z "$empty_targets" ] || fail "$name: panels without queries: $empty_targets"
  empty_expr="$(jq -r '[.panels[] | (.targets // [])[] | select((.expr // "") == "") | .refId] | .[]' "$dash")"
  [ -z "$empty_expr" ] || fail "$name: targets without expr: $empty_expr"

  # Sample values for the dashboard's variables and Grafana's macros.
  jq -r '.templating.list[]?.name' "$dash" | awk '{ print length($0), $0 }' | sort -rn | cut -d" " -f2- > "$tmp/vars"
  # Panel expressions, then the selectors inside label_values(SELECTOR, label) of variables.
  jq -r '.panels[] | (.targets // [])[] | .expr' "$dash" > "$tmp/exprs"
  jq -r '.templating.list[]? | (.query.query? // .query // "") | select(type == "string")
         | capture("^label_values\\((?<sel>.*), *[a-zA-Z_][a-zA-Z0-9_]*\\)$").sel' "$dash" >> "$tmp/exprs"
  {
    echo "groups:"
    echo "  - name: dashboard"
    echo "    rules:"
  } > "$tmp/rules.yml"
  n=0
  while IFS= read -r expr; do
    n=$((n + 1))
    e="$expr"
    e="${e//\$__rate_interval/5m}"
    e="${e//\$__interval/1m}"
    e="${e//\$__range/1h}"
    while IFS= read -r v; do
      [ -n "$v" ] || continue
      e="${e//\$\{$v\}/.*}"
      e="${e//\$$v/.*}"
    done < "$tmp/vars"
    if [[ "$e" == *'$'* ]]; then
      fail "$name: unknown variable or macro in: $expr"
      continue
    fi
    printf '      - record: dashboard:expr_%d\n        expr: %s\n' "$n" "$(jq -Rn --arg e "$e" '$e')" >> "$tmp/rules.yml"
  done < "$tmp/exprs"
  if [ "$n" -eq 0 ]; then fail "$name: no expressions"; fi
  if ! promtool check rules "$tmp/rules.yml" > "$tmp/promtool.out" 2>&1; then
    cat "$tmp/promtool.out" >&2
    fail "$name: promtool rejects an expression (generated file below)"
    cat -n "$tmp/rules.yml" >&2
  fi
  check_metric_names "$src" "$tmp/exprs" || fail "$name uses undocumented metric names"
  total=$((total + n))
done

if [ "$failures" -ne 0 ]; then
  echo "grafana dashboards: $failures failure(s)" >&2
  exit 1
fi
echo "grafana dashboards: ${#dashboards[@]} dashboard(s), $total PromQL expressions valid"
