// Real libusb (and the agent's device layer) against USB devices emulated in-process by
// umockdev: the preload redirects /sys and /dev/bus/usb to a testbed, and an ioctl handler on the
// device node plays a tiny rtw89 adapter answering vendor register requests.
#include <sys/ioctl.h>
// clang-format off: usbdevice_fs.h needs sys/ioctl.h first.
#include <linux/usbdevice_fs.h>
// clang-format on
#include <umockdev.h>

#include <cerrno>
#include <condition_variable>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "agent/sysfs/usb_sysfs.h"
#include "agent/usb/device_source.h"
#include "agent/usb/libusb_device_source.h"
#include "agent/usb/libusb_register_io.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rxfleet::agent {
namespace {

using ::testing::ElementsAre;
using ::testing::Field;
using ::testing::SizeIs;

// One control request as seen on the wire.
struct SetupPacket {
  uint8_t request_type = 0;
  uint8_t request = 0;
  uint16_t value = 0;
  uint16_t index = 0;
  uint16_t length = 0;
  friend bool operator==(const SetupPacket&, const SetupPacket&) = default;
};

// The device end of an emulated rtw89 adapter: serves USBDEVFS ioctls of its node, keeps 32-bit
// registers, records every control request. Runs on umockdev's worker thread.
class FakeRtw89 {
 public:
  explicit FakeRtw89(std::map<uint32_t, uint32_t> registers) : registers_(std::move(registers)) {
    handler_ = umockdev_ioctl_base_new();
    g_signal_connect(handler_, "handle-ioctl", G_CALLBACK(&FakeRtw89::OnIoctl), this);
  }
  ~FakeRtw89() {
    std::lock_guard lock(mutex_);
    for (UMockdevIoctlData* urb : completed_) umockdev_ioctl_data_unref(urb);
    g_object_unref(handler_);
  }
  FakeRtw89(const FakeRtw89&) = delete;
  FakeRtw89& operator=(const FakeRtw89&) = delete;

  UMockdevIoctlBase* handler() const { return handler_; }

  std::vector<SetupPacket> requests() const {
    std::lock_guard lock(mutex_);
    return requests_;
  }
  uint32_t Register(uint32_t address) const {
    std::lock_guard lock(mutex_);
    return registers_.at(address);
  }
  // ioctls other than capabilities / submit / reap, e.g. CLAIMINTERFACE or DISCONNECT_CLAIM.
  std::vector<gulong> unexpected_ioctls() const {
    std::lock_guard lock(mutex_);
    return unexpected_ioctls_;
  }
  void StallVendorRequests() {
    std::lock_guard lock(mutex_);
    stall_ = true;
  }
  void MarkGone() {
    std::lock_guard lock(mutex_);
    gone_ = true;
  }

 private:
  static gboolean OnIoctl(UMockdevIoctlBase* /*handler*/, UMockdevIoctlClient* client,
                          gpointer self) {
    static_cast<FakeRtw89*>(self)->Handle(client);
    return TRUE;
  }

  void Handle(UMockdevIoctlClient* client) {
    const gulong request = umockdev_ioctl_client_get_request(client);
    UMockdevIoctlData* arg = umockdev_ioctl_client_get_arg(client);
    std::lock_guard lock(mutex_);
    switch (request) {
      case USBDEVFS_GET_CAPABILITIES: {
        UMockdevIoctlData* caps = umockdev_ioctl_data_resolve(arg, 0, sizeof(uint32_t), nullptr);
        if (caps == nullptr) return umockdev_ioctl_client_complete(client, -1, EFAULT);
        const uint32_t value = USBDEVFS_CAP_NO_PACKET_SIZE_LIM | USBDEVFS_CAP_REAP_AFTER_DISCONNECT;
        std::memcpy(caps->data, &value, sizeof(value));
        umockdev_ioctl_client_complete(client, 0, 0);
        umockdev_ioctl_data_unref(caps);
        return;
      }
      case USBDEVFS_SUBMITURB:
        return Submit(client, arg);
      case USBDEVFS_REAPURB:
      case USBDEVFS_REAPURBNDELAY:
        return Reap(client, arg);
      default:
        // The agent must never claim interfaces, detach drivers or reset: anything else is
        // recorded as a protocol violation.
        unexpected_ioctls_.push_back(request);
        return umockdev_ioctl_client_complete(client, -1, ENOTTY);
    }
  }

