#!/usr/bin/env bash
# Builds the Debian packages with cpack from the build tree and inspects them with dpkg-deb:
# files and their paths, conffiles, maintainer scripts, Depends (from dpkg-shlibdeps), no file
# in two packages; runs the postinst against stubbed system commands to prove it creates the
# user and enables (never starts) the service; prints lintian's findings without failing on them.
#   packages_test.sh SOURCE_DIR BINARY_DIR
# Skips (exit 77) with the reason when the tree has no packaging or the programs are not built.
set -euo pipefail
src="${1:?usage: packages_test.sh SOURCE_DIR BINARY_DIR}"
bin="${2:?usage: packages_test.sh SOURCE_DIR BINARY_DIR}"
config="$bin/CPackConfig.cmake"
if [ ! -f "$config" ]; then
  echo "SKIP: $config missing: the top-level CMakeLists.txt does not include(Packaging) yet"
  exit 77
fi
for tool in cpack dpkg-deb dpkg-shlibdeps; do
  command -v "$tool" >/dev/null || { echo "FAIL: $tool not installed (scripts/install-deps: dpkg-dev, cmake)" >&2; exit 1; }
done
# Component -> package -> program, as cmake/Packaging.cmake names them.
components="$(sed -n 's/^set(CPACK_COMPONENTS_ALL "\(.*\)")$/\1/p' "$config" | tr ';' ' ')"
if [ -z "$components" ]; then
  echo "SKIP: no program targets in this tree (CPACK_COMPONENTS_ALL is empty)"
  exit 77
fi
declare -A package=([agent]=rxfleet-agent [server]=rxfleet-server [cli]=rxfleetctl)
declare -A program=([agent]=rxfleet-agent [server]=rxfleet-server [cli]=rxfleetctl)
missing=()
for c in $components; do
  if [ -z "$(find "$bin" -path "$bin/_CPack_Packages" -prune -o -type f -name "${program[$c]}" -perm -u+x -print -quit)" ]; then
    missing+=("${program[$c]}")
  fi
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "SKIP: not built in $bin: ${missing[*]} (build the release preset first: cmake --build --preset release)"
  exit 77
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

if ! cpack -G DEB --config "$config" -B "$tmp/out" > "$tmp/cpack.log" 2>&1; then
  cat "$tmp/cpack.log" >&2
  echo "FAIL: cpack failed" >&2
  exit 1
fi
version="$(sed -n 's/^set(CPACK_PACKAGE_VERSION "\(.*\)")$/\1/p' "$config")"
arch="$(sed -n 's/^set(CPACK_DEBIAN_PACKAGE_ARCHITECTURE "\(.*\)")$/\1/p' "$config")"

# expect_files DEB PATH...: each PATH is in the package's data.
expect_files() {
  local deb="$1" path
  shift
  for path in "$@"; do
    grep -qxF "./$path" "$tmp/$(basename "$deb").files" || fail "$(basename "$deb"): missing /$path"
  done
}
# expect_depends DEB PACKAGE...: each PACKAGE is named in Depends.
expect_depends() {
  local deb="$1"
  shift
  local depends dep
  depends="$(dpkg-deb -f "$deb" Depends)"
  for dep in "$@"; do
    # Package names of the relations, alternatives included ("a (>= 1) | b" -> a, b).
    tr ',|' '\n\n' <<< "$depends" | sed 's/^ *//; s/[ :].*//' | grep -qxF -- "$dep" ||
      fail "$(basename "$deb"): Depends lacks $dep: $depends"
  done
}

