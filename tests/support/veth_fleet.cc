#include "tests/support/veth_fleet.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"

namespace rxfleet::testing {
namespace {

constexpr char kPrefix[] = "rxfleet-t";
constexpr char kPeerDevice[] = "peer";
constexpr size_t kMaxPairs = 50;

absl::Status Run(const std::vector<std::string>& argv) {
  const ProcessResult r = RunProcess(argv, absl::Seconds(30));
  if (r.exit_code == 0) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("`", absl::StrJoin(argv, " "), "` failed (exit ",
                                          r.exit_code, "): ", r.stderr_text, r.stdout_text));
}

bool InPath(const std::string& program) {
  const char* path = std::getenv("PATH");
  for (absl::string_view dir : absl::StrSplit(path != nullptr ? path : "/usr/bin:/bin", ':')) {
    std::error_code ec;
    if (std::filesystem::exists(std::filesystem::path(std::string(dir)) / program, ec)) {
      return true;
    }
  }
  return false;
}

bool ValidDeviceName(const std::string& name) {
  if (name.empty() || name.size() > 15) return false;
  for (unsigned char c : name) {
    if (c <= 0x20 || c == '/' || c == ':' || c >= 0x7f) return false;
  }
  return true;
}

}  // namespace

std::string VethFleetUnavailableReason() {
  if (geteuid() != 0) {
    return "needs root (network namespaces, veth pairs and tbf qdiscs need CAP_NET_ADMIN and "
           "CAP_SYS_ADMIN)";
  }
  for (const char* program : {"ip", "iperf3"}) {
    if (!InPath(program)) return absl::StrCat("needs `", program, "` in PATH");
  }
  return "";
}

int RemoveStaleVethFleets() {
  int removed = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/run/netns", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(kPrefix, 0) != 0) continue;
    const std::string rest = name.substr(sizeof(kPrefix) - 1);
    int pid = 0;
    if (!absl::SimpleAtoi(rest.substr(0, rest.find('-')), &pid) || pid <= 0) continue;
    if (kill(pid, 0) == 0 || errno != ESRCH) continue;  // its test still runs
    const ProcessResult pids = RunProcess({"ip", "netns", "pids", name}, absl::Seconds(10));
    for (absl::string_view line : absl::StrSplit(pids.stdout_text, '\n', absl::SkipEmpty())) {
      int inside = 0;
      if (absl::SimpleAtoi(line, &inside) && inside > 0) kill(inside, SIGKILL);
    }
    if (Run({"ip", "netns", "del", name}).ok()) ++removed;
  }
  return removed;
}

absl::StatusOr<std::unique_ptr<VethFleet>> VethFleet::Create(const VethFleetOptions& options) {
  if (options.host_devices.empty() || options.host_devices.size() > kMaxPairs) {
    return absl::InvalidArgumentError(absl::StrCat(
        "VethFleet: 1..", kMaxPairs, " host devices, got ", options.host_devices.size()));
  }
  std::set<std::string> seen;
  for (const std::string& name : options.host_devices) {
    if (!ValidDeviceName(name) || !seen.insert(name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("VethFleet: bad or duplicate device name '", name, "'"));
    }
  }
  RemoveStaleVethFleets();
  std::unique_ptr<VethFleet> fleet(new VethFleet());
  if (absl::Status s = fleet->Build(options); !s.ok()) return s;  // the destructor cleans up
  return fleet;
}

absl::Status VethFleet::Build(const VethFleetOptions& options) {
  server_address_ = options.subnet + ".1";
  for (const std::string& name : options.host_devices) {
    // A namespace deleted a moment ago takes its veth pair with it asynchronously.
    const bool gone = WaitFor(
        [&] {
          std::error_code ec;
          return !std::filesystem::exists("/sys/class/net/" + name, ec);
        },
        absl::Seconds(10));
    if (!gone) {
      return absl::FailedPreconditionError(
          absl::StrCat("VethFleet: interface ", name,
                       " already exists and is not from a stale test run; remove it first"));
    }
  }
  for (size_t k = 0; k < options.host_devices.size(); ++k) {
    Veth v;
    v.host_device = options.host_devices[k];
    v.host_address = absl::StrCat(options.subnet, ".", 11 + k);
    v.netns = absl::StrCat(kPrefix, getpid(), "-", k);
    v.peer_device = kPeerDevice;
    v.peer_address = server_address_;
    if (absl::Status s = Run({"ip", "netns", "add", v.netns}); !s.ok()) return s;
    namespaces_.push_back(v.netns);
    // The peer is created inside the namespace: the pair lives and dies with it.
    if (absl::Status s = Run({"ip", "link", "add", v.host_device, "type", "veth", "peer", "name",
                              v.peer_device, "netns", v.netns});
        !s.ok()) {
      return s;
    }
    veths_.push_back(v);
    for (const std::vector<std::string>& argv : std::vector<std::vector<std::string>>{
             {"ip", "addr", "add", v.host_address + "/24", "dev", v.host_device},
             {"ip", "link", "set", v.host_device, "up"},
             {"ip", "-n", v.netns, "addr", "add", v.peer_address + "/24", "dev", v.peer_device},
             {"ip", "-n", v.netns, "link", "set", v.peer_device, "up"},
             {"ip", "-n", v.netns, "link", "set", "lo", "up"}}) {
      if (absl::Status s = Run(argv); !s.ok()) return s;
    }
  }
  if (!options.iperf_servers) return absl::OkStatus();
  for (const Veth& v : veths_) {
    absl::StatusOr<std::unique_ptr<ChildProcess>> server = ChildProcess::Start(
        {"ip", "netns", "exec", v.netns, "iperf3", "-s", "-B", v.peer_address, "--forceflush"});
    if (!server.ok()) return server.status();
    servers_.push_back(*std::move(server));
    absl::StatusOr<std::string> line = servers_.back()->WaitForLineContaining(
        Stream::kStdout, "Server listening", absl::Seconds(20));
    if (!line.ok()) {
      return absl::InternalError(absl::StrCat("iperf3 -s in ", v.netns,
                                              " did not start: ", line.status().message(), " ",
                                              servers_.back()->Text(Stream::kStderr)));
    }
  }
  return absl::OkStatus();
}

VethFleet::~VethFleet() {
  servers_.clear();  // SIGKILL to each server's process group, reaped
  // Deleting the host end removes the pair at once; a namespace's devices go asynchronously.
  for (const Veth& v : veths_) (void)Run({"ip", "link", "del", v.host_device});
  for (const std::string& netns : namespaces_) {
    (void)Run({"ip", "netns", "del", netns});
  }
}

std::string VethFleet::Logs() const {
  std::string logs;
  for (size_t k = 0; k < servers_.size(); ++k) {
    absl::StrAppend(&logs, "--- iperf3 -s in ", veths_[k].netns, "\n",
                    servers_[k]->Text(Stream::kStdout), servers_[k]->Text(Stream::kStderr));
  }
  return logs;
}

}  // namespace rxfleet::testing
