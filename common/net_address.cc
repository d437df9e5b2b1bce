#include "common/net_address.h"

#include <cstdint>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace rxfleet::common {

absl::Status ValidateHostPort(std::string_view address) {
  const std::string text(address);
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("address \"", text, "\" needs a port: HOST:PORT, e.g. 127.0.0.1:7443"));
  }
  const std::string host = text.substr(0, colon);
  const std::string port = text.substr(colon + 1);
  if (host.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("address \"", text, "\" has no host"));
  }
  if (host.front() != '[' && host.find(':') != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("address \"", text, "\": write an IPv6 host in brackets, e.g. [::1]:7443"));
  }
  uint32_t number = 0;
  if (port.empty() || port.find_first_not_of("0123456789") != std::string::npos ||
      !absl::SimpleAtoi(port, &number) || number > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("address \"", text, "\": port must be a number from 0 to 65535"));
  }
  return absl::OkStatus();
}

}  // namespace rxfleet::common
