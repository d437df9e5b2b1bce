#pragma once

// Real network interfaces for tests of active probes on emulated adapters: N veth pairs whose
// host ends carry the lab's netdev names and whose peers sit in throwaway network namespaces,
// each with its own `iperf3 -s`. rxfleet-emulate's `netdev.shape` then keeps a tbf on each
// peer at the traffic model's capacity (docs/EMULATOR.md, "Shaped netdevs").
//
// Addressing: every host end is on one subnet (S.11, S.12, ... /24 for S = options.subnet)
// and every peer has the same address S.1/24 in its own namespace. A probe reaches "its"
// iperf3 server only when it binds to the device (SO_BINDTODEVICE, iperf3 -B addr%dev), which
// is what the agent does; unbound traffic to S.1 takes the first route.
//
// Needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN), `ip` (iproute2) and `iperf3`. Namespaces are
// named "rxfleet-t<pid>-<k>"; deleting one removes its veth pair. The destructor removes
// everything; Create first removes the namespaces of test processes that no longer run (a
// crashed or killed run), with whatever still runs inside them.

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tests/support/process.h"

namespace rxfleet::testing {

/// One veth pair of a VethFleet.
struct Veth {
  std::string host_device;   ///< in the test's namespace: the lab's netdev name (<= 15 chars)
  std::string host_address;  ///< "S.(11+k)", prefix length 24
  std::string netns;         ///< "rxfleet-t<pid>-<k>", in /run/netns
  std::string peer_device;   ///< "peer", inside netns
  std::string peer_address;  ///< "S.1", prefix length 24, the same in every namespace
};

struct VethFleetOptions {
  /// Host-end names, 1..50 of them, unique, 1..15 characters; none may exist yet (after the
  /// stale namespaces are gone).
  std::vector<std::string> host_devices;
  /// First three octets of the /24 every pair uses.
  std::string subnet = "10.99.0";
  /// Start `iperf3 -s -B S.1` in every namespace and wait until it listens.
  bool iperf_servers = true;
};

class VethFleet {
 public:
  /// Builds the pairs (and servers). Errors: InvalidArgument for bad options,
  /// FailedPrecondition if a host device name is taken, Internal with the failing command's
  /// output otherwise; whatever was built is removed again.
  static absl::StatusOr<std::unique_ptr<VethFleet>> Create(const VethFleetOptions& options);

  ~VethFleet();
  VethFleet(const VethFleet&) = delete;
  VethFleet& operator=(const VethFleet&) = delete;

  const std::vector<Veth>& veths() const { return veths_; }
  /// The iperf3 servers' address, S.1 (reachable through every host device).
  const std::string& server_address() const { return server_address_; }
  /// Output of the iperf3 servers so far, for failure messages.
  std::string Logs() const;

 private:
  VethFleet() = default;
  absl::Status Build(const VethFleetOptions& options);

  std::vector<Veth> veths_;
  std::vector<std::string> namespaces_;  ///< created so far, removed by the destructor
  std::vector<std::unique_ptr<ChildProcess>> servers_;
  std::string server_address_;
};

/// Empty when this process may create network namespaces and veth pairs (effective uid 0,
/// `ip` and `iperf3` found), else the reason, for GTEST_SKIP.
std::string VethFleetUnavailableReason();

/// Removes the namespaces "rxfleet-t<pid>-*" of processes that no longer run, killing the
/// processes still inside them. Returns how many were removed.
int RemoveStaleVethFleets();

}  // namespace rxfleet::testing
