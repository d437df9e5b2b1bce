#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace rxfleet::agent {

/// 32-bit register access to one rtw89 USB adapter's MAC registers.
///
/// Addresses are the chip's MAC register addresses as the rtw89 driver uses them (e.g.
/// R_AX_RXAGG_0 = 0x8900, R_AX_RXAGG_1_V1 / R_BE_RXAGG_1_V1 = 0x6004; rtw89 usb.h). Values are
/// host-order integers; implementations handle the little-endian wire format.
///
/// Implementations are not thread-safe: one owner talks to one adapter at a time.
///
/// Error codes returned by both methods:
///  - Unavailable: the device is gone (unplugged, re-enumerated); the object is useless from
///    then on and should be destroyed.
///  - DeadlineExceeded: the device did not answer in time (after the implementation's retries).
///  - FailedPrecondition: the device stalled the request.
///  - PermissionDenied: the OS refused access, or the address is not in the allow-list the
///    object was created with (in which case nothing was sent to the device).
///  - Unimplemented: the platform cannot issue the request.
///  - Internal: any other transport failure (I/O error, short transfer, overflow).
class RegisterIo {
 public:
  virtual ~RegisterIo();

  /// Reads the 32-bit register at `address`.
  [[nodiscard]] virtual absl::StatusOr<uint32_t> Read32(uint32_t address) = 0;

  /// Writes `value` to the 32-bit register at `address`.
  [[nodiscard]] virtual absl::Status Write32(uint32_t address, uint32_t value) = 0;

  /// Failed transfer attempts so far, including ones a retry recovered, and the error of the
  /// last one (OK if none). Implementations without retries may report 0 / OK.
  virtual uint64_t failed_attempts() const { return 0; }
  virtual absl::Status last_failed_attempt() const { return absl::OkStatus(); }
};

}  // namespace rxfleet::agent
