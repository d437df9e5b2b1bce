// Runs as the child of rxfleet-emulate (rxfleet_emulated_test, lab tests/labs/demo.yaml):
// in-process libusb sees the lab and talks to the emulated adapters.

#include <libusb-1.0/libusb.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace {

class WrappedLibusbTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(libusb_init(&ctx_), 0); }
  void TearDown() override { libusb_exit(ctx_); }
  libusb_context* ctx_ = nullptr;
};

TEST_F(WrappedLibusbTest, RunsUnderTheEmulator) {
  const char* emulated = std::getenv("RXFLEET_EMULATED");
  ASSERT_NE(emulated, nullptr);
  EXPECT_STREQ(emulated, "1");
}

TEST_F(WrappedLibusbTest, SeesTheDemoAdaptersAndTheirSpeeds) {
  libusb_device** list = nullptr;
  const ssize_t n = libusb_get_device_list(ctx_, &list);
  int super_8912 = 0;
  int high_8912 = 0;
  int mediatek = 0;
  for (ssize_t i = 0; i < n; ++i) {
    libusb_device_descriptor d;
    ASSERT_EQ(libusb_get_device_descriptor(list[i], &d), 0);
    if (d.idVendor == 0x0bda && d.idProduct == 0x8912) {
      const int speed = libusb_get_device_speed(list[i]);
      super_8912 += speed == LIBUSB_SPEED_SUPER;
      high_8912 += speed == LIBUSB_SPEED_HIGH;
    }
    mediatek += d.idVendor == 0x0e8d && d.idProduct == 0x7961;
  }
  libusb_free_device_list(list, 1);
  EXPECT_EQ(super_8912, 1);
  EXPECT_EQ(high_8912, 1);
  EXPECT_EQ(mediatek, 1);
}

TEST_F(WrappedLibusbTest, ReadsTheRxAggregationRegister) {
  libusb_device_handle* h = libusb_open_device_with_vid_pid(ctx_, 0x0bda, 0xb832);
  ASSERT_NE(h, nullptr);
  unsigned char data[4] = {};
  ASSERT_EQ(libusb_control_transfer(h, 0xC0, 0x05, 0x8900, 0, data, 4, 500), 4);
  EXPECT_EQ(data[0] | data[1] << 8 | data[2] << 16 | static_cast<unsigned>(data[3]) << 24,
            0x80002005u);
  libusb_close(h);
}

TEST_F(WrappedLibusbTest, SysfsShowsTheNetdevs) {
  std::ifstream operstate("/sys/class/net/wlx00e04c000001/operstate");
  std::string state;
  operstate >> state;
  EXPECT_EQ(state, "up");
}

}  // namespace
