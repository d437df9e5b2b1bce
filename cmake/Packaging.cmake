# Debian packages through CPack, one per install component (cmake/Install.cmake):
#   rxfleet-agent   agent -> /usr/bin/rxfleet-agent, systemd unit, udev rules, /etc/rxfleet/agent.*
#   rxfleet-server  server -> /usr/bin/rxfleet-server, systemd unit, /etc/rxfleet/server.env
#   rxfleetctl      cli -> /usr/bin/rxfleetctl, bash completion
# Include from the top-level CMakeLists.txt after include(Install):
#   include(Packaging)
# then build and package:
#   cmake --build build/release && (cd build/release && cpack -G DEB)
# Shared-library dependencies come from dpkg-shlibdeps (dpkg-dev). For a cross build the
# toolchain file sets RXFLEET_DEB_ARCH (arm64, armhf) and the multiarch -dev packages must be
# installed for dpkg-shlibdeps to find the target libraries (docs/DEPLOY.md).

include(GNUInstallDirs)

set(RXFLEET_PACKAGE_CONTACT "rxfleet maintainers <rxfleet@localhost>" CACHE STRING
    "Maintainer field of the Debian packages")

if(NOT RXFLEET_DEB_ARCH)
  find_program(DPKG_PROGRAM dpkg)
  if(DPKG_PROGRAM)
    execute_process(COMMAND ${DPKG_PROGRAM} --print-architecture
                    OUTPUT_VARIABLE RXFLEET_DEB_ARCH OUTPUT_STRIP_TRAILING_WHITESPACE)
  endif()
endif()

set(components "")
foreach(pair "agent;rxfleet-agent" "server;rxfleet-server" "cli;rxfleetctl")
  list(GET pair 0 component)
  list(GET pair 1 target)
  if(TARGET ${target})
    list(APPEND components ${component})
  endif()
endforeach()

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME rxfleet)
set(CPACK_PACKAGE_VENDOR rxfleet)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "${RXFLEET_PACKAGE_CONTACT}")
# Each package's Description has its own synopsis (its first line below); a non-empty global
# summary would be prepended to all three by CPackDeb.
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_COMPONENTS_ALL ${components})
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_GROUPING IGNORE)
set(CPACK_PACKAGE_DIRECTORY ${CMAKE_BINARY_DIR}/packages)

set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_ARCHITECTURE ${RXFLEET_DEB_ARCH})
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS OFF)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)

set(deb_dir ${PROJECT_SOURCE_DIR}/deploy/debian)
set(gen_dir ${CMAKE_BINARY_DIR}/deploy/debian)

# Files under /etc are conffiles: dpkg keeps the admin's edits across upgrades.
file(WRITE ${gen_dir}/rxfleet-agent/conffiles
     "/etc/rxfleet/agent.env\n/etc/rxfleet/agent.yaml\n/etc/rxfleet/policies.d/README\n")
file(WRITE ${gen_dir}/rxfleet-server/conffiles "/etc/rxfleet/server.env\n")

# Debian changelog of each (native) package: /usr/share/doc/<package>/changelog.gz.
# The date honours SOURCE_DATE_EPOCH for reproducible packages.
string(TIMESTAMP changelog_date "%a, %d %b %Y %H:%M:%S +0000" UTC)
foreach(pair "agent;rxfleet-agent" "server;rxfleet-server" "cli;rxfleetctl")
  list(GET pair 0 component)
  list(GET pair 1 pkg)
  if(NOT component IN_LIST components)
    continue()
  endif()
  file(WRITE ${gen_dir}/${pkg}/changelog
       "${pkg} (${PROJECT_VERSION}) unstable; urgency=medium\n\n"
       "  * Release ${PROJECT_VERSION}.\n\n"
       " -- ${RXFLEET_PACKAGE_CONTACT}  ${changelog_date}\n")
  file(ARCHIVE_CREATE OUTPUT ${gen_dir}/${pkg}/changelog.gz PATHS ${gen_dir}/${pkg}/changelog
       FORMAT raw COMPRESSION GZip COMPRESSION_LEVEL 9)
  install(FILES ${gen_dir}/${pkg}/changelog.gz DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/${pkg}
          COMPONENT ${component})
endforeach()

# agent
set(CPACK_DEBIAN_AGENT_PACKAGE_NAME rxfleet-agent)
set(CPACK_DEBIAN_AGENT_PACKAGE_DEPENDS "adduser, init-system-helpers (>= 1.54~)")
set(CPACK_DEBIAN_AGENT_PACKAGE_RECOMMENDS "udev")
set(CPACK_DEBIAN_AGENT_PACKAGE_SUGGESTS "rxfleetctl")
set(CPACK_COMPONENT_AGENT_DESCRIPTION
    "speed-aware RX aggregation agent for rtw89 USB Wi-Fi adapters
rxfleet-agent finds the host's USB Wi-Fi adapters of the Linux rtw89
family (RTL8851BU, RTL8852AU/BU/CU, RTL8922AU), sets their RX aggregation
hold for the negotiated USB speed with the driver's vendor requests, keeps
it applied, and exports Prometheus metrics. It runs standalone with local
policy files or under an rxfleet-server. Ships a hardened systemd unit and
udev rules giving the rxfleet group access to supported adapters only.")
set(CPACK_DEBIAN_AGENT_PACKAGE_CONTROL_EXTRA
    ${gen_dir}/rxfleet-agent/conffiles
    ${deb_dir}/rxfleet-agent/postinst ${deb_dir}/rxfleet-agent/prerm
    ${deb_dir}/rxfleet-agent/postrm)

# server
set(CPACK_DEBIAN_SERVER_PACKAGE_NAME rxfleet-server)
set(CPACK_DEBIAN_SERVER_PACKAGE_DEPENDS "adduser, init-system-helpers (>= 1.54~)")
set(CPACK_DEBIAN_SERVER_PACKAGE_SUGGESTS "rxfleetctl, prometheus")
set(CPACK_COMPONENT_SERVER_DESCRIPTION
    "fleet registry and policy server for rxfleet agents
rxfleet-server keeps the registry of hosts and rtw89 USB Wi-Fi adapters that
run rxfleet-agent, stores RX aggregation policies and experiments in SQLite,
pushes versioned policy bundles to agents over gRPC and records their
ACK/NACK. It serves Prometheus metrics and HTTP service discovery for the
agents. Example Prometheus and Grafana files are in the documentation.")
set(CPACK_DEBIAN_SERVER_PACKAGE_CONTROL_EXTRA
    ${gen_dir}/rxfleet-server/conffiles
    ${deb_dir}/rxfleet-server/postinst ${deb_dir}/rxfleet-server/prerm
    ${deb_dir}/rxfleet-server/postrm)

# cli
set(CPACK_DEBIAN_CLI_PACKAGE_NAME rxfleetctl)
set(CPACK_COMPONENT_CLI_DESCRIPTION
    "command-line client for rxfleet servers and agents
rxfleetctl lists hosts and rtw89 USB Wi-Fi adapters, shows and sets RX
aggregation policies, runs experiments on an rxfleet-server, and reads the
local status of an rxfleet-agent.")

include(CPack)
