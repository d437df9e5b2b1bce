# install() rules of the three programs and their deployment files, one install component per
# Debian package (cmake/Packaging.cmake): agent -> rxfleet-agent, server -> rxfleet-server,
# cli -> rxfleetctl. Include from the top-level CMakeLists.txt after the program folders:
#   include(Install)
#
# Program paths are relative to the install prefix (/usr in the packages: the systemd units
# start /usr/bin/rxfleet-*). Files that must be at fixed system paths whatever the prefix
# (configuration under /etc/rxfleet, systemd units and udev rules under /lib as Debian 12's
# packages ship them) use absolute destinations; a plain `cmake --install` with a non-system
# prefix therefore still writes those to the system paths (use DESTDIR=... to stage).

include(GNUInstallDirs)

set(RXFLEET_DEPLOY_DIR ${PROJECT_SOURCE_DIR}/deploy)
set(RXFLEET_SYSTEMD_UNIT_DIR /lib/systemd/system CACHE PATH
    "Where the packages install systemd units")
set(RXFLEET_UDEV_RULES_DIR /lib/udev/rules.d CACHE PATH
    "Where the rxfleet-agent package installs its udev rules")
set(RXFLEET_CONFIG_DIR /etc/rxfleet CACHE PATH
    "Configuration directory of the agent and the server")

if(TARGET rxfleet-agent)
  install(TARGETS rxfleet-agent RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT agent)
  install(FILES ${RXFLEET_DEPLOY_DIR}/systemd/rxfleet-agent.service
          DESTINATION ${RXFLEET_SYSTEMD_UNIT_DIR} COMPONENT agent)
  install(FILES ${RXFLEET_DEPLOY_DIR}/udev/70-rxfleet.rules
          DESTINATION ${RXFLEET_UDEV_RULES_DIR} COMPONENT agent)
  install(FILES ${RXFLEET_DEPLOY_DIR}/config/agent.yaml ${RXFLEET_DEPLOY_DIR}/config/agent.env
          DESTINATION ${RXFLEET_CONFIG_DIR} PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ
          WORLD_READ COMPONENT agent)
  install(FILES ${RXFLEET_DEPLOY_DIR}/config/policies.d/README
          DESTINATION ${RXFLEET_CONFIG_DIR}/policies.d COMPONENT agent)
  install(FILES ${PROJECT_SOURCE_DIR}/docs/DEPLOY.md
          DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/rxfleet-agent COMPONENT agent)
endif()

if(TARGET rxfleet-server)
  install(TARGETS rxfleet-server RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT server)
  install(FILES ${RXFLEET_DEPLOY_DIR}/systemd/rxfleet-server.service
          DESTINATION ${RXFLEET_SYSTEMD_UNIT_DIR} COMPONENT server)
  install(FILES ${RXFLEET_DEPLOY_DIR}/config/server.env
          DESTINATION ${RXFLEET_CONFIG_DIR} PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ
          WORLD_READ COMPONENT server)
  install(FILES ${PROJECT_SOURCE_DIR}/docs/DEPLOY.md
          DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/rxfleet-server COMPONENT server)
  # Prometheus and Grafana files for the monitoring host, as examples to copy.
  install(DIRECTORY ${RXFLEET_DEPLOY_DIR}/prometheus ${RXFLEET_DEPLOY_DIR}/grafana
          DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/rxfleet-server/examples COMPONENT server)
endif()

if(TARGET rxfleetctl)
  install(TARGETS rxfleetctl RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT cli)
  # Written by the CLI's owners; installed when present.
  if(EXISTS ${RXFLEET_DEPLOY_DIR}/completion/rxfleetctl.bash)
    install(FILES ${RXFLEET_DEPLOY_DIR}/completion/rxfleetctl.bash
            DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions RENAME rxfleetctl
            COMPONENT cli)
  endif()
endif()
