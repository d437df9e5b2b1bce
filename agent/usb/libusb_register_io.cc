#include "agent/usb/libusb_register_io.h"

#include <libusb.h>

#include <algorithm>
#include <array>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "agent/usb/libusb_status.h"

namespace rxfleet::agent {
namespace {

bool IsTransient(int code) {
  switch (code) {
    case LIBUSB_ERROR_TIMEOUT:
    case LIBUSB_ERROR_IO:
    case LIBUSB_ERROR_OVERFLOW:
    case LIBUSB_ERROR_INTERRUPTED:
    case LIBUSB_ERROR_BUSY:
    case LIBUSB_ERROR_OTHER:
      return true;
    default:
      return false;
  }
}

std::string FormatAddresses(const std::vector<uint32_t>& addresses) {
  return absl::StrJoin(addresses, ", ", [](std::string* out, uint32_t address) {
    absl::StrAppendFormat(out, "0x%04X", address);
  });
}

}  // namespace

ControlTransport::~ControlTransport() = default;

LibusbControlTransport::LibusbControlTransport(libusb_device_handle* handle,
                                               std::shared_ptr<libusb_context> context)
    : handle_(handle), context_(std::move(context)) {}

LibusbControlTransport::~LibusbControlTransport() {
  if (handle_ != nullptr) libusb_close(handle_);
}

int LibusbControlTransport::ControlTransfer(uint8_t request_type, uint8_t request, uint16_t value,
                                            uint16_t index, std::span<uint8_t> data,
                                            unsigned int timeout_ms) {
  if (data.size() > UINT16_MAX) return LIBUSB_ERROR_INVALID_PARAM;
  return libusb_control_transfer(handle_, request_type, request, value, index, data.data(),
                                 static_cast<uint16_t>(data.size()), timeout_ms);
}

absl::StatusOr<std::unique_ptr<LibusbRegisterIo>> LibusbRegisterIo::Create(
    std::unique_ptr<ControlTransport> transport, std::vector<uint32_t> allowed_addresses,
    int max_attempts) {
  return Create(std::move(transport), std::move(allowed_addresses), common::Rtw89Protocol(),
                max_attempts);
}

absl::StatusOr<std::unique_ptr<LibusbRegisterIo>> LibusbRegisterIo::Create(
    std::unique_ptr<ControlTransport> transport, std::vector<uint32_t> allowed_addresses,
    const common::RegisterProtocol& protocol, int max_attempts) {
  if (transport == nullptr) return absl::InvalidArgumentError("register access without transport");
  if (max_attempts < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_attempts must be >= 1, got ", max_attempts));
  }
  if (allowed_addresses.empty()) {
    return absl::InvalidArgumentError("register allow-list is empty");
  }
  for (uint32_t address : allowed_addresses) {
    if (address % 4 != 0 || address > protocol.max_address) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "register 0x%X cannot be allow-listed: 32-bit registers are 4-byte aligned and at most "
          "0x%X",
          address, protocol.max_address));
    }
  }
  std::sort(allowed_addresses.begin(), allowed_addresses.end());
  allowed_addresses.erase(std::unique(allowed_addresses.begin(), allowed_addresses.end()),
                          allowed_addresses.end());
  return std::unique_ptr<LibusbRegisterIo>(new LibusbRegisterIo(
      std::move(transport), std::move(allowed_addresses), protocol, max_attempts));
}

LibusbRegisterIo::LibusbRegisterIo(std::unique_ptr<ControlTransport> transport,
                                   std::vector<uint32_t> allowed_addresses,
                                   const common::RegisterProtocol& protocol, int max_attempts)
    : transport_(std::move(transport)),
      allowed_addresses_(std::move(allowed_addresses)),
      protocol_(protocol),
      max_attempts_(max_attempts) {}

absl::Status LibusbRegisterIo::CheckAllowed(uint32_t address, std::string_view operation) const {
  if (std::binary_search(allowed_addresses_.begin(), allowed_addresses_.end(), address)) {
    return absl::OkStatus();
  }
  return absl::PermissionDeniedError(
      absl::StrFormat("%s of register 0x%04X refused: not an allowed register (allowed: %s)",
                      operation, address, FormatAddresses(allowed_addresses_)));
}

absl::Status LibusbRegisterIo::Transfer(uint8_t request_type, uint32_t address,
                                        std::span<uint8_t> data, std::string_view operation) {
  const common::WireAddress wire = common::EncodeAddress(protocol_.encoding, address);
  const bool in = (request_type & 0x80) != 0;
  const uint8_t request = in ? protocol_.read_request : protocol_.write_request;
  int result = 0;
  for (int attempt = 1; attempt <= max_attempts_; ++attempt) {
    ++transfer_count_;
    result = transport_->ControlTransfer(request_type, request, wire.value, wire.index, data,
                                         protocol_.timeout_ms);
    if (result == static_cast<int>(data.size())) return absl::OkStatus();
    ++failed_attempts_;
    last_failed_attempt_ =
        result >= 0 ? absl::InternalError("short transfer") : StatusFromLibusb(result, operation);
    if (result >= 0) continue;  // short transfer: retry
    if (!IsTransient(result)) break;
  }
  const std::string context = absl::StrFormat("%s of register 0x%04X", operation, address);
  if (result >= 0) {
    return absl::InternalError(
        absl::StrFormat("%s: short transfer, %d of %d bytes after %d attempts", context, result,
                        data.size(), max_attempts_));
  }
  return StatusFromLibusb(result, context);
}

absl::StatusOr<uint32_t> LibusbRegisterIo::Read32(uint32_t address) {
  if (absl::Status allowed = CheckAllowed(address, "read"); !allowed.ok()) return allowed;
  std::array<uint8_t, 4> data{};
  if (absl::Status status = Transfer(protocol_.read_request_type, address, data, "read");
      !status.ok()) {
    return status;
  }
  return static_cast<uint32_t>(data[0]) | static_cast<uint32_t>(data[1]) << 8 |
         static_cast<uint32_t>(data[2]) << 16 | static_cast<uint32_t>(data[3]) << 24;
}

absl::Status LibusbRegisterIo::Write32(uint32_t address, uint32_t value) {
  if (!protocol_.writable) {
    return absl::PermissionDeniedError(absl::StrFormat(
        "write of register 0x%04X refused: this chip family is observe-only (its driver owns RX "
        "aggregation); rxfleet never writes it",
        address));
  }
  if (absl::Status allowed = CheckAllowed(address, "write"); !allowed.ok()) return allowed;
  std::array<uint8_t, 4> data = {static_cast<uint8_t>(value), static_cast<uint8_t>(value >> 8),
                                 static_cast<uint8_t>(value >> 16),
                                 static_cast<uint8_t>(value >> 24)};
  return Transfer(protocol_.write_request_type, address, data, "write");
}

}  // namespace rxfleet::agent
