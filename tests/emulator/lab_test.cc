#include "tools/emulator/lab.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/paths.h"
#include "tools/emulator/descriptors.h"

namespace rxfleet::emulator {
namespace {

using ::testing::HasSubstr;

constexpr char kMinimal[] = R"(devices:
  - name: a
    vid: 0x0bda
    pid: "8912"
    speed: 5000
    bus: 2
    port: "2"
    devnum: 10
    netdev: {name: wlan0}
)";

std::string ErrorOf(const std::string& yaml) {
  absl::StatusOr<Lab> lab = ParseLab(yaml, "lab.yaml");
  EXPECT_FALSE(lab.ok());
  return lab.ok() ? "" : std::string(lab.status().message());
}

TEST(LabTest, MinimalLabGetsDefaultsFromTheChipTable) {
  absl::StatusOr<Lab> lab = ParseLab(kMinimal, "lab.yaml");
  ASSERT_TRUE(lab.ok()) << lab.status();
  ASSERT_EQ(lab->devices.size(), 1u);
  const DeviceSpec& d = lab->devices[0];
  EXPECT_EQ(d.config.vid, 0x0bda);
  EXPECT_EQ(d.config.pid, 0x8912);
  EXPECT_EQ(d.config.bcd_usb, 0x0320);
  EXPECT_EQ(d.config.SysfsName(), "2-2");
  EXPECT_EQ(d.config.DevNode(), "/dev/bus/usb/002/010");
  EXPECT_EQ(d.rx_agg_register, 0x6000u);
  ASSERT_TRUE(d.config.netdev.has_value());
  EXPECT_EQ(d.config.netdev->driver, "rtw89_8922au");
  EXPECT_EQ(d.config.interfaces.size(), 1u);
  EXPECT_EQ(lab->host_class, HostClass::kX86);
}

TEST(LabTest, V1ChipsUse0x8900) {
  std::string yaml = kMinimal;
  yaml.replace(yaml.find("\"8912\""), 6, "0xb832");
  absl::StatusOr<Lab> lab = ParseLab(yaml, "lab.yaml");
  ASSERT_TRUE(lab.ok()) << lab.status();
  EXPECT_EQ(lab->devices[0].rx_agg_register, 0x8900u);
  EXPECT_EQ(lab->devices[0].config.netdev->driver, "rtw89_8852bu");
}

TEST(LabTest, ErrorsNameFileLineAndField) {
  std::string yaml = kMinimal;
  yaml.replace(yaml.find("5000"), 4, "300");
  EXPECT_THAT(ErrorOf(yaml), HasSubstr("lab.yaml:5: devices[0].speed: expected one of"));
  EXPECT_THAT(ErrorOf("devices: []\n"), HasSubstr("lab.yaml:1: devices: expected a non-empty"));
  EXPECT_THAT(ErrorOf("host_class: pi9\ndevices: []\n"), HasSubstr("lab.yaml:1: host_class"));
  EXPECT_THAT(ErrorOf("devices: [{name: a}]\n"), HasSubstr("missing required key 'vid'"));
  EXPECT_THAT(ErrorOf("devices:\n  - {name: a, vid: 0x0bda, pid: 0x8912, speed: 480, bus: 3,\n"
                      "     port: \"0\", devnum: 3}\n"),
              HasSubstr("lab.yaml:3: devices[0].port"));
  EXPECT_THAT(ErrorOf("devices:\n  - {name: a, vid: 0x1ffff, pid: 1, speed: 480, bus: 3, port: "
                      "\"1\", devnum: 3}\n"),
              HasSubstr("devices[0].vid: 0x1ffff out of range"));
  EXPECT_THAT(ErrorOf("devices:\n  - {name: a, vid: 1, pid: 1, speed: 480, bus: 3, port: \"1\", "
                      "devnum: 3, registers: {0x6001: 1}}\n"),
              HasSubstr("not 32-bit aligned"));
  EXPECT_THAT(ErrorOf("devices: [\n"), HasSubstr("YAML syntax error"));
  // Odd shapes are errors, never exceptions.
  for (const char* odd : {"devices: [[1]]\n", "devices: {a: 1}\n", "- 1\n", "devices: [1]\n",
                          "devices:\n  - {name: [x]}\n", "devices:\n  - {name: a, vid: {x: 1}}\n",
                          "devices:\n  - {name: a, registers: [1]}\n"}) {
    EXPECT_THAT(ErrorOf(odd), HasSubstr("lab.yaml")) << odd;
  }
  EXPECT_THAT(ErrorOf("devices:\n  - {name: a, vid: 1, pid: 1, speed: 480, bus: 3, port: \"1\", "
                      "devnum: 3, netdev: {name: x}}\n"),
              HasSubstr("missing 'driver'"));
}

TEST(LabTest, DuplicatesAndMixedBusesAreRejected) {
  EXPECT_THAT(
      ErrorOf("devices:\n"
              "  - {name: a, vid: 1, pid: 1, speed: 480, bus: 3, port: \"1\", devnum: 3}\n"
              "  - {name: a, vid: 1, pid: 1, speed: 480, bus: 3, port: \"2\", devnum: 4}\n"),
      HasSubstr("duplicate device name"));
  EXPECT_THAT(
      ErrorOf("devices:\n"
              "  - {name: a, vid: 1, pid: 1, speed: 480, bus: 3, port: \"1\", devnum: 3}\n"
              "  - {name: b, vid: 1, pid: 1, speed: 480, bus: 3, port: \"1\", devnum: 4}\n"),
      HasSubstr("both plugged at 3-1"));
  EXPECT_THAT(
      ErrorOf("devices:\n"
              "  - {name: a, vid: 1, pid: 1, speed: 480, bus: 3, port: \"1\", devnum: 3}\n"
              "  - {name: b, vid: 1, pid: 1, speed: 5000, bus: 3, port: \"2\", devnum: 4}\n"),
      HasSubstr("separate buses"));
  EXPECT_THAT(ErrorOf("devices:\n"
                      "  - {name: a, vid: 1, pid: 1, speed: 480, bus: 3, port: \"1\", devnum: 3,\n"
                      "     peer: \"3-2\"}\n"),
              HasSubstr("must be on the other root hub"));
  EXPECT_THAT(
      ErrorOf("devices:\n"
              "  - {name: a, vid: 1, pid: 1, speed: 480, bus: 3, port: \"1\", devnum: 3}\n"
              "  - {name: b, vid: 1, pid: 1, speed: 480, bus: 3, port: \"2.1\", devnum: 4,\n"
              "     peer: \"2-1.4\"}\n"
              "  - {name: c, vid: 1, pid: 1, speed: 5000, bus: 2, port: \"1\", devnum: 4}\n"),
      HasSubstr("also the hub in front of 2-1.4"));
}

TEST(TimelineTest, PlugOverridesAndValidation) {
  absl::StatusOr<Lab> lab = ParseLab(kMinimal, "lab.yaml");
  ASSERT_TRUE(lab.ok());
  absl::StatusOr<std::vector<TimelineEvent>> t = ParseTimeline(R"(
- {at: 1.0, event: plug, device: a, bus: 3, port: "3", speed: 480, devnum: 15}
- {at: 0.5, event: unplug, device: a}
- {at: 2, event: set_register, device: a, address: 0x6000, value: 0x80FF0114}
- {at: 2, event: fail_next, device: a, count: 3}
)",
                                                               "t.yaml", *lab);
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->size(), 4u);
  EXPECT_EQ((*t)[0].kind, EventKind::kUnplug);
  EXPECT_EQ((*t)[1].kind, EventKind::kPlug);
  EXPECT_EQ((*t)[1].plug_config.bus, 3);
  EXPECT_EQ((*t)[1].plug_config.bcd_usb, 0x0210);  // follows the new speed
  EXPECT_EQ((*t)[1].plug_config.serial, lab->devices[0].config.serial);
  EXPECT_EQ((*t)[3].mode, FailMode::kTimeout);

  auto error = [&](const std::string& yaml) {
    absl::StatusOr<std::vector<TimelineEvent>> r = ParseTimeline(yaml, "t.yaml", *lab);
    EXPECT_FALSE(r.ok());
    return r.ok() ? "" : std::string(r.status().message());
  };
  EXPECT_THAT(error("- {at: 1, event: plug, device: a}\n"), HasSubstr("already plugged"));
  EXPECT_THAT(error("- {at: 1, event: unplug, device: b}\n"), HasSubstr("no device named 'b'"));
  EXPECT_THAT(error("- {at: 1, event: sleep, device: a, extra: 1}\n"),
              HasSubstr("t.yaml:1: [0].extra: unknown key"));
  EXPECT_THAT(error("- {at: -1, event: sleep, device: a}\n"), HasSubstr("[0].at"));
  EXPECT_THAT(error("- {at: 1, event: fail_next, device: a, count: 1, mode: fire}\n"),
              HasSubstr("[0].mode"));
  EXPECT_THAT(error("- {at: 1, event: unplug, device: a}\n"
                    "- {at: 2, event: plug, device: a, speed: 480}\n"),
              HasSubstr("separate buses"));
}