debs=()
for c in $components; do
  p="${package[$c]}"
  deb="$tmp/out/${p}_${version}_${arch}.deb"
  if [ ! -f "$deb" ]; then
    fail "cpack did not produce $(basename "$deb") (got: $(cd "$tmp/out" && ls ./*.deb 2>/dev/null | tr '\n' ' '))"
    continue
  fi
  debs+=("$deb")
  dpkg-deb -I "$deb" > "$tmp/$p.info"
  dpkg-deb -c "$deb" | awk '{ print $6 }' | sed 's|/$||' > "$tmp/$(basename "$deb").files"
  dpkg-deb -e "$deb" "$tmp/$p.control"
  [ "$(dpkg-deb -f "$deb" Package)" = "$p" ] || fail "$p: Package field is $(dpkg-deb -f "$deb" Package)"
  [ "$(dpkg-deb -f "$deb" Architecture)" = "$arch" ] || fail "$p: Architecture is not $arch"
  [ -n "$(dpkg-deb -f "$deb" Description)" ] || fail "$p: no Description"
  expect_files "$deb" "usr/bin/${program[$c]}"
  # Binaries are stripped (CPACK_STRIP_FILES): no .debug_info section.
  dpkg-deb -x "$deb" "$tmp/$p.root"
  if readelf -S "$tmp/$p.root/usr/bin/${program[$c]}" 2>/dev/null | grep -q '\.debug_info'; then
    fail "$p: /usr/bin/${program[$c]} is not stripped"
  fi
  # Depends must follow the binary's shared libraries (dpkg-shlibdeps): libstdc++ always,
  # libsystemd once the program links it for sd_notify.
  expect_depends "$deb" libc6 libstdc++6
  if readelf -d "$tmp/$p.root/usr/bin/${program[$c]}" | grep -q 'NEEDED.*libsystemd\.so'; then
    expect_depends "$deb" libsystemd0
  fi
  for script in postinst prerm postrm; do
    f="$tmp/$p.control/$script"
    [ -f "$f" ] || continue
    [ -x "$f" ] || fail "$p: $script is not executable"
    sh -n "$f" || fail "$p: $script has a syntax error"
  done
done

conffiles_of() { sort "$tmp/$1.control/conffiles" 2>/dev/null || true; }

if [[ " $components " == *" agent "* ]] && [ -d "$tmp/rxfleet-agent.control" ]; then
  deb="$tmp/out/rxfleet-agent_${version}_${arch}.deb"
  expect_files "$deb" lib/systemd/system/rxfleet-agent.service lib/udev/rules.d/70-rxfleet.rules \
    etc/rxfleet/agent.yaml etc/rxfleet/agent.env etc/rxfleet/policies.d/README \
    usr/share/doc/rxfleet-agent/DEPLOY.md
  expect_depends "$deb" libusb-1.0-0 adduser init-system-helpers
  cmp -s "$tmp/rxfleet-agent.root/lib/udev/rules.d/70-rxfleet.rules" "$src/deploy/udev/70-rxfleet.rules" ||
    fail "rxfleet-agent: installed udev rules differ from deploy/udev/70-rxfleet.rules"
  expected=$'/etc/rxfleet/agent.env\n/etc/rxfleet/agent.yaml\n/etc/rxfleet/policies.d/README'
  [ "$(conffiles_of rxfleet-agent)" = "$expected" ] ||
    fail "rxfleet-agent: conffiles are [$(conffiles_of rxfleet-agent | tr '\n' ' ')], expected [${expected//$'\n'/ }]"
  for s in postinst prerm postrm; do
    [ -x "$tmp/rxfleet-agent.control/$s" ] || fail "rxfleet-agent: no $s"
  done
fi
if [[ " $components " == *" server "* ]] && [ -d "$tmp/rxfleet-server.control" ]; then
  deb="$tmp/out/rxfleet-server_${version}_${arch}.deb"
  expect_files "$deb" lib/systemd/system/rxfleet-server.service etc/rxfleet/server.env \
    usr/share/doc/rxfleet-server/DEPLOY.md \
    usr/share/doc/rxfleet-server/examples/prometheus/prometheus.yml \
    usr/share/doc/rxfleet-server/examples/grafana/dashboards/fleet.json \
    usr/share/doc/rxfleet-server/examples/grafana/dashboards/experiment.json \
    usr/share/doc/rxfleet-server/examples/prometheus/rules/rxfleet.rules.yml
  expect_depends "$deb" libsqlite3-0 adduser init-system-helpers
  [ "$(conffiles_of rxfleet-server)" = "/etc/rxfleet/server.env" ] ||
    fail "rxfleet-server: conffiles are [$(conffiles_of rxfleet-server | tr '\n' ' ')]"
  for s in postinst prerm postrm; do
    [ -x "$tmp/rxfleet-server.control/$s" ] || fail "rxfleet-server: no $s"
  done
