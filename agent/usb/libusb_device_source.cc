#include "agent/usb/libusb_device_source.h"

#include <libusb.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "agent/usb/libusb_register_io.h"
#include "agent/usb/libusb_status.h"

namespace rxfleet::agent {
namespace {

// libusb_get_port_numbers: "As per the USB 3.0 specs, the current maximum limit for the depth
// is 7" (libusb.h).
constexpr int kMaxPortNumbers = 7;

common::UsbSpeed SpeedFromLibusb(int speed) {
  switch (speed) {
    case LIBUSB_SPEED_LOW:
      return common::UsbSpeed::kLow;
    case LIBUSB_SPEED_FULL:
      return common::UsbSpeed::kFull;
    case LIBUSB_SPEED_HIGH:
      return common::UsbSpeed::kHigh;
    case LIBUSB_SPEED_SUPER:
      return common::UsbSpeed::kSuper;
    case LIBUSB_SPEED_SUPER_PLUS:
      return common::UsbSpeed::kSuperPlus;
    default:
      return common::UsbSpeed::kUnknown;
  }
}

// Owns the array returned by libusb_get_device_list (unreferencing the devices on release).
struct DeviceListDeleter {
  void operator()(libusb_device** list) const { libusb_free_device_list(list, /*unref=*/1); }
};
using DeviceList = std::unique_ptr<libusb_device*, DeviceListDeleter>;

std::string DescribeForError(const UsbDeviceInfo& device) {
  return absl::StrFormat("%s (%04x:%04x, bus %d device %d)", device.port_path, device.vid,
                         device.pid, device.bus, device.devnum);
}

}  // namespace

// Bridge from libusb's C callback to the private member (a friend of LibusbDeviceSource).
struct LibusbHotplugBridge {
  static void Deliver(LibusbDeviceSource* source, libusb_device* device, bool arrived);
};

namespace {

int LIBUSB_CALL HotplugTrampoline(libusb_context* /*context*/, libusb_device* device,
                                  libusb_hotplug_event event, void* user_data) {
  LibusbHotplugBridge::Deliver(static_cast<LibusbDeviceSource*>(user_data), device,
                               event == LIBUSB_HOTPLUG_EVENT_DEVICE_ARRIVED);
  return 0;  // stay registered
}

}  // namespace

absl::StatusOr<std::unique_ptr<DeviceSource>> CreateLibusbDeviceSource(std::string sysfs_root) {
  absl::StatusOr<std::unique_ptr<LibusbDeviceSource>> source =
      LibusbDeviceSource::Create(std::move(sysfs_root));
  if (!source.ok()) return source.status();
  return std::unique_ptr<DeviceSource>(std::move(*source));
}

absl::StatusOr<std::unique_ptr<LibusbDeviceSource>> LibusbDeviceSource::Create(
    std::string sysfs_root) {
  libusb_context* raw_context = nullptr;
  if (const int rc = libusb_init(&raw_context); rc < 0) {
    return absl::InternalError(StatusFromLibusb(rc, "libusb_init").message());
  }
  std::shared_ptr<libusb_context> context(raw_context, [](libusb_context* c) { libusb_exit(c); });
  return std::unique_ptr<LibusbDeviceSource>(
      new LibusbDeviceSource(std::move(context), std::move(sysfs_root)));
}

LibusbDeviceSource::LibusbDeviceSource(std::shared_ptr<libusb_context> context,
                                       std::string sysfs_root)
    : context_(std::move(context)), sysfs_(std::move(sysfs_root)) {}

LibusbDeviceSource::~LibusbDeviceSource() { Stop(); }

std::optional<UsbDeviceInfo> LibusbDeviceSource::Describe(libusb_device* device) const {
  libusb_device_descriptor descriptor{};
  if (libusb_get_device_descriptor(device, &descriptor) < 0) return std::nullopt;
  if (descriptor.bDeviceClass == LIBUSB_CLASS_HUB) return std::nullopt;

  std::array<uint8_t, kMaxPortNumbers> ports{};
  const int port_count = libusb_get_port_numbers(device, ports.data(), ports.size());
  if (port_count <= 0) return std::nullopt;  // a root hub, or deeper than USB allows

  UsbDeviceInfo info;
  info.bus = libusb_get_bus_number(device);
  info.port_numbers.assign(ports.begin(), ports.begin() + port_count);
  info.port_path = absl::StrCat(
      info.bus, "-", absl::StrJoin(info.port_numbers, ".", [](std::string* out, uint8_t port) {
        absl::StrAppend(out, port);
      }));
  info.devnum = libusb_get_device_address(device);
  info.vid = descriptor.idVendor;
  info.pid = descriptor.idProduct;
  info.bcd_usb = descriptor.bcdUSB;
  info.bcd_device = descriptor.bcdDevice;
  info.speed = SpeedFromLibusb(libusb_get_device_speed(device));
  if (info.speed == common::UsbSpeed::kUnknown) {
    if (std::optional<std::string> speed = sysfs_.ReadAttribute(info.port_path, "speed")) {
      info.speed = common::UsbSpeedFromSysfs(*speed);
    }
  }
  info.manufacturer = sysfs_.ReadAttribute(info.port_path, "manufacturer").value_or("");
  info.product = sysfs_.ReadAttribute(info.port_path, "product").value_or("");
  info.serial = sysfs_.ReadAttribute(info.port_path, "serial").value_or("");
  return info;
}

absl::StatusOr<std::vector<UsbDeviceInfo>> LibusbDeviceSource::Enumerate() {
  libusb_device** raw_list = nullptr;
  const ssize_t count = libusb_get_device_list(context_.get(), &raw_list);
  if (count < 0) return StatusFromLibusb(static_cast<int>(count), "listing USB devices");
  const DeviceList list(raw_list);
  std::vector<UsbDeviceInfo> devices;
  for (ssize_t i = 0; i < count; ++i) {
    if (std::optional<UsbDeviceInfo> info = Describe(raw_list[i])) {
      devices.push_back(std::move(*info));
    }
  }
  std::sort(devices.begin(), devices.end(), [](const UsbDeviceInfo& a, const UsbDeviceInfo& b) {
    return std::tie(a.bus, a.port_numbers) < std::tie(b.bus, b.port_numbers);
  });
  return devices;
}

absl::StatusOr<libusb_device*> LibusbDeviceSource::Locate(libusb_device** list, ssize_t count,
                                                          const UsbDeviceInfo& device) const {
  libusb_device* match = nullptr;
  for (ssize_t i = 0; i < count; ++i) {
    if (libusb_get_bus_number(list[i]) == device.bus &&
        libusb_get_device_address(list[i]) == device.devnum) {
      match = list[i];
      break;
    }
  }
  if (match == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("USB device ", DescribeForError(device), " is gone"));
  }
  // The kernel reuses addresses: make sure this is still the same device before talking to it.
  const std::optional<UsbDeviceInfo> current = Describe(match);
  if (!current.has_value() || current->vid != device.vid || current->pid != device.pid ||
      current->port_path != device.port_path) {
    return absl::UnavailableError(
        absl::StrCat("USB device ", DescribeForError(device), " was replaced by another device"));
  }
  return match;
}

