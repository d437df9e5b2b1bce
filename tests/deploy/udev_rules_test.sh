#!/usr/bin/env bash
# The committed udev rules equal the generator's output, grant access to every VID:PID of the
# chip table and to nothing else, and every line has the one strict shape the agent relies on.
# (Debian 12's udevadm has no `verify`; the line check below is stricter than udev's parser.)
#   udev_rules_test.sh SOURCE_DIR
set -euo pipefail
src="${1:?usage: udev_rules_test.sh SOURCE_DIR}"
rules="$src/deploy/udev/70-rxfleet.rules"
tsv="$src/common/chips/rtw89-usb-devices.tsv"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

# 1. Committed file == generated file.
"$src/deploy/udev/generate-rules.sh" "$tsv" > "$tmp/generated.rules"
if ! diff -u "$rules" "$tmp/generated.rules" > "$tmp/diff"; then
  cat "$tmp/diff" >&2
  fail "$rules is stale: run deploy/udev/generate-rules.sh > deploy/udev/70-rxfleet.rules"
fi

# 2. Strict line format: comments, blank lines and one shape of rule; nothing else.
re='^SUBSYSTEM=="usb", ENV\{DEVTYPE\}=="usb_device", ATTR\{idVendor\}=="[0-9a-f]{4}", ATTR\{idProduct\}=="[0-9a-f]{4}", GROUP="rxfleet", MODE="0660"$'
n=0
while IFS= read -r line || [ -n "$line" ]; do
  n=$((n + 1))
  case "$line" in
    '' | '#'*) continue ;;
  esac
  [[ "$line" =~ $re ]] || fail "$rules:$n: unexpected line: $line"
done < "$rules"
if grep -q $'\r' "$rules"; then fail "$rules has CR characters"; fi
if [ -n "$(tail -c1 "$rules")" ]; then fail "$rules does not end with a newline"; fi

# 3. Same set of VID:PIDs as the table, each exactly once.
tail -n +2 "$tsv" | awk -F '\t' 'NF >= 2 { print $1 ":" $2 }' | sort > "$tmp/table.ids"
sed -n 's/.*ATTR{idVendor}=="\([0-9a-f]*\)", ATTR{idProduct}=="\([0-9a-f]*\)".*/\1:\2/p' "$rules" \
  | sort > "$tmp/rules.ids"
rows=$(wc -l < "$tmp/table.ids")
if [ "$rows" -lt 1 ]; then fail "no rows in $tsv"; fi
if ! diff -u "$tmp/table.ids" "$tmp/rules.ids" > "$tmp/ids.diff"; then
  cat "$tmp/ids.diff" >&2
  fail "rules and chip table differ in VID:PIDs"
fi
if [ -n "$(uniq -d "$tmp/rules.ids")" ]; then fail "duplicate rules: $(uniq -d "$tmp/rules.ids")"; fi

# 4. Devices that must stay untouched: a MediaTek card and the Realtek virtual CD-ROM.
for id in 0e8d:7961 0bda:1a2b; do
  if grep -qx "$id" "$tmp/rules.ids"; then fail "$id must not be granted"; fi
done

# 5. The generator rejects malformed and duplicate tables instead of writing partial output.
printf 'vid\tpid\tchip\trx_agg_layout\tsource\n0bda\t8912\trtl8922au\tv3\tx\n0bda\t8912\trtl8922au\tv3\tx\n' > "$tmp/dup.tsv"
if "$src/deploy/udev/generate-rules.sh" "$tmp/dup.tsv" > /dev/null 2>&1; then fail "duplicate row accepted"; fi
printf 'vid\tpid\tchip\trx_agg_layout\tsource\n0BDA\t8912\trtl8922au\tv3\tx\n' > "$tmp/bad.tsv"
if "$src/deploy/udev/generate-rules.sh" "$tmp/bad.tsv" > /dev/null 2>&1; then fail "uppercase VID accepted"; fi

if [ "$failures" -ne 0 ]; then
  echo "udev rules: $failures failure(s)" >&2
  exit 1
fi
echo "udev rules: $rows VID:PIDs from the chip table, file up to date"
