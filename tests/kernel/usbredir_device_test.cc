// rxfleet-usbredir-device as a real process, driven over its socket by a usbredir peer in the
// role QEMU's usb-redir plays (libusbredirparser, usb-guest side): what it announces, how it
// answers control transfers, timeline and control-FIFO events, and its state file. No QEMU:
// this checks the protocol side quickly; tests/kernel/kernel_lane_test.cc the real kernel.

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/paths.h"
#include "tests/support/process.h"

extern "C" {
#include <usbredirparser.h>
}

namespace rxfleet::kernel_lane {
namespace {

using ::rxfleet::testing::BinaryPath;
using ::rxfleet::testing::ChildProcess;
using ::rxfleet::testing::LabPath;
using ::rxfleet::testing::ReadJsonFile;
using ::rxfleet::testing::Stream;
using ::rxfleet::testing::TempDir;
using ::rxfleet::testing::WaitFor;
using ::rxfleet::testing::WriteTextFile;

// The usb-guest end of a usbredir connection, as QEMU's usb-redir device.
class Guest {
 public:
  struct Reply {
    uint8_t status = 0xff;
    std::vector<uint8_t> data;
  };

  explicit Guest(int fd) : fd_(fd) {
    parser_ = usbredirparser_create();
    parser_->priv = this;
    parser_->log_func = [](void*, int, const char*) {};
    parser_->read_func = [](void* priv, uint8_t* data, int count) -> int {
      const ssize_t n = recv(static_cast<Guest*>(priv)->fd_, data, count, MSG_DONTWAIT);
      if (n > 0) return static_cast<int>(n);
      return n < 0 && errno == EAGAIN ? 0 : -1;
    };
    parser_->write_func = [](void* priv, uint8_t* data, int count) -> int {
      return static_cast<int>(send(static_cast<Guest*>(priv)->fd_, data, count, MSG_NOSIGNAL));
    };
    parser_->hello_func = [](void* priv, struct usb_redir_hello_header*) {
      static_cast<Guest*>(priv)->hello = true;
    };
    parser_->device_connect_func = [](void* priv, struct usb_redir_device_connect_header* h) {
      static_cast<Guest*>(priv)->connects.push_back(*h);
    };
    parser_->device_disconnect_func = [](void* priv) { ++static_cast<Guest*>(priv)->disconnects; };
    parser_->interface_info_func = [](void* priv, struct usb_redir_interface_info_header* h) {
      static_cast<Guest*>(priv)->interfaces = *h;
    };
    parser_->ep_info_func = [](void* priv, struct usb_redir_ep_info_header* h) {
      static_cast<Guest*>(priv)->eps = *h;
    };
    parser_->control_packet_func = [](void* priv, uint64_t id,
                                      struct usb_redir_control_packet_header* h, uint8_t* data,
                                      int len) {
      Guest* g = static_cast<Guest*>(priv);
      Reply r;
      r.status = h->status;
      if (data != nullptr) {
        r.data.assign(data, data + len);
        usbredirparser_free_packet_data(g->parser_, data);
      }
      g->replies[id] = r;
    };
    uint32_t caps[USB_REDIR_CAPS_SIZE] = {0};
    for (int cap : {usb_redir_cap_connect_device_version, usb_redir_cap_ep_info_max_packet_size,
                    usb_redir_cap_64bits_ids, usb_redir_cap_32bits_bulk_length}) {
      usbredirparser_caps_set_cap(caps, cap);
    }
    usbredirparser_init(parser_, "test guest", caps, USB_REDIR_CAPS_SIZE, 0);
  }
  ~Guest() {
    usbredirparser_destroy(parser_);
    close(fd_);
  }

  // Exchanges data until `condition` holds (deadline 20 s).
  bool PumpUntil(const std::function<bool()>& condition) {
    return WaitFor([&] {
      while (usbredirparser_has_data_to_write(parser_) > 0) usbredirparser_do_write(parser_);
      pollfd p = {fd_, POLLIN, 0};
      if (poll(&p, 1, 10) > 0) usbredirparser_do_read(parser_);
      return condition();
    });
  }