absl::StatusOr<libusb_device_handle*> LibusbDeviceSource::OpenLocated(
    const UsbDeviceInfo& device) const {
  libusb_device** raw_list = nullptr;
  const ssize_t count = libusb_get_device_list(context_.get(), &raw_list);
  if (count < 0) return StatusFromLibusb(static_cast<int>(count), "listing USB devices");
  const DeviceList list(raw_list);  // libusb_open keeps its own reference to the device
  absl::StatusOr<libusb_device*> match = Locate(raw_list, count, device);
  if (!match.ok()) return match.status();
  libusb_device_handle* handle = nullptr;
  if (const int rc = libusb_open(*match, &handle); rc < 0) {
    return StatusFromLibusb(rc, absl::StrCat("opening USB device ", DescribeForError(device)));
  }
  return handle;
}

absl::StatusOr<BosSpeeds> LibusbDeviceSource::ReadBos(const UsbDeviceInfo& device) {
  absl::StatusOr<libusb_device_handle*> raw_handle = OpenLocated(device);
  if (!raw_handle.ok()) return raw_handle.status();
  const std::unique_ptr<libusb_device_handle, void (*)(libusb_device_handle*)> handle(*raw_handle,
                                                                                      libusb_close);
  // wTotalLength of an adapter's BOS is a few dozen bytes; 255 covers every capability set the
  // USB 3.2 spec defines for a device of this kind.
  std::array<uint8_t, 255> buffer{};
  const int n = libusb_get_descriptor(handle.get(), LIBUSB_DT_BOS, 0, buffer.data(),
                                      static_cast<int>(buffer.size()));
  if (n == LIBUSB_ERROR_PIPE) {
    return absl::NotFoundError(
        absl::StrCat("USB device ", DescribeForError(device), " has no BOS descriptor"));
  }
  if (n < 0) {
    return StatusFromLibusb(n, absl::StrCat("reading the BOS of ", DescribeForError(device)));
  }
  return ParseBosDescriptor(absl::MakeConstSpan(buffer.data(), static_cast<size_t>(n)));
}

absl::StatusOr<std::unique_ptr<RegisterIo>> LibusbDeviceSource::OpenRegisterIo(
    const UsbDeviceInfo& device, std::vector<uint32_t> allowed_addresses) {
  return OpenFamilyRegisterIo(device, std::move(allowed_addresses), common::Rtw89Protocol());
}

absl::StatusOr<std::unique_ptr<RegisterIo>> LibusbDeviceSource::OpenFamilyRegisterIo(
    const UsbDeviceInfo& device, std::vector<uint32_t> allowed_addresses,
    const common::RegisterProtocol& protocol) {
  absl::StatusOr<libusb_device_handle*> handle = OpenLocated(device);
  if (!handle.ok()) return handle.status();
  absl::StatusOr<std::unique_ptr<LibusbRegisterIo>> io =
      LibusbRegisterIo::Create(std::make_unique<LibusbControlTransport>(*handle, context_),
                               std::move(allowed_addresses), protocol);
  if (!io.ok()) return io.status();  // the transport closed the handle
  return std::unique_ptr<RegisterIo>(std::move(*io));
}

