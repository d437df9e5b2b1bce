# The agent application: the Agent class wiring device source, reconcile, policies, metrics,
# collectors and the local status endpoint (agent/app/), and the rxfleet-agent executable.
rxfleet_library(rxfleet_agent_app
  SOURCES
    app/agent.cc
    app/agent_probes.cc
    app/command_line.cc
    app/host_facts.cc
    app/local_policies.cc
    app/report.cc
  DEPS
    rxfleet_agent_reconcile
    rxfleet_agent_server_list
    rxfleet_agent_status
    rxfleet_agent_telemetry
    rxfleet_agent_metrics
    rxfleet_agent_collectors
    rxfleet_agent_experiments
    rxfleet_agent_usb
    rxfleet_agent_sysfs
    rxfleet_common
    rxfleet_common_proto
    rxfleet_common_service
    CLI11::CLI11
    PkgConfig::SYSTEMD
    nlohmann_json::nlohmann_json
    yaml-cpp
    absl::status
    absl::statusor
    absl::strings
    absl::str_format
    absl::synchronization
    absl::time)

add_executable(rxfleet-agent main.cc)
target_link_libraries(rxfleet-agent PRIVATE rxfleet_agent_app rxfleet_agent_link_binding
                                            rxfleet_warnings)