  // Sends one control transfer on endpoint 0 and waits for its reply.
  Reply Control(uint8_t request_type, uint8_t request, uint16_t value, uint16_t index,
                uint16_t length, std::vector<uint8_t> out = {}) {
    const uint64_t id = next_id_++;
    usb_redir_control_packet_header h{};
    h.endpoint = request_type & 0x80;
    h.request = request;
    h.requesttype = request_type;
    h.value = value;
    h.index = index;
    h.length = length;
    usbredirparser_send_control_packet(parser_, id, &h, out.empty() ? nullptr : out.data(),
                                       static_cast<int>(out.size()));
    EXPECT_TRUE(PumpUntil([&] { return replies.count(id) > 0; })) << "no reply to " << id;
    return replies[id];
  }

  bool hello = false;
  std::vector<usb_redir_device_connect_header> connects;
  int disconnects = 0;
  usb_redir_interface_info_header interfaces{};
  usb_redir_ep_info_header eps{};
  std::map<uint64_t, Reply> replies;

 private:
  int fd_;
  usbredirparser* parser_ = nullptr;
  uint64_t next_id_ = 1;
};

TEST(UsbredirDeviceTest, ServesTheLabAdapterAndFollowsTimelineAndControlEvents) {
  TempDir dir("rxfleet-usbredir-device");
  // At connection time the driver already re-initialised the chip to a 96 µs hold.
  ASSERT_TRUE(WriteTextFile(dir.File("timeline.yaml"),
                            "- {at: 0, event: set_register, device: be6500, address: 0x6000, "
                            "value: 0x80FF0314}\n")
                  .ok());
  auto device =
      ChildProcess::Start({BinaryPath("tools/usbredir/rxfleet-usbredir-device"), "--lab",
                           LabPath("rtl8922au-highspeed"), "--listen", dir.File("redir.sock"),
                           "--timeline", dir.File("timeline.yaml"), "--control",
                           dir.File("control"), "--state-out", dir.File("device.json")});
  ASSERT_TRUE(device.ok()) << device.status();
  ASSERT_TRUE(
      (*device)->WaitForLineContaining(Stream::kStderr, "listening on", absl::Seconds(20)).ok())
      << (*device)->Text(Stream::kStderr);

  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, dir.File("redir.sock").c_str(), sizeof(addr.sun_path) - 1);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  auto guest = std::make_unique<Guest>(fd);

  // Hello, then interface and endpoint info, then the connect at high-speed.
  ASSERT_TRUE(guest->PumpUntil([&] { return guest->connects.size() == 1; }));
  EXPECT_EQ(guest->connects[0].speed, usb_redir_speed_high);
  EXPECT_EQ(guest->connects[0].vendor_id, 0x0bda);
  EXPECT_EQ(guest->connects[0].product_id, 0x8912);
  EXPECT_EQ(guest->interfaces.interface_count, 1u);
  EXPECT_EQ(guest->interfaces.interface_class[0], 0xff);
  EXPECT_EQ(guest->eps.type[16 | 4], usb_redir_type_bulk);  // bulk IN 0x84
  EXPECT_EQ(guest->eps.max_packet_size[16 | 4], 512);
  EXPECT_EQ(guest->eps.type[5], usb_redir_type_bulk);  // bulk OUT 0x05
  EXPECT_EQ(guest->eps.max_packet_size[0], 64);        // ep0 at high-speed

