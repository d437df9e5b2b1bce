# shellcheck shell=bash
# Sourced by the deploy tests. check_metric_names SOURCE_DIR FILE...: every rxfleet_* metric
# name used in FILEs (histogram suffixes _bucket/_sum/_count stripped, recording-rule names of
# the form level:metric:ops ignored) must be documented in docs/METRICS.md or docs/SERVER.md.
# Prints each unknown name; returns the number of unknown names (0 = all documented).
check_metric_names() {
  local src="$1"
  shift
  local docs=()
  for d in "$src/docs/METRICS.md" "$src/docs/SERVER.md"; do
    [ -f "$d" ] && docs+=("$d")
  done
  local unknown=0 name base
  # Names preceded by ':' belong to recording rules (instance_adapter:rxfleet_...:rate1m).
  for name in $(grep -ohE '(^|[^:a-z_])rxfleet_[a-z0-9_]+' "$@" | sed -E 's/^[^r]//' | sort -u); do
    base="$name"
    case "$base" in
      *_bucket) base="${base%_bucket}" ;;
      *_sum) base="${base%_sum}" ;;
      *_count) base="${base%_count}" ;;
    esac
    if ! grep -qw -- "$base" "${docs[@]}" 2>/dev/null; then
      echo "undocumented metric: $name (not in docs/METRICS.md or docs/SERVER.md)" >&2
      unknown=$((unknown + 1))
    fi
  done
  return "$unknown"
}
