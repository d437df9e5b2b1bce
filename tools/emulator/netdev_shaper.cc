#include "tools/emulator/netdev_shaper.h"

#include <fcntl.h>
#include <linux/capability.h>
#include <linux/pkt_sched.h>
#include <netlink/netlink.h>
#include <netlink/route/link.h>
#include <netlink/route/qdisc.h>
#include <netlink/route/qdisc/tbf.h>
#include <netlink/route/tc.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <thread>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace rxfleet::emulator {
namespace {

constexpr uint32_t kMinBucketBytes = 64 * 1024;
constexpr double kBucketSeconds = 0.004;
constexpr uint32_t kLatencyUs = 50'000;

absl::Status NetlinkError(int err, const std::string& what) {
  const std::string message = absl::StrCat(what, ": ", nl_geterror(err));
  switch (err < 0 ? -err : err) {
    case NLE_PERM:
      return absl::PermissionDeniedError(
          absl::StrCat(message, " (needs CAP_NET_ADMIN: run rxfleet-emulate as root)"));
    case NLE_OBJ_NOTFOUND:
    case NLE_NODEV:
      return absl::NotFoundError(message);
    default:
      return absl::InternalError(message);
  }
}

struct SocketDeleter {
  void operator()(nl_sock* sock) const { nl_socket_free(sock); }
};
using Socket = std::unique_ptr<nl_sock, SocketDeleter>;

// A NETLINK_ROUTE socket inside /run/netns/<netns>, made on a thread of its own.
absl::StatusOr<Socket> OpenSocketIn(const std::string& netns) {
  const std::string path = absl::StrCat("/run/netns/", netns);
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int e = errno;
    if (e == ENOENT) {
      return absl::NotFoundError(absl::StrCat("network namespace ", netns, ": no ", path,
                                              " (create it with `ip netns add ", netns, "`)"));
    }
    return absl::PermissionDeniedError(
        absl::StrCat("network namespace ", netns, ": cannot open ", path, ": ", strerror(e)));
  }
  absl::StatusOr<Socket> result = absl::InternalError("not run");
  std::thread worker([&] {
    if (setns(fd, CLONE_NEWNET) != 0) {
      const int e = errno;
      const std::string message =
          absl::StrCat("network namespace ", netns, ": setns: ", strerror(e));
      result = e == EPERM ? absl::PermissionDeniedError(absl::StrCat(
                                message, " (needs CAP_SYS_ADMIN: run rxfleet-emulate as root)"))
                          : absl::InternalError(message);
      return;
    }
    Socket sock(nl_socket_alloc());
    if (!sock) {
      result = absl::InternalError("nl_socket_alloc failed");
      return;
    }
    if (int err = nl_connect(sock.get(), NETLINK_ROUTE); err < 0) {
      result = NetlinkError(err, absl::StrCat("network namespace ", netns, ": netlink"));
      return;
    }
    result = std::move(sock);
  });
  worker.join();
  close(fd);
  return result;
}

class NetlinkShaper : public NetdevShaper {
 public:
  absl::Status SetRate(const ShapeSpec& shape, uint64_t rate_bps) override {
    auto it = sockets_.find(shape.netns);
    if (it == sockets_.end()) {
      absl::StatusOr<Socket> sock = OpenSocketIn(shape.netns);
      if (!sock.ok()) return sock.status();
      it = sockets_.emplace(shape.netns, *std::move(sock)).first;
    }
    nl_sock* sock = it->second.get();
    const std::string where = absl::StrCat(shape.device, " in network namespace ", shape.netns);

    rtnl_link* link = nullptr;
    if (int err = rtnl_link_get_kernel(sock, 0, shape.device.c_str(), &link); err < 0) {
      return NetlinkError(err, absl::StrCat("no interface ", where));
    }
    const int ifindex = rtnl_link_get_ifindex(link);
    rtnl_link_put(link);

    const TbfParameters p = TbfParametersFor(rate_bps);
    rtnl_qdisc* qdisc = rtnl_qdisc_alloc();
    if (qdisc == nullptr) return absl::InternalError("rtnl_qdisc_alloc failed");
    rtnl_tc_set_ifindex(TC_CAST(qdisc), ifindex);
    rtnl_tc_set_parent(TC_CAST(qdisc), TC_H_ROOT);
    absl::Status status;
    if (int err = rtnl_tc_set_kind(TC_CAST(qdisc), "tbf"); err < 0) {
      status = NetlinkError(err, "tbf");
    } else {
      rtnl_qdisc_tbf_set_rate(qdisc, static_cast<int>(p.rate_bytes_per_second),
                              static_cast<int>(p.bucket_bytes), 0);
      if (err = rtnl_qdisc_tbf_set_limit_by_latency(qdisc, static_cast<int>(p.latency_us));
          err < 0) {
        status = NetlinkError(err, "tbf limit");
      } else if (err = rtnl_qdisc_add(sock, qdisc, NLM_F_CREATE | NLM_F_REPLACE); err < 0) {
        status = NetlinkError(err, absl::StrCat("tbf at ", rate_bps, " bit/s on ", where));
      }
    }
    rtnl_qdisc_put(qdisc);
    return status;
  }

 private:
  std::map<std::string, Socket> sockets_;
};

}  // namespace

TbfParameters TbfParametersFor(uint64_t rate_bps) {
  TbfParameters p;
  // libnl takes the rate as an int of bytes/s: 17 Gbit/s is far beyond any model figure.
  p.rate_bytes_per_second =
      std::min<uint64_t>(std::max<uint64_t>(rate_bps / 8, 1000),
                         static_cast<uint64_t>(std::numeric_limits<int>::max()));
  p.bucket_bytes = static_cast<uint32_t>(std::max<double>(
      kMinBucketBytes, static_cast<double>(p.rate_bytes_per_second) * kBucketSeconds));
  p.latency_us = kLatencyUs;
  return p;
}

std::unique_ptr<NetdevShaper> MakeNetlinkShaper() { return std::make_unique<NetlinkShaper>(); }

absl::Status CheckShapePrivileges() {
  __user_cap_header_struct header{};
  header.version = _LINUX_CAPABILITY_VERSION_3;
  header.pid = 0;
  __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};
  if (syscall(SYS_capget, &header, data) != 0) {
    return absl::InternalError(absl::StrCat("capget: ", strerror(errno)));
  }
  auto has = [&](int cap) { return (data[cap / 32].effective & (1u << (cap % 32))) != 0; };
  std::string missing;
  if (!has(CAP_NET_ADMIN)) missing = "CAP_NET_ADMIN";
  if (!has(CAP_SYS_ADMIN))
    absl::StrAppend(&missing, missing.empty() ? "" : " and ", "CAP_SYS_ADMIN");
  if (missing.empty()) return absl::OkStatus();
  return absl::PermissionDeniedError(
      absl::StrCat("netdev.shape needs CAP_NET_ADMIN (tbf qdiscs) and CAP_SYS_ADMIN (setns into "
                   "/run/netns/...); this process lacks ",
                   missing, ": run rxfleet-emulate as root"));
}

}  // namespace rxfleet::emulator