fi
if [[ " $components " == *" cli "* ]] && [ -d "$tmp/rxfleetctl.control" ]; then
  deb="$tmp/out/rxfleetctl_${version}_${arch}.deb"
  if [ -f "$src/deploy/completion/rxfleetctl.bash" ]; then
    expect_files "$deb" usr/share/bash-completion/completions/rxfleetctl
  else
    echo "note: deploy/completion/rxfleetctl.bash not in the tree yet; rxfleetctl ships without completion"
  fi
  [ -z "$(conffiles_of rxfleetctl)" ] || fail "rxfleetctl: unexpected conffiles"
fi

# No regular file may be in two packages (dpkg would refuse to install both).
if [ ${#debs[@]} -gt 1 ]; then
  for deb in "${debs[@]}"; do
    dpkg-deb -c "$deb" | awk '$1 !~ /^d/ { print $6 }'
  done | sort | uniq -d > "$tmp/dups"
  [ ! -s "$tmp/dups" ] || fail "files in more than one package: $(tr '\n' ' ' < "$tmp/dups")"
fi

# postinst against stubs: records every system command it runs.
for p in rxfleet-agent rxfleet-server; do
  [ -x "$tmp/$p.control/postinst" ] || continue
  stubs="$tmp/stubs-$p"
  mkdir -p "$stubs"
  for cmd in getent addgroup adduser install udevadm deb-systemd-helper deb-systemd-invoke systemctl; do
    printf '#!/bin/sh\necho "%s $*" >> "%s/calls"\n%s\n' "$cmd" "$stubs" \
      "$( [ "$cmd" = getent ] && echo 'exit 2' || echo 'exit 0')" > "$stubs/$cmd"
    chmod +x "$stubs/$cmd"
  done
  if ! PATH="$stubs:/usr/bin:/bin" "$tmp/$p.control/postinst" configure > "$tmp/postinst.out" 2>&1; then
    cat "$tmp/postinst.out" >&2
    fail "$p: postinst configure failed"
  fi
  calls="$(cat "$stubs/calls" 2>/dev/null || true)"
  for want in "addgroup --system --quiet rxfleet" "adduser --system --quiet --ingroup rxfleet" \
      "install -d -o rxfleet -g rxfleet -m 0750 /var/lib/rxfleet" "deb-systemd-helper enable $p.service"; do
    [[ "$calls" == *"$want"* ]] || fail "$p: postinst configure did not run \"$want\"; ran: ${calls//$'\n'/; }"
  done
  if grep -Eq '(systemctl|deb-systemd-invoke) .*(start|restart)' "$stubs/calls"; then
    fail "$p: postinst starts the service on a fresh install: ${calls//$'\n'/; }"
  fi
done

if command -v lintian >/dev/null 2>&1; then
  echo "lintian findings (informational, see docs/DEPLOY.md):"
  for deb in "${debs[@]}"; do
    lintian --tag-display-limit 0 "$deb" 2>&1 | grep -v 'running with root privileges' |
      sed 's/^/  /' || true
  done
else
  echo "lintian not installed: skipped"
fi

if [ "$failures" -ne 0 ]; then
  echo "packages: $failures failure(s)" >&2
  exit 1
fi
echo "packages: ${#debs[@]} package(s) built and inspected: $(for d in "${debs[@]}"; do basename "$d"; done | tr '\n' ' ')"