bool LibusbDeviceSource::SupportsHotplug() const {
  return libusb_has_capability(LIBUSB_CAP_HAS_HOTPLUG) != 0;
}

absl::Status LibusbDeviceSource::StartHotplug(Callback callback) {
  if (!SupportsHotplug()) {
    return absl::UnimplementedError("libusb has no hotplug support on this platform");
  }
  if (!callback) return absl::InvalidArgumentError("hotplug callback is empty");
  absl::MutexLock lifecycle(&lifecycle_mutex_);
  if (hotplug_registered_ || event_thread_.joinable()) {
    return absl::FailedPreconditionError("hotplug already started");
  }
  callback_ = std::move(callback);
  stop_requested_.store(false);
  {
    absl::MutexLock events(&events_mutex_);
    known_.clear();
    pending_.clear();
    registering_ = true;
  }
  // LIBUSB_HOTPLUG_ENUMERATE reports the devices already attached from inside this call; they
  // only seed the departure cache (registering_), they are not delivered.
  libusb_hotplug_callback_handle handle = 0;
  const int rc = libusb_hotplug_register_callback(
      context_.get(),
      static_cast<libusb_hotplug_event>(LIBUSB_HOTPLUG_EVENT_DEVICE_ARRIVED |
                                        LIBUSB_HOTPLUG_EVENT_DEVICE_LEFT),
      LIBUSB_HOTPLUG_ENUMERATE, LIBUSB_HOTPLUG_MATCH_ANY, LIBUSB_HOTPLUG_MATCH_ANY,
      LIBUSB_HOTPLUG_MATCH_ANY, HotplugTrampoline, this, &handle);
  {
    absl::MutexLock events(&events_mutex_);
    registering_ = false;
  }
  if (rc < 0) {
    callback_ = nullptr;
    return absl::InternalError(
        StatusFromLibusb(rc, "registering the USB hotplug callback").message());
  }
  hotplug_handle_ = handle;
  hotplug_registered_ = true;
  event_thread_ = std::thread([this] { EventLoop(); });
  return absl::OkStatus();
}

void LibusbDeviceSource::Stop() {
  absl::MutexLock lifecycle(&lifecycle_mutex_);
  stop_requested_.store(true);
  if (hotplug_registered_) {
    // Wakes up the event thread if it is waiting inside libusb.
    libusb_hotplug_deregister_callback(context_.get(), hotplug_handle_);
    hotplug_registered_ = false;
  }
  if (event_thread_.joinable()) {
    // Called from the callback despite the contract: the thread cannot join itself. It stops
    // after this callback returns; a later Stop (the destructor's) joins it.
    if (event_thread_.get_id() == std::this_thread::get_id()) return;
    event_thread_.join();
  }
  callback_ = nullptr;
  absl::MutexLock events(&events_mutex_);
  pending_.clear();
  known_.clear();
}

void LibusbHotplugBridge::Deliver(LibusbDeviceSource* source, libusb_device* device, bool arrived) {
  source->OnLibusbHotplug(device, arrived);
}

void LibusbDeviceSource::OnLibusbHotplug(libusb_device* device, bool arrived) {
  const DeviceKey key{libusb_get_bus_number(device), libusb_get_device_address(device)};
  if (arrived) {
    std::optional<UsbDeviceInfo> info = Describe(device);
    if (!info.has_value()) return;  // hub or unreadable
    absl::MutexLock events(&events_mutex_);
    known_[key] = *info;
    if (!registering_) pending_.emplace_back(HotplugEvent::kArrived, std::move(*info));
    return;
  }
  absl::MutexLock events(&events_mutex_);
  auto it = known_.find(key);
  if (it == known_.end()) return;  // a hub, or a device never described: nothing to report
  pending_.emplace_back(HotplugEvent::kLeft, std::move(it->second));
  known_.erase(it);
}

void LibusbDeviceSource::EventLoop() {
  while (!stop_requested_.load()) {
    timeval timeout{.tv_sec = 0, .tv_usec = static_cast<suseconds_t>(kEventTimeoutMs) * 1000};
    const int rc = libusb_handle_events_timeout_completed(context_.get(), &timeout, nullptr);
    if (rc < 0 && rc != LIBUSB_ERROR_INTERRUPTED && rc != LIBUSB_ERROR_TIMEOUT) {
      // libusb could not wait (e.g. its event sources failed): back off instead of spinning.
      std::this_thread::sleep_for(std::chrono::milliseconds(kEventTimeoutMs));
    }
    std::vector<std::pair<HotplugEvent, UsbDeviceInfo>> ready;
    {
      absl::MutexLock events(&events_mutex_);
      ready.swap(pending_);
    }
    for (const auto& [event, info] : ready) {
      if (stop_requested_.load()) return;
      callback_(event, info);
    }
  }
}

}  // namespace rxfleet::agent
