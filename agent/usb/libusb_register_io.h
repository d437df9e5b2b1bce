#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "agent/usb/register_io.h"
#include "common/chips/family.h"

struct libusb_context;
struct libusb_device_handle;

namespace rxfleet::agent {

/// The single libusb call LibusbRegisterIo needs, behind a seam so tests can force rare errors.
class ControlTransport {
 public:
  virtual ~ControlTransport();

  /// Issues one control transfer, with the semantics of libusb_control_transfer: `data` is the
  /// data stage (read into for IN requests, sent for OUT requests; its size is wLength).
  /// Returns the number of bytes transferred (>= 0) or a negative `enum libusb_error` code.
  virtual int ControlTransfer(uint8_t request_type, uint8_t request, uint16_t value, uint16_t index,
                              std::span<uint8_t> data, unsigned int timeout_ms) = 0;
};

/// ControlTransport over an open libusb device handle, which it owns and closes on destruction.
/// It never claims an interface and never detaches the kernel driver: vendor control requests
/// on endpoint 0 need neither, so the rtw89 driver keeps running undisturbed.
class LibusbControlTransport : public ControlTransport {
 public:
  /// Takes ownership of `handle` (must not be null). `context`, if given, is the libusb context
  /// the handle belongs to; holding it keeps the context alive until the handle is closed.
  explicit LibusbControlTransport(libusb_device_handle* handle,
                                  std::shared_ptr<libusb_context> context = nullptr);
  ~LibusbControlTransport() override;
  LibusbControlTransport(const LibusbControlTransport&) = delete;
  LibusbControlTransport& operator=(const LibusbControlTransport&) = delete;

  int ControlTransfer(uint8_t request_type, uint8_t request, uint16_t value, uint16_t index,
                      std::span<uint8_t> data, unsigned int timeout_ms) override;

 private:
  libusb_device_handle* handle_;
  std::shared_ptr<libusb_context> context_;
};

/// Vendor-request constants of the rtw89 USB register protocol (rtw89 usb.h: RTW89_USB_VENQT,
/// RTW89_USB_VENQT_READ, RTW89_USB_VENQT_WRITE; usb.c rtw89_usb_vendorreq: wValue = addr[15:0],
/// wIndex = addr[23:16], 500 ms per transfer, little-endian data). The Realtek vendor drivers
/// use the same values (usb_ops.h: REALTEK_USB_VENQT_*).
inline constexpr uint8_t kRtw89UsbVendorRequest = 0x05;
inline constexpr uint8_t kRtw89UsbRequestTypeRead = 0xC0;   // device-to-host | vendor | device
inline constexpr uint8_t kRtw89UsbRequestTypeWrite = 0x40;  // host-to-device | vendor | device
inline constexpr unsigned int kRtw89UsbTimeoutMs = 500;
/// Largest register address the protocol can encode (wIndex carries bits 23:16 only).
inline constexpr uint32_t kRtw89MaxRegisterAddress = 0x00FFFFFF;

/// RegisterIo speaking a chip family's vendor-request protocol (common::RegisterProtocol: rtw89,
/// rtw88 or mt76) over a ControlTransport.
///
/// Write permission: a protocol without `writable` (rtw88, mt76: observe-only families) makes
/// Write32 return PermissionDenied for every address without any bus traffic, so no caller can
/// write to such an adapter whatever it asks for.
///
/// Safety net: the object is created with an allow-list of register addresses (the layout's RX
/// aggregation registers, e.g. {0x8900} for layout v1 or {0x6000, 0x6004} for v2/v3). Read32 and
/// Write32 of any other address return PermissionDenied without any bus traffic.
///
/// Retries: a transfer that fails with a transient error (TIMEOUT, IO, OVERFLOW, INTERRUPTED,
/// BUSY, OTHER) or transfers fewer than 4 bytes is retried, up to `max_attempts` attempts in all.
/// NO_DEVICE, NOT_FOUND, PIPE (stall), ACCESS, NOT_SUPPORTED, NO_MEM and INVALID_PARAM are
/// returned at once. (rtw89 itself retries up to 10 times and declares the device unplugged after
/// more than 4 consecutive errors, usb.c; the agent reconciles again later, so fewer suffice.)
///
/// Error codes: see RegisterIo; a persistent short transfer is Internal. Not thread-safe.
class LibusbRegisterIo : public RegisterIo {
 public:
  static constexpr int kDefaultMaxAttempts = 3;

  /// Validates the allow-list: it must be non-empty and every address must be 4-byte aligned
  /// and <= kRtw89MaxRegisterAddress; otherwise returns InvalidArgument. `max_attempts` must be
  /// >= 1 (InvalidArgument otherwise).
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<LibusbRegisterIo>> Create(
      std::unique_ptr<ControlTransport> transport, std::vector<uint32_t> allowed_addresses,
      int max_attempts = kDefaultMaxAttempts);

  /// The same for another family's protocol (addresses must be <= protocol.max_address).
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<LibusbRegisterIo>> Create(
      std::unique_ptr<ControlTransport> transport, std::vector<uint32_t> allowed_addresses,
      const common::RegisterProtocol& protocol, int max_attempts = kDefaultMaxAttempts);

  /// IN request: the protocol's read bmRequestType and bRequest (rtw89: 0xC0, 0x05), wValue /
  /// wIndex per its address encoding (rtw89: addr[15:0] / addr[23:16]), wLength 4; the 4 data
  /// bytes are decoded little-endian.
  [[nodiscard]] absl::StatusOr<uint32_t> Read32(uint32_t address) override;

  /// OUT request: bmRequestType 0x40, bRequest 0x05, wValue addr[15:0], wIndex addr[23:16],
  /// wLength 4; `value` is sent little-endian. PermissionDenied without bus traffic when the
  /// protocol is not writable (observe-only family) or the address is not allowed.
  [[nodiscard]] absl::Status Write32(uint32_t address, uint32_t value) override;

  /// Number of control transfers issued so far (all attempts, successful or not).
  uint64_t transfer_count() const { return transfer_count_; }
  uint64_t failed_attempts() const override { return failed_attempts_; }
  absl::Status last_failed_attempt() const override { return last_failed_attempt_; }

  /// The allow-list, sorted and without duplicates.
  const std::vector<uint32_t>& allowed_addresses() const { return allowed_addresses_; }

 private:
  LibusbRegisterIo(std::unique_ptr<ControlTransport> transport,
                   std::vector<uint32_t> allowed_addresses,
                   const common::RegisterProtocol& protocol, int max_attempts);

  absl::Status CheckAllowed(uint32_t address, std::string_view operation) const;
  absl::Status Transfer(uint8_t request_type, uint32_t address, std::span<uint8_t> data,
                        std::string_view operation);

  std::unique_ptr<ControlTransport> transport_;
  std::vector<uint32_t> allowed_addresses_;
  common::RegisterProtocol protocol_;
  int max_attempts_;
  uint64_t transfer_count_ = 0;
  uint64_t failed_attempts_ = 0;
  absl::Status last_failed_attempt_;
};

}  // namespace rxfleet::agent
