#include "agent/probes/netdev_address.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/string_view_compat.h"

namespace rxfleet::agent {

absl::StatusOr<std::string> PickNetdevIpv4(const std::vector<InterfaceAddress>& interfaces,
                                           std::string_view netdev) {
  if (netdev.empty()) return absl::NotFoundError("the adapter has no netdev");
  bool found = false;
  bool up = false;
  for (const InterfaceAddress& entry : interfaces) {
    if (entry.name != netdev) continue;
    found = true;
    up = up || entry.up;
    if (entry.up && !entry.ipv4.empty()) return entry.ipv4;
  }
  if (!found)
    return absl::NotFoundError(absl::StrCat("netdev ", common::ToAbslView(netdev), " is missing"));
  if (!up)
    return absl::FailedPreconditionError(
        absl::StrCat("netdev ", common::ToAbslView(netdev), " is down"));
  return absl::FailedPreconditionError(
      absl::StrCat("netdev ", common::ToAbslView(netdev), " has no IPv4 address"));
}

absl::StatusOr<std::vector<InterfaceAddress>> ReadInterfaceAddresses() {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) {
    return absl::InternalError(absl::StrCat("getifaddrs: ", std::strerror(errno)));
  }
  std::vector<InterfaceAddress> out;
  for (const ifaddrs* entry = list; entry != nullptr; entry = entry->ifa_next) {
    if (entry->ifa_name == nullptr) continue;
    InterfaceAddress address;
    address.name = entry->ifa_name;
    address.up = (entry->ifa_flags & IFF_UP) != 0;
    if (entry->ifa_addr != nullptr && entry->ifa_addr->sa_family == AF_INET) {
      char text[INET_ADDRSTRLEN] = {};
      const auto* in = reinterpret_cast<const sockaddr_in*>(entry->ifa_addr);
      if (::inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text)) != nullptr) address.ipv4 = text;
    }
    out.push_back(std::move(address));
  }
  ::freeifaddrs(list);
  return out;
}

}  // namespace rxfleet::agent
