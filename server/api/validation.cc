#include "server/api/validation.h"

#include <set>
#include <string>
#include <string_view>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/host_labels.h"
#include "common/string_view_compat.h"
#include "common/validation.h"

namespace rxfleet::server {
namespace {

using common::ToAbslView;

absl::Status Invalid(std::string_view field, std::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(ToAbslView(field), ": ", ToAbslView(message)));
}

absl::Status CheckShort(std::string_view field, const std::string& value) {
  if (value.size() > kMaxShortStringLength) {
    return Invalid(field, absl::StrCat("longer than ", kMaxShortStringLength, " characters"));
  }
  return absl::OkStatus();
}

// The naming rules are common/validation.h's; this adds the field path.
absl::Status CheckField(std::string_view field, const absl::Status& status) {
  if (status.ok()) return status;
  return Invalid(field, common::ToStdView(status.message()));
}

absl::Status CheckMetricsAddress(const std::string& address) {
  if (address.empty()) return absl::OkStatus();
  if (absl::Status s = CheckShort("hello.metrics_address", address); !s.ok()) return s;
  const size_t colon = address.rfind(':');
  int port = 0;
  const bool bracketed = !address.empty() && address.front() == '[';
  const bool host_ok = colon != std::string::npos && colon > 0 &&
                       (!bracketed || address[colon - 1] == ']') &&
                       (bracketed || address.find(':') == colon);
  if (!host_ok || !absl::SimpleAtoi(address.substr(colon + 1), &port) || port < 1 || port > 65535) {
    return Invalid("hello.metrics_address",
                   absl::StrCat("'", absl::CHexEscape(address),
                                "' is not HOST:PORT (port 1..65535, IPv6 in brackets)"));
  }
  for (char c : address) {
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f || c == '/') {
      return Invalid("hello.metrics_address",
                     absl::StrCat("'", absl::CHexEscape(address),
                                  "' contains '/', spaces or control characters"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateHello(const v1::Hello& hello) {
  if (absl::Status s = CheckField("hello.host_id", common::ValidateHostId(hello.host_id()));
      !s.ok())
    return s;
  if (hello.labels_size() > static_cast<int>(kMaxHostLabels)) {
    return Invalid("hello.labels", absl::StrCat("more than ", kMaxHostLabels, " labels"));
  }
  for (const auto& [key, value] : hello.labels()) {
    if (absl::Status s = common::ValidateLabelKey(key); !s.ok()) {
      return Invalid("hello.labels", common::ToStdView(s.message()));
    }
    if (absl::Status s = common::ValidateLabelValue(value); !s.ok()) {
      return Invalid(absl::StrCat("hello.labels.", key), common::ToStdView(s.message()));
    }
  }
  if (absl::Status s = CheckShort("hello.agent_version", hello.agent_version()); !s.ok()) return s;
  if (hello.capabilities_size() > static_cast<int>(kMaxCapabilities)) {
    return Invalid("hello.capabilities",
                   absl::StrCat("more than ", kMaxCapabilities, " capabilities"));
  }
  for (const std::string& capability : hello.capabilities()) {
    if (absl::Status s = CheckShort("hello.capabilities", capability); !s.ok()) return s;
  }
  if (absl::Status s = CheckMetricsAddress(hello.metrics_address()); !s.ok()) return s;
  const v1::HostInfo& info = hello.host_info();
  for (const auto& [field, value] :
       {std::pair<const char*, const std::string*>{"hostname", &info.hostname()},
        {"kernel_release", &info.kernel_release()},
        {"arch", &info.arch()},
        {"os", &info.os()},
        {"cpu_model", &info.cpu_model()},
        {"board_model", &info.board_model()},
        {"boot_id", &info.boot_id()}}) {
    if (absl::Status s = CheckShort(absl::StrCat("hello.host_info.", field), *value); !s.ok()) {
      return s;
    }
  }
  if (absl::Status s = CheckShort("hello.instance_id", hello.instance_id()); !s.ok()) return s;
  return absl::OkStatus();
}

absl::Status ValidateAdapters(const google::protobuf::RepeatedPtrField<v1::Adapter>& adapters) {
  if (adapters.size() > static_cast<int>(kMaxAdaptersPerHost)) {
    return Invalid("adapters", absl::StrCat(adapters.size(), " adapters; at most ",
                                            kMaxAdaptersPerHost, " per host"));
  }
  std::set<std::string_view> seen;
  for (int i = 0; i < adapters.size(); ++i) {
    const std::string& id = adapters[i].metadata().name();
    if (absl::Status s = CheckField(absl::StrCat("adapters[", i, "].metadata.name"),
                                    common::ValidateAdapterId(id));
        !s.ok()) {
      return s;
    }
    if (!seen.insert(id).second) {
      return Invalid(absl::StrCat("adapters[", i, "].metadata.name"),
                     absl::StrCat("adapter id '", id, "' appears twice"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateAdapterUpdate(const v1::AdapterUpdate& update) {
  if (absl::Status s = ValidateAdapters(update.adapters()); !s.ok()) return s;
  if (update.removed_adapter_ids_size() > static_cast<int>(kMaxAdaptersPerHost)) {
    return Invalid("removed_adapter_ids", absl::StrCat("more than ", kMaxAdaptersPerHost, " ids"));
  }
  for (int i = 0; i < update.removed_adapter_ids_size(); ++i) {
    if (absl::Status s = CheckField(absl::StrCat("removed_adapter_ids[", i, "]"),
                                    common::ValidateAdapterId(update.removed_adapter_ids(i)));
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace rxfleet::server
