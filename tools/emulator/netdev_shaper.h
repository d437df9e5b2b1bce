#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "tools/emulator/lab.h"

namespace rxfleet::emulator {

// Shaped netdevs (ShapeSpec, docs/EMULATOR.md "Shaped netdevs"): the emulator sets the rate of
// a tbf qdisc on an interface inside another network namespace whenever the traffic model's
// capacity of the adapter changes. This is the narrow OS boundary of that feature; the
// emulator core only computes rates (ShapedRateBps) and calls SetRate.

/// Sets the egress rate of a real interface.
class NetdevShaper {
 public:
  virtual ~NetdevShaper() = default;

  /// Makes the root qdisc of `shape.device` in namespace `shape.netns` a tbf at `rate_bps`
  /// (bit/s, >= 8000; replaces whatever root qdisc is there). Errors: NotFound (no
  /// /run/netns/<netns>, or no such device in it), PermissionDenied (no CAP_NET_ADMIN /
  /// CAP_SYS_ADMIN), Internal (any other netlink failure); messages name the namespace and
  /// the device.
  virtual absl::Status SetRate(const ShapeSpec& shape, uint64_t rate_bps) = 0;
};

/// tbf parameters for a rate (bytes and µs, as tc takes them): the bucket holds 4 ms at the
/// rate but at least 64 KiB (a TCP window's burst on a veth), the queue 50 ms of latency.
struct TbfParameters {
  uint64_t rate_bytes_per_second = 0;
  uint32_t bucket_bytes = 0;
  uint32_t latency_us = 0;
};
TbfParameters TbfParametersFor(uint64_t rate_bps);

/// The libnl-route-3 implementation: one NETLINK_ROUTE socket per namespace, created by a
/// short-lived thread that setns()-es into /run/netns/<netns> (a netlink socket stays in the
/// namespace it was created in), so the emulator's own threads never change namespace.
std::unique_ptr<NetdevShaper> MakeNetlinkShaper();

/// OK when this process has CAP_NET_ADMIN and CAP_SYS_ADMIN in its effective set (the shape
/// option needs both: tbf changes, and setns into another network namespace); else
/// PermissionDenied saying what is missing and that rxfleet-emulate must run as root.
absl::Status CheckShapePrivileges();

}  // namespace rxfleet::emulator