  void Submit(UMockdevIoctlClient* client, UMockdevIoctlData* arg) {
    if (gone_) return umockdev_ioctl_client_complete(client, -1, ENODEV);
    UMockdevIoctlData* urb_data =
        umockdev_ioctl_data_resolve(arg, 0, sizeof(usbdevfs_urb), nullptr);
    if (urb_data == nullptr) return umockdev_ioctl_client_complete(client, -1, EFAULT);
    auto* urb = reinterpret_cast<usbdevfs_urb*>(urb_data->data);
    if (urb->type != USBDEVFS_URB_TYPE_CONTROL || urb->buffer_length < 8) {
      umockdev_ioctl_client_complete(client, -1, EINVAL);
      umockdev_ioctl_data_unref(urb_data);
      return;
    }
    UMockdevIoctlData* buffer = umockdev_ioctl_data_resolve(
        urb_data, offsetof(usbdevfs_urb, buffer), urb->buffer_length, nullptr);
    const uint8_t* b = buffer->data;
    const SetupPacket setup{.request_type = b[0],
                            .request = b[1],
                            .value = static_cast<uint16_t>(b[2] | b[3] << 8),
                            .index = static_cast<uint16_t>(b[4] | b[5] << 8),
                            .length = static_cast<uint16_t>(b[6] | b[7] << 8)};
    requests_.push_back(setup);
    const uint32_t address = static_cast<uint32_t>(setup.index) << 16 | setup.value;
    urb->status = 0;
    urb->actual_length = 0;
    const bool vendor = setup.request == 0x05 && setup.length == 4 && urb->buffer_length >= 12 &&
                        registers_.contains(address);
    if (!vendor || stall_) {
      urb->status = -EPIPE;
    } else if (setup.request_type == 0xC0) {
      const uint32_t value = registers_[address];
      for (int i = 0; i < 4; ++i) buffer->data[8 + i] = static_cast<uint8_t>(value >> (8 * i));
      urb->actual_length = 4;
    } else if (setup.request_type == 0x40) {
      registers_[address] = static_cast<uint32_t>(b[8]) | static_cast<uint32_t>(b[9]) << 8 |
                            static_cast<uint32_t>(b[10]) << 16 | static_cast<uint32_t>(b[11]) << 24;
      urb->actual_length = 4;
    } else {
      urb->status = -EPIPE;
    }
    completed_.push_back(urb_data);  // keeps the reference until reaped
    umockdev_ioctl_client_complete(client, 0, 0);
    umockdev_ioctl_data_unref(buffer);
  }

  void Reap(UMockdevIoctlClient* client, UMockdevIoctlData* arg) {
    if (completed_.empty()) {
      return umockdev_ioctl_client_complete(client, -1, gone_ ? ENODEV : EAGAIN);
    }
    UMockdevIoctlData* urb_data = completed_.front();
    completed_.pop_front();
    UMockdevIoctlData* slot = umockdev_ioctl_data_resolve(arg, 0, sizeof(gpointer), nullptr);
    umockdev_ioctl_data_set_ptr(slot, 0, urb_data);
    umockdev_ioctl_client_complete(client, 0, 0);
    umockdev_ioctl_data_unref(slot);
    umockdev_ioctl_data_unref(urb_data);
  }

