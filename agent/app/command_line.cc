#include "agent/app/command_line.h"

#include <fstream>
#include <map>
#include <ostream>
#include <sstream>
#include <variant>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "agent/link/server_list.h"
#include "agent/metrics/metrics_server.h"
#include "agent/status/status_server.h"
#include "common/host_labels.h"
#include "common/string_view_compat.h"
#include "common/validation.h"
#include "rxfleet/version.h"
#include "yaml-cpp/yaml.h"

namespace rxfleet::agent {
namespace {

constexpr char kDescription[] =
    "rxfleet-agent keeps the RX aggregation hold of rtw89 USB Wi-Fi adapters (RTL8851BU, "
    "RTL8852AU/BU/CU, RTL8922AU) right for each adapter's negotiated USB speed: 32 us on "
    "SuperSpeed and SuperSpeed+, the driver's 1024 us on high-speed and slower, unless a policy "
    "says otherwise. It reads and writes only the RX aggregation register with vendor control "
    "transfers; other USB devices are reported, never touched.";

constexpr char kFooter[] =
    "Modes: without --once the agent runs the reconcile loop until SIGTERM/SIGINT (SIGHUP "
    "reloads policy files), on local policy files and built-in defaults, and with --server also "
    "on the server's policies and experiments; --standalone is accepted as another name for "
    "this. --once reconciles every adapter once, prints a report and exits.\n"
    "Exit codes: 0 ok (also when adapters are unsupported or there are none), 1 fatal runtime "
    "error (e.g. libusb cannot start), 2 usage, config or policy file error.\n"
    "Documentation: docs/AGENT.md";

absl::Status ValidateProbeTarget(const std::string& target) {
  if (target.empty() || target == "gateway") return absl::OkStatus();
  std::vector<std::string> parts;
  std::stringstream in(target);
  for (std::string part; std::getline(in, part, '.');) parts.push_back(part);
  bool ok = parts.size() == 4;
  for (const std::string& part : parts) {
    int value = -1;
    ok = ok && !part.empty() && part.size() <= 3 && absl::SimpleAtoi(part, &value) && value >= 0 &&
         value <= 255;
  }
  if (!ok) {
    return absl::InvalidArgumentError(
        absl::StrFormat("probe target \"%s\": expected none, gateway or an IPv4 address", target));
  }
  return absl::OkStatus();
}

// "none" -> "" for the endpoint options.
std::string NoneToEmpty(const std::string& value) { return value == "none" ? "" : value; }

}  // namespace

absl::StatusOr<absl::Duration> ParsePeriod(const std::string& text) {
  absl::Duration d;
  double seconds = 0;
  if (absl::SimpleAtod(text, &seconds)) {
    d = absl::Seconds(seconds);
  } else if (!absl::ParseDuration(text, &d)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("\"%s\" is not a duration (e.g. 200ms, 10s, 1m)", text));
  }
  if (d <= absl::ZeroDuration() || d == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(absl::StrFormat("\"%s\" must be greater than zero", text));
  }
  return d;
}