  // bcdUSB 2.10 and the SuperSpeed capability in the BOS descriptor.
  Guest::Reply desc = guest->Control(0x80, 6, 0x0100, 0, 18);
  ASSERT_EQ(desc.status, usb_redir_success);
  ASSERT_EQ(desc.data.size(), 18u);
  EXPECT_EQ(desc.data[2], 0x10);
  EXPECT_EQ(desc.data[3], 0x02);
  Guest::Reply bos = guest->Control(0x80, 6, 0x0f00, 0, 255);
  ASSERT_EQ(bos.status, usb_redir_success);
  ASSERT_EQ(bos.data.size(), 22u);
  EXPECT_EQ(bos.data[13], 0x10);
  EXPECT_EQ(bos.data[14], 0x03);

  // rtw89 register requests: the timeline's value, then a write.
  Guest::Reply read = guest->Control(0xc0, 5, 0x6000, 0, 4);
  ASSERT_EQ(read.status, usb_redir_success);
  EXPECT_EQ(read.data, (std::vector<uint8_t>{0x14, 0x03, 0xff, 0x80}));
  EXPECT_EQ(guest->Control(0x40, 5, 0x6000, 0, 4, {0x14, 0x01, 0xff, 0x80}).status,
            usb_redir_success);
  EXPECT_EQ(guest->Control(0xc0, 0x33, 0, 0, 4).status, usb_redir_stall);

  // The control FIFO: re-plug at SuperSpeed.
  {
    std::ofstream control(dir.File("control"));
    control << "{event: unplug, device: be6500}\n"
            << "{event: plug, device: be6500, speed: 5000, bus: 2, port: \"2\"}\n";
  }
  ASSERT_TRUE(guest->PumpUntil([&] { return guest->connects.size() == 2; }));
  EXPECT_EQ(guest->disconnects, 1);
  EXPECT_EQ(guest->connects[1].speed, usb_redir_speed_super);
  EXPECT_EQ(guest->eps.max_packet_size[0], 512);
  EXPECT_EQ(guest->eps.max_packet_size[16 | 4], 1024);
  desc = guest->Control(0x80, 6, 0x0100, 0, 18);
  ASSERT_EQ(desc.data.size(), 18u);
  EXPECT_EQ(desc.data[3], 0x03);  // bcdUSB 3.20
  EXPECT_EQ(desc.data[7], 9);     // bMaxPacketSize0 2^9

  // QEMU going away ends the process, which writes its final state.
  guest.reset();
  EXPECT_EQ((*device)->Wait(absl::Seconds(20)).value_or(-1), 0) << (*device)->Text(Stream::kStderr);
  auto state = ReadJsonFile(dir.File("device.json"));
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(state->at("qemu_connected"), false);
  const nlohmann::json& d = state->at("devices").at(0);
  EXPECT_EQ(d.at("speed"), 5000);
  EXPECT_EQ(d.at("incarnation"), 2);
  // The re-plug reset the registers to the lab's values (keep_registers not given).
  EXPECT_EQ(d.at("registers").at("0x6000"), "0x80ff2014");
  std::vector<std::string> log;
  for (const nlohmann::json& t : d.at("transfers")) {
    log.push_back(t.at("direction").get<std::string>() + " " + t.at("address").get<std::string>() +
                  " " + (t.at("value").is_null() ? "-" : t.at("value").get<std::string>()) + " " +
                  t.at("result").get<std::string>());
  }
  EXPECT_EQ(log, (std::vector<std::string>{"in 0x100 - ok", "in 0xf00 - ok",
                                           "in 0x6000 0x80ff0314 ok", "out 0x6000 0x80ff0114 ok",
                                           "in 0x0 - stall", "in 0x100 - ok"}));
}

TEST(UsbredirDeviceTest, BadArgumentsExitTwo) {
  const auto r =
      ::rxfleet::testing::RunProcess({BinaryPath("tools/usbredir/rxfleet-usbredir-device"), "--lab",
                                      LabPath("demo"), "--listen", "/tmp/unused.sock"},
                                     absl::Seconds(20));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.stderr_text.find("several devices"), std::string::npos) << r.stderr_text;
}

}  // namespace
}  // namespace rxfleet::kernel_lane