  mutable std::mutex mutex_;
  UMockdevIoctlBase* handler_ = nullptr;
  std::map<uint32_t, uint32_t> registers_;
  std::vector<SetupPacket> requests_;
  std::deque<UMockdevIoctlData*> completed_;
  std::vector<gulong> unexpected_ioctls_;
  bool stall_ = false;
  bool gone_ = false;
};

std::string Hex(const std::vector<uint8_t>& bytes) {
  std::string out;
  for (uint8_t b : bytes) out += absl::StrFormat("%02x", b);
  return out;
}

// Device + configuration descriptors (what the kernel exposes as sysfs `descriptors`): one
// configuration with one vendor-specific interface and no endpoints (the agent only uses
// endpoint 0).
std::string Descriptors(uint16_t vid, uint16_t pid, uint16_t bcd_usb, uint8_t device_class,
                        uint8_t max_packet0) {
  const std::vector<uint8_t> device = {18,
                                       0x01,
                                       static_cast<uint8_t>(bcd_usb),
                                       static_cast<uint8_t>(bcd_usb >> 8),
                                       device_class,
                                       0,
                                       0,
                                       max_packet0,
                                       static_cast<uint8_t>(vid),
                                       static_cast<uint8_t>(vid >> 8),
                                       static_cast<uint8_t>(pid),
                                       static_cast<uint8_t>(pid >> 8),
                                       0x00,
                                       0x00,
                                       1,
                                       2,
                                       3,
                                       1};
  const std::vector<uint8_t> config = {9, 0x02, 18, 0, 1, 1,    0,    0x80, 0xFA,
                                       9, 0x04, 0,  0, 0, 0xFF, 0xFF, 0xFF, 0};
  return Hex(device) + Hex(config);
}

struct EmulatedDevice {
  std::string syspath;  // /devices/..., as umockdev names it (relative to the testbed's /sys)
  std::string name;     // sysfs name = port path
  int bus = 0;
  int devnum = 0;
  std::string devnode() const { return absl::StrFormat("/dev/bus/usb/%03d/%03d", bus, devnum); }
};

// The umockdev record of one USB device.
std::string Record(const EmulatedDevice& d, uint16_t vid, uint16_t pid, uint16_t bcd_usb,
                   uint8_t device_class, const std::string& speed, const std::string& product,
                   const std::string& serial) {
  const uint8_t max_packet0 = bcd_usb >= 0x0300 ? 9 : 64;
  return absl::StrFormat(
      "P: %s\nN: bus/usb/%03d/%03d\nE: SUBSYSTEM=usb\nE: DEVTYPE=usb_device\nE: DRIVER=usb\n"
      "E: DEVNAME=%s\nE: BUSNUM=%03d\nE: DEVNUM=%03d\n"
      "A: busnum=%d\\n\nA: devnum=%d\\n\nA: speed=%s\\n\nA: bConfigurationValue=1\\n\n"
      "A: idVendor=%04x\\n\nA: idProduct=%04x\\n\nA: manufacturer=Realtek\\n\n"
      "A: product=%s\\n\nA: serial=%s\\n\nH: descriptors=%s\n",
      d.syspath, d.bus, d.devnum, d.devnode(), d.bus, d.devnum, d.bus, d.devnum, speed, vid, pid,
      product, serial, Descriptors(vid, pid, bcd_usb, device_class, max_packet0));
}

// Hotplug events handed over from the device source's thread.
class EventQueue {
 public:
  void Push(HotplugEvent event, const UsbDeviceInfo& info) {
    std::lock_guard lock(mutex_);
    events_.emplace_back(event, info);
    cv_.notify_all();
  }
  std::optional<std::pair<HotplugEvent, UsbDeviceInfo>> Pop(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    if (!cv_.wait_for(lock, timeout, [&] { return !events_.empty(); })) return std::nullopt;
    auto event = std::move(events_.front());
    events_.pop_front();
    return event;
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::pair<HotplugEvent, UsbDeviceInfo>> events_;
};

constexpr uint32_t kRxAgg0 = 0x6000;  // R_BE_RXAGG_0_V1 (rtw89 usb.h)
constexpr uint32_t kRxAgg1 = 0x6004;  // R_BE_RXAGG_1_V1
constexpr uint32_t kPadCtrl2 = 0x00C4;

// BrosTrend BE6500 (0bda:8912, RTL8922AU) at SuperSpeed on 2-2, below the SuperSpeed root hub,
// as in the field log; a DWA-X1850 (2001:3321, RTL8852AU) at high-speed behind a hub on 2-1.4.
const EmulatedDevice kRootHub{.syspath = "/devices/usb2", .name = "usb2", .bus = 2, .devnum = 1};
const EmulatedDevice kBe6500{.syspath = "/devices/usb2/2-2", .name = "2-2", .bus = 2, .devnum = 10};
const EmulatedDevice kHub{.syspath = "/devices/usb2/2-1", .name = "2-1", .bus = 2, .devnum = 2};
const EmulatedDevice kDwa{
    .syspath = "/devices/usb2/2-1/2-1.4", .name = "2-1.4", .bus = 2, .devnum = 3};

class EmulatedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* preload = std::getenv("LD_PRELOAD");
    ASSERT_TRUE(preload != nullptr && std::strstr(preload, "libumockdev-preload") != nullptr)
        << "run under LD_PRELOAD=libumockdev-preload.so.0 (ctest sets it)";
    // The testbed must exist before libusb_init, or libusb does not see its devices.
    testbed_ = umockdev_testbed_new();
    fake_ = std::make_unique<FakeRtw89>(std::map<uint32_t, uint32_t>{
        {kRxAgg0, 0x80FF2014}, {kRxAgg1, 0x0000001F}, {kPadCtrl2, 0x90130F00}});
    Add(Record(kRootHub, 0x1d6b, 0x0003, 0x0310, 0x09, "10000", "xHCI Host Controller", ""));
    Attach(kBe6500, *fake_);
    Add(Record(kBe6500, 0x0bda, 0x8912, 0x0320, 0x00, "5000", "802.11be WLAN Adapter",
               "00e04c000001"));
    Add(Record(kHub, 0x05e3, 0x0610, 0x0210, 0x09, "480", "USB2.1 Hub", ""));
    Add(Record(kDwa, 0x2001, 0x3321, 0x0210, 0x00, "480", "802.11ax WLAN Adapter", "00e04c000002"));
    absl::StatusOr<std::unique_ptr<DeviceSource>> source = CreateLibusbDeviceSource();
    ASSERT_TRUE(source.ok()) << source.status();
    source_ = std::move(*source);
  }