TEST(LabTest, SuperSpeedCapabilityFollowsTheFastestSpeedSeenUnlessGiven) {
  absl::StatusOr<Lab> lab = ParseLab(kMinimal, "lab.yaml");
  ASSERT_TRUE(lab.ok()) << lab.status();
  EXPECT_TRUE(lab->devices[0].config.superspeed_capable);
  // Re-plugged at high-speed, the same adapter stays SuperSpeed-capable (bcdUSB 2.10 + BOS).
  absl::StatusOr<std::vector<TimelineEvent>> t = ParseTimeline(R"(
- {at: 1, event: unplug, device: a}
- {at: 2, event: plug, device: a, speed: 480, bus: 3, port: "3"}
)",
                                                               "t.yaml", *lab);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_TRUE((*t)[1].plug_config.superspeed_capable);
  EXPECT_EQ((*t)[1].plug_config.bcd_usb, 0x0210);

  std::string highspeed = kMinimal;
  highspeed.replace(highspeed.find("speed: 5000"), 11, "speed: 480");
  highspeed.replace(highspeed.find("bus: 2"), 6, "bus: 1");
  lab = ParseLab(highspeed, "lab.yaml");
  ASSERT_TRUE(lab.ok()) << lab.status();
  EXPECT_FALSE(lab->devices[0].config.superspeed_capable);
  lab = ParseLab(highspeed + "    superspeed_capable: true\n", "lab.yaml");
  ASSERT_TRUE(lab.ok()) << lab.status();
  EXPECT_TRUE(lab->devices[0].config.superspeed_capable);
  EXPECT_THAT(ErrorOf(highspeed + "    superspeed_capable: maybe\n"),
              HasSubstr("devices[0].superspeed_capable"));
}

