#!/usr/bin/env bash
# Generates 70-rxfleet.rules from the rtw89 USB ID table, one rule per supported VID:PID.
#
#   deploy/udev/generate-rules.sh [TSV] > deploy/udev/70-rxfleet.rules
#
# TSV defaults to common/chips/rtw89-usb-devices.tsv (columns: vid, pid, chip, rx_agg_layout,
# source; first line is the header). A malformed or duplicate row is an error (exit 1), so a
# broken table never produces a partial rules file. Needs only bash and awk.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
tsv="${1:-$here/../../common/chips/rtw89-usb-devices.tsv}"
if [ ! -r "$tsv" ]; then
  echo "generate-rules.sh: cannot read $tsv" >&2
  exit 1
fi

LC_ALL=C awk -F '\t' '
  NR == 1 {
    if ($1 != "vid" || $2 != "pid" || $3 != "chip") {
      printf "%s:1: header must start with vid, pid, chip\n", FILENAME > "/dev/stderr"
      exit 1
    }
    print "# udev rules for rxfleet-agent: members of group \"rxfleet\" may read and write the USB"
    print "# device nodes of supported rtw89 Wi-Fi adapters (and of nothing else), so the agent can"
    print "# run unprivileged. Loaded after 50-udev-default.rules, whose MODE these override."
    print "#"
    print "# GENERATED from common/chips/rtw89-usb-devices.tsv by deploy/udev/generate-rules.sh."
    print "# Do not edit: change the table and run"
    print "#   deploy/udev/generate-rules.sh > deploy/udev/70-rxfleet.rules"
    next
  }
  /^[[:space:]]*$/ { next }
  {
    if (NF < 3 || $1 !~ /^[0-9a-f][0-9a-f][0-9a-f][0-9a-f]$/ || $2 !~ /^[0-9a-f][0-9a-f][0-9a-f][0-9a-f]$/ ||
        $3 !~ /^[a-z0-9]+$/) {
      printf "%s:%d: expected vid and pid as 4 lowercase hex digits and a chip name\n", FILENAME, NR > "/dev/stderr"
      failed = 1
      exit 1
    }
    id = $1 ":" $2
    if (id in seen) {
      printf "%s:%d: duplicate %s (first on line %d)\n", FILENAME, NR, id, seen[id] > "/dev/stderr"
      failed = 1
      exit 1
    }
    seen[id] = NR
    if ($3 != chip) {
      chip = $3
      print ""
      print "# " chip
    }
    printf "SUBSYSTEM==\"usb\", ENV{DEVTYPE}==\"usb_device\", ATTR{idVendor}==\"%s\", ATTR{idProduct}==\"%s\", GROUP=\"rxfleet\", MODE=\"0660\"\n", $1, $2
    rows++
  }
  END {
    if (failed) exit 1
    if (rows == 0) {
      printf "%s: no rows\n", FILENAME > "/dev/stderr"
      exit 1
    }
  }
' "$tsv"