  void TearDown() override {
    source_.reset();  // libusb_exit before the testbed goes
    fake_.reset();
    extra_fake_.reset();
    if (testbed_ != nullptr) g_object_unref(testbed_);
  }

  void Add(const std::string& record) {
    GError* error = nullptr;
    ASSERT_TRUE(umockdev_testbed_add_from_string(testbed_, record.c_str(), &error))
        << (error != nullptr ? error->message : "") << "\n"
        << record;
  }

  void Attach(const EmulatedDevice& device, FakeRtw89& fake) {
    GError* error = nullptr;
    ASSERT_TRUE(
        umockdev_testbed_attach_ioctl(testbed_, device.devnode().c_str(), fake.handler(), &error))
        << (error != nullptr ? error->message : "");
  }

  // Unplug as the kernel reports it: the remove uevent first, then the device disappears.
  void Unplug(const EmulatedDevice& device, FakeRtw89* fake) {
    if (fake != nullptr) fake->MarkGone();
    const std::string sys = "/sys" + device.syspath;
    umockdev_testbed_uevent(testbed_, sys.c_str(), "remove");
    umockdev_testbed_remove_device(testbed_, sys.c_str());
  }

  UsbDeviceInfo Find(const std::string& port_path) {
    absl::StatusOr<std::vector<UsbDeviceInfo>> devices = source_->Enumerate();
    EXPECT_TRUE(devices.ok()) << devices.status();
    if (devices.ok()) {
      for (const UsbDeviceInfo& d : *devices) {
        if (d.port_path == port_path) return d;
      }
    }
    ADD_FAILURE() << "no device at " << port_path;
    return {};
  }

  UMockdevTestbed* testbed_ = nullptr;
  std::unique_ptr<FakeRtw89> fake_;
  std::unique_ptr<FakeRtw89> extra_fake_;
  std::unique_ptr<DeviceSource> source_;
};

TEST_F(EmulatedTest, EnumeratesAdaptersWithoutHubs) {
  absl::StatusOr<std::vector<UsbDeviceInfo>> devices = source_->Enumerate();
  ASSERT_TRUE(devices.ok()) << devices.status();
  ASSERT_THAT(*devices, SizeIs(2));
  ASSERT_THAT(*devices, ElementsAre(Field(&UsbDeviceInfo::port_path, "2-1.4"),
                                    Field(&UsbDeviceInfo::port_path, "2-2")));

  const UsbDeviceInfo& dwa = (*devices)[0];
  EXPECT_EQ(dwa.bus, 2);
  EXPECT_THAT(dwa.port_numbers, ElementsAre(1, 4));
  EXPECT_EQ(dwa.devnum, 3);
  EXPECT_EQ(dwa.vid, 0x2001);
  EXPECT_EQ(dwa.pid, 0x3321);
  EXPECT_EQ(dwa.speed, common::UsbSpeed::kHigh);
  EXPECT_EQ(dwa.bcd_usb, 0x0210);

  const UsbDeviceInfo& be = (*devices)[1];
  EXPECT_EQ(be.bus, 2);
  EXPECT_THAT(be.port_numbers, ElementsAre(2));
  EXPECT_EQ(be.devnum, 10);
  EXPECT_EQ(be.vid, 0x0bda);
  EXPECT_EQ(be.pid, 0x8912);
  EXPECT_EQ(be.bcd_usb, 0x0320);
  EXPECT_EQ(be.bcd_device, 0x0000);
  EXPECT_EQ(be.speed, common::UsbSpeed::kSuper);
  EXPECT_EQ(be.manufacturer, "Realtek");
  EXPECT_EQ(be.product, "802.11be WLAN Adapter");
  EXPECT_EQ(be.serial, "00e04c000001");
}