TEST(LabTest, SyntheticCurveIsParsed) {
  absl::StatusOr<Lab> lab = ParseLab(std::string(kMinimal) + R"(    traffic:
      offered_rx_mbps: 1200
      offered_tx_mbps: 50
      synthetic_curve:
        - {hold_us: 32, rx_mbps: 700}
        - {hold_us: 128, rx_mbps: 1000, loss: 0.25}
        - {hold_us: 0x400, rx_mbps: 600.5, loss: 0.0}
)",
                                     "lab.yaml");
  ASSERT_TRUE(lab.ok()) << lab.status();
  ASSERT_TRUE(lab->devices[0].traffic.has_value());
  const std::vector<SyntheticCurvePoint>& c = lab->devices[0].traffic->synthetic_curve;
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0].hold_us, 32u);
  EXPECT_EQ(c[0].rx_mbps, 700);
  EXPECT_EQ(c[0].loss, 0);  // default
  EXPECT_EQ(c[1].loss, 0.25);
  EXPECT_EQ(c[2].hold_us, 1024u);
  EXPECT_EQ(c[2].rx_mbps, 600.5);
  // Without the key: the calibrated model.
  lab = ParseLab(std::string(kMinimal) + "    traffic: {offered_rx_mbps: 1}\n", "lab.yaml");
  ASSERT_TRUE(lab.ok()) << lab.status();
  EXPECT_TRUE(lab->devices[0].traffic->synthetic_curve.empty());
}

