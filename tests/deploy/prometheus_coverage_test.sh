#!/usr/bin/env bash
# Every alert in deploy/prometheus/rules/ has a promtool unit test (an alert_rule_test naming
# it in deploy/prometheus/tests/), and every rxfleet_* metric the rules and the scrape
# configuration use is documented in docs/METRICS.md or docs/SERVER.md.
#   prometheus_coverage_test.sh SOURCE_DIR
set -euo pipefail
src="${1:?usage: prometheus_coverage_test.sh SOURCE_DIR}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=metric_names.sh
. "$here/metric_names.sh"
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

rules=("$src"/deploy/prometheus/rules/*.yml)
tests=("$src"/deploy/prometheus/tests/*.yml)
alerts="$(sed -n 's/^ *- alert: *\([A-Za-z0-9_]*\).*/\1/p' "${rules[@]}" | sort -u)"
[ -n "$alerts" ] || fail "no alerts found in ${rules[*]}"
tested="$(sed -n 's/^ *alertname: *\([A-Za-z0-9_]*\).*/\1/p' "${tests[@]}" | sort -u)"
for a in $alerts; do
  grep -qx "$a" <<< "$tested" || fail "alert $a has no alert_rule_test in deploy/prometheus/tests/"
done
for a in $tested; do
  grep -qx "$a" <<< "$alerts" || fail "tests name alert $a, which no rule file defines"
done
# Each tested alert must also be seen firing somewhere (a non-empty exp_alerts).
for a in $alerts; do
  if ! awk -v a="$a" '
      $0 ~ "alertname: *" a "$" { inside = 1; next }
      inside && /alertname:|eval_time:/ { inside = 0 }
      inside && /exp_labels:/ { found = 1 }
      END { exit !found }' "${tests[@]}"; then
    fail "alert $a is never expected to fire in the tests"
  fi
done
check_metric_names "$src" "${rules[@]}" "$src/deploy/prometheus/prometheus.yml" ||
  fail "rules or scrape configuration use undocumented metric names"

if [ "$failures" -ne 0 ]; then
  echo "prometheus coverage: $failures failure(s)" >&2
  exit 1
fi
echo "prometheus coverage: $(wc -w <<< "$alerts") alerts, each tested firing; metric names documented"