TEST_F(EmulatedTest, SysfsLayerSeesTheTestbedThroughTheDefaultRoot) {
  const UsbSysfs sysfs;
  EXPECT_EQ(sysfs.ReadAttribute("2-2", "speed"), "5000");
  EXPECT_EQ(sysfs.ReadAttribute("2-1.4", "product"), "802.11ax WLAN Adapter");
  EXPECT_EQ(sysfs.PeerPortPath("2-2"), std::nullopt);  // no port links yet
  EXPECT_EQ(sysfs.StableAdapterId("2-2"), "port-2-2");

  // Port directories and links as the kernel makes them (usb2-port2 <-> usb3-port3), written
  // into the testbed directly: the preload must resolve them through "/sys".
  char* root = umockdev_testbed_get_root_dir(testbed_);
  const std::filesystem::path sys = std::filesystem::path(root) / "sys/devices";
  g_free(root);
  std::filesystem::create_directories(sys / "usb2/2-0:1.0/usb2-port2");
  std::filesystem::create_directories(sys / "usb3/3-0:1.0/usb3-port3");
  std::filesystem::create_directory_symlink("../2-0:1.0/usb2-port2", sys / "usb2/2-2/port");
  std::filesystem::create_directory_symlink("../../../usb3/3-0:1.0/usb3-port3",
                                            sys / "usb2/2-0:1.0/usb2-port2/peer");
  EXPECT_EQ(sysfs.PeerPortPath("2-2"), "3-3");
  EXPECT_EQ(sysfs.StableAdapterId("2-2"), "port-2-2");
}

TEST_F(EmulatedTest, ReadsAndWritesAllowListedRegisters) {
  absl::StatusOr<std::unique_ptr<RegisterIo>> io =
      source_->OpenRegisterIo(Find("2-2"), {kRxAgg0, kRxAgg1});
  ASSERT_TRUE(io.ok()) << io.status();

  absl::StatusOr<uint32_t> value = (*io)->Read32(kRxAgg0);
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(*value, 0x80FF2014u);
  ASSERT_TRUE((*io)->Write32(kRxAgg0, 0x80FF0114).ok());
  EXPECT_EQ(fake_->Register(kRxAgg0), 0x80FF0114u);
  value = (*io)->Read32(kRxAgg0);
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(*value, 0x80FF0114u);
  io->reset();  // closes the handle

  EXPECT_THAT(fake_->requests(), ElementsAre(SetupPacket{0xC0, 0x05, 0x6000, 0x0000, 4},
                                             SetupPacket{0x40, 0x05, 0x6000, 0x0000, 4},
                                             SetupPacket{0xC0, 0x05, 0x6000, 0x0000, 4}));
  // Never claimed an interface nor detached the kernel driver.
  EXPECT_THAT(fake_->unexpected_ioctls(), SizeIs(0));
}

