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
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"

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

absl::Status CheckLength(const std::string& field, const std::string& value, size_t max) {
  if (value.size() > max) {
    return Invalid(field, absl::StrCat(value.size(), " characters; at most ", max));
  }
  return absl::OkStatus();
}

// Every string an agent reports about an adapter, and every list in it, has a bound; the walk
// is by reflection so fields added to the proto later are bounded too.
absl::Status CheckMessageBounds(const google::protobuf::Message& message, const std::string& path) {
  const google::protobuf::Reflection* reflection = message.GetReflection();
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  reflection->ListFields(message, &fields);
  for (const google::protobuf::FieldDescriptor* field : fields) {
    const std::string field_path = absl::StrCat(path, ".", field->name());
    const size_t max_length =
        field->name() == "message" ? kMaxAgentTextLength : kMaxShortStringLength;
    if (field->is_repeated()) {
      const int count = reflection->FieldSize(message, field);
      if (count > static_cast<int>(kMaxAdapterListEntries)) {
        return Invalid(field_path,
                       absl::StrCat(count, " entries; at most ", kMaxAdapterListEntries));
      }
      for (int i = 0; i < count; ++i) {
        const std::string item_path = absl::StrCat(field_path, "[", i, "]");
        if (field->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_STRING) {
          std::string scratch;
          const std::string& value =
              reflection->GetRepeatedStringReference(message, field, i, &scratch);
          if (absl::Status s = CheckLength(item_path, value, max_length); !s.ok()) return s;
        } else if (field->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE) {
          if (absl::Status s =
                  CheckMessageBounds(reflection->GetRepeatedMessage(message, field, i), item_path);
              !s.ok()) {
            return s;
          }
        }
      }
    } else if (field->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_STRING) {
      std::string scratch;
      const std::string& value = reflection->GetStringReference(message, field, &scratch);
      if (absl::Status s = CheckLength(field_path, value, max_length); !s.ok()) return s;
    } else if (field->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE) {
      if (absl::Status s = CheckMessageBounds(reflection->GetMessage(message, field), field_path);
          !s.ok()) {
        return s;
      }
    }
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

absl::Status ValidateAdapters(const google::protobuf::RepeatedPtrField<v1::Adapter>& adapters,
                              size_t max_adapters) {
  if (adapters.size() > static_cast<int>(max_adapters)) {
    return Invalid("adapters",
                   absl::StrCat(adapters.size(), " adapters; at most ", max_adapters,
                                " adapters per host (rxfleet-server --max-adapters-per-host)"));
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
    const std::string path = absl::StrCat("adapters[", i, "]");
    if (const size_t bytes = adapters[i].ByteSizeLong(); bytes > kMaxAdapterBytes) {
      return Invalid(path,
                     absl::StrCat(bytes, " bytes; at most ", kMaxAdapterBytes, " per adapter"));
    }
    if (absl::Status s = CheckMessageBounds(adapters[i], path); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status ValidateAdapterUpdate(const v1::AdapterUpdate& update, size_t max_adapters) {
  if (absl::Status s = ValidateAdapters(update.adapters(), max_adapters); !s.ok()) return s;
  if (update.removed_adapter_ids_size() > static_cast<int>(max_adapters)) {
    return Invalid("removed_adapter_ids", absl::StrCat("more than ", max_adapters, " ids"));
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
