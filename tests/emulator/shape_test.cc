// Shaped netdevs (lab netdev.shape): option parsing, the rate the model asks for, when the
// device model says a new rate is due, and the tbf parameters. Pure logic, no namespaces.
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tools/emulator/device_model.h"
#include "tools/emulator/lab.h"
#include "tools/emulator/netdev_shaper.h"
#include "tools/emulator/traffic_model.h"

namespace rxfleet::emulator {
namespace {

using ::testing::HasSubstr;

std::string Lab(const std::string& shape, const std::string& second_shape = "") {
  std::string yaml = R"(devices:
  - name: a
    vid: 0x0bda
    pid: 0x8912
    speed: 5000
    bus: 2
    port: "1"
    devnum: 10
    registers: {0x6000: 0x80FF2014}
    netdev: {name: wlx00e04c000101, shape: )" +
                     shape + "}\n";
  if (!second_shape.empty()) {
    yaml += R"(  - name: b
    vid: 0x0bda
    pid: 0x8912
    speed: 5000
    bus: 2
    port: "2"
    devnum: 11
    netdev: {name: wlx00e04c000102, shape: )" +
            second_shape + "}\n";
  }
  return yaml;
}

std::string ErrorOf(const std::string& yaml) {
  absl::StatusOr<rxfleet::emulator::Lab> lab = ParseLab(yaml, "lab.yaml");
  EXPECT_FALSE(lab.ok());
  return lab.ok() ? "" : std::string(lab.status().message());
}

TEST(ShapeOptionTest, ParsesNamespaceDeviceAndScale) {
  absl::StatusOr<rxfleet::emulator::Lab> lab =
      ParseLab(Lab("{netns: rxfleet-t1-0, device: peer, scale: 0.1}"), "lab.yaml");
  ASSERT_TRUE(lab.ok()) << lab.status();
  const std::optional<ShapeSpec>& shape = lab->devices[0].config.netdev->shape;
  ASSERT_TRUE(shape.has_value());
  EXPECT_EQ(shape->netns, "rxfleet-t1-0");
  EXPECT_EQ(shape->device, "peer");
  EXPECT_DOUBLE_EQ(shape->scale, 0.1);

  lab = ParseLab(Lab("{netns: n, device: peer}"), "lab.yaml");
  ASSERT_TRUE(lab.ok()) << lab.status();
  EXPECT_DOUBLE_EQ(lab->devices[0].config.netdev->shape->scale, 1);
}

TEST(ShapeOptionTest, RejectsBadValuesNamingTheField) {
  EXPECT_THAT(ErrorOf(Lab("{device: peer}")),
              HasSubstr("lab.yaml:10: devices[0].netdev.shape: missing required key 'netns'"));
  EXPECT_THAT(ErrorOf(Lab("{netns: n}")), HasSubstr("missing required key 'device'"));
  EXPECT_THAT(ErrorOf(Lab("{netns: a/b, device: peer}")),
              HasSubstr("devices[0].netdev.shape.netns: expected a network namespace name"));
  EXPECT_THAT(ErrorOf(Lab("{netns: n, device: a-name-longer-than-15}")),
              HasSubstr("devices[0].netdev.shape.device: expected 1..15 characters"));
  EXPECT_THAT(ErrorOf(Lab("{netns: n, device: peer, scale: 0}")),
              HasSubstr("devices[0].netdev.shape.scale: must be > 0"));
  EXPECT_THAT(ErrorOf(Lab("{netns: n, device: peer, scale: 11}")),
              HasSubstr("devices[0].netdev.shape.scale: 11 out of range"));
  EXPECT_THAT(ErrorOf(Lab("{netns: n, device: peer, rate: 5}")),
              HasSubstr("unknown key 'rate' (allowed: netns, device, scale)"));
  EXPECT_THAT(ErrorOf(Lab("{netns: n, device: peer}", "{netns: n, device: peer}")),
              HasSubstr("device peer in namespace n is already shaped for another device"));
  // The same device name in two namespaces is two interfaces.
  EXPECT_TRUE(
      ParseLab(Lab("{netns: n1, device: peer}", "{netns: n2, device: peer}"), "lab.yaml").ok());
}

TEST(ShapedRateTest, IsTheModelCapacityTimesTheScale) {
  EXPECT_EQ(ShapedRateBps(HostClass::kX86, 5000, 1024, 0.1), 61'300'000u);
  EXPECT_EQ(ShapedRateBps(HostClass::kX86, 5000, 32, 0.1), 100'200'000u);
  EXPECT_EQ(ShapedRateBps(HostClass::kX86, 5000, 32, 1), 1'002'000'000u);
  EXPECT_EQ(ShapedRateBps(HostClass::kPi5, 5000, 1024, 0.5), 293'500'000u);
  EXPECT_EQ(ShapedRateBps(HostClass::kX86, 5000, 528, 0.1), 80'750'000u);  // midpoint
  EXPECT_EQ(ShapedRateBps(HostClass::kPi1, 480, 32, 1), 87'700'000u);      // capacity, no loss
  EXPECT_EQ(ShapedRateBps(HostClass::kX86, 1.5, 32, 0.001), 8000u);        // the floor
}

TEST(ShapedRateTest, TbfParameters) {
  TbfParameters p = TbfParametersFor(100'200'000);
  EXPECT_EQ(p.rate_bytes_per_second, 12'525'000u);
  EXPECT_EQ(p.bucket_bytes, 65'536u);  // 4 ms would be 50 kB: the 64 KiB floor
  EXPECT_EQ(p.latency_us, 50'000u);
  p = TbfParametersFor(1'002'000'000);
  EXPECT_EQ(p.rate_bytes_per_second, 125'250'000u);
  EXPECT_EQ(p.bucket_bytes, 501'000u);
}

TEST(ShapedDeviceTest, NewRateDueOnlyWhenTheHoldChangesIt) {
  absl::StatusOr<rxfleet::emulator::Lab> lab =
      ParseLab(Lab("{netns: n, device: peer, scale: 0.1}"), "lab.yaml");
  ASSERT_TRUE(lab.ok()) << lab.status();
  EmulatedDevice device(lab->devices[0], lab->host_class);
  ShapeSpec shape;
  uint64_t rate = 0;
  ASSERT_TRUE(device.ShapeNeedsApply(&shape, &rate));  // nothing applied yet
  EXPECT_EQ(shape.netns, "n");
  EXPECT_EQ(shape.device, "peer");
  EXPECT_EQ(rate, 61'300'000u);
  device.RecordShapeApplied(shape, 0, rate);
  EXPECT_FALSE(device.ShapeNeedsApply(&shape, &rate));

  device.SetRegister(0x6000, 0x80FF2014);  // the same hold: nothing to do
  EXPECT_FALSE(device.ShapeNeedsApply(&shape, &rate));
  device.SetRegister(0x6000, 0x80FF0114);  // 32 µs
  ASSERT_TRUE(device.ShapeNeedsApply(&shape, &rate));
  EXPECT_EQ(rate, 100'200'000u);
  device.RecordShapeApplied(shape, 1.5, rate);
  device.SetRegister(0x6000, 0x00FF2014);  // aggregation off counts as 32 µs: same rate
  EXPECT_FALSE(device.ShapeNeedsApply(&shape, &rate));

  const nlohmann::json state = device.StateJson();
  const nlohmann::json& s = state.at("netdev").at("shape");
  EXPECT_EQ(s.at("netns"), "n");
  EXPECT_EQ(s.at("rate_bps"), 100'200'000u);
  ASSERT_EQ(s.at("rates").size(), 2u);
  EXPECT_EQ(s.at("rates")[0].at("hold_us"), 1024);
  EXPECT_EQ(s.at("rates")[0].at("rate_bps"), 61'300'000u);
  EXPECT_EQ(s.at("rates")[1].at("hold_us"), 32);
  EXPECT_DOUBLE_EQ(s.at("rates")[1].at("t").get<double>(), 1.5);
}

TEST(ShapedDeviceTest, UnshapedNetdevsNeverAsk) {
  absl::StatusOr<rxfleet::emulator::Lab> lab = ParseLab(R"(devices:
  - {name: a, vid: 0x0bda, pid: 0x8912, speed: 5000, bus: 2, port: "1", devnum: 10,
     netdev: {name: wlan0}}
)",
                                                        "lab.yaml");
  ASSERT_TRUE(lab.ok()) << lab.status();
  EmulatedDevice device(lab->devices[0], lab->host_class);
  ShapeSpec shape;
  uint64_t rate = 0;
  EXPECT_FALSE(device.ShapeNeedsApply(&shape, &rate));
  EXPECT_FALSE(device.StateJson().at("netdev").contains("shape"));
}

}  // namespace
}  // namespace rxfleet::emulator