TEST_F(EmulatedTest, RefusesRegistersOutsideTheAllowListWithoutTraffic) {
  absl::StatusOr<std::unique_ptr<RegisterIo>> io = source_->OpenRegisterIo(Find("2-2"), {kRxAgg0});
  ASSERT_TRUE(io.ok()) << io.status();
  EXPECT_EQ((*io)->Write32(kPadCtrl2, 0x90130F00).code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ((*io)->Write32(kRxAgg1, 0).code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ((*io)->Read32(kPadCtrl2).status().code(), absl::StatusCode::kPermissionDenied);
  io->reset();
  EXPECT_THAT(fake_->requests(), SizeIs(0));
  EXPECT_EQ(fake_->Register(kPadCtrl2), 0x90130F00u);
}

TEST_F(EmulatedTest, StallIsFailedPrecondition) {
  absl::StatusOr<std::unique_ptr<RegisterIo>> io = source_->OpenRegisterIo(Find("2-2"), {kRxAgg0});
  ASSERT_TRUE(io.ok()) << io.status();
  fake_->StallVendorRequests();
  EXPECT_EQ((*io)->Read32(kRxAgg0).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ((*io)->Write32(kRxAgg0, 1).code(), absl::StatusCode::kFailedPrecondition);
  io->reset();
  EXPECT_THAT(fake_->requests(), SizeIs(2));  // a stall is not retried
  EXPECT_EQ(fake_->Register(kRxAgg0), 0x80FF2014u);
}

TEST_F(EmulatedTest, UnplugIsUnavailable) {
  const UsbDeviceInfo be = Find("2-2");
  absl::StatusOr<std::unique_ptr<RegisterIo>> io = source_->OpenRegisterIo(be, {kRxAgg0});
  ASSERT_TRUE(io.ok()) << io.status();
  Unplug(kBe6500, fake_.get());
  const absl::Status write = (*io)->Write32(kRxAgg0, 0x80FF0114);
  EXPECT_EQ(write.code(), absl::StatusCode::kUnavailable) << write;
  io->reset();
  EXPECT_EQ(fake_->Register(kRxAgg0), 0x80FF2014u);
  EXPECT_EQ(source_->OpenRegisterIo(be, {kRxAgg0}).status().code(), absl::StatusCode::kUnavailable);
}

TEST_F(EmulatedTest, RefusesToOpenADifferentDeviceAtTheSameAddress) {
  UsbDeviceInfo stale = Find("2-2");
  stale.pid = 0x1a2b;  // what was there before the mode switch
  EXPECT_EQ(source_->OpenRegisterIo(stale, {kRxAgg0}).status().code(),
            absl::StatusCode::kUnavailable);
  EXPECT_THAT(fake_->requests(), SizeIs(0));
}

TEST_F(EmulatedTest, RejectsBadAllowList) {
  EXPECT_EQ(source_->OpenRegisterIo(Find("2-2"), {}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(EmulatedTest, HotplugReportsArrivalAndDeparture) {
  ASSERT_TRUE(source_->SupportsHotplug());
  EventQueue events;
  ASSERT_TRUE(source_
                  ->StartHotplug([&](HotplugEvent event, const UsbDeviceInfo& info) {
                    events.Push(event, info);
                  })
                  .ok());
  EXPECT_EQ(source_->StartHotplug([](HotplugEvent, const UsbDeviceInfo&) {}).code(),
            absl::StatusCode::kFailedPrecondition);

  // The BE6500 re-enumerates on the high-speed bus after a mode switch: 3-3, device 15.
  const EmulatedDevice replug{
      .syspath = "/devices/usb3/3-3", .name = "3-3", .bus = 3, .devnum = 15};
  extra_fake_ = std::make_unique<FakeRtw89>(std::map<uint32_t, uint32_t>{{kRxAgg0, 0x80FF2014}});
  Attach(replug, *extra_fake_);
  Add(Record(replug, 0x0bda, 0x8912, 0x0320, 0x00, "480", "802.11be WLAN Adapter", "00e04c000001"));

  // Devices present before StartHotplug are not reported: the first event is the new one.
  auto arrived = events.Pop(std::chrono::seconds(10));
  ASSERT_TRUE(arrived.has_value());
  EXPECT_EQ(arrived->first, HotplugEvent::kArrived);
  EXPECT_EQ(arrived->second.port_path, "3-3");
  EXPECT_EQ(arrived->second.vid, 0x0bda);
  EXPECT_EQ(arrived->second.pid, 0x8912);
  EXPECT_EQ(arrived->second.speed, common::UsbSpeed::kHigh);
  EXPECT_EQ(arrived->second.serial, "00e04c000001");

  // The new device is usable from the callback's information.
  absl::StatusOr<std::unique_ptr<RegisterIo>> io =
      source_->OpenRegisterIo(arrived->second, {kRxAgg0});
  ASSERT_TRUE(io.ok()) << io.status();
  EXPECT_EQ((*io)->Read32(kRxAgg0).value_or(0), 0x80FF2014u);
  io->reset();

  // Departure of a device that was there before StartHotplug: described from the cache.
  Unplug(kDwa, nullptr);
  auto left = events.Pop(std::chrono::seconds(10));
  ASSERT_TRUE(left.has_value());
  EXPECT_EQ(left->first, HotplugEvent::kLeft);
  EXPECT_EQ(left->second.port_path, "2-1.4");
  EXPECT_EQ(left->second.vid, 0x2001);
  EXPECT_EQ(left->second.product, "802.11ax WLAN Adapter");  // sysfs is gone: from the cache

  Unplug(replug, extra_fake_.get());
  left = events.Pop(std::chrono::seconds(10));
  ASSERT_TRUE(left.has_value());
  EXPECT_EQ(left->first, HotplugEvent::kLeft);
  EXPECT_EQ(left->second, arrived->second);

  source_->Stop();
  source_->Stop();  // idempotent
}

TEST_F(EmulatedTest, StopWithoutStartIsANoOp) { source_->Stop(); }

}  // namespace
}  // namespace rxfleet::agent