absl::Status ApplyConfigFile(const std::string& path, AgentOptions& options) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot read the config file"));
  std::stringstream text;
  text << in.rdbuf();
  YAML::Node root;
  try {
    root = YAML::Load(text.str());
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrFormat("%s:%d:%d: malformed YAML: %s", path,
                                                      e.mark.line + 1, e.mark.column + 1, e.msg));
  }
  if (root.IsNull()) return absl::OkStatus();
  auto error = [&](const YAML::Node& node, const std::string& key, const std::string& problem) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s:%d: %s: %s", path, node.Mark().line + 1, key, problem));
  };
  if (!root.IsMap()) return error(root, "config", "expected a mapping of keys");
  for (const auto& entry : root) {
    const std::string key = entry.first.Scalar();
    const YAML::Node& value = entry.second;
    auto scalar = [&](std::string& out) -> absl::Status {
      if (!value.IsScalar()) return error(value, key, "expected a string");
      out = value.Scalar();
      return absl::OkStatus();
    };
    auto period = [&](absl::Duration& out) -> absl::Status {
      std::string s;
      if (absl::Status st = scalar(s); !st.ok()) return st;
      auto parsed = ParsePeriod(s);
      if (!parsed.ok()) return error(value, key, std::string(parsed.status().message()));
      out = *parsed;
      return absl::OkStatus();
    };
    absl::Status status;
    if (key == "hostId") {
      status = scalar(options.host_id);
      if (status.ok()) {
        if (absl::Status s = common::ValidateHostId(options.host_id); !s.ok()) {
          return error(value, key, std::string(s.message()));
        }
      }
    } else if (key == "labels") {
      if (!value.IsMap()) return error(value, key, "expected a mapping of label keys to values");
      for (const auto& label : value) {
        if (!label.second.IsScalar()) return error(label.second, key, "expected a string value");
        const std::string k = label.first.Scalar();
        const std::string v = label.second.Scalar();
        if (absl::Status s = common::ValidateLabelKey(k); !s.ok()) {
          return error(label.first, key, std::string(s.message()));
        }
        if (absl::Status s = common::ValidateLabelValue(v); !s.ok()) {
          return error(label.second, key, std::string(s.message()));
        }
        options.labels[k] = v;
      }
    } else if (key == "policyFiles") {
      if (!value.IsSequence()) return error(value, key, "expected a list of paths");
      options.policy_paths.clear();
      for (const auto& item : value) {
        if (!item.IsScalar()) return error(item, key, "expected a path");
        options.policy_paths.push_back(item.Scalar());
      }
    } else if (key == "reconcilePeriod") {
      status = period(options.reconcile_period);
    } else if (key == "rescanPeriod") {
      status = period(options.rescan_period);
    } else if (key == "metricWindow") {
      status = period(options.metric_window);
    } else if (key == "statusSocket") {
      status = scalar(options.status_socket);
      options.status_socket = NoneToEmpty(options.status_socket);
    } else if (key == "metricsAddress") {
      status = scalar(options.metrics_address);
      options.metrics_address = NoneToEmpty(options.metrics_address);
      if (status.ok() && !options.metrics_address.empty()) {
        if (auto parsed = ParseListenAddress(options.metrics_address); !parsed.ok()) {
          return error(value, key, std::string(parsed.status().message()));
        }
      }
    } else if (key == "stateDir") {
      status = scalar(options.state_dir);
    } else if (key == "sysfsRoot") {
      status = scalar(options.sysfs_root);
    } else if (key == "procfsRoot") {
      status = scalar(options.procfs_root);
    } else if (key == "probeTarget") {
      status = scalar(options.probe_target);
      options.probe_target = NoneToEmpty(options.probe_target);
      if (status.ok()) {
        if (absl::Status s = ValidateProbeTarget(options.probe_target); !s.ok()) {
          return error(value, key, std::string(s.message()));
        }
      }
    } else {
      return error(entry.first, key, "unknown key");
    }
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

std::variant<CommandLine, int> ParseCommandLine(int argc, const char* const* argv,
                                                std::ostream& out, std::ostream& err) {
  CLI::App app(kDescription, "rxfleet-agent");
  app.footer(kFooter);
  app.set_version_flag("--version", std::string(kVersion), "Print the version and exit");

  bool once = false;
  bool standalone = false;
  std::string output = "table";
  std::string config;
  std::vector<std::string> policy_files;
  std::vector<std::string> labels;
  std::string host_id;
  std::string reconcile_period;
  std::string rescan_period;
  std::string metric_window;
  std::string sysfs_root;
  std::string settle;
  std::string chips_dir;
  int loop_count = 0;
  std::string loop_window;
  std::string procfs_root;
  std::string state_dir;
  std::string status_socket;
  std::string metrics_address;
  std::string probe_target;
  std::string server;
  bool insecure = false;
  LinkTlsFiles tls;

  CLI::Option* once_flag =
      app.add_flag("--once", once, "Reconcile every adapter once, print a report and exit");
  CLI::Option* standalone_flag =
      app.add_flag("--standalone", standalone,
                   "Run the reconcile loop until SIGTERM/SIGINT: the default, accepted as an "
                   "alias (also with --server)");
  once_flag->excludes(standalone_flag);
  app.add_option("-o,--output", output, "--once report format: table (default) or json")
      ->check(CLI::IsMember({"table", "json"}));
  app.add_option("--config", config,
                 "YAML agent config (hostId, labels, policyFiles, ...); flags win over it");
  app.add_option("--policy-file", policy_files,
                 "Local policy file or directory of *.yaml/*.yml; repeatable (default: "
                 "/etc/rxfleet/policies.d, missing is fine). Reloaded on SIGHUP and on change");
  app.add_option("--label", labels,
                 "Host label KEY=VALUE for policy selectors; repeatable; wins over the detected "
                 "arch, board and kernel labels");
  app.add_option("--host-id", host_id, "Host id (default: the host name)");
  app.add_option("--reconcile-period", reconcile_period,
                 "How often each adapter is checked again, e.g. 200ms, 10s (default 10s)");
  app.add_option("--rescan-period", rescan_period,
                 "How often USB devices are re-enumerated behind hotplug (default 30s)");
  app.add_option("--metric-window", metric_window,
                 "Length of per-adapter metric windows for experiments (default 60s)");
  app.add_option("--sysfs-root", sysfs_root, "Where sysfs is mounted (default /sys)");
  app.add_option("--settle", settle,
                 "No register write this long after an adapter arrives or while its USB 2 -> 3 "
                 "switch is pending, e.g. 5s; 0 disables (default 5s)");
  app.add_option("--chips-dir", chips_dir,
                 "Chip-table extension files (*.tsv, the shipped table's columns) (default "
                 "/etc/rxfleet/chips.d, missing is fine)");
  app.add_option("--reenumeration-loop-count", loop_count,
                 "Quarantine an adapter that appears more than this many times within "
                 "--reenumeration-loop-window (default 5)")
      ->check(CLI::Range(1, 1000));
  app.add_option("--reenumeration-loop-window", loop_window,
                 "Window of the re-enumeration loop count, and how long a quarantined adapter "
                 "must stay put to be released (default 30s)");
  app.add_option("--procfs-root", procfs_root, "Where procfs is mounted (default /proc)");
  app.add_option("--state-dir", state_dir,
                 "State kept across restarts, e.g. the last good server bundle (default "
                 "/var/lib/rxfleet/agent)");
  app.add_option("--status-socket", status_socket,
                 "Local status gRPC Unix socket, or none (default /run/rxfleet/agent.sock; "
                 "not with --once)");
  app.add_option("--metrics-address", metrics_address,
                 absl::StrCat("Prometheus endpoint HOST:PORT, or none (default ",
                              common::ToAbslView(kDefaultMetricsAddress), "; not with --once)"));
  app.add_option("--server", server,
                 absl::StrCat("rxfleet-server HOST:PORT to take policy bundles from over TLS (not "
                              "with --once); the last good bundle is kept in --state-dir. "
                              "Replicas: a comma-separated list of up to ",
                              kMaxServerAddresses,
                              " HOST:PORT, started at a random one, the next tried when a "
                              "stream ends"));
  app.add_option("--tls-ca", tls.ca_file,
                 "With --server: CA certificate that signs the server's (PEM)");
  app.add_option("--tls-cert", tls.cert_file,
                 "With --server: this host's client certificate, CN = host id (PEM)");
  app.add_option("--tls-key", tls.key_file, "With --server: its private key (PEM)");
  app.add_flag("--insecure", insecure,
               "With --server: plaintext, no certificates (servers started with --insecure)");
  app.add_option("--probe-target", probe_target,
                 "ICMP RTT probes through each adapter: gateway (default: the netdev's IPv4 "
                 "default gateway), an IPv4 address, or none (not with --once)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    out << app.help();
    return kExitOk;
  } catch (const CLI::CallForAllHelp&) {
    out << app.help();
    return kExitOk;
  } catch (const CLI::CallForVersion&) {
    out << kVersion << "\n";
    return kExitOk;
  } catch (const CLI::ParseError& e) {
    err << "rxfleet-agent: " << e.what() << "\nRun rxfleet-agent --help for usage.\n";
    return kExitUsage;
  }

  auto usage = [&](const std::string& message) {
    err << "rxfleet-agent: " << message << "\n";
    return kExitUsage;
  };
  if (!once && app.count("--output") > 0) return usage("--output only applies to --once");
  if (app.count("--server") > 0 && server.empty()) {
    return usage(absl::StrCat("--server: ", ParseServerAddresses(server).status().message()));
  }
  if (once && !server.empty()) {
    return usage("--server runs the loop under the server; it cannot be combined with --once");
  }
  const bool any_tls = !tls.ca_file.empty() || !tls.cert_file.empty() || !tls.key_file.empty();
  if (server.empty() && (insecure || any_tls)) {
    return usage("--insecure and --tls-* only apply with --server");
  }
  if (!server.empty()) {
    if (absl::Status address = ParseServerAddresses(server).status(); !address.ok()) {
      return usage(absl::StrCat("--server: ", address.message()));
    }
    if (insecure && any_tls) return usage("--insecure cannot be combined with --tls-* files");
    if (!insecure && (tls.ca_file.empty() || tls.cert_file.empty() || tls.key_file.empty())) {
      return usage(
          "--server needs --tls-ca, --tls-cert and --tls-key (see docs/SECURITY.md), or "
          "--insecure for a plaintext server");
    }
  }

  CommandLine command;
  AgentOptions& o = command.options;
  o.mode = once ? AgentMode::kOnce : AgentMode::kRun;
  o.status_socket = kDefaultStatusSocket;
  o.metrics_address = std::string(kDefaultMetricsAddress);
  o.probe_target = "gateway";
  command.output = output == "json" ? OutputFormat::kJson : OutputFormat::kTable;
  if (!server.empty()) command.servers = *ParseServerAddresses(server);
  if (!server.empty() && !insecure) command.server_tls = tls;

  if (!config.empty()) {
    if (absl::Status s = ApplyConfigFile(config, o); !s.ok()) {
      return usage(std::string(s.message()));
    }
  }
  if (!policy_files.empty()) o.policy_paths = policy_files;
  for (const std::string& flag : labels) {
    auto parsed = common::ParseLabelFlag(flag);
    if (!parsed.ok()) return usage(absl::StrCat("--label: ", parsed.status().message()));
    o.labels[parsed->first] = parsed->second;
  }
  if (!host_id.empty()) {
    if (absl::Status s = common::ValidateHostId(host_id); !s.ok()) {
      return usage(absl::StrCat("--host-id: ", s.message()));
    }
    o.host_id = host_id;
  }
  struct PeriodFlag {
    const char* name;
    const std::string& text;
    absl::Duration& target;
  };
  for (const PeriodFlag& flag :
       {PeriodFlag{"--reconcile-period", reconcile_period, o.reconcile_period},
        PeriodFlag{"--rescan-period", rescan_period, o.rescan_period},
        PeriodFlag{"--metric-window", metric_window, o.metric_window}}) {
    if (flag.text.empty()) continue;
    auto parsed = ParsePeriod(flag.text);
    if (!parsed.ok()) return usage(absl::StrCat(flag.name, ": ", parsed.status().message()));
    flag.target = *parsed;
  }
  if (!loop_window.empty()) {
    auto parsed = ParsePeriod(loop_window);
    if (!parsed.ok()) {
      return usage(absl::StrCat("--reenumeration-loop-window: ", parsed.status().message()));
    }
    o.reenumeration_loop_window = *parsed;
  }
  if (loop_count > 0) o.reenumeration_loop_count = loop_count;
  if (!settle.empty()) {
    // Any spelling of zero ("0", "0s", "0ms") disables the settle period.
    absl::Duration zero;
    const bool is_zero =
        settle == "0" || (absl::ParseDuration(settle, &zero) && zero == absl::ZeroDuration());
    absl::StatusOr<absl::Duration> parsed =
        is_zero ? absl::StatusOr<absl::Duration>(absl::ZeroDuration()) : ParsePeriod(settle);
    if (!parsed.ok()) return usage(absl::StrCat("--settle: ", parsed.status().message()));
    o.settle = *parsed;
  }
  if (!chips_dir.empty()) o.chips_dir = chips_dir;
  if (!sysfs_root.empty()) o.sysfs_root = sysfs_root;
  if (!procfs_root.empty()) o.procfs_root = procfs_root;
  if (!state_dir.empty()) o.state_dir = state_dir;
  if (app.count("--status-socket") > 0) o.status_socket = NoneToEmpty(status_socket);
  if (app.count("--metrics-address") > 0) o.metrics_address = NoneToEmpty(metrics_address);
  if (!o.metrics_address.empty()) {
    if (auto parsed = ParseListenAddress(o.metrics_address); !parsed.ok()) {
      return usage(absl::StrCat("--metrics-address: ", parsed.status().message()));
    }
  }
  if (app.count("--probe-target") > 0) o.probe_target = NoneToEmpty(probe_target);
  if (absl::Status s = ValidateProbeTarget(o.probe_target); !s.ok()) {
    return usage(absl::StrCat("--probe-target: ", s.message()));
  }
  return command;
}

}  // namespace rxfleet::agent