TEST(LabTest, SyntheticCurveIsValidatedStrictly) {
  // Line 12 is the synthetic_curve key, the points follow from line 13.
  auto error = [](const std::string& points) {
    return ErrorOf(std::string(kMinimal) + "    traffic:\n      offered_rx_mbps: 100\n" +
                   "      synthetic_curve:" + points);
  };
  const std::string ok_point = "\n        - {hold_us: 32, rx_mbps: 1}";
  EXPECT_THAT(error(" {hold_us: 32}\n"),
              HasSubstr("lab.yaml:12: devices[0].traffic.synthetic_curve: expected a list"));
  EXPECT_THAT(error(ok_point + "\n"),
              HasSubstr("lab.yaml:13: devices[0].traffic.synthetic_curve: expected 2..32 "
                        "points; got 1"));
  std::string many;
  for (int i = 1; i <= 33; ++i)
    many += "\n        - {hold_us: " + std::to_string(32 * i) + ", rx_mbps: 1}";
  EXPECT_THAT(error(many + "\n"), HasSubstr("expected 2..32 points; got 33"));
  EXPECT_THAT(error(ok_point + "\n        - {hold_us: 48, rx_mbps: 1}\n"),
              HasSubstr("lab.yaml:14: devices[0].traffic.synthetic_curve[1].hold_us: 48 is not "
                        "a multiple of 32"));
  EXPECT_THAT(error(ok_point + "\n        - {hold_us: 8192, rx_mbps: 1}\n"),
              HasSubstr("synthetic_curve[1].hold_us: 8192 out of range [0, 8160]"));
  EXPECT_THAT(error(ok_point + ok_point + "\n"),
              HasSubstr("lab.yaml:14: devices[0].traffic.synthetic_curve[1].hold_us: 32 is not "
                        "above the previous point's 32"));
  EXPECT_THAT(error("\n        - {hold_us: 64, rx_mbps: 1}" + ok_point + "\n"),
              HasSubstr("synthetic_curve[1].hold_us: 32 is not above the previous point's 64"));
  EXPECT_THAT(error(ok_point + "\n        - {hold_us: 64, rx_mbps: -1}\n"),
              HasSubstr("synthetic_curve[1].rx_mbps: -1 out of range"));
  EXPECT_THAT(error(ok_point + "\n        - {hold_us: 64, rx_mbps: .inf}\n"),
              HasSubstr("synthetic_curve[1].rx_mbps: expected a number"));
  EXPECT_THAT(error(ok_point + "\n        - {hold_us: 64, rx_mbps: nan}\n"),
              HasSubstr("synthetic_curve[1].rx_mbps: expected a number"));
  EXPECT_THAT(error(ok_point + "\n        - {hold_us: 64, rx_mbps: 1, loss: 1.5}\n"),
              HasSubstr("synthetic_curve[1].loss: 1.5 out of range [0, 1]"));
  EXPECT_THAT(error(ok_point + "\n        - {hold_us: 64, rx_mbps: 1, loss: -0.1}\n"),
              HasSubstr("synthetic_curve[1].loss: -0.1 out of range"));
  EXPECT_THAT(error(ok_point + "\n        - {hold_us: 64}\n"),
              HasSubstr("lab.yaml:14: devices[0].traffic.synthetic_curve[1]: missing required "
                        "key 'rx_mbps'"));
  EXPECT_THAT(error(ok_point + "\n        - {rx_mbps: 1}\n"),
              HasSubstr("missing required key 'hold_us'"));
  EXPECT_THAT(error(ok_point + "\n        - {hold_us: 64, rx_mbps: 1, drop: 0}\n"),
              HasSubstr("synthetic_curve[1].drop: unknown key 'drop' (allowed: hold_us, "
                        "rx_mbps, loss)"));
  EXPECT_THAT(error(ok_point + "\n        - [64, 1]\n"),
              HasSubstr("synthetic_curve[1]: expected a mapping"));
}

TEST(LabTest, ShippedLabsLoad) {
  for (const char* name : {"rtl8922au-superspeed", "rtl8922au-highspeed", "rtl8852bu-superspeed",
                           "rtl8852cu-superspeed", "driver-disabled", "mixed-host", "demo",
                           "be6500-reenumerate", "tuning-x86-usb3", "tuning-pi1-usb2"}) {
    absl::StatusOr<Lab> lab = LoadLab(rxfleet::testing::LabPath(name));
    EXPECT_TRUE(lab.ok()) << name << ": " << lab.status();
  }
  absl::StatusOr<Lab> lab = LoadLab(rxfleet::testing::LabPath("be6500-reenumerate"));
  ASSERT_TRUE(lab.ok());
  absl::StatusOr<std::vector<TimelineEvent>> t =
      LoadTimeline(rxfleet::testing::LabPath("timelines/be6500-reenumerate"), *lab);
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->size(), 4u);
  EXPECT_EQ((*t)[3].plug_config.speed_mbps, 5000);
  EXPECT_EQ((*t)[3].plug_config.pid, 0x8912);
  EXPECT_EQ((*t)[3].plug_config.peer, "3-3");
  EXPECT_TRUE((*t)[3].plug_config.netdev.has_value());
}

TEST(DescriptorsTest, SuperSpeedDeviceHasCompanions) {
  absl::StatusOr<Lab> lab = ParseLab(kMinimal, "lab.yaml");
  ASSERT_TRUE(lab.ok());
  const std::vector<uint8_t> d = SysfsDescriptors(lab->devices[0].config);
  ASSERT_GE(d.size(), 18u + 9u);
  EXPECT_EQ(d[0], 18);
  EXPECT_EQ(d[2], 0x20);  // bcdUSB 0x0320
  EXPECT_EQ(d[3], 0x03);
  EXPECT_EQ(d[7], 9);  // bMaxPacketSize0 at SuperSpeed
  const size_t total = d[18 + 2] | d[18 + 3] << 8;
  EXPECT_EQ(total, d.size() - 18);
  // interface (9) + 4 x (endpoint 7 + companion 6)
  EXPECT_EQ(total, 9u + 9u + 4u * 13u);
  EXPECT_EQ(d[18 + 9 + 9 + 7 + 1], 0x30);
  EXPECT_EQ(StringDescriptor(lab->devices[0].config, 0), (std::vector<uint8_t>{4, 3, 9, 4}));
}

}  // namespace
}  // namespace rxfleet::emulator
